package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/kernels"
)

// TestShimHalfWeights runs the sgd_hw and adam_hw kernels (half weights without an FP32
// master) and the CPU backend's SGDStep/AdamStep with the same backend.HalfWeights for
// three steps, for every rounding (bfloat16) and nearest and stochastic (float16), and
// requires bit-identical weights, low halves and state.
func TestShimHalfWeights(t *testing.T) {
	s := loadShim(t)
	const n = 1031
	type kase struct {
		dt       backend.DType
		rounding backend.HalfRounding
	}
	cases := []kase{
		{backend.BFloat16, backend.RoundNearest}, {backend.BFloat16, backend.RoundStochastic},
		{backend.BFloat16, backend.RoundSplit}, {backend.Float16, backend.RoundNearest},
		{backend.Float16, backend.RoundStochastic},
	}
	for _, c := range cases {
		for _, adam := range []bool{false, true} {
			init := optimVals(0, n)
			init[3], init[5] = math.NaN(), math.Inf(1)
			if c.dt == backend.Float16 {
				// Weights across float16's range: subnormals up to past 65504.
				for i := range init {
					init[i] = math.Ldexp(init[i], i%46-28)
				}
			}
			pS, pC := bufOf(c.dt, init), up(bufOf(c.dt, init))
			loS := newBuf(backend.BFloat16, n)
			for i := range loS.u16() {
				if c.rounding == backend.RoundSplit {
					loS.u16()[i] = uint16(i * 977) // low halves at and around the tie too
				}
			}
			loC := up(loS)
			states := func() ([]*buf, []backend.Storage) {
				var bs []*buf
				var ss []backend.Storage
				for range 3 {
					b := newBuf(backend.Float32, n)
					bs, ss = append(bs, b), append(ss, up(b))
				}
				return bs, ss
			}
			stS, stC := states()
			var lo backend.Storage
			var loPtr uint64
			if c.rounding == backend.RoundSplit {
				lo, loPtr = loC, loS.ptr()
			}
			for step := 1; step <= 3; step++ {
				gv := optimVals(step, n)
				g := bufOf(backend.Float32, gv)
				gC := up(g)
				hw := backend.HalfWeights{Rounding: c.rounding, Lo: lo, RNG: backend.RNG{Seed: 17, Offset: uint64(step * n)}}
				var name string
				if adam {
					a := backend.AdamArgs{G: gC, M: stC[0], V: stC[1], VMax: stC[2], Half: pC, N: n, LR: 1e-2,
						Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.05, Step: int64(step),
						Decoupled: true, AMSGrad: step > 0, HalfWeights: hw}
					cpuB().AdamStep(a)
					stepSize, bc2Sqrt := kernels.AdamScalars(a.LR, a.Beta1, a.Beta2, a.Step)
					name = kernels.Name("adam_hw", c.dt)
					s.run(t, name, pS.ptr(), loPtr, g.ptr(), stS[0].ptr(), stS[1].ptr(), stS[2].ptr(), int64(n),
						a.LR, a.Beta1, a.Beta2, a.Eps, a.WeightDecay, stepSize, bc2Sqrt,
						kernels.FlagDecoupled|kernels.FlagAMSGrad, int32(c.rounding), hw.RNG.Seed, hw.RNG.Offset, uint64(0))
				} else {
					var flags int32 = kernels.FlagNesterov
					if step == 1 {
						flags |= kernels.FlagFirst
					}
					cpuB().SGDStep(backend.SGDArgs{G: gC, Buf: stC[0], Half: pC, N: n, LR: 0.05, Momentum: 0.9,
						WeightDecay: 1e-3, Nesterov: true, First: step == 1, HalfWeights: hw})
					name = kernels.Name("sgd_hw", c.dt)
					s.run(t, name, pS.ptr(), loPtr, g.ptr(), stS[0].ptr(), int64(n), 0.05, 0.9, 0.0, 1e-3,
						flags, int32(c.rounding), hw.RNG.Seed, hw.RNG.Offset, uint64(0))
				}
				cpuB().Free(gC)
				what := fmt.Sprintf("%s rounding %d step %d", name, c.rounding, step)
				sameBits(t, what+" weights", pS, snapshotOf(pC, n))
				if c.rounding == backend.RoundSplit {
					sameBits(t, what+" low halves", loS, snapshotOf(loC, n))
				}
				for k := range stS {
					sameBits(t, fmt.Sprintf("%s state %d", what, k), stS[k], snapshotOf(stC[k], n))
				}
			}
		}
	}
}

// snapshotOf copies CPU storage s into a new buffer, leaving s alive.
func snapshotOf(s backend.Storage, n int) *buf {
	b := newBuf(s.DType(), n)
	cpuB().Download(b.host(), s, 0)
	return b
}

// TestShimSplitTies: an SGD step with a zero learning rate re-encodes each 16+16 pair,
// ties included (low halves 0x8000 under odd and even high halves), as the CPU backend
// does: the pair comes back unchanged.
func TestShimSplitTies(t *testing.T) {
	s := loadShim(t)
	const n = 4096
	p, lo := newBuf(backend.BFloat16, n), newBuf(backend.BFloat16, n)
	for i := range n {
		p.u16()[i] = uint16(0x3f00 + i/4)
		lo.u16()[i] = []uint16{0x8000, 0x7fff, 0x8001, 0}[i%4]
	}
	pC, loC := up(p), up(lo)
	g := bufOf(backend.Float32, optimVals(1, n))
	gC := up(g)
	cpuB().SGDStep(backend.SGDArgs{G: gC, Half: pC, N: n, HalfWeights: backend.HalfWeights{Rounding: backend.RoundSplit, Lo: loC}})
	want := p.clone()
	s.run(t, kernels.Name("sgd_hw", backend.BFloat16), p.ptr(), lo.ptr(), g.ptr(), uint64(0), int64(n), 0.0, 0.0, 0.0, 0.0,
		int32(0), int32(backend.RoundSplit), uint64(0), uint64(0), uint64(0))
	sameBits(t, "weights", p, snapshotOf(pC, n))
	sameBits(t, "weights unchanged", p, want)
	sameBits(t, "low halves", lo, snapshotOf(loC, n))
}
