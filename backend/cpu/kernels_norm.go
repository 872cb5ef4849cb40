package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/gamp-ml/gamp/backend"
)

// Normalisation kernels. Statistics (means, variances and the gradient sums) accumulate
// in float64 from the values the storage holds and are stored as float32; the
// elementwise parts run in the compute type (float32 for float32 and half data).

// normOperands checks that the named storages share a floating dtype and hold at least
// n elements, and returns them in order.
func normOperands(op string, n int, names []string, ss ...backend.Storage) []*storage {
	out := make([]*storage, len(ss))
	for i, s := range ss {
		c := st(s)
		switch {
		case c == nil:
			panic(fmt.Sprintf("cpu: %s: %s is nil", op, names[i]))
		case !c.dt.IsFloat():
			panic(fmt.Sprintf("cpu: %s: %s is %s, want a floating dtype", op, names[i], c.dt))
		case i > 0 && c.dt != out[0].dt:
			panic(fmt.Sprintf("cpu: %s: %s is %s but %s is %s", op, names[i], c.dt, names[0], out[0].dt))
		case c.n < n:
			panic(fmt.Sprintf("cpu: %s: %s holds %d elements, the geometry needs %d", op, names[i], c.n, n))
		}
		out[i] = c
	}
	return out
}

// LayerNormHalfIO implements backend.LayerNormHalfIO: LayerNorm's Y and
// LayerNormBackward's GY may be Float16 or BFloat16 when X (and GX) are Float32.
func (b *Backend) LayerNormHalfIO(dt backend.DType) bool { return dt.IsHalf() }

// normOperandsHalfIO is normOperands where operand h (LayerNorm's Y, its backward's
// GY) may instead be of a half dtype when the first is Float32: the row passes convert
// it a chunk at a time, as they do for half X.
func normOperandsHalfIO(op string, n int, names []string, h int, ss ...backend.Storage) []*storage {
	x, hs := st(ss[0]), st(ss[h])
	if x == nil || hs == nil || x.dt != backend.Float32 || !hs.dt.IsHalf() {
		return normOperands(op, n, names, ss...)
	}
	others := normOperands(op, n, append(names[:h:h], names[h+1:]...), append(ss[:h:h], ss[h+1:]...)...)
	hv := normOperands(op, n, names[h:h+1], ss[h])[0]
	return append(others[:h:h], append([]*storage{hv}, others[h:]...)...)
}

// statParam returns the first n elements of a Float32 statistics or affine storage, or
// nil when s is nil; need, when not empty, says why s may not be nil.
func statParam(op, name string, s backend.Storage, n int, need string) []float32 {
	c := st(s)
	switch {
	case c == nil && need != "":
		panic(fmt.Sprintf("cpu: %s: %s is nil; %s", op, name, need))
	case c == nil:
		return nil
	case c.dt != backend.Float32:
		panic(fmt.Sprintf("cpu: %s: %s is %s; statistics and affine parameters are float32", op, name, c.dt))
	case c.n < n:
		panic(fmt.Sprintf("cpu: %s: %s holds %d elements, want %d", op, name, c.n, n))
	}
	return c.f32()[:n]
}

func checkNormSize(op string, a *backend.NormArgs) {
	if a.N < 0 || a.C < 0 || a.S < 0 {
		panic(fmt.Sprintf("cpu: %s: negative size N=%d C=%d S=%d", op, a.N, a.C, a.S))
	}
}

// param returns p[i] as float64, or def when p is nil.
func param(p []float32, i int, def float64) float64 {
	if p == nil {
		return def
	}
	return float64(p[i])
}

// A batch-norm tile is at most chunk positions of one sample's [C, S] slab that lie
// together in memory: the whole rows of several channels when S < chunk, else a piece of
// one channel's row. The kernels run over the samples tile by tile with per-position
// accumulators and coefficients, so their inner loops are plain vector loops whatever S
// is (S = 1 for BatchNorm1d). A channel's tiles depend on S alone, not on which channels
// a worker got, so per-channel sums come out the same for any worker count. bnGroups
// (bn_groups.go) hands them out.
type bnTile struct {
	off int   // offset of the tile in sample 0; sample n adds n·C·S
	ch  []int // ch[j]: the channel of position j, relative to the worker's first one
}

// BatchNorm implements backend.Backend. X and Y are [N, C, S] (Y may be X). Training
// normalises with the batch mean and biased variance of each channel, stores them in
// SaveMean and 1/√(var+Eps) in SaveInvStd when those are non-nil, and updates
// RunningMean/RunningVar when non-nil as PyTorch does (with the unbiased variance);
// it needs N·S > 1. Eval normalises with RunningMean/RunningVar, which it requires,
// and stores those statistics in SaveMean/SaveInvStd when non-nil.
func (b *Backend) BatchNorm(a backend.NormArgs) { b.batchNormAct("BatchNorm", a, false) }

// BatchNormReLU implements backend.BatchNormReLUer: BatchNorm with the ReLU applied
// to each tile of Y before it is stored (vecRelu, as Unary's Relu).
func (b *Backend) BatchNormReLU(a backend.NormArgs) { b.batchNormAct("BatchNormReLU", a, true) }

