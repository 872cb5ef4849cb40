package half

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// AllFinite32 reports whether no element of x is Inf or NaN.
func AllFinite32(x []float32) bool {
	// Branch-free over blocks: the exponent field plus one exponent unit
	// reaches bit 31 exactly when the exponent is all ones (Inf or NaN), and
	// never carries further, so two elements share a 64-bit word (eight a step,
	// four words loaded whole).
	const block = 256
	const exp, unit, top = 0x7f800000_7f800000, 0x00800000_00800000, 0x80000000_80000000
	for len(x) > 0 {
		n := min(len(x), block)
		b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*n)
		var a0, a1, a2, a3 uint64
		for len(b) >= 32 {
			a0 |= binary.LittleEndian.Uint64(b[0:8])&exp + unit
			a1 |= binary.LittleEndian.Uint64(b[8:16])&exp + unit
			a2 |= binary.LittleEndian.Uint64(b[16:24])&exp + unit
			a3 |= binary.LittleEndian.Uint64(b[24:32])&exp + unit
			b = b[32:]
		}
		for ; len(b) >= 4; b = b[4:] {
			a0 |= uint64(binary.LittleEndian.Uint32(b)&0x7f800000 + 0x00800000)
		}
		if (a0|a1|a2|a3)&top != 0 {
			return false
		}
		x = x[n:]
	}
	return true
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
