package cpu

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/backend"
)

// The fused optimizer updates: one pass over the weights, gradients and state instead
// of a dozen tensor ops, with every intermediate rounded to the masters' dtype exactly
// as package optim's composed ops round it (explicit conversions keep Go from fusing a
// multiply and an add), so the numbers are bit-identical to the unfused path.

func (b *Backend) optimCheck(op string, n int, w, g backend.Storage, state ...backend.Storage) (*storage, *storage) {
	ws, gs := st(w), st(g)
	if ws.dt != backend.Float32 && ws.dt != backend.Float64 {
		panic(fmt.Sprintf("cpu: %s: master weights are %s, want float32 or float64", op, ws.dt))
	}
	for _, s := range append([]backend.Storage{g}, state...) {
		if s == nil {
			continue
		}
		if c := st(s); c.dt != ws.dt || c.n < n {
			panic(fmt.Sprintf("cpu: %s: operand %s[%d] does not match %s[%d] weights", op, c.dt, c.n, ws.dt, n))
		}
	}
	if ws.n < n || gs.n < n {
		panic(fmt.Sprintf("cpu: %s: %d elements, weights hold %d, gradient %d", op, n, ws.n, gs.n))
	}
	return ws, gs
}

func halfOut(op string, h backend.Storage, n int) *storage {
	if h == nil {
		return nil
	}
	s := st(h)
	if !s.dt.IsHalf() || s.n < n {
		panic(fmt.Sprintf("cpu: %s: the half copy is %s[%d], want float16/bfloat16 of %d", op, s.dt, s.n, n))
	}
	return s
}

// halfGrad returns the gradient g when it is float16/bfloat16 (a half gradient of
// float32 masters: backend.HalfGradSGD, backend.HalfGradAdam), nil otherwise, and
// panics, naming op, unless then the weights w are float32 and both hold n elements.
func halfGrad(op string, w, g backend.Storage, n int) *storage {
	gs := st(g)
	if !gs.dt.IsHalf() {
		return nil
	}
	if ws := st(w); ws.dt != backend.Float32 || gs.n < n || ws.n < n {
		panic(fmt.Sprintf("cpu: %s: a %s[%d] gradient needs float32 weights of %d, got %s[%d]", op, gs.dt, gs.n, n, ws.dt, ws.n))
	}
	return gs
}

// SGDHalfGrads implements backend.HalfGradSGD: SGDStep with float32 masters takes a
// float16/bfloat16 gradient, widened a chunk at a time as the update reads it.
func (b *Backend) SGDHalfGrads() bool { return true }

// AdamHalfGrads implements backend.HalfGradAdam: AdamStep with float32 masters takes a
// float16/bfloat16 gradient, widened a chunk at a time as the update reads it.
func (b *Backend) AdamHalfGrads() bool { return true }

// SGDStep implements backend.FusedOptimizer.
func (b *Backend) SGDStep(a backend.SGDArgs) {
	if a.Rounding != backend.RoundMaster {
		hw := b.halfWeightsCheck("SGDStep", a.N, a.W, a.G, a.Half, a.HalfWeights, a.Buf)
		if a.Momentum != 0 && a.Buf == nil {
			panic("cpu: SGDStep: momentum without a buffer")
		}
		var bb []float32
		if a.Buf != nil {
			bb = st(a.Buf).f32()
		}
		g := st(a.G).f32()
		hw.run(func(w []float32, lo, hi int) { sgdSpan(a, w, g[lo:hi], sub(bb, lo, hi)) })
		return
	}
	gLow := halfGrad("SGDStep", a.W, a.G, a.N) // backend.HalfGradSGD
	if gLow != nil {
		a.G = a.W // checked below as a float32 operand; never read
	}
	ws, gs := b.optimCheck("SGDStep", a.N, a.W, a.G, a.Buf)
	if a.Momentum != 0 && a.Buf == nil {
		panic("cpu: SGDStep: momentum without a buffer")
	}
	hs := halfOut("SGDStep", a.Half, a.N)
	if gLow != nil {
		var bb []float32
		if a.Buf != nil {
			bb = st(a.Buf).f32()
		}
		sgdRangeLow(a, ws.f32(), gLow, bb, hs)
		return
	}
	var buf *storage
	if a.Buf != nil {
		buf = st(a.Buf)
	}
	if ws.dt == backend.Float64 {
		var bb []float64
		if buf != nil {
			bb = buf.f64()
		}
		sgdRange(a, ws.f64(), gs.f64(), bb, nil)
		return
	}
	var bb []float32
	if buf != nil {
		bb = buf.f32()
	}
	sgdRange(a, ws.f32(), gs.f32(), bb, hs)
}