func (b *Backend) batchNormAct(op string, a backend.NormArgs, relu bool) {
	checkNormSize(op, &a)
	xy := normOperands(op, a.N*a.C*a.S, []string{"X", "Y"}, a.X, a.Y)
	evalNeed := ""
	if !a.Training {
		evalNeed = "eval mode normalises with the running statistics"
	}
	p := bnParams{
		w:    statParam(op, "Weight", a.Weight, a.C, ""),
		bias: statParam(op, "Bias", a.Bias, a.C, ""),
		rm:   statParam(op, "RunningMean", a.RunningMean, a.C, evalNeed),
		rv:   statParam(op, "RunningVar", a.RunningVar, a.C, evalNeed),
		sm:   statParam(op, "SaveMean", a.SaveMean, a.C, ""),
		si:   statParam(op, "SaveInvStd", a.SaveInvStd, a.C, ""),
	}
	if a.Training && a.N*a.S < 2 && a.C > 0 {
		panic(fmt.Sprintf("cpu: %s: training needs more than one value per channel, got N·S = %d", op, a.N*a.S))
	}
	if computeF64(xy[0].dt) {
		batchNorm[float64](&a, xy[0], xy[1], &p, relu)
	} else {
		batchNorm[float32](&a, xy[0], xy[1], &p, relu)
	}
}

// bnParams are the float32 per-channel operands of a batch-norm call (nil when absent).
type bnParams struct {
	w, bias, rm, rv, sm, si []float32
	gw, gb                  []float32
}

func batchNorm[C numeric](a *backend.NormArgs, x, y *storage, p *bnParams, relu bool) {
	cnt, stride := a.N*a.S, a.C*a.S
	xr, yr := elemRunOf[C](x), elemRunOf[C](y)
	ParallelFor(a.C, max(1, grainElems/max(cnt, 1)), func(lo, hi int) {
		k := hi - lo
		mean, invstd := make([]float64, k), make([]float64, k)
		sum, sq := make([]float64, k), make([]float64, k)
		cm, scale, shift := make([]C, k), make([]C, k), make([]C, k)
		buf := make([]C, chunk)
		acc, e64 := make([]float64, chunk), make([]float64, chunk)
		em, es, eb, ob := make([]C, chunk), make([]C, chunk), make([]C, chunk), make([]C, chunk)
		// Half data the AVX-512 loops read and write in place (bn_half.go); the group's
		// 16-bit x stays in cache between the passes.
		xh, bf, direct := bnHalfOf(x)
		var yh []uint16
		var emf, esf, ebf []float32
		if direct {
			yh, _, _ = bnHalfOf(y)
			emf, esf, ebf = any(em).([]float32), any(es).([]float32), any(eb).([]float32)
		}
		// Otherwise in training the group's x is read three times: converted once, into
		// xc.
		var xc bnCache[C]
		if a.Training && !direct {
			xc = newBNCache(xr, a)
			defer xc.release()
		}
		bnGroups(a, lo, hi, func(g *bnGroup) {
			// read returns sample n of tile i: from xc once the first pass filled it.
			read := func(i, n int, fill bool) []C {
				t := g.tiles[i]
				off := t.off + n*stride
				switch {
				case !xc.ok:
					return xr.read(buf[:len(t.ch)], off)
				case fill:
					return xr.read(xc.slot(g, i, n), off)
				}
				return xc.slot(g, i, n)
			}
			if a.Training {
				// Two passes: the mean, then the mean squared deviation from it.
				for i, t := range g.tiles {
					m := len(t.ch)
					clear(acc[:m])
					for n := 0; n < a.N; n++ {
						if direct {
							off := t.off + n*stride
							bnAccHalf(bf, acc[:m], xh[off:off+m], stride)
							continue
						}
						accAdd(acc[:m], read(i, n, true))
					}
					for j, c := range t.ch {
						sum[c] += acc[j]
					}
				}
				for c := g.c0; c < g.c1; c++ {
					mean[c] = sum[c] / float64(cnt)
				}
				for i, t := range g.tiles {
					m := len(t.ch)
					clear(acc[:m])
					for j, c := range t.ch {
						e64[j] = mean[c]
					}
					for n := 0; n < a.N; n++ {
						if direct {
							off := t.off + n*stride
							bnDevSqHalf(bf, acc[:m], xh[off:off+m], e64[:m])
							continue
						}
						accDev(accSq, acc[:m], nil, read(i, n, false), e64[:m])
					}
					for j, c := range t.ch {
						sq[c] += acc[j]
					}
				}
				for i := g.c0; i < g.c1; i++ {
					c := lo + i
					v := sq[i] / float64(cnt)
					invstd[i] = 1 / math.Sqrt(v+a.Eps)
					if p.rm != nil {
						p.rm[c] = float32((1-a.Momentum)*float64(p.rm[c]) + a.Momentum*mean[i])
					}
					if p.rv != nil {
						unbiased := v * float64(cnt) / float64(cnt-1)
						p.rv[c] = float32((1-a.Momentum)*float64(p.rv[c]) + a.Momentum*unbiased)
					}
				}
			} else {
				for i := g.c0; i < g.c1; i++ {
					mean[i] = float64(p.rm[lo+i])
					invstd[i] = 1 / math.Sqrt(float64(p.rv[lo+i])+a.Eps)
				}
			}
			for i := g.c0; i < g.c1; i++ {
				c := lo + i
				if p.sm != nil {
					p.sm[c] = float32(mean[i])
				}
				if p.si != nil {
					p.si[c] = float32(invstd[i])
				}
				cm[i] = C(mean[i])
				scale[i] = C(invstd[i] * param(p.w, c, 1))
				shift[i] = C(param(p.bias, c, 0))
			}
			// y = (x − mean)·(invstd·w) + b; subtracting first keeps a large mean from
			// cancelling against the shift.
			for i, t := range g.tiles {
				m := len(t.ch)
				for j, c := range t.ch {
					em[j], es[j], eb[j] = cm[c], scale[c], shift[c]
				}
				for n := 0; n < a.N; n++ {
					off := t.off + n*stride
					if direct {
						bnAffineHalf(bf, yh[off:off+m], xh[off:off+m], emf[:m], esf[:m], ebf[:m], relu)
						continue
					}
					o := yr.out(ob[:m], off)
					bnAffine(o, read(i, n, false), em, es, eb, relu)
					yr.flush(off, o)
				}
			}
		})
	})
}

