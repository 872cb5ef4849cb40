package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// attnBenchArgs allocates examples/chargpt's default attention (batch 32 × 4 heads,
// T = 128, D = 32, causal) in dt.
func attnBenchArgs(b *testing.B, dt backend.DType) backend.AttentionArgs {
	be, _ := New(0)
	const bh, t, d = 128, 128, 32
	rng := rand.New(rand.NewPCG(1, 2))
	mk := func(fill bool) backend.Storage {
		s, err := be.Alloc(dt, bh*t*d)
		if err != nil {
			b.Fatal(err)
		}
		if fill {
			v := make([]float32, bh*t*d)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			st(s).storeF32(0, v)
		}
		return s
	}
	lse, _ := be.Alloc(backend.Float32, bh*t)
	return backend.AttentionArgs{Q: mk(true), K: mk(true), V: mk(true), O: mk(false), LSE: lse,
		GO: mk(true), GQ: mk(false), GK: mk(false), GV: mk(false),
		BH: bh, T: t, D: d, Scale: 1 / math.Sqrt(d), Causal: true}
}

// BenchmarkAttention times one forward and one backward pass of chargpt's attention.
func BenchmarkAttention(b *testing.B) {
	be, _ := New(0)
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		b.Run(dt.String(), func(b *testing.B) {
			a := attnBenchArgs(b, dt)
			for b.Loop() {
				be.Attention(a)
				be.AttentionBackward(a)
			}
		})
	}
}
