package cpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gamp-ml/gamp/half"
)

// BenchmarkGemmBF16Linear1 is BenchmarkGemmLinear's bf16 GEMMs on one
// worker, on the transformer, transformer-large and MLP shapes, reporting
// the thread's CPU time per op (cpu-ns/op) and GFLOP/s of that CPU time
// (cpu-GFLOP/s): steadier than wall time on a shared machine.
func BenchmarkGemmBF16Linear1(b *testing.B) {
	for _, sh := range []struct{ rows, in, out int }{
		{2048, 128, 384}, {2048, 128, 512}, {2048, 512, 128}, {256, 784, 1024}, {256, 1024, 1024},
		{2048, 512, 1536}, {2048, 512, 512}, {2048, 512, 2048}, {2048, 2048, 512},
	} {
		rng := rand.New(rand.NewPCG(uint64(sh.rows), uint64(sh.out)))
		xb, wb, dyb := make([]half.BFloat16, sh.rows*sh.in), make([]half.BFloat16, sh.out*sh.in), make([]half.BFloat16, sh.rows*sh.out)
		for _, s := range [][]half.BFloat16{xb, wb, dyb} {
			for i := range s {
				s[i] = half.BFloat16FromFloat32(rng.Float32() - 0.5)
			}
		}
		yb, dxb, dwb := make([]half.BFloat16, len(dyb)), make([]half.BFloat16, len(xb)), make([]half.BFloat16, len(wb))
		bias := make([]half.BFloat16, sh.out)
		r, in, out := sh.rows, sh.in, sh.out
		k := gemmBF16KernelBest
		cases := []struct {
			name string
			run  func()
		}{
			{"fwd", func() { gemmBF16With(k, 1, false, true, r, out, in, 1, xb, in, wb, in, 0, yb, out) }},
			{"fwdbias", func() { gemmBF16WithBias(k, 1, false, true, r, out, in, 1, xb, in, wb, in, 0, bias, yb, out) }},
			{"dx", func() { gemmBF16With(k, 1, false, false, r, in, out, 1, dyb, out, wb, in, 0, dxb, in) }},
			{"dw", func() { gemmBF16With(k, 1, true, false, out, in, r, 1, dyb, out, xb, in, 0, dwb, in) }},
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", r, in, out, c.name), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				c.run()
				t0 := gemmThreadCPU()
				for b.Loop() {
					c.run()
				}
				ns := float64(gemmThreadCPU()-t0) / float64(b.N)
				b.ReportMetric(ns, "cpu-ns/op")
				b.ReportMetric(2*float64(r*in*out)/ns, "cpu-GFLOP/s")
			})
		}
	}
}