// BatchNormBackward implements backend.Backend. It computes GX from GY and X, and
// overwrites GWeight and GBias (Float32 [C]) when they are non-nil. Training uses the
// batch statistics in SaveMean and SaveInvStd (from the forward call):
//
//	x̂ = (x − mean)·invstd, gb = Σ gy, gw = Σ gy·x̂,
//	gx = w·invstd·(gy − gb/n − x̂·gw/n)  with n = N·S;
//
// eval uses RunningMean and 1/√(RunningVar+Eps) as constants: gx = gy·w·invstd.
func (b *Backend) BatchNormBackward(a backend.NormArgs) {
	b.batchNormBackwardAct("BatchNormBackward", a, false)
}

// BatchNormReLUBackward implements backend.BatchNormReLUer: BatchNormBackward of GY
// masked where Y is not > 0 (vecMask, as UnaryBackward's Relu), tile by tile in both
// passes.
func (b *Backend) BatchNormReLUBackward(a backend.NormArgs) {
	b.batchNormBackwardAct("BatchNormReLUBackward", a, true)
}

func (b *Backend) batchNormBackwardAct(op string, a backend.NormArgs, relu bool) {
	checkNormSize(op, &a)
	ops := normOperands(op, a.N*a.C*a.S, []string{"X", "GY", "GX"}, a.X, a.GY, a.GX)
	var ys *storage
	if relu {
		ys = normOperands(op, a.N*a.C*a.S, []string{"X", "Y"}, a.X, a.Y)[1]
	}
	p := bnParams{
		w:  statParam(op, "Weight", a.Weight, a.C, ""),
		gw: statParam(op, "GWeight", a.GWeight, a.C, ""),
		gb: statParam(op, "GBias", a.GBias, a.C, ""),
	}
	if a.Training {
		const need = "training mode needs the statistics the forward call saved"
		p.sm = statParam(op, "SaveMean", a.SaveMean, a.C, need)
		p.si = statParam(op, "SaveInvStd", a.SaveInvStd, a.C, need)
	} else {
		const need = "eval mode uses the running statistics"
		p.rm = statParam(op, "RunningMean", a.RunningMean, a.C, need)
		p.rv = statParam(op, "RunningVar", a.RunningVar, a.C, need)
	}
	if computeF64(ops[0].dt) {
		batchNormBackward[float64](&a, ops[0], ops[1], ops[2], ys, &p)
	} else {
		batchNormBackward[float32](&a, ops[0], ops[1], ops[2], ys, &p)
	}
}