func sgdRange[C float32 | float64](a backend.SGDArgs, w, g, buf []C, hs *storage) {
	ParallelFor(a.N, grainElems, func(lo, hi int) {
		sgdSpan(a, w[lo:hi], g[lo:hi], sub(buf, lo, hi))
		if hs != nil {
			if w32, ok := any(w).([]float32); ok {
				hs.storeF32(lo, w32[lo:hi])
			}
		}
	})
}

// sgdLowBlock is how many gradient elements sgdRangeLow widens at a time (16 KiB of
// float32: in L1 beside the streams of w and buf).
const sgdLowBlock = 4096

// adamLowBlock is how many gradient elements adamRangeLow widens at a time (4 KiB of
// float32), a quarter of sgdLowBlock: the widening (one stream) and the update (four)
// then take turns more often, which measured faster (BenchmarkAdamHalfGrad's
// "halfgrad", 1.86 M parameters on one core of the 2-core VM: 1.1-1.2 ms with 768 or
// 1024, 1.2-1.3 ms with 512, ~1.3 ms with 256, 1.4-1.6 ms with 4096; the step on a
// float32 gradient 1.0-1.2 ms).
const adamLowBlock = 1024

// sgdRangeLow is sgdRange for a float16/bfloat16 gradient g: each chunk of it is
// widened into a buffer that stays in L1 and updated from there, so the result is
// sgdRange's on the widened gradient (the widening is exact) without its float32 copy.
//
// A bfloat16 gradient goes, where the CPU has AVX-512 (and Maximize is off), straight
// into the vector update's loads (vecSGDBF16AVX512), which widen it in registers.
func sgdRangeLow(a backend.SGDArgs, w []float32, g *storage, buf []float32, hs *storage) {
	if g.dt == backend.BFloat16 && !a.Maximize && vecAVX512OK() {
		gu := g.u16()
		ParallelFor(a.N, grainElems, func(lo, hi int) {
			sgdFusedBF16(a, w[lo:hi], gu[lo:hi], sub(buf, lo, hi))
			if hs != nil {
				hs.storeF32(lo, w[lo:hi])
			}
		})
		return
	}
	ParallelFor(a.N, grainElems, func(lo, hi int) {
		var gb [sgdLowBlock]float32
		for c := lo; c < hi; c += sgdLowBlock {
			e := min(c+sgdLowBlock, hi)
			gc := gb[:e-c]
			g.loadF32(gc, c)
			sgdSpan(a, w[c:e], gc, sub(buf, c, e))
		}
		if hs != nil {
			hs.storeF32(lo, w[lo:hi])
		}
	})
}

// sub returns s[lo:hi], or nil for a nil s (an absent buffer).
func sub[C any](s []C, lo, hi int) []C {
	if s == nil {
		return nil
	}
	return s[lo:hi]
}

