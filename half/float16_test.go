package half

import (
	"math"
	"strconv"
	"testing"

	"github.com/x448/float16"
)

func f32(u uint32) float32 { return math.Float32frombits(u) }

// TestFloat16AllPatterns widens every Float16 and narrows it back.
func TestFloat16AllPatterns(t *testing.T) {
	for b := range 1 << 16 {
		h := Float16(b)
		f := h.Float32()
		if want := float16.Frombits(uint16(b)).Float32(); math.Float32bits(f) != math.Float32bits(want) {
			t.Fatalf("Float16(%#04x).Float32() = %#08x, x448 %#08x", uint16(b), math.Float32bits(f), math.Float32bits(want))
		}
		if h.Float64() != float64(f) && !h.IsNaN() {
			t.Fatalf("Float16(%#04x).Float64() = %v, want %v", uint16(b), h.Float64(), f)
		}
		back := Float16FromFloat32(f)
		if h.IsNaN() {
			// Widening quiets a signalling NaN; sign and payload stay.
			if back != h|0x0200 {
				t.Fatalf("NaN %#04x came back as %#04x", uint16(b), uint16(back))
			}
			continue
		}
		if back != h {
			t.Fatalf("Float16 %#04x came back as %#04x", uint16(b), uint16(back))
		}
		if back64 := Float16FromFloat64(h.Float64()); back64 != h {
			t.Fatalf("Float16 %#04x came back through float64 as %#04x", uint16(b), uint16(back64))
		}
	}
}

func TestFloat16FromFloat32Boundaries(t *testing.T) {
	tests := []struct {
		name string
		in   uint32
		want Float16
	}{
		{"+0", 0x00000000, 0x0000},
		{"-0", 0x80000000, 0x8000},
		{"1", 0x3f800000, 0x3c00},
		{"-2", 0xc0000000, 0xc000},
		{"max 65504", math.Float32bits(65504), 0x7bff},
		{"65519 rounds down", math.Float32bits(65519), 0x7bff},
		{"65519.996 rounds down", math.Float32bits(65519.996), 0x7bff},
		{"65520 ties to Inf", math.Float32bits(65520), 0x7c00},
		{"-65520 ties to -Inf", math.Float32bits(-65520), 0xfc00},
		{"65536", math.Float32bits(65536), 0x7c00},
		{"max float32", 0x7f7fffff, 0x7c00},
		{"+Inf", 0x7f800000, 0x7c00},
		{"-Inf", 0xff800000, 0xfc00},
		{"smallest normal", math.Float32bits(0x1p-14), 0x0400},
		{"largest subnormal", math.Float32bits(0x3ffp-24), 0x03ff},
		{"just below smallest normal rounds up", math.Float32bits(0x1p-14 - 0x1p-26), 0x0400},
		{"2^-24", math.Float32bits(0x1p-24), 0x0001},
		{"2^-25 ties to 0", math.Float32bits(0x1p-25), 0x0000},
		{"-2^-25 ties to -0", math.Float32bits(-0x1p-25), 0x8000},
		{"above 2^-25 rounds up", math.Float32bits(0x1p-25) + 1, 0x0001},
		{"3*2^-26", math.Float32bits(3 * 0x1p-26), 0x0001},
		{"3*2^-25 ties to even 2", math.Float32bits(3 * 0x1p-25), 0x0002},
		{"5*2^-25 ties to even 2", math.Float32bits(5 * 0x1p-25), 0x0002},
		{"smallest float32 subnormal", 0x00000001, 0x0000},
		{"1+2^-11 ties to 1", math.Float32bits(1 + 0x1p-11), 0x3c00},
		{"1+3*2^-11 ties to even", math.Float32bits(1 + 3*0x1p-11), 0x3c02},
		{"quiet NaN", 0x7fc00000, 0x7e00},
		{"negative quiet NaN", 0xffc00000, 0xfe00},
		{"NaN payload only in low bits", 0x7f800001, 0x7e00},
		{"signalling NaN, high payload", 0x7fa00000, 0x7f00},
		{"all-ones NaN", 0xffffffff, 0xffff},
		{"NaN payload 0x155 kept", 0x7f800000 | 0x155<<13, 0x7e00 | 0x155},
	}
	for _, tc := range tests {
		x := f32(tc.in)
		if want := Float16(float16.Fromfloat32(x)); want != tc.want {
			t.Fatalf("%s: table says %#04x, x448 %#04x", tc.name, uint16(tc.want), uint16(want))
		}
		if got := Float16FromFloat32(x); got != tc.want {
			t.Errorf("%s: Float16FromFloat32(%#08x) = %#04x, want %#04x", tc.name, tc.in, uint16(got), uint16(tc.want))
		}
		if got := Float16FromFloat64(float64(x)); got != tc.want {
			t.Errorf("%s: Float16FromFloat64 = %#04x, want %#04x", tc.name, uint16(got), uint16(tc.want))
		}
		for _, k := range usable(f32ToF16Kernels) {
			src := make([]float32, k.lanes)
			src[k.lanes-1] = x
			dst := make([]Float16, k.lanes)
			k.fn(&dst[0], &src[0], len(src))
			if dst[k.lanes-1] != tc.want {
				t.Errorf("%s: kernel %s = %#04x, want %#04x", tc.name, k.name, uint16(dst[k.lanes-1]), uint16(tc.want))
			}
		}
	}
}