// batchNormBackward is the batch-norm backward pass; with y non-nil (a ReLU output)
// it first masks each tile of gy where y is not > 0.
func batchNormBackward[C numeric](a *backend.NormArgs, x, gy, gx, y *storage, p *bnParams) {
	cnt, stride := float64(a.N*a.S), a.C*a.S
	xr, gyr, gxr := elemRunOf[C](x), elemRunOf[C](gy), elemRunOf[C](gx)
	var yr elemRun[C]
	if y != nil {
		yr = elemRunOf[C](y)
	}
	sums := a.Training || p.gw != nil || p.gb != nil
	ParallelFor(a.C, max(1, grainElems/max(a.N*a.S, 1)), func(lo, hi int) {
		k := hi - lo
		mean, invstd := make([]float64, k), make([]float64, k)
		for i := range k {
			if a.Training {
				mean[i], invstd[i] = float64(p.sm[lo+i]), float64(p.si[lo+i])
			} else {
				mean[i] = float64(p.rm[lo+i])
				invstd[i] = 1 / math.Sqrt(float64(p.rv[lo+i])+a.Eps)
			}
		}
		gb, xb := make([]C, chunk), make([]C, chunk)
		var yb []C
		if y != nil {
			yb = make([]C, chunk)
		}
		// Half data the AVX-512 loops read and write in place (bn_half.go), masking gy
		// in both passes; the group's 16-bit gy, y and x stay in cache between them.
		xh, bf, direct := bnHalfOf(x)
		var gyh, gxh, yh []uint16
		if direct {
			gyh, _, _ = bnHalfOf(gy)
			gxh, _, _ = bnHalfOf(gx)
			yh, _, _ = bnHalfOf(y)
		}
		// Otherwise, when the sums pass runs, it leaves the group's masked gy and x
		// converted in gc and xc for the gradient pass. Float32 gy, read in place, is
		// cached too when there is a ReLU output: the sums loop stores the masked gy
		// there, which spares the gradient pass reading gy and y again and masking.
		var gc, xc bnCache[C]
		if sums && !direct {
			gc, xc = newBNCache(gyr, a), newBNCache(xr, a)
			if y != nil && gyr.ok {
				gc = newBNCacheNative[C](a)
			}
			defer gc.release()
			defer xc.release()
		}
		// sg = Σ gy and sgx = Σ gy·(x − mean), per channel.
		sg, sgx := make([]float64, k), make([]float64, k)
		acc1, acc2, e64 := make([]float64, chunk), make([]float64, chunk), make([]float64, chunk)
		ca, cb, cc, cm := make([]C, k), make([]C, k), make([]C, k), make([]C, k)
		ea, eb, ec, em := make([]C, chunk), make([]C, chunk), make([]C, chunk), make([]C, chunk)
		ob, tb := make([]C, chunk), make([]C, chunk)
		var eaf, ebf, ecf, emf []float32
		if direct {
			eaf, ebf, ecf, emf = any(ea).([]float32), any(eb).([]float32), any(ec).([]float32), any(em).([]float32)
		}
		// yAt returns y's 16-bit elements [off, off+m), or nil without y.
		yAt := func(off, m int) []uint16 {
			if yh == nil {
				return nil
			}
			return yh[off : off+m]
		}
		bnGroups(a, lo, hi, func(g *bnGroup) {
			// readGY returns sample n of tile i of gy, masked by the ReLU output when
			// there is one: from gc once the sums pass filled it. With fill (the sums
			// pass) it returns gy as read, where the masked values go (gc's slot or a
			// buffer: gy may be the caller's own) and the ReLU output (nil: none).
			readGY := func(i, n int, fill bool) (v, dst, yv []C) {
				t := g.tiles[i]
				m, off := len(t.ch), t.off+n*stride
				if gc.ok && !fill {
					return gc.slot(g, i, n), nil, nil
				}
				dst = gb[:m]
				if gc.ok {
					dst = gc.slot(g, i, n)
				}
				v = gyr.read(dst, off)
				if y != nil {
					yv = yr.read(yb[:m], off)
				}
				if fill {
					return v, dst, yv
				}
				if y == nil {
					return v, nil, nil
				}
				reluMask(dst, v, yv)
				return dst, nil, nil
			}
			readX := func(i, n int, fill bool) []C {
				t := g.tiles[i]
				switch {
				case !xc.ok:
					return xr.read(xb[:len(t.ch)], t.off+n*stride)
				case fill:
					return xr.read(xc.slot(g, i, n), t.off+n*stride)
				}
				return xc.slot(g, i, n)
			}
			if sums {
				for i, t := range g.tiles {
					m := len(t.ch)
					clear(acc1[:m])
					clear(acc2[:m])
					for j, c := range t.ch {
						e64[j] = mean[c]
					}
					for n := 0; n < a.N; n++ {
						if direct {
							off := t.off + n*stride
							bnSumsHalf(bf, acc1[:m], acc2[:m], gyh[off:off+m], yAt(off, m), xh[off:off+m], e64[:m], stride)
							continue
						}
						gv, dst, yv := readGY(i, n, true)
						bnSums(dst, acc1[:m], acc2[:m], gv, yv, readX(i, n, true), e64[:m])
					}
					for j, c := range t.ch {
						sg[c] += acc1[j]
						sgx[c] += acc2[j]
					}
				}
			}
			// gx = ca·gy + cb·(x − mean) + cc.
			for i := g.c0; i < g.c1; i++ {
				c := lo + i
				if p.gw != nil {
					p.gw[c] = float32(sgx[i] * invstd[i])
				}
				if p.gb != nil {
					p.gb[c] = float32(sg[i])
				}
				f := param(p.w, c, 1) * invstd[i]
				ca[i], cm[i] = C(f), C(mean[i])
				if a.Training {
					cb[i] = C(-f * invstd[i] * invstd[i] * sgx[i] / cnt)
					cc[i] = C(-f * sg[i] / cnt)
				}
			}
			for i, t := range g.tiles {
				m := len(t.ch)
				for j, c := range t.ch {
					ea[j], eb[j], ec[j], em[j] = ca[c], cb[c], cc[c], cm[c]
				}
				for n := 0; n < a.N; n++ {
					off := t.off + n*stride
					if direct {
						bnGradHalf(bf, gxh[off:off+m], gyh[off:off+m], yAt(off, m), xh[off:off+m], eaf[:m], ebf[:m], ecf[:m], emf[:m])
						continue
					}
					gv, _, _ := readGY(i, n, false)
					xs := readX(i, n, false)
					o := gxr.out(ob[:m], off)
					bnGrad(o, gv, xs, ea, eb, ec, em, tb)
					gxr.flush(off, o)
				}
			}
		})
	})
}

// bnSums is batch norm's backward sums over one tile: with y not nil it first sets
// o[j] = g[j] where y[j] > 0, else 0 (reluMask; o may be g), and sums that: acc1 +=
// g (accAdd), acc2 += g·(x − m) (accDev's product form); one fused AVX-512 pass for
// float32 (bnSumsF32).
func bnSums[C numeric](o []C, acc1, acc2 []float64, g, y, x []C, m []float64) {
	if gf, ok := any(g).([]float32); ok {
		of, _ := any(o).([]float32)
		yf, _ := any(y).([]float32)
		bnSumsF32(of, acc1, acc2, gf, yf, any(x).([]float32), m)
		return
	}
	if y != nil {
		reluMask(o, g, y)
		g = o
	}
	accAdd(acc1, g)
	accDev(accProd, acc2, g, x, m)
}

// reluInPlace sets o[j] = max(0, o[j]) as Unary's Relu does (NaN kept, -0 to +0).
func reluInPlace[C numeric](o []C) {
	if of, ok := any(o).([]float32); ok {
		vecScalar(vecRelu, of, of, 0)
		return
	}
	for j, v := range o {
		if v <= 0 {
			o[j] = 0
		}
	}
}

// reluMask sets o[j] = g[j] where y[j] > 0 and 0 elsewhere, as UnaryBackward's Relu
// does; o may be g.
func reluMask[C numeric](o, g, y []C) {
	if of, ok := any(o).([]float32); ok {
		vecBinary(vecMask, of, any(g).([]float32), any(y).([]float32))
		return
	}
	for j, v := range y {
		if v > 0 {
			o[j] = g[j]
		} else {
			o[j] = 0
		}
	}
}

// accAdd sets acc[j] += float64(v[j]), on the vector layer for float32.
func accAdd[C numeric](acc []float64, v []C) {
	if vf, ok := any(v).([]float32); ok {
		vecAccF64(acc, vf)
		return
	}
	for j, x := range v {
		acc[j] += float64(x)
	}
}

