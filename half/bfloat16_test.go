package half

import (
	"math"
	"strconv"
	"testing"
)

// TestBFloat16AllPatterns widens every BFloat16 and narrows it back.
func TestBFloat16AllPatterns(t *testing.T) {
	for b := range 1 << 16 {
		h := BFloat16(b)
		f := h.Float32()
		if math.Float32bits(f) != uint32(b)<<16 {
			t.Fatalf("BFloat16(%#04x).Float32() has bits %#08x", uint16(b), math.Float32bits(f))
		}
		back := BFloat16FromFloat32(f)
		if h.IsNaN() {
			if back != h|0x40 {
				t.Fatalf("NaN %#04x came back as %#04x", uint16(b), uint16(back))
			}
			continue
		}
		if back != h {
			t.Fatalf("BFloat16 %#04x came back as %#04x", uint16(b), uint16(back))
		}
		if back64 := BFloat16FromFloat64(h.Float64()); back64 != h {
			t.Fatalf("BFloat16 %#04x came back through float64 as %#04x", uint16(b), uint16(back64))
		}
		if h.IsNaN() != math.IsNaN(float64(f)) || h.IsInf() != math.IsInf(float64(f), 0) ||
			h.IsFinite() != (!math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0)) {
			t.Fatalf("%#04x: IsNaN %v IsInf %v IsFinite %v for %v", uint16(b), h.IsNaN(), h.IsInf(), h.IsFinite(), f)
		}
		if h.Bits() != uint16(b) || BFloat16FromBits(uint16(b)) != h {
			t.Fatalf("%#04x: Bits/FromBits", uint16(b))
		}
	}
}

func TestBFloat16FromFloat32Boundaries(t *testing.T) {
	tests := []struct {
		name string
		in   uint32
		want BFloat16
	}{
		{"+0", 0x00000000, 0x0000},
		{"-0", 0x80000000, 0x8000},
		{"1", 0x3f800000, 0x3f80},
		{"tie to even down", 0x3f808000, 0x3f80},
		{"tie to even up", 0x3f818000, 0x3f82},
		{"above tie", 0x3f808001, 0x3f81},
		{"below tie", 0x3f817fff, 0x3f81},
		{"BFloat16Max", 0x7f7f0000, 0x7f7f},
		{"max float32 rounds to Inf", 0x7f7fffff, 0x7f80},
		{"tie above max rounds to Inf", 0x7f7f8000, 0x7f80},
		{"-max float32 rounds to -Inf", 0xff7fffff, 0xff80},
		{"+Inf", 0x7f800000, 0x7f80},
		{"-Inf", 0xff800000, 0xff80},
		{"smallest subnormal", 0x00010000, 0x0001},
		{"float32 subnormal tie to 0", 0x00008000, 0x0000},
		{"float32 subnormal rounds up", 0x00008001, 0x0001},
		{"largest subnormal rounds to normal", 0x007fffff, 0x0080},
		{"NaN payload only in low bits", 0x7f800001, 0x7fc0},
		{"negative NaN, low payload", 0xff80ffff, 0xffc0},
		{"all-ones NaN", 0x7fffffff, 0x7fff},
		{"negative all-ones NaN", 0xffffffff, 0xffff},
		{"signalling NaN quieted", 0x7f810000, 0x7fc1},
		{"quiet NaN", 0x7fc00000, 0x7fc0},
	}
	for _, tc := range tests {
		x := f32(tc.in)
		if !math.IsNaN(float64(x)) {
			if ref := refBFloat16(float64(x)); ref != tc.want {
				t.Fatalf("%s: table says %#04x, reference %#04x", tc.name, uint16(tc.want), uint16(ref))
			}
		}
		if got := BFloat16FromFloat32(x); got != tc.want {
			t.Errorf("%s: BFloat16FromFloat32(%#08x) = %#04x, want %#04x", tc.name, tc.in, uint16(got), uint16(tc.want))
		}
		if got := BFloat16FromFloat64(float64(x)); got != tc.want {
			t.Errorf("%s: BFloat16FromFloat64 = %#04x, want %#04x", tc.name, uint16(got), uint16(tc.want))
		}
		for _, k := range usable(f32ToBF16Kernels) {
			src := make([]float32, k.lanes)
			src[k.lanes-1] = x
			dst := make([]BFloat16, k.lanes)
			k.fn(&dst[0], &src[0], len(src))
			if dst[k.lanes-1] != tc.want {
				t.Errorf("%s: kernel %s = %#04x, want %#04x", tc.name, k.name, uint16(dst[k.lanes-1]), uint16(tc.want))
			}
		}
	}
}

