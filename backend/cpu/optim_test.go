package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// TestAdamVecMatchesLoop compares AdamStep's vector path with its loop, bit for bit: the
// loop runs on the same step with Maximize set and the gradient negated (an exact
// negation), which keeps it off the vector path.
func TestAdamVecMatchesLoop(t *testing.T) {
	b, _ := New(0)
	rng := rand.New(rand.NewPCG(61, 62))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, float32(math.Inf(1)), float32(math.NaN()), 3e38}
	fill := func(x []float32, positive bool) {
		for i := range x {
			v := float32(rng.NormFloat64())
			if rng.IntN(40) == 0 {
				v = special[rng.IntN(len(special))]
			}
			if positive {
				v = float32(math.Abs(float64(v)))
			}
			x[i] = v
		}
	}
	for _, n := range []int{0, 1, 15, 16, 17, 100, 1000, 5000} {
		for _, c := range []struct {
			beta1, wd float64
			decoupled bool
		}{{0.9, 0, false}, {0.9, 0.01, false}, {0.9, 0.01, true}, {0.3, 0.1, false}, {0.3, 0.1, true}} {
			w, g, m, v := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
			fill(w, false)
			fill(g, false)
			fill(m, false)
			fill(v, true)
			run := func(maximize bool) [4][]float32 {
				var ss [4]backend.Storage
				for k, x := range [][]float32{w, g, m, v} {
					ss[k], _ = b.Alloc(backend.Float32, n)
					copy(st(ss[k]).f32(), x)
					if k == 1 && maximize {
						for i, e := range st(ss[k]).f32() {
							st(ss[k]).f32()[i] = -e
						}
					}
				}
				b.AdamStep(backend.AdamArgs{W: ss[0], G: ss[1], M: ss[2], V: ss[3], N: n, LR: 1e-3,
					Beta1: c.beta1, Beta2: 0.999, Eps: 1e-8, WeightDecay: c.wd, Step: 3,
					Decoupled: c.decoupled, Maximize: maximize})
				return [4][]float32{st(ss[0]).f32(), nil, st(ss[2]).f32(), st(ss[3]).f32()}
			}
			got, want := run(false), run(true)
			for k, name := range []string{"w", "", "m", "v"} {
				for i := range got[k] {
					if !sameBits(got[k][i], want[k][i]) {
						t.Fatalf("n=%d %+v: %s[%d] = %v, loop %v", n, c, name, i, got[k][i], want[k][i])
					}
				}
			}
		}
	}
}

// BenchmarkAdamStep times a float32 AdamStep over 1M parameters on the vector path and,
// with Maximize, on the loop.
func BenchmarkAdamStep(b *testing.B) {
	be, _ := New(0)
	const n = 1 << 20
	var ss [4]backend.Storage
	for k := range ss {
		ss[k], _ = be.Alloc(backend.Float32, n)
		be.Fill(backend.Dense(ss[k], 0, n), 0.5)
	}
	for _, maximize := range []bool{false, true} {
		name := "vec"
		if maximize {
			name = "loop"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				be.AdamStep(backend.AdamArgs{W: ss[0], G: ss[1], M: ss[2], V: ss[3], N: n, LR: 1e-3,
					Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 3, Decoupled: true, Maximize: maximize})
			}
		})
	}
}