// accDev sets acc[j] += p·d with d = float64(x[j]) - m[j] and p = d (accSq) or
// float64(g[j]) (accProd), one rounding each (a fused multiply-add), on the vector layer
// for float32.
func accDev[C numeric](op accDevOp, acc []float64, g, x []C, m []float64) {
	if xf, ok := any(x).([]float32); ok {
		gf, _ := any(g).([]float32)
		vecAccDevF64(op, acc, gf, xf, m)
		return
	}
	for j, v := range x {
		d := float64(v) - m[j]
		p := d
		if op == accProd {
			p = float64(g[j])
		}
		acc[j] = math.FMA(p, d, acc[j])
	}
}

// bnAffine sets o[j] = (v[j]-m[j])·s[j] + b[j], each operation rounded (one fused
// AVX-512 pass for float32, bnAffineF32), then with relu the ReLU (reluInPlace). o may
// be v.
func bnAffine[C numeric](o, v, m, s, b []C, relu bool) {
	if of, ok := any(o).([]float32); ok {
		n := len(of)
		bnAffineF32(of, any(v).([]float32)[:n], any(m).([]float32)[:n], any(s).([]float32)[:n], any(b).([]float32)[:n], relu)
		return
	}
	for j := range o {
		o[j] = C((v[j]-m[j])*s[j]) + b[j]
	}
	if relu {
		reluInPlace(o)
	}
}

// bnGrad sets o[j] = (ea[j]·g[j] + eb[j]·(x[j]-em[j])) + ec[j], each operation rounded,
// using t as scratch. o may be g or x.
func bnGrad[C numeric](o, g, x, ea, eb, ec, em, t []C) {
	n := len(o)
	if of, ok := any(o).([]float32); ok {
		bnGradF32(of, any(g).([]float32)[:n], any(x).([]float32)[:n], any(ea).([]float32)[:n], any(eb).([]float32)[:n],
			any(ec).([]float32)[:n], any(em).([]float32)[:n], any(t).([]float32)[:n])
		return
	}
	for j := range o {
		o[j] = C(C(ea[j]*g[j])+C(eb[j]*(x[j]-em[j]))) + ec[j]
	}
}

// bnGradVec is bnGrad's float32 passes on the vector layer (vecBinary), the twin of
// bnGradAVX512.
func bnGradVec(o, g, x, ea, eb, ec, em, t []float32) {
	n := len(o)
	tf := t[:n]
	vecBinary(vecSub, tf, x[:n], em[:n])
	vecBinary(vecMul, tf, eb[:n], tf)
	vecBinary(vecMul, o, ea[:n], g[:n])
	vecBinary(vecAdd, o, o, tf)
	vecBinary(vecAdd, o, o, ec[:n])
}

// LayerNorm implements backend.Backend. X and Y are [Outer, C] with Outer = N (Y may
// be X); each row is normalised with its mean and biased variance, which are stored
// in SaveMean and as 1/√(var+Eps) in SaveInvStd ([Outer]) when those are non-nil, then
// scaled by Weight and shifted by Bias ([C]) when those are non-nil. Y may be a half
// dtype when X is Float32 (backend.LayerNormHalfIO): the float32 rows rounded once as
// they are stored.
func (b *Backend) LayerNorm(a backend.NormArgs) {
	const op = "LayerNorm"
	checkNormSize(op, &a)
	xy := normOperandsHalfIO(op, a.N*a.C, []string{"X", "Y"}, 1, a.X, a.Y)
	p := bnParams{
		w:    statParam(op, "Weight", a.Weight, a.C, ""),
		bias: statParam(op, "Bias", a.Bias, a.C, ""),
		sm:   statParam(op, "SaveMean", a.SaveMean, a.N, ""),
		si:   statParam(op, "SaveInvStd", a.SaveInvStd, a.N, ""),
	}
	if computeF64(xy[0].dt) {
		layerNorm[float64](&a, xy[0], xy[1], &p)
	} else {
		layerNorm[float32](&a, xy[0], xy[1], &p)
	}
}

// toCompute converts a float32 parameter to the compute type (nil stays nil).
func toCompute[C numeric](p []float32) []C {
	if p == nil {
		return nil
	}
	out := make([]C, len(p))
	for i, v := range p {
		out[i] = C(v)
	}
	return out
}

// lnChunkElems bounds the rows LayerNorm converts at once from or to half storage: one
// bulk conversion per chunk of whole rows rather than per row, into buffers that stay
// in L1. Float32 (and Float64) storage is read and written in place.
const lnChunkElems = 2048

// lnRun returns elements [off, off+n) of r: a window on the storage, or buf (which is
// nil when r is in place) filled.
func lnRun[C numeric](r elemRun[C], buf []C, off, n int) []C {
	if r.ok {
		return r.native[off : off+n]
	}
	return r.read(buf[:n], off)
}

// lnChunkRows is the number of rows of width cols in one conversion chunk.
func lnChunkRows(cols int) int { return max(1, lnChunkElems/max(cols, 1)) }

