package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/half"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

var gemmBenchSizes = []int{256, 512, 1024, 2048}

func gemmBenchOperands(n int) (a, b, c []float32) {
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	a, b, c = make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	for i := range a {
		a[i] = rng.Float32() - 0.5
		b[i] = rng.Float32() - 0.5
	}
	return a, b, c
}

func reportGFLOPs(b *testing.B, n int) {
	b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkGemm compares Gemm with gonum's Sgemm on square row-major
// products C = A·B, both using every core.
func BenchmarkGemm(b *testing.B) {
	for _, n := range gemmBenchSizes {
		b.Run(fmt.Sprintf("f32/%d", n), func(b *testing.B) {
			x, y, z := gemmBenchOperands(n)
			for b.Loop() {
				Gemm(false, false, n, n, n, 1, x, n, y, n, 0, z, n)
			}
			reportGFLOPs(b, n)
		})
	}
	for _, n := range gemmBenchSizes {
		b.Run(fmt.Sprintf("gonum/%d", n), func(b *testing.B) {
			x, y, z := gemmBenchOperands(n)
			var impl gonum.Implementation
			for b.Loop() {
				impl.Sgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, x, n, y, n, 0, z, n)
			}
			reportGFLOPs(b, n)
		})
	}
	for _, n := range gemmBenchSizes[:2] {
		b.Run(fmt.Sprintf("f64/%d", n), func(b *testing.B) {
			x, y, z := gemmBenchOperands(n)
			x64, y64, z64 := make([]float64, n*n), make([]float64, n*n), make([]float64, n*n)
			for i := range x {
				x64[i], y64[i], z64[i] = float64(x[i]), float64(y[i]), float64(z[i])
			}
			for b.Loop() {
				Gemm(false, false, n, n, n, 1, x64, n, y64, n, 0, z64, n)
			}
			reportGFLOPs(b, n)
		})
	}
}

// BenchmarkGemmKernels runs Gemm with each float32 micro-kernel this machine
// supports, on one worker and on all.
func BenchmarkGemmKernels(b *testing.B) {
	for _, kern := range gemmKernels32() {
		for _, workers := range []int{1, Workers()} {
			for _, n := range gemmBenchSizes[:3] {
				b.Run(fmt.Sprintf("%s/w=%d/%d", kern.name, workers, n), func(b *testing.B) {
					x, y, z := gemmBenchOperands(n)
					for b.Loop() {
						gemmWith(kern, workers, false, false, n, n, n, 1, x, n, y, n, 0, z, n)
					}
					reportGFLOPs(b, n)
				})
			}
		}
	}
}

// BenchmarkGemmMicroKernel measures each micro-kernel alone on panels that
// stay in L1: the ceiling the blocking can approach.
func BenchmarkGemmMicroKernel(b *testing.B) {
	const kc = 256
	for _, kern := range gemmKernels32() {
		b.Run(kern.name, func(b *testing.B) {
			x := make([]float32, kc*kern.mr)
			y := make([]float32, kc*kern.nr)
			c := make([]float32, kern.mr*kern.nr)
			for b.Loop() {
				kern.fn(kc, x, y, c, kern.nr)
			}
			b.ReportMetric(2*float64(kern.mr*kern.nr*kc)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkGemmMicroKernelParallel runs the micro-kernel on every core at
// once, each on its own panels: the machine's FMA ceiling for Gemm.
func BenchmarkGemmMicroKernelParallel(b *testing.B) {
	const kc = 256
	kern := gemmKernel32
	b.RunParallel(func(pb *testing.PB) {
		x := make([]float32, kc*kern.mr)
		y := make([]float32, kc*kern.nr)
		c := make([]float32, kern.mr*kern.nr)
		for pb.Next() {
			kern.fn(kc, x, y, c, kern.nr)
		}
	})
	b.ReportMetric(2*float64(kern.mr*kern.nr*kc)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkGemmLinear times the three GEMMs of a linear layer on the
// transformer's and the MLP's shapes, float32 next to bf16 in the same run:
// forward Y = X·Wᵀ (fwd), input gradient dX = dY·W (dx) and weight gradient
// dW = dYᵀ·X (dw), for X [rows, in] and W [out, in]. GFLOP/s counts
// 2·rows·in·out operations.
func BenchmarkGemmLinear(b *testing.B) {
	for _, sh := range []struct{ rows, in, out int }{
		{2048, 128, 384}, {2048, 128, 512}, {2048, 512, 128}, {256, 784, 1024}, {256, 1024, 1024},
		{2048, 512, 1536}, {2048, 512, 2048}, {2048, 2048, 512}, {256, 1024, 10},
	} {
		rng := rand.New(rand.NewPCG(uint64(sh.rows), uint64(sh.out)))
		x, w, dy := make([]float32, sh.rows*sh.in), make([]float32, sh.out*sh.in), make([]float32, sh.rows*sh.out)
		for _, s := range [][]float32{x, w, dy} {
			for i := range s {
				s[i] = rng.Float32() - 0.5
			}
		}
		xb, wb, dyb := make([]half.BFloat16, len(x)), make([]half.BFloat16, len(w)), make([]half.BFloat16, len(dy))
		half.Float32ToBFloat16(xb, x)
		half.Float32ToBFloat16(wb, w)
		half.Float32ToBFloat16(dyb, dy)
		y, dx, dw := make([]float32, len(dy)), make([]float32, len(x)), make([]float32, len(w))
		yb, dxb, dwb := make([]half.BFloat16, len(dy)), make([]half.BFloat16, len(x)), make([]half.BFloat16, len(w))
		r, in, out := sh.rows, sh.in, sh.out
		cases := []struct {
			name string
			f32  func()
			bf16 func()
		}{
			{"fwd", func() { Gemm(false, true, r, out, in, 1, x, in, w, in, 0, y, out) },
				func() { GemmBF16(false, true, r, out, in, 1, xb, in, wb, in, 0, yb, out) }},
			{"dx", func() { Gemm(false, false, r, in, out, 1, dy, out, w, in, 0, dx, in) },
				func() { GemmBF16(false, false, r, in, out, 1, dyb, out, wb, in, 0, dxb, in) }},
			{"dw", func() { Gemm(true, false, out, in, r, 1, dy, out, x, in, 0, dw, in) },
				func() { GemmBF16(true, false, out, in, r, 1, dyb, out, xb, in, 0, dwb, in) }},
		}
		for _, c := range cases {
			for _, p := range []struct {
				name string
				run  func()
			}{{"f32", c.f32}, {"bf16", c.bf16}} {
				b.Run(fmt.Sprintf("%dx%dx%d/%s/%s", r, in, out, c.name, p.name), func(b *testing.B) {
					for b.Loop() {
						p.run()
					}
					b.ReportMetric(2*float64(r*in*out)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}
