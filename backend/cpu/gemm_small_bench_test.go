//go:build linux

package cpu

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
)

// BenchmarkGemmClassifier times the three float32 GEMMs of the MLP's last
// Linear (X [256,1024], W [10,1024], bias) as Gemm runs them on the pool
// (w2) and on one worker (w1): the forward Y = X·Wᵀ + b (n = 10), the input
// gradient dX = dY·W (k = 10) and the weight gradient dW = dYᵀ·X (m = 10).
// It reports the process CPU time per op (cpu-ns/op) besides ns/op: on a
// shared machine the pool's waiting shows in the CPU time.
func BenchmarkGemmClassifier(b *testing.B) {
	const rows, in, out = 256, 1024, 10
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = rng.Float32() - 0.5
		}
		return s
	}
	x, w, dy, bias := fill(rows*in), fill(out*in), fill(rows*out), fill(out)
	y, dx, dw := make([]float32, rows*out), make([]float32, rows*in), make([]float32, out*in)
	k := gemmKernel32
	for _, c := range []struct {
		name string
		run  func(workers int)
	}{
		{"fwd", func(wk int) {
			gemmWithBias(k, wk, false, true, rows, out, in, 1, x, in, w, in, 0, bias, y, out)
		}},
		{"dx", func(wk int) { gemmWith(k, wk, false, false, rows, in, out, 1, dy, out, w, in, 0, dx, in) }},
		{"dw", func(wk int) { gemmWith(k, wk, true, false, out, in, rows, 1, dy, out, x, in, 0, dw, in) }},
	} {
		for _, wk := range []int{Workers(), 1} {
			b.Run(fmt.Sprintf("%s/w%d", c.name, wk), func(b *testing.B) {
				c.run(wk)
				var r0, r1 syscall.Rusage
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
				for b.Loop() {
					c.run(wk)
				}
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
				cpu := r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano()
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