// TestBFloat16Ties checks the midpoint of every pair of adjacent finite
// BFloat16 values, and its float32 and float64 neighbours.
func TestBFloat16Ties(t *testing.T) {
	for lo := uint16(0); lo < 0x7f80; lo++ {
		mid := (bf16Value(lo) + bf16Value(lo+1)) / 2
		even := lo + lo&1
		for _, sign := range []uint16{0, 0x8000} {
			s := sgn(sign)
			check := func(what string, got BFloat16, want uint16) {
				t.Helper()
				if got != BFloat16(sign|want) {
					t.Fatalf("%s of %#04x/%#04x: got %#04x, want %#04x", what, uint16(lo), uint16(lo+1), uint16(got), uint16(sign|want))
				}
			}
			check("float32 tie", BFloat16FromFloat32(float32(s*mid)), even)
			check("float32 below tie", BFloat16FromFloat32(float32(s)*math.Nextafter32(float32(mid), 0)), lo)
			check("float32 above tie", BFloat16FromFloat32(float32(s)*math.Nextafter32(float32(mid), float32(math.Inf(1)))), lo+1)
			check("float64 tie", BFloat16FromFloat64(s*mid), even)
			check("float64 above tie", BFloat16FromFloat64(s*math.Nextafter(mid, math.Inf(1))), lo+1)
			check("float64 below tie", BFloat16FromFloat64(s*math.Nextafter(mid, 0)), lo)
		}
	}
}

func TestBFloat16FromFloat64(t *testing.T) {
	tests := []struct {
		in   float64
		want BFloat16
	}{
		{0, 0},
		{math.Copysign(0, -1), 0x8000},
		{1e-300, 0},
		{0x1p-133, 0x0001},
		{0x1p-134, 0x0000},
		{0x1p-134 + 0x1p-170, 0x0001}, // float32 rounding first would land on the tie
		{3 * 0x1p-135, 0x0001},
		{0x1.fep127, 0x7f7f},
		{0x1.ffp127, 0x7f80}, // tie past the max: to even, which is Inf
		{0x1.ffp127 - 0x1p90, 0x7f7f},
		{1e39, 0x7f80}, // beyond float32, still rounds
		{-1e300, 0xff80},
		{math.Inf(1), 0x7f80},
		{math.Inf(-1), 0xff80},
		{math.NaN(), 0x7fc0},
		{math.Float64frombits(0x7ff0000000000001), 0x7fc0},
		{math.Float64frombits(0xfff0000000000001), 0xffc0},
	}
	for _, tc := range tests {
		if got := BFloat16FromFloat64(tc.in); got != tc.want {
			t.Errorf("BFloat16FromFloat64(%v = %#016x) = %#04x, want %#04x", tc.in, math.Float64bits(tc.in), uint16(got), uint16(tc.want))
		}
	}
	for _, u := range []uint32{0x7fc00000, 0x7f800001, 0xffa00000, 0x7fffffff, 0x7fd55555} {
		if a, b := BFloat16FromFloat64(float64(f32(u))), BFloat16FromFloat32(f32(u)); a != b {
			t.Errorf("NaN %#08x: from float64 %#04x, from float32 %#04x", u, uint16(a), uint16(b))
		}
	}
	r := newRand(2)
	for range 1_000_000 {
		x := math.Ldexp(r.Float64()+0.5, r.IntN(280)-140)
		if r.IntN(2) == 0 {
			x = -x
		}
		if got, want := BFloat16FromFloat64(x), refBFloat16(x); got != want {
			t.Fatalf("BFloat16FromFloat64(%v) = %#04x, reference %#04x", x, uint16(got), uint16(want))
		}
	}
}

func TestBFloat16Constants(t *testing.T) {
	tests := []struct {
		name string
		bits BFloat16
		want float64
	}{
		{"BFloat16Max", 0x7f7f, BFloat16Max},
		{"BFloat16SmallestNormal", 0x0080, BFloat16SmallestNormal},
		{"BFloat16SmallestSubnormal", 0x0001, BFloat16SmallestSubnormal},
		{"BFloat16Inf", BFloat16Inf, math.Inf(1)},
		{"BFloat16NegInf", BFloat16NegInf, math.Inf(-1)},
	}
	for _, tc := range tests {
		if got := tc.bits.Float64(); got != tc.want {
			t.Errorf("%s: %#04x is %v, want %v", tc.name, uint16(tc.bits), got, tc.want)
		}
	}
	if !BFloat16NaN.IsNaN() || BFloat16NaN != BFloat16FromFloat32(float32(math.NaN())) {
		t.Errorf("BFloat16NaN %#04x is not the quiet NaN made from math.NaN()", uint16(BFloat16NaN))
	}
}

func TestBFloat16String(t *testing.T) {
	tests := []struct {
		in   float32
		want string
	}{
		{0, "0"},
		{1, "1"},
		{0.1, "0.1"},
		{-3, "-3"},
		{1.0 / 3, "0.334"},
		{256, "256"},
		{257, "256"},
		{1e10, "1e+10"},
		{BFloat16Max, "3.39e+38"},
		{float32(math.Inf(-1)), "-Inf"},
		{float32(math.NaN()), "NaN"},
	}
	for _, tc := range tests {
		if got := BFloat16FromFloat32(tc.in).String(); got != tc.want {
			t.Errorf("BFloat16(%v).String() = %q, want %q", tc.in, got, tc.want)
		}
	}
	for b := range 1 << 16 {
		h := BFloat16(b)
		if !h.IsFinite() {
			continue
		}
		s := h.String()
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || BFloat16FromFloat64(x) != h {
			t.Fatalf("BFloat16(%#04x).String() = %q, which reads back as %v, %v", uint16(b), s, x, err)
		}
	}
}
