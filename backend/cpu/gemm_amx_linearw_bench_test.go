package cpu

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/gamp-ml/gamp/half"
)

// BenchmarkGemmBF16LinearW is BenchmarkGemmBF16Linear1's shapes through
// GemmBF16 on every worker (wall time, ns/op), with and without a bias.
func BenchmarkGemmBF16LinearW(b *testing.B) {
	for _, sh := range []struct{ rows, in, out int }{
		{256, 784, 1024}, {256, 1024, 1024}, {256, 1024, 10},
		{2048, 128, 384}, {2048, 128, 128}, {2048, 128, 512}, {2048, 512, 128},
		{4096, 128, 384}, {4096, 128, 512}, {4096, 512, 128},
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
		k, w := gemmBF16KernelBest, Workers()
		cases := []struct {
			name string
			run  func()
		}{
			{"fwdbias", func() { gemmBF16WithBias(k, w, false, true, r, out, in, 1, xb, in, wb, in, 0, bias, yb, out) }},
			{"dx", func() { gemmBF16With(k, w, false, false, r, in, out, 1, dyb, out, wb, in, 0, dxb, in) }},
			{"dw", func() { gemmBF16With(k, w, true, false, out, in, r, 1, dyb, out, xb, in, 0, dwb, in) }},
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", r, in, out, c.name), func(b *testing.B) {
				if w, err := strconv.Atoi(os.Getenv("GAMP_BF16_COLSPLIT")); err == nil {
					// Benchmarking the column split of few rows.
					defer func(w int) { gemmBF16ColumnSplitPanels = w }(gemmBF16ColumnSplitPanels)
					gemmBF16ColumnSplitPanels = w
				}
				for b.Loop() {
					c.run()
				}
				b.ReportMetric(2*float64(r*in*out)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