// sgdSpan updates w from g (and buf) elementwise, all of one length.
func sgdSpan[C float32 | float64](a backend.SGDArgs, w, g, buf []C) {
	wd, mom, damp, lr := C(a.WeightDecay), C(a.Momentum), C(1-a.Dampening), C(a.LR)
	i0, hi := 0, len(w)
	if w32, ok := any(w).([]float32); ok && !a.Maximize {
		sgdVec(a, w32, any(g).([]float32), any(buf).([]float32), 0, hi)
		i0 = hi
	}
	for i := i0; i < hi; i++ {
		d := g[i]
		if a.Maximize {
			d = -d
		}
		wv := w[i]
		if a.WeightDecay != 0 {
			d = C(wv*wd) + d
		}
		if a.Momentum != 0 {
			var bv C
			if a.First {
				bv = d
			} else {
				bv = C(buf[i] * mom)
				if a.Dampening == 0 {
					bv = bv + d
				} else {
					bv = bv + C(d*damp)
				}
			}
			buf[i] = bv
			if a.Nesterov {
				d = C(bv*mom) + d
			} else {
				d = bv
			}
		}
		w[i] = wv - C(d*lr)
	}
}

// sgdVec is sgdRange's float32 loop over [lo, hi) on the vector layer: the loop's
// operations in its order, each rounded to float32 on its own, so the results are the
// loop's bit for bit. With AVX-512 it is one fused pass (sgdFused), else sgdVecPasses.
// Maximize (a negation, which no vector operation spells exactly for ±0) stays on the
// loop.
func sgdVec(a backend.SGDArgs, w, g, buf []float32, lo, hi int) {
	if vecAVX512OK() {
		sgdFused(a, w[lo:hi], g[lo:hi], sub(buf, lo, hi))
		return
	}
	sgdVecPasses(a, w, g, buf, lo, hi)
}

// sgdVecPasses is sgdVec a chunk at a time, each of the loop's operations a vector
// pass over a chunk that stays in L1.
func sgdVecPasses(a backend.SGDArgs, w, g, buf []float32, lo, hi int) {
	var db, tb [chunk]float32
	mom := float32(a.Momentum)
	for c := lo; c < hi; c += chunk {
		m := min(chunk, hi-c)
		wc, d, t := w[c:c+m], g[c:c+m], tb[:m]
		if a.WeightDecay != 0 {
			vecScalar(vecMulS, t, wc, float32(a.WeightDecay))
			vecBinary(vecAdd, db[:m], t, d)
			d = db[:m]
		}
		if a.Momentum != 0 {
			bc := buf[c : c+m]
			switch {
			case a.First:
				copy(bc, d)
			case a.Dampening == 0:
				vecScalar(vecMulS, bc, bc, mom)
				vecBinary(vecAdd, bc, bc, d)
			default:
				vecScalar(vecMulS, bc, bc, mom)
				vecScalar(vecMulS, t, d, float32(1-a.Dampening))
				vecBinary(vecAdd, bc, bc, t)
			}
			if a.Nesterov {
				vecScalar(vecMulS, t, bc, mom)
				vecBinary(vecAdd, db[:m], t, d)
				d = db[:m]
			} else {
				d = bc
			}
		}
		vecScalar(vecMulS, t, d, float32(a.LR))
		vecBinary(vecSub, wc, wc, t)
	}
}

// AdamStep implements backend.FusedOptimizer.
func (b *Backend) AdamStep(a backend.AdamArgs) {
	if a.Rounding != backend.RoundMaster {
		hw := b.halfWeightsCheck("AdamStep", a.N, a.W, a.G, a.Half, a.HalfWeights, a.M, a.V, a.VMax)
		if a.M == nil || a.V == nil || (a.AMSGrad && a.VMax == nil) {
			panic("cpu: AdamStep: missing moment storage")
		}
		var vm []float32
		if a.VMax != nil {
			vm = st(a.VMax).f32()
		}
		g, m, v := st(a.G).f32(), st(a.M).f32(), st(a.V).f32()
		c := newAdamConsts[float32](a)
		hw.run(func(w []float32, lo, hi int) {
			adamSpan(a, c, w, g[lo:hi], m[lo:hi], v[lo:hi], sub(vm, lo, hi))
		})
		return
	}
	gLow := halfGrad("AdamStep", a.W, a.G, a.N) // backend.HalfGradAdam
	if gLow != nil {
		a.G = a.W // checked below as a float32 operand; never read
	}
	ws, gs := b.optimCheck("AdamStep", a.N, a.W, a.G, a.M, a.V, a.VMax)
	if a.M == nil || a.V == nil || (a.AMSGrad && a.VMax == nil) {
		panic("cpu: AdamStep: missing moment storage")
	}
	hs := halfOut("AdamStep", a.Half, a.N)
	m, v := st(a.M), st(a.V)
	if gLow != nil {
		var vm []float32
		if a.VMax != nil {
			vm = st(a.VMax).f32()
		}
		adamRangeLow(a, ws.f32(), gLow, m.f32(), v.f32(), vm, hs)
		return
	}
	if ws.dt == backend.Float64 {
		var vm []float64
		if a.VMax != nil {
			vm = st(a.VMax).f64()
		}
		adamRange(a, ws.f64(), gs.f64(), m.f64(), v.f64(), vm, nil)
		return
	}
	var vm []float32
	if a.VMax != nil {
		vm = st(a.VMax).f32()
	}
	adamRange(a, ws.f32(), gs.f32(), m.f32(), v.f32(), vm, hs)
}

