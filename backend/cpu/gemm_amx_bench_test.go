package cpu

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/gamp-ml/gamp/half"
)

// BenchmarkGemmBF16Linear1 is BenchmarkGemmLinear's bf16 GEMMs on one
// worker, on the transformer, transformer-large and MLP shapes, reporting
// the thread's CPU time per op (cpu-ns/op) and GFLOP/s of that CPU time
// (cpu-GFLOP/s): steadier than wall time on a shared machine.
func BenchmarkGemmBF16Linear1(b *testing.B) {
	for _, sh := range []struct{ rows, in, out int }{
		{2048, 128, 384}, {2048, 128, 512}, {2048, 512, 128}, {256, 784, 1024}, {256, 1024, 1024}, {256, 1024, 10},
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
				if w, err := strconv.Atoi(os.Getenv("GAMP_BF16_COLSPLIT")); err == nil {
					// Benchmarking the column split of few rows.
					defer func(w int) { gemmBF16ColumnSplitPanels = w }(gemmBF16ColumnSplitPanels)
					gemmBF16ColumnSplitPanels = w
				}
				if w, err := strconv.Atoi(os.Getenv("GAMP_BF16_ROW_WORDS")); err == nil {
					// Benchmarking the row order's chunk size.
					defer func(w int) { gemmBF16RowOrderWords = w }(gemmBF16RowOrderWords)
					gemmBF16RowOrderWords = w
				}
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

// BenchmarkAMXStrips times the AMX strip stores on the layouts the driver
// feeds them at k = 512, 1024 and 2048 on one worker: a column of 5 tiles
// from A in place (row stride lda = k) or from packed panels, and a row of
// 16 tiles from one A row panel in place. GFLOP/s of CPU time; the L1/L2
// ceiling is BenchmarkGemmBF16MicroKernel.
func BenchmarkAMXStrips(b *testing.B) {
	kern := gemmBF16KernelBest
	if kern.directN == nil {
		b.Skip("no AMX")
	}
	for _, k := range []int{512, 1024, 2048} {
		kc2 := k / 2
		for _, sh := range []struct {
			name         string
			rows, panels int
		}{{"col5", 5 * amxMR, 1}, {"row16", amxMR, 16}, {"col64", 64 * amxMR, 1}} {
			for _, mode := range []string{"direct", "packed"} {
				if mode == "packed" && sh.panels > 1 {
					continue
				}
				b.Run(fmt.Sprintf("k=%d/%s/%s", k, sh.name, mode), func(b *testing.B) {
					a := make([]half.BFloat16, sh.rows*k)
					ap := make([]uint32, sh.rows*kc2)
					bp := make([]uint32, sh.panels*amxNR*kc2)
					ldc := sh.panels * amxNR
					c := make([]half.BFloat16, sh.rows*ldc)
					// Written, not just made: a buffer never written is the
					// kernel's shared zero page, every row the same physical
					// page, and would read at L1 speed.
					for i := range a {
						a[i] = half.BFloat16(0x3c00 + i%97)
					}
					for i := range ap {
						ap[i] = 0x3c003c00 + uint32(i%89)
					}
					for i := range bp {
						bp[i] = 0x3c003c00 + uint32(i%83)
					}
					n := sh.rows / amxMR
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					t0 := gemmThreadCPU()
					for b.Loop() {
						switch {
						case sh.panels > 1:
							kern.directRow(sh.panels, kc2, a, k, bp, nil, c, ldc, 1, 0)
						case mode == "direct":
							kern.directN(n, kc2, a, k, bp, nil, c, ldc, 1, 0)
						default:
							kern.storeN(n, kc2, ap, bp, nil, c, ldc, 1, 0)
						}
					}
					ns := float64(gemmThreadCPU()-t0) / float64(b.N)
					b.ReportMetric(2*float64(sh.rows*ldc*k)/ns, "cpu-GFLOP/s")
				})
			}
		}
	}
}
