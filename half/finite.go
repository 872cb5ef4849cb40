package half

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// AllFinite32 reports whether no element of x is Inf or NaN.
func AllFinite32(x []float32) bool {
	// Branch-free over blocks (orExpWords), two elements to a 64-bit word.
	const block = 256
	for len(x) > 0 {
		n := min(len(x), block)
		b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*n)
		acc, rest := orExpWords(b, 0x7f800000_7f800000, 0x00800000_00800000)
		for ; len(rest) >= 4; rest = rest[4:] {
			acc |= uint64(binary.LittleEndian.Uint32(rest)&0x7f800000 + 0x00800000)
		}
		if acc&0x80000000_80000000 != 0 {
			return false
		}
		x = x[n:]
	}
	return true
}

// AllFiniteBF16 reports whether no element of x is Inf or NaN.
func AllFiniteBF16(x []BFloat16) bool { return AllFinite16(u16s(x), 0x7f80) }

// AllFiniteF16 reports whether no element of x is Inf or NaN.
func AllFiniteF16(x []Float16) bool { return AllFinite16(u16s(x), 0x7c00) }

// AllFinite16 reports whether no element of x, the bits of a 16-bit float whose
// exponent field is the mask e (0x7f80 for bfloat16, 0x7c00 for float16), has that
// field all ones (Inf or NaN). Four elements share a 64-bit word (orExpWords).
func AllFinite16(x []uint16, e uint16) bool {
	const lanes = 0x0001000100010001
	low := e & -e
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 2*len(x))
	acc, rest := orExpWords(b, uint64(e)*lanes, uint64(low)*lanes)
	for ; len(rest) >= 2; rest = rest[2:] {
		acc |= uint64(binary.LittleEndian.Uint16(rest)&e + low)
	}
	return acc&(0x8000*lanes) == 0
}

// orExpWords ORs w&exp + unit over the 64-bit words of b (little-endian), four words
// a step into four accumulators, and returns the OR and the bytes left over (fewer
// than 8). With exp each lane's exponent field and unit its lowest bit, a lane's sum
// reaches the lane's top bit exactly when the field is all ones and never carries out
// of the lane, so the lanes' top bits of the result say whether any element was Inf
// or NaN.
func orExpWords(b []byte, exp, unit uint64) (uint64, []byte) {
	var a0, a1, a2, a3 uint64
	for len(b) >= 32 {
		a0 |= binary.LittleEndian.Uint64(b[0:8])&exp + unit
		a1 |= binary.LittleEndian.Uint64(b[8:16])&exp + unit
		a2 |= binary.LittleEndian.Uint64(b[16:24])&exp + unit
		a3 |= binary.LittleEndian.Uint64(b[24:32])&exp + unit
		b = b[32:]
	}
	for len(b) >= 8 {
		a0 |= binary.LittleEndian.Uint64(b[0:8])&exp + unit
		b = b[8:]
	}
	return a0 | a1 | a2 | a3, b
}

// u16s views 16-bit floats as their bits.
func u16s[H BFloat16 | Float16](x []H) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
}

// CountNonFinite32 returns the number of infinite and of NaN elements of x.
func CountNonFinite32(x []float32) (inf, nan int) {
	for _, f := range x {
		u := math.Float32bits(f) & 0x7fffffff
		if u >= 0x7f800000 {
			if u == 0x7f800000 {
				inf++
			} else {
				nan++
			}
		}
	}
	return inf, nan
}
