package half

import (
	"math"
	"sort"
)

// Reference rounding, independent of the code under test: find the two
// representable neighbours of |x| by binary search over the (monotonic)
// positive bit patterns and compare |x| with their midpoint, which float64
// holds exactly for both 16-bit formats.

// f16Value is the value of the non-negative Float16 bits b from the field
// definitions; b = 0x7c00 gives 2^16, the first value past Float16Max.
func f16Value(b uint16) float64 {
	e, m := int(b>>10), float64(b&0x3ff)
	if e == 0 {
		return math.Ldexp(m, -24)
	}
	return math.Ldexp(1024+m, e-25)
}

// bf16Value is the value of the non-negative BFloat16 bits b; b = 0x7f80
// gives 2^128, the first value past BFloat16Max.
func bf16Value(b uint16) float64 {
	if b == 0x7f80 {
		return 0x1p128
	}
	return float64(math.Float32frombits(uint32(b) << 16))
}

// refRound rounds the non-NaN x to nearest even among value(0..maxFinite),
// with value(maxFinite+1) the overflow neighbour (whose bits are Inf).
func refRound(x float64, maxFinite uint16, value func(uint16) float64) uint16 {
	var sign uint16
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	if x >= value(maxFinite+1) {
		return sign | (maxFinite + 1)
	}
	// lo: the largest pattern not above x.
	lo := uint16(sort.Search(int(maxFinite)+1, func(i int) bool { return value(uint16(i)) > x }) - 1)
	mid := (value(lo) + value(lo+1)) / 2
	r := lo
	if x > mid || x == mid && lo&1 == 1 {
		r++
	}
	return sign | r
}

func refFloat16(x float64) Float16 {
	if math.IsNaN(x) {
		panic("refFloat16: NaN")
	}
	return Float16(refRound(x, 0x7bff, f16Value))
}

func refBFloat16(x float64) BFloat16 {
	if math.IsNaN(x) {
		panic("refBFloat16: NaN")
	}
	return BFloat16(refRound(x, 0x7f7f, bf16Value))
}
