package cpu

import (
	"fmt"
	"math"

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

// statParam returns the first n elements of a Float32 statistics or affine storage, or
// nil when s is nil and not required.
func statParam(op, name string, s backend.Storage, n int, required bool) []float32 {
	c := st(s)
	switch {
	case c == nil && required:
		panic(fmt.Sprintf("cpu: %s: %s is required here", op, name))
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

// bnWalk visits the values of channels [lo, hi) of tensors viewed as [N, C, S]: for
// each sample those channels' rows are adjacent, so ins are loaded into bufs (one per
// input) a buffer at a time. fn gets each run [q, e) of buffer positions belonging to
// channel c; when out is non-nil, bufs[0] as fn left it is stored there. Every channel's
// values are visited in (n, s) order whatever [lo, hi) is, which keeps per-channel sums
// independent of how channels are split between workers.
func bnWalk[C numeric](a *backend.NormArgs, lo, hi int, ins []*storage, bufs [][]C, out *storage, fn func(c, q, e int)) {
	seg := (hi - lo) * a.S
	bl := len(bufs[0])
	for n := 0; n < a.N; n++ {
		base := (n*a.C + lo) * a.S
		for p := 0; p < seg; p += bl {
			m := min(bl, seg-p)
			for k, in := range ins {
				load(bufs[k][:m], in, base+p, 1)
			}
			for q := 0; q < m; {
				c := (p + q) / a.S
				e := min(m, q+a.S-(p+q)%a.S)
				fn(lo+c, q, e)
				q = e
			}
			if out != nil {
				store(out, base+p, 1, bufs[0][:m])
			}
		}
	}
}

// BatchNorm implements backend.Backend. X and Y are [N, C, S] (Y may be X). Training
// normalises with the batch mean and biased variance of each channel, stores them in
// SaveMean and 1/√(var+Eps) in SaveInvStd when those are non-nil, and updates
// RunningMean/RunningVar when non-nil as PyTorch does (with the unbiased variance);
// it needs N·S > 1. Eval normalises with RunningMean/RunningVar, which it requires,
// and stores those statistics in SaveMean/SaveInvStd when non-nil.
func (b *Backend) BatchNorm(a backend.NormArgs) {
	const op = "BatchNorm"
	checkNormSize(op, &a)
	xy := normOperands(op, a.N*a.C*a.S, []string{"X", "Y"}, a.X, a.Y)
	p := bnParams{
		w:    statParam(op, "Weight", a.Weight, a.C, false),
		bias: statParam(op, "Bias", a.Bias, a.C, false),
		rm:   statParam(op, "RunningMean", a.RunningMean, a.C, !a.Training),
		rv:   statParam(op, "RunningVar", a.RunningVar, a.C, !a.Training),
		sm:   statParam(op, "SaveMean", a.SaveMean, a.C, false),
		si:   statParam(op, "SaveInvStd", a.SaveInvStd, a.C, false),
	}
	if a.Training && a.N*a.S < 2 && a.C > 0 {
		panic(fmt.Sprintf("cpu: %s: training needs more than one value per channel, got N·S = %d", op, a.N*a.S))
	}
	if computeF64(xy[0].dt) {
		batchNorm[float64](&a, xy[0], xy[1], &p)
	} else {
		batchNorm[float32](&a, xy[0], xy[1], &p)
	}
}

// bnParams are the float32 per-channel operands of a batch-norm call (nil when absent).
type bnParams struct {
	w, bias, rm, rv, sm, si []float32
	gw, gb                  []float32
}

func batchNorm[C numeric](a *backend.NormArgs, x, y *storage, p *bnParams) {
	cnt := a.N * a.S
	ParallelFor(a.C, max(1, grainElems/max(cnt, 1)), func(lo, hi int) {
		k := hi - lo
		mean, invstd := make([]float64, k), make([]float64, k)
		cm, scale, shift := make([]C, k), make([]C, k), make([]C, k)
		bufs := [][]C{make([]C, chunk)}
		in := []*storage{x}
		if a.Training {
			bnWalk(a, lo, hi, in, bufs, nil, func(c, q, e int) {
				s := 0.0
				for _, v := range bufs[0][q:e] {
					s += float64(v)
				}
				mean[c-lo] += s
			})
			sq := make([]float64, k)
			for i := range mean {
				mean[i] /= float64(cnt)
			}
			bnWalk(a, lo, hi, in, bufs, nil, func(c, q, e int) {
				m, s := mean[c-lo], 0.0
				for _, v := range bufs[0][q:e] {
					d := float64(v) - m
					s += d * d
				}
				sq[c-lo] += s
			})
			for i := range k {
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
			for i := range k {
				mean[i] = float64(p.rm[lo+i])
				invstd[i] = 1 / math.Sqrt(float64(p.rv[lo+i])+a.Eps)
			}
		}
		for i := range k {
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
		bnWalk(a, lo, hi, in, bufs, y, func(c, q, e int) {
			m, sc, sh := cm[c-lo], scale[c-lo], shift[c-lo]
			v := bufs[0][q:e]
			for j := range v {
				v[j] = (v[j]-m)*sc + sh
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
	const op = "BatchNormBackward"
	checkNormSize(op, &a)
	ops := normOperands(op, a.N*a.C*a.S, []string{"X", "GY", "GX"}, a.X, a.GY, a.GX)
	p := bnParams{
		w:  statParam(op, "Weight", a.Weight, a.C, false),
		gw: statParam(op, "GWeight", a.GWeight, a.C, false),
		gb: statParam(op, "GBias", a.GBias, a.C, false),
	}
	if a.Training {
		p.sm = statParam(op, "SaveMean", a.SaveMean, a.C, true)
		p.si = statParam(op, "SaveInvStd", a.SaveInvStd, a.C, true)
	} else {
		p.rm = statParam(op, "RunningMean", a.RunningMean, a.C, true)
		p.rv = statParam(op, "RunningVar", a.RunningVar, a.C, true)
	}
	if computeF64(ops[0].dt) {
		batchNormBackward[float64](&a, ops[0], ops[1], ops[2], &p)
	} else {
		batchNormBackward[float32](&a, ops[0], ops[1], ops[2], &p)
	}
}

func batchNormBackward[C numeric](a *backend.NormArgs, x, gy, gx *storage, p *bnParams) {
	cnt := float64(a.N * a.S)
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
		bufs := [][]C{make([]C, chunk), make([]C, chunk)}
		// sg = Σ gy and sgx = Σ gy·(x − mean), per channel.
		sg, sgx := make([]float64, k), make([]float64, k)
		if a.Training || p.gw != nil || p.gb != nil {
			bnWalk(a, lo, hi, []*storage{gy, x}, bufs, nil, func(c, q, e int) {
				m := mean[c-lo]
				g, gxs := 0.0, 0.0
				for j, v := range bufs[0][q:e] {
					g += float64(v)
					gxs += float64(v) * (float64(bufs[1][q+j]) - m)
				}
				sg[c-lo] += g
				sgx[c-lo] += gxs
			})
		}
		// gx = ca·gy + cb·(x − mean) + cc.
		ca, cb, cc, cm := make([]C, k), make([]C, k), make([]C, k), make([]C, k)
		for i := range k {
			c := lo + i
			if p.gw != nil {
				p.gw[c] = float32(sgx[i])
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
		bnWalk(a, lo, hi, []*storage{gy, x}, bufs, gx, func(c, q, e int) {
			i := c - lo
			fa, fb, fc, m := ca[i], cb[i], cc[i], cm[i]
			g, xs := bufs[0][q:e], bufs[1][q:e]
			for j := range g {
				g[j] = fa*g[j] + fb*(xs[j]-m) + fc
			}
		})
	})
}

// LayerNorm implements backend.Backend. X and Y are [Outer, C] with Outer = N (Y may
// be X); each row is normalised with its mean and biased variance, which are stored
// in SaveMean and as 1/√(var+Eps) in SaveInvStd ([Outer]) when those are non-nil, then
// scaled by Weight and shifted by Bias ([C]) when those are non-nil.
func (b *Backend) LayerNorm(a backend.NormArgs) {
	const op = "LayerNorm"
	checkNormSize(op, &a)
	xy := normOperands(op, a.N*a.C, []string{"X", "Y"}, a.X, a.Y)
	p := bnParams{
		w:    statParam(op, "Weight", a.Weight, a.C, false),
		bias: statParam(op, "Bias", a.Bias, a.C, false),
		sm:   statParam(op, "SaveMean", a.SaveMean, a.N, false),
		si:   statParam(op, "SaveInvStd", a.SaveInvStd, a.N, false),
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

func layerNorm[C numeric](a *backend.NormArgs, x, y *storage, p *bnParams) {
	rows, cols := a.N, a.C
	w, bias := toCompute[C](p.w), toCompute[C](p.bias)
	ParallelFor(rows, max(1, grainElems/max(cols, 1)), func(lo, hi int) {
		row := make([]C, cols)
		for r := lo; r < hi; r++ {
			load(row, x, r*cols, 1)
			mean, invstd := rowStats(row, a.Eps)
			if p.sm != nil {
				p.sm[r] = float32(mean)
			}
			if p.si != nil {
				p.si[r] = float32(invstd)
			}
			m, is := C(mean), C(invstd)
			for j, v := range row {
				row[j] = (v - m) * is
			}
			if w != nil {
				for j := range row {
					row[j] *= w[j]
				}
			}
			if bias != nil {
				for j := range row {
					row[j] += bias[j]
				}
			}
			store(y, r*cols, 1, row)
		}
	})
}

// rowStats returns the mean and 1/√(var+eps) of row (biased variance, two passes in
// float64).
func rowStats[C numeric](row []C, eps float64) (mean, invstd float64) {
	if len(row) == 0 {
		return 0, 1 / math.Sqrt(eps)
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
	checkNormSize(op, &a)
	ops := normOperands(op, a.N*a.C, []string{"X", "GY", "GX"}, a.X, a.GY, a.GX)
	p := bnParams{
		w:  statParam(op, "Weight", a.Weight, a.C, false),
		sm: statParam(op, "SaveMean", a.SaveMean, a.N, true),
		si: statParam(op, "SaveInvStd", a.SaveInvStd, a.N, true),
		gw: statParam(op, "GWeight", a.GWeight, a.C, false),
		gb: statParam(op, "GBias", a.GBias, a.C, false),
	}
	if computeF64(ops[0].dt) {
		layerNormBackward[float64](&a, ops[0], ops[1], ops[2], &p)
	} else {
		layerNormBackward[float32](&a, ops[0], ops[1], ops[2], &p)
	}
}

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
	if p.gw != nil {
		pgw = make([]float64, nb*cols)
	}
	if p.gb != nil {
		pgb = make([]float64, nb*cols)
	}
	ParallelFor(nb, 1, func(blo, bhi int) {
		xr, gy, g := make([]C, cols), make([]C, cols), make([]C, cols)
		for blk := blo; blk < bhi; blk++ {
			var bgw, bgb []float64
			if pgw != nil {
				bgw = pgw[blk*cols : (blk+1)*cols]
			}
			if pgb != nil {
				bgb = pgb[blk*cols : (blk+1)*cols]
			}
			for r := blk * per; r < min(rows, (blk+1)*per); r++ {
				load(xr, x, r*cols, 1)
				load(gy, gyS, r*cols, 1)
				mean, invstd := float64(p.sm[r]), float64(p.si[r])
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
				n := float64(cols)
				ca, cm := C(invstd), C(mean)
				cb := C(-invstd * invstd * s2 / n)
				cc := C(-invstd * s1 / n)
				for j := range g {
					g[j] = ca*g[j] + cb*(xr[j]-cm) + cc
				}
				store(gxS, r*cols, 1, g)
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