// adamConsts are the per-step constants of an Adam update.
type adamConsts[C float32 | float64] struct {
	stepSize, bc2Sqrt C
	small             bool
}

func newAdamConsts[C float32 | float64](a backend.AdamArgs) adamConsts[C] {
	t := float64(a.Step)
	bc1 := 1 - math.Pow(a.Beta1, t)
	bc2 := 1 - math.Pow(a.Beta2, t)
	return adamConsts[C]{stepSize: C(a.LR / bc1), bc2Sqrt: C(math.Sqrt(bc2)), small: math.Abs(1-a.Beta1) < 0.5}
}

func adamRange[C float32 | float64](a backend.AdamArgs, w, g, m, v, vmax []C, hs *storage) {
	c := newAdamConsts[C](a)
	ParallelFor(a.N, grainElems, func(lo, hi int) {
		adamSpan(a, c, w[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi], sub(vmax, lo, hi))
		if hs != nil {
			if w32, ok := any(w).([]float32); ok {
				hs.storeF32(lo, w32[lo:hi])
			}
		}
	})
}

// adamRangeLow is adamRange for a float16/bfloat16 gradient g of float32 weights
// (backend.HalfGradAdam): each chunk of adamLowBlock elements of it is widened into a
// buffer that stays in L1 and adamSpan updates from there (then rounds into hs, when
// not nil), so the result is adamRange's on the widened gradient (the widening is
// exact and the update elementwise) without its float32 copy.
func adamRangeLow(a backend.AdamArgs, w []float32, g *storage, m, v, vmax []float32, hs *storage) {
	c := newAdamConsts[float32](a)
	ParallelFor(a.N, grainElems, func(lo, hi int) {
		var gb [adamLowBlock]float32
		for k := lo; k < hi; k += adamLowBlock {
			e := min(k+adamLowBlock, hi)
			gc := gb[:e-k]
			g.loadF32(gc, k)
			adamSpan(a, c, w[k:e], gc, m[k:e], v[k:e], sub(vmax, k, e))
			if hs != nil {
				hs.storeF32(k, w[k:e]) // while the chunk of w is in L1
			}
		}
	})
}

