package half

import (
	"math"
	"testing"

	"github.com/x448/float16"
)

var fuzzSeeds = []uint32{
	0, 0x80000000, 0x3f800000, 0x477fe000, 0x477ff000, 0x33000000, 0x33000001, 0x38800000,
	0x7f800000, 0x7f800001, 0x7fc00000, 0xff80ffff, 0x7f7fffff, 0x7f7f8000, 0x00008000, 0x3f808000,
}

// fuzzVector spreads u over a vector long enough for every kernel's wide
// loop and a scalar tail: lane 0 holds u itself.
func fuzzVector(u uint32) []uint32 {
	v := make([]uint32, 67)
	for i := range v {
		v[i] = u + uint32(i)*0x9e3779b9
		if i%3 == 1 {
			v[i] = u ^ uint32(i)<<(i%13) // near u: same exponent, other low bits
		}
	}
	return v
}

// FuzzFloat16 compares the scalar, bulk and assembly Float16 conversions
// with x448/float16, and the float64 conversion with the reference.
func FuzzFloat16(f *testing.F) {
	for i, u := range fuzzSeeds {
		f.Add(u, math.Float64bits(float64(f32(u)))+uint64(i))
	}
	f.Fuzz(func(t *testing.T, u uint32, d uint64) {
		bits := fuzzVector(u)
		src := make([]float32, len(bits))
		want := make([]Float16, len(bits))
		for i, b := range bits {
			src[i] = f32(b)
			want[i] = Float16(float16.Fromfloat32(src[i]))
			if got := Float16FromFloat32(src[i]); got != want[i] {
				t.Fatalf("Float16FromFloat32(%#08x) = %#04x, x448 %#04x", b, uint16(got), uint16(want[i]))
			}
		}
		got := make([]Float16, len(src))
		for _, k := range append(usable(f32ToF16Kernels), kernel[Float16, float32]{name: "go"}) {
			convert(k, got, src, float32ToFloat16Go)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("kernel %s: %#08x → %#04x, x448 %#04x", k.name, bits[i], uint16(got[i]), uint16(want[i]))
				}
			}
		}

		halves := make([]Float16, len(bits))
		wide := make([]float32, len(bits))
		for i, b := range bits {
			halves[i] = Float16(b)
		}
		for _, k := range append(usable(f16ToF32Kernels), kernel[float32, Float16]{name: "go"}) {
			convert(k, wide, halves, float16ToFloat32Go)
			for i, h := range halves {
				if w := float16.Frombits(uint16(h)).Float32(); math.Float32bits(wide[i]) != math.Float32bits(w) {
					t.Fatalf("kernel %s: %#04x → %#08x, x448 %#08x", k.name, uint16(h), math.Float32bits(wide[i]), math.Float32bits(w))
				}
			}
		}

		if x := math.Float64frombits(d); !math.IsNaN(x) {
			if got, want := Float16FromFloat64(x), refFloat16(x); got != want {
				t.Fatalf("Float16FromFloat64(%v) = %#04x, reference %#04x", x, uint16(got), uint16(want))
			}
		}
	})
}

// FuzzBFloat16 compares the scalar, bulk and assembly BFloat16 conversions
// with the float64 reference.
func FuzzBFloat16(f *testing.F) {
	for i, u := range fuzzSeeds {
		f.Add(u, math.Float64bits(float64(f32(u)))+uint64(i))
	}
	f.Fuzz(func(t *testing.T, u uint32, d uint64) {
		bits := fuzzVector(u)
		src := make([]float32, len(bits))
		want := make([]BFloat16, len(bits))
		for i, b := range bits {
			src[i] = f32(b)
			if src[i] != src[i] {
				want[i] = BFloat16(b>>16 | 0x40)
			} else {
				want[i] = refBFloat16(float64(src[i]))
			}
			if got := BFloat16FromFloat32(src[i]); got != want[i] {
				t.Fatalf("BFloat16FromFloat32(%#08x) = %#04x, reference %#04x", b, uint16(got), uint16(want[i]))
			}
		}
		got := make([]BFloat16, len(src))
		for _, k := range append(usable(f32ToBF16Kernels), kernel[BFloat16, float32]{name: "go"}) {
			convert(k, got, src, float32ToBFloat16Go)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("kernel %s: %#08x → %#04x, reference %#04x", k.name, bits[i], uint16(got[i]), uint16(want[i]))
				}
			}
		}

		halves := make([]BFloat16, len(bits))
		wide := make([]float32, len(bits))
		for i, b := range bits {
			halves[i] = BFloat16(b)
		}
		for _, k := range append(usable(bf16ToF32Kernels), kernel[float32, BFloat16]{name: "go"}) {
			convert(k, wide, halves, bfloat16ToFloat32Go)
			for i, h := range halves {
				if math.Float32bits(wide[i]) != uint32(h)<<16 {
					t.Fatalf("kernel %s: %#04x → %#08x", k.name, uint16(h), math.Float32bits(wide[i]))
				}
			}
		}

		if x := math.Float64frombits(d); !math.IsNaN(x) {
			if got, want := BFloat16FromFloat64(x), refBFloat16(x); got != want {
				t.Fatalf("BFloat16FromFloat64(%v) = %#04x, reference %#04x", x, uint16(got), uint16(want))
			}
		}
	})
}
