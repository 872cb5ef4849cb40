package half

import (
	"fmt"
	"testing"
)

// The cast benchmarks at the sizes a training step casts (a model's weights and their
// gradients, 0.25–2 M elements: 1–8 MB of float32), against a plain copy of the float32
// side, to show whether the conversions run at memory speed.
func BenchmarkCastSizes(b *testing.B) {
	for _, n := range []int{256 << 10, 1 << 20, 1860000} {
		f := make([]float32, n)
		g := make([]float32, n)
		h := make([]BFloat16, n)
		for i := range f {
			f[i] = float32(i%1000) * 0.37
		}
		// h and g are written before they are timed: a buffer never written is the
		// kernel's shared zero page and would read at L1 speed.
		Float32ToBFloat16(h, f)
		copy(g, f)
		b.Run(fmt.Sprintf("f32tobf16/%d", n), func(b *testing.B) {
			b.SetBytes(int64(6 * n))
			for b.Loop() {
				Float32ToBFloat16(h, f)
			}
		})
		b.Run(fmt.Sprintf("bf16tof32/%d", n), func(b *testing.B) {
			b.SetBytes(int64(6 * n))
			for b.Loop() {
				BFloat16ToFloat32(g, h)
			}
		})
		b.Run(fmt.Sprintf("copyf32/%d", n), func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			for b.Loop() {
				copy(g, f)
			}
		})
	}
}
