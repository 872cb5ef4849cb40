package tensor

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkCrossEntropyMLP times the MLP's loss, float32 logits [256, 10]
// with Int64 labels: the forward alone (fwd) and forward plus backward
// (fwdbwd).
func BenchmarkCrossEntropyMLP(b *testing.B) {
	const rows, classes = 256, 10
	rng := rand.New(rand.NewPCG(1, 2))
	xs := make([]float32, rows*classes)
	for i := range xs {
		xs[i] = rng.Float32()*4 - 2
	}
	labs := make([]int64, rows)
	for i := range labs {
		labs[i] = int64(rng.IntN(classes))
	}
	c := NewContext()
	defer c.Close()
	lab := FromSlice(labs, Shape{rows}, WithContext(c))
	for _, bwd := range []bool{false, true} {
		name := "fwd"
		if bwd {
			name = "fwdbwd"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				x := FromSlice(xs, Shape{rows, classes}, WithGrad(), WithContext(c))
				l := CrossEntropy(x, lab, 0)
				if bwd {
					l.Backward()
				}
				x.Release()
				l.Release()
			}
		})
	}
}