func layerNorm[C numeric](a *backend.NormArgs, x, y *storage, p *bnParams) {
	rows, cols := a.N, a.C
	w, bias := toCompute[C](p.w), toCompute[C](p.bias)
	xrun, yrun := elemRunOf[C](x), elemRunOf[C](y)
	cr := lnChunkRows(cols)
	ParallelFor(rows, max(1, grainElems/max(cols, 1)), func(lo, hi int) {
		if lnFwdInPlace(a, p, xrun.native, yrun.native, w, bias, lo, hi) {
			return
		}
		if xrun.ok && !yrun.ok {
			// Float32 X, half Y: the pairs of rows straight into Y.
			if lo += lnFwdHalfBlock(a, p, xrun.native, y, w, bias, lo, hi); lo == hi {
				return
			}
		}
		var buf []C
		if !xrun.ok || !yrun.ok {
			var done func()
			buf, done = lnScratch[C](min(cr, hi-lo) * cols)
			defer done()
		}
		for r0 := lo; r0 < hi; r0 += cr {
			nr := min(cr, hi-r0)
			off := r0 * cols
			// Half data is converted into buf and normalised there (Y may be X), by
			// lnFwdRows where it takes the width.
			xs := lnRun(xrun, buf, off, nr*cols)
			into := xs
			if xrun.ok && !yrun.ok {
				// Float32 X, half Y: normalise into buf, never into X.
				into = buf[:nr*cols]
			}
			ys := yrun.out(into, off)
			if !lnFwdBlock(a, p, ys, xs, w, bias, r0, r0+nr) {
				for i := range nr {
					layerNormRow(a, p, r0+i, ys[i*cols:(i+1)*cols], xs[i*cols:(i+1)*cols], w, bias)
				}
			}
			yrun.flush(off, ys)
		}
	})
}

// lnFwdInPlace runs layerNormRow on rows [lo, hi) of float32 x and y read and written
// in place, with both Weight and Bias, in lnFwdRows calls of up to lnFwdRowsMax rows,
// and reports whether it did (false: the caller's row loop does it, as when lnFwdRows
// declines the width).
func lnFwdInPlace[C numeric](a *backend.NormArgs, p *bnParams, x, y, w, bias []C, lo, hi int) bool {
	if x == nil || y == nil {
		return false
	}
	return lnFwdBlock(a, p, y[lo*a.C:], x[lo*a.C:], w, bias, lo, hi)
}

// lnFwdHalfBlock normalises rows [lo, hi) of float32 x into half y (as layerNormRow and
// then the half rounding do, bit for bit), with both Weight and Bias, by lnFwdRowsHalf
// in calls of up to lnFwdRowsMax rows, and returns how many leading rows it did: all
// but an odd last one where the kernels run, else none.
func lnFwdHalfBlock[C numeric](a *backend.NormArgs, p *bnParams, x []C, y *storage, w, bias []C, lo, hi int) int {
	xf, ok := any(x).([]float32)
	if !ok || xf == nil || w == nil || bias == nil {
		return 0
	}
	yu, bf, ok := bnHalfOf(y)
	if !ok {
		return 0
	}
	wf, bf32 := any(w).([]float32), any(bias).([]float32)
	cols := a.C
	var msb, isb [lnFwdRowsMax]float32
	r := lo
	for r < hi {
		nr := min(lnFwdRowsMax, hi-r)
		ms, is := p.lnRowStats(&msb, &isb, r, nr)
		k := lnFwdRowsHalf(bf, yu[r*cols:], xf[r*cols:], wf, bf32, ms, is, a.Eps, cols)
		r += k
		if k < nr {
			break
		}
	}
	return r - lo
}

// lnRowStats returns where the fused forward kernels store the means and inverse
// deviations of rows [r, r+nr): SaveMean's and SaveInvStd's, or the caller's arrays
// where those are nil.
func (p *bnParams) lnRowStats(msb, isb *[lnFwdRowsMax]float32, r, nr int) (ms, is []float32) {
	ms, is = msb[:nr], isb[:nr]
	if p.sm != nil {
		ms = p.sm[r : r+nr]
	}
	if p.si != nil {
		is = p.si[r : r+nr]
	}
	return ms, is
}

// lnFwdBlock runs layerNormRow on rows [lo, hi), whose float32 values x and y hold
// from their start (y may be x), with both Weight and Bias, in lnFwdRows calls of up
// to lnFwdRowsMax rows, and reports whether it did (false, writing nothing: not
// float32, no Weight or Bias, or a width lnFwdRows declines).
func lnFwdBlock[C numeric](a *backend.NormArgs, p *bnParams, y, x, w, bias []C, lo, hi int) bool {
	xf, ok := any(x).([]float32)
	yf, _ := any(y).([]float32)
	if !ok || w == nil || bias == nil {
		return false
	}
	cols := a.C
	wf, bf := any(w).([]float32), any(bias).([]float32)
	var msb, isb [lnFwdRowsMax]float32
	for r0 := lo; r0 < hi; r0 += lnFwdRowsMax {
		nr := min(lnFwdRowsMax, hi-r0)
		ms, is := p.lnRowStats(&msb, &isb, r0, nr)
		if !lnFwdRows(yf[(r0-lo)*cols:], xf[(r0-lo)*cols:], wf, bf, ms, is, a.Eps, cols) {
			return false // the width, so for the first block, before any row is written
		}
	}
	return true
}

// layerNormRow normalises row r: yr from xr (yr may be xr, not otherwise overlapping).
func layerNormRow[C numeric](a *backend.NormArgs, p *bnParams, r int, yr, xr, w, bias []C) {
	mean, invstd := rowStats(xr, a.Eps)
	if p.sm != nil {
		p.sm[r] = float32(mean)
	}
	if p.si != nil {
		p.si[r] = float32(invstd)
	}
	m, is := C(mean), C(invstd)
	if yf, ok := any(yr).([]float32); ok {
		// The loops below on the vector layer, each step rounded as there.
		xf := any(xr).([]float32)
		if w != nil && bias != nil {
			vecLnFwd(yf, xf, any(w).([]float32), any(bias).([]float32), float32(m), float32(is))
			return
		}
		vecScalar(vecSubS, yf, xf, float32(m))
		vecScalar(vecMulS, yf, yf, float32(is))
		if w != nil {
			vecBinary(vecMul, yf, yf, any(w).([]float32))
		}
		if bias != nil {
			vecBinary(vecAdd, yf, yf, any(bias).([]float32))
		}
		return
	}
	for j, v := range xr {
		yr[j] = (v - m) * is
	}
	if w != nil {
		for j := range yr {
			yr[j] *= w[j]
		}
	}
	if bias != nil {
		for j := range yr {
			yr[j] += bias[j]
		}
	}
}

