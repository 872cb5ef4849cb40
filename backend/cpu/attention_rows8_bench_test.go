package cpu

import (
	"github.com/gamp-ml/gamp/backend"
	"testing"
	"time"
)

// BenchmarkAttentionRows8 times a forward and backward pass of the small
// transformer's and chargpt's bf16 attention with the 8-row kernel form and
// without it (attnRows8), call by call alternately: the two figures share the
// machine's state (rows8-ns/op, rows12-ns/op).
func BenchmarkAttentionRows8(b *testing.B) {
	be, _ := New(0)
	for _, sh := range []struct {
		name           string
		n, heads, t, d int
		causal         bool
	}{{"small", 32, 4, 64, 32, false}, {"chargpt", 32, 4, 128, 32, true}} {
		b.Run(sh.name, func(b *testing.B) {
			a := attnBenchPackedShape(b, backend.BFloat16, sh.n, sh.heads, sh.t, sh.d, sh.causal)
			defer func(v bool) { attnRows8 = v }(attnRows8)
			var ns [2]time.Duration
			for b.Loop() {
				for i, on := range []bool{true, false} {
					attnRows8 = on
					t0 := time.Now()
					be.Attention(a)
					be.AttentionBackward(a)
					ns[i] += time.Since(t0)
				}
			}
			b.ReportMetric(float64(ns[0].Nanoseconds())/float64(b.N), "rows8-ns/op")
			b.ReportMetric(float64(ns[1].Nanoseconds())/float64(b.N), "rows12-ns/op")
		})
	}
}
