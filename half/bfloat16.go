package half

import "math"

// BFloat16 is a bfloat16 value held as its raw bits: the top 16 bits of a
// float32 (1 sign bit, 8 exponent bits, 7 fraction bits).
type BFloat16 uint16

// Limits of BFloat16.
const (
	BFloat16Max               = 0x1.fep127 // largest finite BFloat16, ≈ 3.3895314e38
	BFloat16SmallestNormal    = 0x1p-126   // smallest positive normal BFloat16
	BFloat16SmallestSubnormal = 0x1p-133   // smallest positive BFloat16
)

// Bit patterns of the BFloat16 infinities and of the quiet NaN this package
// produces from a NaN without payload.
const (
	BFloat16Inf    BFloat16 = 0x7f80
	BFloat16NegInf BFloat16 = 0xff80
	BFloat16NaN    BFloat16 = 0x7fc0
)

// BFloat16FromBits returns the BFloat16 with the given bits.
func BFloat16FromBits(b uint16) BFloat16 { return BFloat16(b) }

// Bits returns the raw bits of b.
func (b BFloat16) Bits() uint16 { return uint16(b) }

// BFloat16FromFloat32 rounds f to the nearest BFloat16, ties to even;
// magnitudes that round past BFloat16Max become ±Inf, subnormals are kept.
// A NaN stays a NaN, quiet, with the sign and top 6 payload bits, even when
// its payload is only in the low 16 bits that truncation would drop.
func BFloat16FromFloat32(f float32) BFloat16 {
	u := math.Float32bits(f)
	// Add just under half an ulp, plus one when the kept part is odd, so
	// that exact ties round to even; the carry may reach the exponent.
	r := (u + 0x7fff + u>>16&1) >> 16
	nan := u>>16 | 0x40
	if u&0x7fffffff > 0x7f800000 {
		r = nan
	}
	return BFloat16(r)
}

// BFloat16FromFloat64 rounds f to the nearest BFloat16, ties to even, in
// one step (BFloat16FromFloat32(float32(f)) can round twice). Magnitudes
// below BFloat16SmallestNormal round to subnormals, not to float32
// subnormals first.
func BFloat16FromFloat64(f float64) BFloat16 {
	u := math.Float64bits(f)
	sign := uint16(u>>48) & 0x8000
	u &= 1<<63 - 1
	var o uint16
	switch {
	case u >= 0x47f0000000000000: // |f| >= 2^128, Inf or NaN
		o = 0x7f80
		if u > 0x7ff0000000000000 {
			o = 0x7fc0 | uint16(u>>45)&0x7f
		}
	case u < 0x3810000000000000: // |f| < 2^-126
		// 2^-81 has a float64 ulp of 2^-133, the BFloat16 subnormal step;
		// the FPU does the rounding (see Float16FromFloat32).
		o = uint16(math.Float64bits(math.Float64frombits(u)+0x1p-81) - 0x3ae0000000000000)
	default:
		u -= (1023 - 127) << 52
		u += 1<<44 - 1 + (u>>45)&1
		o = uint16(u >> 45)
	}
	return BFloat16(o | sign)
}

// Float32 returns b as a float32, exactly (NaN payloads included).
func (b BFloat16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }

// Float64 returns b as a float64, exactly.
func (b BFloat16) Float64() float64 { return float64(b.Float32()) }

// IsNaN reports whether b is a NaN.
func (b BFloat16) IsNaN() bool { return b&0x7fff > 0x7f80 }

// IsInf reports whether b is +Inf or -Inf.
func (b BFloat16) IsInf() bool { return b&0x7fff == 0x7f80 }

// IsFinite reports whether b is neither Inf nor NaN.
func (b BFloat16) IsFinite() bool { return b&0x7f80 != 0x7f80 }

// String returns the shortest decimal that converts back to b, formatted
// like strconv.FormatFloat(x, 'g', -1, 32).
func (b BFloat16) String() string {
	return shortest(b.Float64(), 4, func(x float64) bool { return BFloat16FromFloat64(x) == b })
}