// rowStats returns the mean and 1/√(var+eps) of row (biased variance, two passes in
// float64; float32 rows sum in vecSumF64's order, so within float64 rounding of the
// sequential sums).
func rowStats[C numeric](row []C, eps float64) (mean, invstd float64) {
	if len(row) == 0 {
		return 0, 1 / math.Sqrt(eps)
	}
	if rf, ok := any(row).([]float32); ok {
		if mean, sq, ok := lnStats(rf); ok {
			return mean, 1 / math.Sqrt(sq/float64(len(rf))+eps)
		}
		mean, sq := lnStatsGo(rf)
		return mean, 1 / math.Sqrt(sq/float64(len(rf))+eps)
	}
	s := 0.0
	for _, v := range row {
		s += float64(v)
	}
	mean = s / float64(len(row))
	sq := 0.0
	for _, v := range row {
		d := float64(v) - mean
		sq += d * d
	}
	return mean, 1 / math.Sqrt(sq/float64(len(row))+eps)
}

// lnStatsGo returns the mean of x (vecSumF64 over len(x)) and the sum of squared
// deviations from it (vecDevSqF64): rowStats's two passes, lnStats's twin.
func lnStatsGo(x []float32) (mean, sq float64) {
	mean = vecSumF64(x) / float64(len(x))
	return mean, vecDevSqF64(x, mean)
}

// lnMaxBlocks bounds the number of row blocks whose GWeight/GBias partial sums
// LayerNormBackward keeps.
const lnMaxBlocks = 64

// LayerNormBackward implements backend.Backend. With x̂ = (x − mean)·invstd from
// SaveMean/SaveInvStd and g = gy·w, each row gets
//
//	gx = invstd·(g − mean(g) − x̂·mean(g·x̂)),
//
// and GWeight = Σ_rows gy·x̂, GBias = Σ_rows gy are overwritten when non-nil. The row
// sums are taken over a fixed split of the rows into blocks (a function of the shape
// only) and the blocks are added in order, so they do not depend on the worker count.
func (b *Backend) LayerNormBackward(a backend.NormArgs) {
	const op = "LayerNormBackward"
	const lnNeed = "the backward pass needs the statistics the forward call saved"
	checkNormSize(op, &a)
	ops := normOperandsHalfIO(op, a.N*a.C, []string{"X", "GY", "GX"}, 1, a.X, a.GY, a.GX)
	p := bnParams{
		w:  statParam(op, "Weight", a.Weight, a.C, ""),
		sm: statParam(op, "SaveMean", a.SaveMean, a.N, lnNeed),
		si: statParam(op, "SaveInvStd", a.SaveInvStd, a.N, lnNeed),
		gw: statParam(op, "GWeight", a.GWeight, a.C, ""),
		gb: statParam(op, "GBias", a.GBias, a.C, ""),
	}
	if computeF64(ops[0].dt) {
		layerNormBackward[float64](&a, ops[0], ops[1], ops[2], &p)
	} else {
		layerNormBackward[float32](&a, ops[0], ops[1], ops[2], &p)
	}
}

// lnScratches holds the float32 buffers the layer norms of half data convert chunks
// of rows into, between calls (a fresh buffer is cleared memory on every call).
var lnScratches = sync.Pool{New: func() any { return new([]float32) }}

// lnScratch returns a buffer of n elements, its contents undefined, and the function
// that gives it back: from lnScratches for float32, the compute type of half data,
// allocated otherwise.
func lnScratch[C numeric](n int) ([]C, func()) {
	if _, ok := any(C(0)).(float32); !ok {
		return make([]C, n), func() {}
	}
	p := lnScratches.Get().(*[]float32)
	if cap(*p) < n {
		*p = make([]float32, n)
	}
	buf := any((*p)[:n]).([]C)
	return buf, func() { lnScratches.Put(p) }
}

// lnPartials holds LayerNormBackward's per-block GWeight/GBias partial sums between
// calls.
var lnPartials = sync.Pool{New: func() any { return new([]float64) }}

