package cuda

import (
	"fmt"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/backend/backendtest"
)

// testOptimHalfWeights compares the fused updates of half weights without an FP32
// master (backend.HalfWeights) on both backends: every rounding on bfloat16, nearest
// and stochastic on float16; weights, low halves and state bit for bit.
func (p pair) testOptimHalfWeights(t *testing.T) {
	gf, _ := p.g.(backend.FusedOptimizer)
	cf, _ := p.c.(backend.FusedOptimizer)
	fs := [2]backend.FusedOptimizer{gf, cf}
	const n = 777
	for _, c := range []struct {
		dt       backend.DType
		rounding backend.HalfRounding
	}{
		{backend.BFloat16, backend.RoundNearest}, {backend.BFloat16, backend.RoundStochastic},
		{backend.BFloat16, backend.RoundSplit}, {backend.Float16, backend.RoundNearest},
		{backend.Float16, backend.RoundStochastic},
	} {
		name := fmt.Sprintf("%s rounding %d", c.dt, c.rounding)
		h := p.up(t, c.dt, backendtest.RandVals(40, n, -1, 1))
		lo := p.up(t, backend.BFloat16, make([]float64, n))
		buf, m := p.garbage(t, backend.Float32, n), p.garbage(t, backend.Float32, n)
		v, vmax := p.up(t, backend.Float32, make([]float64, n)), p.up(t, backend.Float32, make([]float64, n))
		for step := 1; step <= 3; step++ {
			g := p.up(t, backend.Float32, backendtest.RandVals(uint64(41+step), n, -0.5, 0.5))
			hw := func(i int) backend.HalfWeights {
				r := backend.HalfWeights{Rounding: c.rounding, RNG: backend.RNG{Seed: 5, Offset: uint64(step) * n}}
				if c.rounding == backend.RoundSplit {
					r.Lo = lo[i]
				}
				return r
			}
			for i, f := range fs {
				f.SGDStep(backend.SGDArgs{G: g[i], Buf: buf[i], Half: h[i], N: n, LR: 0.1, Momentum: 0.9,
					Dampening: 0.1, WeightDecay: 1e-2, First: step == 1, HalfWeights: hw(i)})
			}
			p.same(t, fmt.Sprintf("SGD %s step %d weights", name, step), h)
			p.same(t, fmt.Sprintf("SGD %s step %d low halves", name, step), lo)
			p.same(t, fmt.Sprintf("SGD %s step %d momentum", name, step), buf)
			for i, f := range fs {
				f.AdamStep(backend.AdamArgs{G: g[i], M: m[i], V: v[i], VMax: vmax[i], Half: h[i], N: n,
					LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-2, Step: int64(step),
					Decoupled: true, AMSGrad: step == 3, HalfWeights: hw(i)})
			}
			p.same(t, fmt.Sprintf("Adam %s step %d weights", name, step), h)
			p.same(t, fmt.Sprintf("Adam %s step %d low halves", name, step), lo)
			p.same(t, fmt.Sprintf("Adam %s step %d moments", name, step), v)
			p.free(g)
		}
		p.free(h, lo, buf, m, v, vmax)
	}
}
