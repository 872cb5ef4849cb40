package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/half"
)

// BenchmarkAttnExpTile times the softmax exponential of one attnBlock² tile, every row
// fully visible, with the row sums, with the bf16 copy (bf16, the products' operand)
// and without (f32); ns/element includes refilling the tile's scores.
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
	for _, c := range []struct {
		name string
		lo   []half.BFloat16
	}{{"bf16", lo}, {"f32", nil}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				copy(x, src)
				attnExpTile(x, n, n, n, n, lse, 0.2, c.lo, sums)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(n*n), "ns/element")
		})
	}
}