func layerNormBackward[C numeric](a *backend.NormArgs, x, gyS, gxS *storage, p *bnParams) {
	rows, cols := a.N, a.C
	if rows == 0 {
		clear(p.gw)
		clear(p.gb)
		return
	}
	w := toCompute[C](p.w)
	// Blocks of whole rows, sized from the shape alone.
	nb := max(1, min(lnMaxBlocks, rows, (rows*cols+grainElems-1)/grainElems))
	per := (rows + nb - 1) / nb
	nb = (rows + per - 1) / per
	var pgw, pgb []float64
	if p.gw != nil || p.gb != nil {
		// The partial sums come from a pool, cleared: fresh heap memory would page
		// fault on first touch inside the row pass.
		ps := lnPartials.Get().(*[]float64)
		defer lnPartials.Put(ps)
		need := 2 * nb * cols
		if cap(*ps) < need {
			*ps = make([]float64, need)
		}
		buf := (*ps)[:need]
		clear(buf)
		if p.gw != nil {
			pgw = buf[:nb*cols]
		}
		if p.gb != nil {
			pgb = buf[nb*cols:]
		}
	}
	xrun, gyrun, gxrun := elemRunOf[C](x), elemRunOf[C](gyS), elemRunOf[C](gxS)
	// GX is written in place unless it is X or GY, which the row pass reads after it
	// starts writing g: then g goes through a row buffer.
	gxAlias := gxS == x || gxS == gyS
	cr := lnChunkRows(cols)
	ParallelFor(nb, 1, func(blo, bhi int) {
		// Half data: a chunk of rows of x and gy converted at once, gx stored at once.
		var xb, gyb, gxb, rowb []C
		if !xrun.ok {
			n := min(cr, per) * cols
			all, done := lnScratch[C](3 * n)
			defer done()
			xb, gyb, gxb = all[:n:n], all[n:2*n:2*n], all[2*n:]
		} else if !gyrun.ok {
			// Float32 X and GX, half GY: only GY is converted.
			var done func()
			gyb, done = lnScratch[C](min(cr, per) * cols)
			defer done()
		}
		if xrun.ok && gxAlias {
			rowb = make([]C, cols)
		}
		var scratch []float64 // stands in for a nil bgw or bgb in the float32 row pass
		if pgw == nil || pgb == nil {
			scratch = make([]float64, cols)
		}
		for blk := blo; blk < bhi; blk++ {
			var bgw, bgb []float64
			if pgw != nil {
				bgw = pgw[blk*cols : (blk+1)*cols]
			}
			if pgb != nil {
				bgb = pgb[blk*cols : (blk+1)*cols]
			}
			end := min(rows, (blk+1)*per)
			for r0 := blk * per; r0 < end; r0 += cr {
				nr := min(cr, end-r0)
				off, n := r0*cols, nr*cols
				xs, gys := lnRun(xrun, xb, off, n), lnRun(gyrun, gyb, off, n)
				var gxs []C
				if gxrun.ok {
					gxs = gxrun.native[off : off+n]
				} else {
					gxs = gxb[:n]
				}
				i := 0
				if g32, ok := any(gxs).([]float32); ok && rowb == nil {
					// Two rows a call: the column sums bgw, bgb are read and written
					// once for both (tr16_lnrow2.go), with the same bits.
					x32, gy32, w32 := any(xs).([]float32), any(gys).([]float32), any(w).([]float32)
					for ; i+2 <= nr; i += 2 {
						r, a, b, c := r0+i, i*cols, (i+1)*cols, (i+2)*cols
						layerNormBackward2RowsF32(g32[a:b], gy32[a:b], x32[a:b], g32[b:c], gy32[b:c], x32[b:c], w32,
							bgw, bgb, scratch, float64(p.sm[r]), float64(p.si[r]), float64(p.sm[r+1]), float64(p.si[r+1]))
					}
				}
				for ; i < nr; i++ {
					r := r0 + i
					xr, gy, g := xs[i*cols:(i+1)*cols], gys[i*cols:(i+1)*cols], gxs[i*cols:(i+1)*cols]
					if rowb != nil {
						g = rowb
					}
					layerNormBackwardRow(g, gy, xr, w, bgw, bgb, scratch, float64(p.sm[r]), float64(p.si[r]))
					if rowb != nil {
						copy(gxs[i*cols:(i+1)*cols], rowb)
					}
				}
				gxrun.flush(off, gxs)
			}
		}
	})
	if pgw == nil && pgb == nil {
		return
	}
	ParallelFor(cols, grainElems/max(nb, 1), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			sw, sb := 0.0, 0.0
			for blk := range nb {
				if pgw != nil {
					sw += pgw[blk*cols+j]
				}
				if pgb != nil {
					sb += pgb[blk*cols+j]
				}
			}
			if p.gw != nil {
				p.gw[j] = float32(sw)
			}
			if p.gb != nil {
				p.gb[j] = float32(sb)
			}
		}
	})
}

// layerNormBackwardRow sets g, LayerNorm's input gradient of one row, from gy and xr
// (neither may overlap g), adding the row's terms to bgw and bgb when they are not nil.
func layerNormBackwardRow[C numeric](g, gy, xr, w []C, bgw, bgb, scratch []float64, mean, invstd float64) {
	if gf, ok := any(g).([]float32); ok {
		layerNormBackwardRowF32(gf, any(gy).([]float32), any(xr).([]float32), any(w).([]float32), bgw, bgb, scratch, mean, invstd)
		return
	}
	copy(g, gy)
	if w != nil {
		for j := range g {
			g[j] *= w[j]
		}
	}
	// s1 = Σ g, s2 = Σ g·x̂.
	s1, s2 := 0.0, 0.0
	for j, v := range g {
		xh := (float64(xr[j]) - mean) * invstd
		s1 += float64(v)
		s2 += float64(v) * xh
		if bgw != nil {
			bgw[j] += float64(gy[j]) * xh
		}
		if bgb != nil {
			bgb[j] += float64(gy[j])
		}
	}
	n := float64(len(g))
	ca, cm := C(invstd), C(mean)
	cb := C(-invstd * invstd * s2 / n)
	cc := C(-invstd * s1 / n)
	for j := range g {
		g[j] = ca*g[j] + cb*(xr[j]-cm) + cc
	}
}

// layerNormBackwardRowF32 is layerNormBackward's float32 row on the vector layer: g =
// gy·w, the row sums and the bgw, bgb updates in vecLnRow (scratch, which it leaves
// dirty, taking the place of a nil one), then g = ca·g + cb·(x - cm) + cc with the
// loop's float32 roundings, step by step (vecLnBwd).
func layerNormBackwardRowF32(g, gy, xr, w []float32, bgw, bgb, scratch []float64, mean, invstd float64) {
	if w != nil {
		vecBinary(vecMul, g, gy, w)
	} else {
		copy(g, gy)
	}
	if bgw == nil {
		bgw = scratch
	}
	if bgb == nil {
		bgb = scratch
	}
	s1, s2 := vecLnRow(bgw, bgb, g, gy, xr, mean, invstd)
	// g·ca + (x - cm)·cb + cc, each step rounded, in one pass.
	lnBwdFinish(g, xr, s1, s2, mean, invstd)
}
