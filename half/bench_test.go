package half

import (
	"testing"

	"github.com/x448/float16"
)

// The benchmarks convert 16 M elements, well past the caches, as when a
// step casts a model's weights; ns/elem is ns/op over the element count.

const benchN = 16 << 20

func benchInputs() ([]float32, []Float16, []BFloat16) {
	f := float32Inputs(1<<16, 11)
	src := make([]float32, benchN)
	for i := range src {
		src[i] = f[i%len(f)]
	}
	h := make([]Float16, benchN)
	b := make([]BFloat16, benchN)
	float32ToFloat16Go(h, src)
	float32ToBFloat16Go(b, src)
	return src, h, b
}

// bench times run over benchN elements, moving bytesPerElem bytes each.
func bench(b *testing.B, bytesPerElem int, run func()) {
	b.Helper()
	run() // touch the pages before timing
	b.SetBytes(int64(bytesPerElem * benchN))
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchN, "ns/elem")
}

func BenchmarkFloat32ToFloat16_16M(b *testing.B) {
	src, h, _ := benchInputs()
	bench(b, 6, func() { Float32ToFloat16(h, src) })
}

func BenchmarkFloat16ToFloat32_16M(b *testing.B) {
	dst, h, _ := benchInputs()
	bench(b, 6, func() { Float16ToFloat32(dst, h) })
}

func BenchmarkFloat32ToBFloat16_16M(b *testing.B) {
	src, _, bf := benchInputs()
	bench(b, 6, func() { Float32ToBFloat16(bf, src) })
}

func BenchmarkBFloat16ToFloat32_16M(b *testing.B) {
	dst, _, bf := benchInputs()
	bench(b, 6, func() { BFloat16ToFloat32(dst, bf) })
}

func BenchmarkFloat32ToFloat16Go_16M(b *testing.B) {
	src, h, _ := benchInputs()
	bench(b, 6, func() { float32ToFloat16Go(h, src) })
}

func BenchmarkFloat16ToFloat32Go_16M(b *testing.B) {
	dst, h, _ := benchInputs()
	bench(b, 6, func() { float16ToFloat32Go(dst, h) })
}

func BenchmarkFloat32ToBFloat16Go_16M(b *testing.B) {
	src, _, bf := benchInputs()
	bench(b, 6, func() { float32ToBFloat16Go(bf, src) })
}

func BenchmarkBFloat16ToFloat32Go_16M(b *testing.B) {
	dst, _, bf := benchInputs()
	bench(b, 6, func() { bfloat16ToFloat32Go(dst, bf) })
}

// The x448/float16 per-element loops the bulk functions replace.

func BenchmarkFloat32ToFloat16X448_16M(b *testing.B) {
	src, h, _ := benchInputs()
	bench(b, 6, func() {
		for i, f := range src {
			h[i] = Float16(float16.Fromfloat32(f))
		}
	})
}

func BenchmarkFloat16ToFloat32X448_16M(b *testing.B) {
	dst, h, _ := benchInputs()
	bench(b, 6, func() {
		for i, x := range h {
			dst[i] = float16.Frombits(uint16(x)).Float32()
		}
	})
}

// BenchmarkKernels_16M times every kernel this CPU can run, the ones not
// picked at init included.
func BenchmarkKernels_16M(b *testing.B) {
	src, h, bf := benchInputs()
	for _, k := range usable(f32ToF16Kernels) {
		b.Run("f32→f16/"+k.name, func(b *testing.B) { bench(b, 6, func() { convert(k, h, src, float32ToFloat16Go) }) })
	}
	for _, k := range usable(f16ToF32Kernels) {
		b.Run("f16→f32/"+k.name, func(b *testing.B) { bench(b, 6, func() { convert(k, src, h, float16ToFloat32Go) }) })
	}
	for _, k := range usable(f32ToBF16Kernels) {
		b.Run("f32→bf16/"+k.name, func(b *testing.B) { bench(b, 6, func() { convert(k, bf, src, float32ToBFloat16Go) }) })
	}
	for _, k := range usable(bf16ToF32Kernels) {
		b.Run("bf16→f32/"+k.name, func(b *testing.B) { bench(b, 6, func() { convert(k, src, bf, bfloat16ToFloat32Go) }) })
	}
}

func BenchmarkAllFinite32_16M(b *testing.B) {
	src, _, _ := benchInputs()
	for i := range src {
		if src[i] != src[i] || src[i]-src[i] != 0 {
			src[i] = 1
		}
	}
	bench(b, 4, func() {
		if !AllFinite32(src) {
			b.Fatal("not finite")
		}
	})
}