// adamSpan updates w, m, v (and vmax) from g elementwise, all of one length.
func adamSpan[C float32 | float64](a backend.AdamArgs, c adamConsts[C], w, g, m, v, vmax []C) {
	stepSize, bc2Sqrt, small := c.stepSize, c.bc2Sqrt, c.small
	wt := 1 - a.Beta1
	decay, wdC := C(1-a.LR*a.WeightDecay), C(a.WeightDecay)
	wtC, wt1C := C(wt), C(1-wt)
	b2, omb2, eps := C(a.Beta2), C(1-a.Beta2), C(a.Eps)
	i0, hi := 0, len(w)
	if w32, ok := any(w).([]float32); ok && !a.Maximize && !a.AMSGrad {
		adamVec(a, w32, any(g).([]float32), any(m).([]float32), any(v).([]float32), 0, hi,
			float32(stepSize), float32(bc2Sqrt), small)
		i0 = hi
	}
	for i := i0; i < hi; i++ {
		gv := g[i]
		if a.Maximize {
			gv = -gv
		}
		wv := w[i]
		if a.WeightDecay != 0 {
			if a.Decoupled {
				wv = C(wv * decay)
			} else {
				gv = C(wv*wdC) + gv
			}
		}
		mv := m[i]
		if small {
			mv = mv + C(C(gv-mv)*wtC)
		} else {
			mv = gv - C(C(gv-mv)*wt1C)
		}
		vv := C(v[i] * b2)
		vv = vv + C(C(gv*omb2)*gv)
		m[i], v[i] = mv, vv
		vd := vv
		if a.AMSGrad {
			mx := vmax[i]
			if !(mx != mx || mx > vv) {
				mx = vv
			}
			vmax[i] = mx
			vd = mx
		}
		denom := C(math.Sqrt(float64(vd)))
		denom = C(denom / bc2Sqrt)
		denom = denom + eps
		upd := C(mv / denom)
		upd = C(upd * stepSize)
		w[i] = wv - upd
	}
}

// adamVec is adamRange's float32 loop over [lo, hi) on the vector layer, a chunk at a
// time, as sgdVec: the loop's operations in its order, each rounded to float32, so the
// results are the loop's bit for bit (the square root rounded once, as VSQRTPS does).
// Maximize (a negation) and AMSGrad (a NaN-aware maximum) stay on the loop. With
// AVX-512 it is one fused pass (adamFused), else adamVecPasses.
func adamVec(a backend.AdamArgs, w, g, m, v []float32, lo, hi int, stepSize, bc2Sqrt float32, small bool) {
	if vecAVX512OK() {
		adamFused(a, w[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi], stepSize, bc2Sqrt, small)
		return
	}
	adamVecPasses(a, w, g, m, v, lo, hi, stepSize, bc2Sqrt, small)
}

// adamVecPasses is adamVec a chunk at a time, each of the loop's operations a vector
// pass over a chunk that stays in L1.
func adamVecPasses(a backend.AdamArgs, w, g, m, v []float32, lo, hi int, stepSize, bc2Sqrt float32, small bool) {
	var wb, db, tb [chunk]float32
	wt := 1 - a.Beta1
	for c := lo; c < hi; c += chunk {
		n := min(chunk, hi-c)
		wc, gv, mc, vc, t := w[c:c+n], g[c:c+n], m[c:c+n], v[c:c+n], tb[:n]
		wv := wc
		if a.WeightDecay != 0 {
			if a.Decoupled {
				wv = wb[:n]
				vecScalar(vecMulS, wv, wc, float32(1-a.LR*a.WeightDecay))
			} else {
				vecScalar(vecMulS, t, wc, float32(a.WeightDecay))
				vecBinary(vecAdd, db[:n], t, gv)
				gv = db[:n]
			}
		}
		vecBinary(vecSub, t, gv, mc) // gv - m
		if small {
			vecScalar(vecMulS, t, t, float32(wt))
			vecBinary(vecAdd, mc, mc, t)
		} else {
			vecScalar(vecMulS, t, t, float32(1-wt))
			vecBinary(vecSub, mc, gv, t)
		}
		vecScalar(vecMulS, vc, vc, float32(a.Beta2))
		vecScalar(vecMulS, t, gv, float32(1-a.Beta2))
		vecBinary(vecMul, t, t, gv)
		vecBinary(vecAdd, vc, vc, t)
		vecScalar(vecSqrt, t, vc, 0)
		vecScalar(vecDivS, t, t, bc2Sqrt)
		vecScalar(vecAddS, t, t, float32(a.Eps))
		vecBinary(vecDiv, t, mc, t)
		vecScalar(vecMulS, t, t, stepSize)
		vecBinary(vecSub, wc, wv, t)
	}
}
