package half

import (
	"math"
)

// Float16 is an IEEE 754 binary16 value held as its raw bits: 1 sign bit,
// 5 exponent bits and 10 fraction bits.
type Float16 uint16

// Limits of Float16.
const (
	Float16Max               = 65504   // largest finite Float16
	Float16SmallestNormal    = 0x1p-14 // smallest positive normal Float16
	Float16SmallestSubnormal = 0x1p-24 // smallest positive Float16
)

// Bit patterns of the Float16 infinities and of the quiet NaN this package
// produces from a NaN without payload.
const (
	Float16Inf    Float16 = 0x7c00
	Float16NegInf Float16 = 0xfc00
	Float16NaN    Float16 = 0x7e00
)

// Float16FromBits returns the Float16 with the given bits.
func Float16FromBits(b uint16) Float16 { return Float16(b) }

// Bits returns the raw bits of h.
func (h Float16) Bits() uint16 { return uint16(h) }

// Float16FromFloat32 rounds f to the nearest Float16, ties to even.
// Results below the normal range are subnormal, magnitudes that round past
// Float16Max become ±Inf, and a NaN becomes a quiet NaN that keeps the sign
// and the top 9 payload bits (as x448/float16 and VCVTPS2PH do).
func Float16FromFloat32(f float32) Float16 {
	// Branch-free, after Marat Dukhan's FP16 library: the FPU does the
	// rounding. Adding 2^(e+15) to 4|f| (e = f's exponent) leaves an ulp
	// of 2^(e-8), so the sum holds 4|f| rounded to Float16 precision, ties
	// to even, in its low 12 bits; for |f| < 2^-14 the exponent is clamped
	// so that the step is the subnormal one, 2^-24. Scaling by 2^112 makes
	// |f| >= 2^16 infinite on the way; a rounding carry out of 65504 reaches
	// Inf through the exponent bits.
	w := math.Float32bits(f)
	abs2 := w + w // |f| bits shifted left one, sign gone
	// The conversion keeps the compiler from fusing this exact scaling
	// into the addition below (arm64 has FMA).
	base := float32(math.Float32frombits(w&0x7fffffff) * 0x1p112 * 0x1p-110)
	bias := max(abs2&0xff000000, 0x71000000)
	sum := math.Float32bits(math.Float32frombits(bias>>1+0x07800000) + base)
	o := sum>>13&0x7c00 + sum&0x0fff
	nan := 0x7e00 | w>>13&0x03ff
	if abs2 > 0xff000000 {
		o = nan
	}
	return Float16(w>>16&0x8000 | o)
}

// Float16FromFloat64 rounds f to the nearest Float16, ties to even, in one
// step: Float16FromFloat32(float32(f)) can differ because it rounds twice.
// NaN, Inf, overflow and subnormals are handled as by Float16FromFloat32.
func Float16FromFloat64(f float64) Float16 {
	u := math.Float64bits(f)
	sign := uint16(u>>48) & 0x8000
	u &= 1<<63 - 1
	var o uint16
	switch {
	case u >= 0x40f0000000000000: // |f| >= 2^16, Inf or NaN
		o = 0x7c00
		if u > 0x7ff0000000000000 {
			o = 0x7e00 | uint16(u>>42)&0x3ff
		}
	case u < 0x3f10000000000000: // |f| < 2^-14
		// 2^28 has a float64 ulp of 2^-24: see Float16FromFloat32.
		o = uint16(math.Float64bits(math.Float64frombits(u)+0x1p28) - 0x41b0000000000000)
	default:
		u -= (1023 - 15) << 52
		u += 1<<41 - 1 + (u>>42)&1
		o = uint16(u >> 42)
	}
	return Float16(o | sign)
}

// Float32 returns h as a float32; every Float16 is exactly representable.
// A signalling NaN comes back quiet (as from VCVTPH2PS), with its payload.
func (h Float16) Float32() float32 {
	// Branch-free, after Marat Dukhan's FP16 library. Normal values: move
	// the exponent and fraction into place, rebias by a multiply. Zero and
	// subnormals: the fraction becomes the low bits of a float in [0.5, 1)
	// whose ulp is 2^-24, and subtracting 0.5 normalises it exactly.
	w := uint32(h) << 16
	abs2 := w + w
	r := math.Float32bits(math.Float32frombits(abs2>>4+0xe0<<23) * 0x1p-112)
	sub := math.Float32bits(math.Float32frombits(abs2>>17|126<<23) - 0.5)
	// Inf and NaN in integer arithmetic, so that every architecture keeps
	// the payload; bit 23 of m+0x7fffff is set when m, the fraction, is not
	// zero, and becomes the quiet bit.
	m := abs2 >> 4 & 0x7fffff
	special := 0x7f800000 | m | (m+0x7fffff)>>1&0x400000
	if abs2 < 1<<27 {
		r = sub
	}
	if abs2 >= 0xf8000000 {
		r = special
	}
	return math.Float32frombits(w&0x80000000 | r)
}

// Float64 returns h as a float64, exactly.
func (h Float16) Float64() float64 { return float64(h.Float32()) }

// IsNaN reports whether h is a NaN.
func (h Float16) IsNaN() bool { return h&0x7fff > 0x7c00 }

// IsInf reports whether h is +Inf or -Inf.
func (h Float16) IsInf() bool { return h&0x7fff == 0x7c00 }

// IsFinite reports whether h is neither Inf nor NaN.
func (h Float16) IsFinite() bool { return h&0x7c00 != 0x7c00 }

// String returns the shortest decimal that converts back to h, formatted
// like strconv.FormatFloat(x, 'g', -1, 32): "0.1", "65504", "6e-08",
// "+Inf", "NaN".
func (h Float16) String() string {
	return shortest(h.Float64(), 5, func(x float64) bool { return Float16FromFloat64(x) == h })
}