// TestFloat16Ties checks the midpoint of every pair of adjacent finite
// Float16 values, and its float32 and float64 neighbours.
func TestFloat16Ties(t *testing.T) {
	for lo := uint16(0); lo < 0x7c00; lo++ {
		mid := (f16Value(lo) + f16Value(lo+1)) / 2 // exact in float32 too
		even := lo + lo&1
		for _, sign := range []uint16{0, 0x8000} {
			m := mid
			if sign != 0 {
				m = -m
			}
			check := func(what string, got Float16, want uint16) {
				t.Helper()
				if got != Float16(sign|want) {
					t.Fatalf("%s of %#04x/%#04x (%g): got %#04x, want %#04x", what, uint16(lo), uint16(lo+1), m, uint16(got), uint16(sign|want))
				}
			}
			check("float32 tie", Float16FromFloat32(float32(m)), even)
			check("float32 below tie", Float16FromFloat32(math.Nextafter32(float32(mid), 0)*float32(sgn(sign))), lo)
			check("float32 above tie", Float16FromFloat32(math.Nextafter32(float32(mid), 1e9)*float32(sgn(sign))), lo+1)
			check("x448 tie", Float16(float16.Fromfloat32(float32(m))), even)
			check("float64 tie", Float16FromFloat64(m), even)
			// One float64 ulp off the tie: float32 cannot hold these, so
			// going through float32 rounds them onto the tie and then to
			// even; the direct conversion must not.
			above := math.Nextafter(mid, math.Inf(1)) * sgn(sign)
			below := math.Nextafter(mid, 0) * sgn(sign)
			check("float64 above tie", Float16FromFloat64(above), lo+1)
			check("float64 below tie", Float16FromFloat64(below), lo)
			if lo&1 == 0 && Float16FromFloat32(float32(above)) != Float16(sign|lo) {
				t.Fatalf("expected double rounding through float32 at %#04x", uint16(lo))
			}
		}
	}
}

func sgn(sign uint16) float64 {
	if sign != 0 {
		return -1
	}
	return 1
}

func TestFloat16FromFloat64(t *testing.T) {
	tests := []struct {
		in   float64
		want Float16
	}{
		{0, 0},
		{math.Copysign(0, -1), 0x8000},
		{1e-300, 0},
		{-1e-300, 0x8000},
		{5e-324, 0},
		{0x1p-24, 0x0001},
		{0x1p-25, 0x0000},
		{0x1p-25 + 0x1p-60, 0x0001}, // float32 would make it a tie, then 0
		{1 + 0x1p-11 + 0x1p-40, 0x3c01},
		{65519.99999999, 0x7bff},
		{65520, 0x7c00},
		{1e300, 0x7c00},
		{-1e300, 0xfc00},
		{math.Inf(1), 0x7c00},
		{math.Inf(-1), 0xfc00},
		{math.NaN(), 0x7e00},
		{math.Float64frombits(0x7ff0000000000001), 0x7e00}, // payload only below the kept bits
		{math.Float64frombits(0xfff4000000000000), 0xff00},
	}
	for _, tc := range tests {
		if got := Float16FromFloat64(tc.in); got != tc.want {
			t.Errorf("Float16FromFloat64(%v = %#016x) = %#04x, want %#04x", tc.in, math.Float64bits(tc.in), uint16(got), uint16(tc.want))
		}
	}
	// NaN payloads come out as from float32.
	for _, u := range []uint32{0x7fc00000, 0x7f800001, 0xffa00000, 0x7fffffff, 0x7fd55555} {
		if a, b := Float16FromFloat64(float64(f32(u))), Float16FromFloat32(f32(u)); a != b {
			t.Errorf("NaN %#08x: from float64 %#04x, from float32 %#04x", u, uint16(a), uint16(b))
		}
	}
}

