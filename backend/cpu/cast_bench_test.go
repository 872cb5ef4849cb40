package cpu_test

import (
	"fmt"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/backend/cpu"
	"github.com/gamp-ml/gamp/half"
)

// BenchmarkCastWeights times the autocast casts of a training step on the MLP's
// 1.86 M parameters (and one 1024×1024 layer): float32 weights to bfloat16, and the
// bfloat16 weight gradients back to float32, against a float32 copy of the same size.
func BenchmarkCastWeights(b *testing.B) {
	be, err := cpu.New(0)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1 << 20, 1860000} {
		f, _ := be.Alloc(backend.Float32, n)
		f2, _ := be.Alloc(backend.Float32, n)
		h, _ := be.Alloc(backend.BFloat16, n)
		be.Fill(backend.Dense(f, 0, n), 0.37)
		for _, c := range []struct {
			name   string
			dst, s backend.Storage
			bytes  int
		}{{"f32tobf16", h, f, 6}, {"bf16tof32", f2, h, 6}, {"f32copy", f2, f, 8}} {
			b.Run(fmt.Sprintf("%d/%s", n, c.name), func(b *testing.B) {
				b.SetBytes(int64(c.bytes * n))
				for b.Loop() {
					be.Copy(backend.Dense(c.dst, 0, n), backend.Dense(c.s, 0, n))
				}
			})
		}
		// The conversion kernel alone, on one goroutine.
		xf, xh := make([]float32, n), make([]half.BFloat16, n)
		b.Run(fmt.Sprintf("%d/f32tobf16-1thread", n), func(b *testing.B) {
			b.SetBytes(int64(6 * n))
			for b.Loop() {
				half.Float32ToBFloat16(xh, xf)
			}
		})
	}
}
