package cpu

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gamp-ml/gamp/half"
)

// BenchmarkAttnExpTile times the softmax exponential of one attnBlock² tile, every row
// fully visible, with the bf16 copy and the row sums (the backward pass's call).
func BenchmarkAttnExpTile(b *testing.B) {
	const n = attnBlock
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]float32, n*n)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	lse := make([]float32, n)
	for i := range lse {
		lse[i] = 3
	}
	x, lo, sums := make([]float32, n*n), make([]half.BFloat16, n*n), make([]float32, n)
	for b.Loop() {
		copy(x, src)
		attnExpTile(x, n, n, n, n, lse, 0.2, benchLo(lo), sums)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(n*n), "ns/element")
}

func benchLo(lo []half.BFloat16) []half.BFloat16 {
	if os.Getenv("NOLO") != "" {
		return nil
	}
	return lo
}