// TestFloat16FromFloat64Random compares with the reference on float64 values
// near the Float16 range, most of them not float32 values.
func TestFloat16FromFloat64Random(t *testing.T) {
	r := newRand(1)
	for range 1_000_000 {
		x := math.Ldexp(r.Float64()+0.5, r.IntN(50)-34)
		if r.IntN(2) == 0 {
			x = -x
		}
		if got, want := Float16FromFloat64(x), refFloat16(x); got != want {
			t.Fatalf("Float16FromFloat64(%v) = %#04x, reference %#04x", x, uint16(got), uint16(want))
		}
	}
}

func TestFloat16Predicates(t *testing.T) {
	for b := range 1 << 16 {
		h := Float16(b)
		f := float64(float16.Frombits(uint16(b)).Float32())
		if h.IsNaN() != math.IsNaN(f) || h.IsInf() != math.IsInf(f, 0) ||
			h.IsFinite() != (!math.IsNaN(f) && !math.IsInf(f, 0)) {
			t.Fatalf("%#04x: IsNaN %v IsInf %v IsFinite %v for %v", uint16(b), h.IsNaN(), h.IsInf(), h.IsFinite(), f)
		}
		if h.Bits() != uint16(b) || Float16FromBits(uint16(b)) != h {
			t.Fatalf("%#04x: Bits/FromBits", uint16(b))
		}
	}
}

func TestFloat16Constants(t *testing.T) {
	tests := []struct {
		name string
		bits Float16
		want float64
	}{
		{"Float16Max", 0x7bff, Float16Max},
		{"Float16SmallestNormal", 0x0400, Float16SmallestNormal},
		{"Float16SmallestSubnormal", 0x0001, Float16SmallestSubnormal},
		{"Float16Inf", Float16Inf, math.Inf(1)},
		{"Float16NegInf", Float16NegInf, math.Inf(-1)},
	}
	for _, tc := range tests {
		if got := tc.bits.Float64(); got != tc.want {
			t.Errorf("%s: %#04x is %v, want %v", tc.name, uint16(tc.bits), got, tc.want)
		}
	}
	if !Float16NaN.IsNaN() || Float16NaN != Float16FromFloat32(float32(math.NaN())) {
		t.Errorf("Float16NaN %#04x is not the quiet NaN made from math.NaN()", uint16(Float16NaN))
	}
}

func TestFloat16String(t *testing.T) {
	tests := []struct {
		in   float32
		want string
	}{
		{0, "0"},
		{float32(math.Copysign(0, -1)), "-0"},
		{1, "1"},
		{0.1, "0.1"},
		{-0.3, "-0.3"},
		{1.0 / 3, "0.3333"},
		{65504, "65504"},
		{1000, "1000"},
		{0x1p-24, "6e-08"},
		{0x1p-14, "6.104e-05"},
		{float32(math.Inf(1)), "+Inf"},
		{float32(math.Inf(-1)), "-Inf"},
		{float32(math.NaN()), "NaN"},
	}
	for _, tc := range tests {
		if got := Float16FromFloat32(tc.in).String(); got != tc.want {
			t.Errorf("Float16(%v).String() = %q, want %q", tc.in, got, tc.want)
		}
	}
	// Every finite value prints as a decimal that parses back to it.
	for b := range 1 << 16 {
		h := Float16(b)
		if !h.IsFinite() {
			continue
		}
		s := h.String()
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || Float16FromFloat64(x) != h {
			t.Fatalf("Float16(%#04x).String() = %q, which reads back as %v, %v", uint16(b), s, x, err)
		}
	}
}
