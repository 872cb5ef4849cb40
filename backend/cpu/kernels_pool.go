package cpu

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// Pool implements backend.Backend with PyTorch's max_pool2d and avg_pool2d semantics.
// The output size may be either the floor or the ceil_mode size. A window covers input
// rows [oh·StrideH − PadH, … + KH) clipped to the input; padding never wins a max, and a
// NaN always does. AvgPool divides by the number of window positions inside the input,
// or, with CountIncludePad, inside the padded input (positions of a ceil_mode window
// beyond the padding are never counted).
func (b *Backend) Pool(dst, index, src backend.Storage, a backend.PoolArgs) {
	s, d, idx := poolOperands("Pool", src, dst, index, a)
	if computeF64(s.dt) {
		poolForward[float64](d, s, idx, a)
	} else {
		poolForward[float32](d, s, idx, a)
	}
}

// PoolBackward implements backend.Backend. gx is overwritten: MaxPool adds each gy to
// the input position index names, AvgPool adds gy/divisor to every input position of
// the window. Each plane accumulates in a fixed order and rounds once on store.
func (b *Backend) PoolBackward(gx, gy, index backend.Storage, a backend.PoolArgs) {
	g, y, idx := poolOperands("PoolBackward", gx, gy, index, a)
	if computeF64(g.dt) {
		poolBackward[float64](g, y, idx, a)
	} else {
		poolBackward[float32](g, y, idx, a)
	}
}

// MaxPool implements backend.MaxPoolRecomputer: Pool for a MaxPool geometry, the
// window positions kept in per-worker scratch only.
func (b *Backend) MaxPool(dst, src backend.Storage, a backend.PoolArgs) {
	if a.Kind != backend.MaxPool {
		panic("cpu: MaxPool: the geometry is not a MaxPool")
	}
	s, d := poolData("MaxPool", src, dst, a)
	if computeF64(s.dt) {
		poolForward[float64](d, s, nil, a)
	} else {
		poolForward[float32](d, s, nil, a)
	}
}

// MaxPoolBackward implements backend.MaxPoolRecomputer: each plane of x goes through
// the forward's maxPlane again, and gy is added to the positions it returns, as
// PoolBackward does with the forward's index.
func (b *Backend) MaxPoolBackward(gx, gy, x backend.Storage, a backend.PoolArgs) {
	if a.Kind != backend.MaxPool {
		panic("cpu: MaxPoolBackward: the geometry is not a MaxPool")
	}
	g, y := poolData("MaxPoolBackward", gx, gy, a)
	xs, _ := poolData("MaxPoolBackward", x, gy, a)
	if xs.dt != g.dt {
		panic("cpu: MaxPoolBackward: x is " + xs.dt.String() + " but gx is " + g.dt.String())
	}
	if computeF64(g.dt) {
		maxPoolBackward[float64](g, y, xs, a)
	} else {
		maxPoolBackward[float32](g, y, xs, a)
	}
}

// poolOperands checks a and the storages of input-shaped in, output-shaped out and, for
// MaxPool, the Int64 index, which it returns as a slice.
func poolOperands(op string, in, out, index backend.Storage, a backend.PoolArgs) (*storage, *storage, []int64) {
	i, o := poolData(op, in, out, a)
	if a.Kind != backend.MaxPool {
		return i, o, nil
	}
	x := st(index)
	switch {
	case x == nil:
		panic("cpu: " + op + ": MaxPool needs an index storage")
	case x.dt != backend.Int64:
		panic("cpu: " + op + ": index is " + x.dt.String() + ", want int64")
	case x.n < a.N*a.C*a.OH*a.OW:
		panic(fmt.Sprintf("cpu: %s: index holds %d elements, geometry needs N·C·OH·OW = %d", op, x.n, a.N*a.C*a.OH*a.OW))
	}
	return i, o, x.i64()[:a.N*a.C*a.OH*a.OW]
}

// poolData checks a and the storages of input-shaped in and output-shaped out.
func poolData(op string, in, out backend.Storage, a backend.PoolArgs) (*storage, *storage) {
	checkPool(op, a)
	i, o := st(in), st(out)
	if i == nil || o == nil {
		panic("cpu: " + op + ": nil storage")
	}
	if !i.dt.IsFloat() || i.dt != o.dt {
		panic(fmt.Sprintf("cpu: %s: operands are %s and %s; want one floating dtype", op, i.dt, o.dt))
	}
	nIn, nOut := a.N*a.C*a.H*a.W, a.N*a.C*a.OH*a.OW
	if i.n < nIn {
		panic(fmt.Sprintf("cpu: %s: input-shaped storage holds %d elements, geometry needs N·C·H·W = %d", op, i.n, nIn))
	}
	if o.n < nOut {
		panic(fmt.Sprintf("cpu: %s: output-shaped storage holds %d elements, geometry needs N·C·OH·OW = %d", op, o.n, nOut))
	}
	return i, o
}

// checkPool panics unless a is a consistent pooling geometry.
func checkPool(op string, a backend.PoolArgs) {
	switch {
	case a.Kind != backend.MaxPool && a.Kind != backend.AvgPool:
		panic(fmt.Sprintf("cpu: %s: unknown pool kind %d", op, a.Kind))
	case a.N < 0 || a.C < 0 || a.H < 1 || a.W < 1:
		panic(fmt.Sprintf("cpu: %s: bad input size %d×%d×%d×%d", op, a.N, a.C, a.H, a.W))
	case a.KH < 1 || a.KW < 1:
		panic(fmt.Sprintf("cpu: %s: kernel %d×%d must be at least 1×1", op, a.KH, a.KW))
	case a.StrideH < 1 || a.StrideW < 1:
		panic(fmt.Sprintf("cpu: %s: stride %d×%d must be at least 1", op, a.StrideH, a.StrideW))
	case a.PadH < 0 || a.PadW < 0 || 2*a.PadH > a.KH || 2*a.PadW > a.KW:
		// As PyTorch: a window made only of padding would have no maximum.
		panic(fmt.Sprintf("cpu: %s: padding %d×%d must be between 0 and half the kernel %d×%d", op, a.PadH, a.PadW, a.KH, a.KW))
	}
	if !poolOutOK(a.OH, a.H, a.KH, a.StrideH, a.PadH) || !poolOutOK(a.OW, a.W, a.KW, a.StrideW, a.PadW) {
		panic(fmt.Sprintf("cpu: %s: output %d×%d is neither the floor nor the ceil_mode size of the geometry", op, a.OH, a.OW))
	}
}

// poolOutOK reports whether out is the floor or the ceil_mode output length of pooling
// along one axis, computed as PyTorch does.
func poolOutOK(out, in, k, stride, pad int) bool {
	span := in + 2*pad - k
	if span < 0 {
		return false
	}
	floor := span/stride + 1
	ceil := (span+stride-1)/stride + 1
	// The last ceil_mode window must start inside the input or its left padding.
	if (ceil-1)*stride >= in+pad {
		ceil--
	}
	return out == floor || out == ceil
}

// poolWindow returns the input range [lo, hi) that output position o covers and the
// length of the window clipped to the padded input (count_include_pad's factor).
func poolWindow(o, stride, pad, k, in int) (lo, hi, padded int) {
	start := o*stride - pad
	end := min(start+k, in+pad)
	return max(start, 0), min(end, in), end - start
}

// poolForward pools s into d; a MaxPool writes its window positions into idx, or into
// scratch when idx is nil (MaxPool).
func poolForward[C numeric](d, s *storage, idx []int64, a backend.PoolArgs) {
	hw, ohw := a.H*a.W, a.OH*a.OW
	// Float32 planes of a 2×2 max-pool without index go from s to d in place (as
	// maxPlaneOf's loaded copy, the same comparisons).
	// So do bfloat16 planes (the same comparisons on the elements widened, the
	// maxima rounded back: exact).
	inPlace := idx == nil && a.Kind == backend.MaxPool && maxPool2x2Packed(&a) && d != s &&
		s.dt == d.dt && (s.dt == backend.Float32 || s.dt == backend.BFloat16)
	ParallelFor(a.N*a.C, max(1, grainElems/max(ohw*a.KH*a.KW, 1)), func(lo, hi int) {
		if inPlace && s.dt == backend.BFloat16 {
			sb, db := s.bf16(), d.bf16()
			for p := lo; p < hi; p++ {
				vecMaxRows2x2BF16(db[p*ohw:(p+1)*ohw], sb[p*hw:(p+1)*hw], a.OW, a.W)
			}
			return
		}
		if inPlace {
			sf, df := s.f32(), d.f32()
			for p := lo; p < hi; p++ {
				vecMaxRows2x2(df[p*ohw:(p+1)*ohw], sf[p*hw:(p+1)*hw], a.OW, a.W)
			}
			return
		}
		in := make([]C, 2*hw) // maxPlaneOf's scratch
		out := make([]C, ohw)
		var scratch []int64
		if _, f32 := any(in).([]float32); idx == nil && a.Kind == backend.MaxPool && !(f32 && maxPool2x2Packed(&a)) {
			scratch = make([]int64, ohw)
		}
		for p := lo; p < hi; p++ {
			pi := scratch
			if pi == nil && idx != nil {
				pi = idx[p*ohw : (p+1)*ohw]
			}
			maxPlaneOf(out, pi, in, s, p*hw, &a)
			store(d, p*ohw, 1, out)
		}
	})
}

// maxPlaneOf sets out to the pooled plane s[off:] (MaxPool: idx to its positions, which
// a float32 maxPool2x2Packed geometry may leave out: nil idx), in (2·H·W long) as
// scratch for the input plane.
func maxPlaneOf[C numeric](out []C, idx []int64, in []C, s *storage, off int, a *backend.PoolArgs) {
	if f, ok := any(in).([]float32); ok && maxPool2x2Packed(a) {
		if idx == nil {
			f = f[:a.H*a.W]
			load(f, s, off, 1)
			vecMaxRows2x2(any(out).([]float32), f, a.OW, a.W)
			return
		}
		maxPlane2x2Packed(any(out).([]float32), idx, f, s, off, a)
		return
	}
	in = in[:a.H*a.W]
	load(in, s, off, 1)
	if a.Kind == backend.MaxPool {
		maxPlane(out, idx, in, a)
	} else {
		avgPlane(out, in, a)
	}
}

// maxPoolBackward is poolBackward for a MaxPool whose positions come from running
// the forward's maxPlaneOf on x again; a maxPool2x2Packed float32 plane runs
// maxPlane2x2PackedGrad instead, the same sums without the positions (on Float32
// storages, its calls in place).
func maxPoolBackward[C numeric](g, y, x *storage, a backend.PoolArgs) {
	hw, ohw := a.H*a.W, a.OH*a.OW
	// Float32 storages are read and written in place (g neither x nor y).
	// So are bfloat16 ones (the comparisons on the elements widened, 0 + gy rounded
	// back: exact).
	inPlace := maxPool2x2Packed(&a) && g != x && g != y && g.dt == x.dt && g.dt == y.dt &&
		(g.dt == backend.Float32 || g.dt == backend.BFloat16)
	ParallelFor(a.N*a.C, max(1, grainElems/max(ohw*a.KH*a.KW, 1)), func(lo, hi int) {
		if inPlace && g.dt == backend.BFloat16 {
			maxPoolGradPlanes(g.bf16(), x.bf16(), y.bf16(), lo, hi, &a, vecMaxRows2x2GradBF16)
			return
		}
		if inPlace {
			maxPoolGradPlanes(g.f32(), x.f32(), y.f32(), lo, hi, &a, vecMaxRows2x2Grad)
			return
		}
		acc, in := make([]C, hw), make([]C, 2*hw)
		gy, out := make([]C, ohw), make([]C, ohw)
		if _, ok := any(in).([]float32); ok && maxPool2x2Packed(&a) {
			for p := lo; p < hi; p++ {
				maxPlane2x2PackedGrad(g, y, x, p, any(acc).([]float32), any(in).([]float32), any(gy).([]float32), &a)
			}
			return
		}
		idx := make([]int64, ohw)
		for p := lo; p < hi; p++ {
			maxPlaneOf(out, idx, in, x, p*hw, &a)
			clear(acc)
			load(gy, y, p*ohw, 1)
			for o, i := range idx {
				acc[i] += gy[o]
			}
			store(g, p*hw, 1, acc)
		}
	})
}

// maxPoolGradPlanes writes the gradient of planes [lo, hi) of a maxPool2x2Packed
// geometry into g in place with grad (a row-pair loop of vec_pool.go), the rows
// below the last window (odd H) +0.
func maxPoolGradPlanes[T float32 | half.BFloat16](g, x, y []T, lo, hi int, a *backend.PoolArgs, grad func(g, x, gy []T, ow, w int)) {
	hw, ohw := a.H*a.W, a.OH*a.OW
	for p := lo; p < hi; p++ {
		gp := g[p*hw : (p+1)*hw]
		grad(gp, x[p*hw:(p+1)*hw], y[p*ohw:(p+1)*ohw], a.OW, a.W)
		clear(gp[2*a.OH*a.W:])
	}
}

// maxPlane2x2PackedGrad is maxPoolBackward's plane p for a maxPool2x2Packed geometry:
// the input plane is loaded into in, vecMaxRows2x2Grad writes the gradient of its
// row pairs into acc (rows below the last window, for odd H, +0), stored in one run.
// maxPoolBackward runs the same calls on float32 storages in place.
func maxPlane2x2PackedGrad(g, y, x *storage, p int, acc, in, gy []float32, a *backend.PoolArgs) {
	w, oh, ow, hw := a.W, a.OH, a.OW, a.H*a.W
	in, acc = in[:hw], acc[:hw]
	load(in, x, p*hw, 1)
	load(gy[:oh*ow], y, p*oh*ow, 1)
	vecMaxRows2x2Grad(acc, in, gy[:oh*ow], ow, w)
	clear(acc[2*oh*w:])
	store(g, p*hw, 1, acc)
}

// maxPlane sets out to the maxima of the windows of one input plane and idx to their
// positions in the plane.
func maxPlane[C numeric](out []C, idx []int64, in []C, a *backend.PoolArgs) {
	if a.KH == 2 && a.KW == 2 && a.StrideH == 2 && a.StrideW == 2 && a.PadH == 0 && a.PadW == 0 &&
		2*a.OH <= a.H && 2*a.OW <= a.W {
		maxPlane2x2(out, idx, in, a.W, a.OH, a.OW)
		return
	}
	maxPlaneAny(out, idx, in, a)
}

// maxPlaneAny is maxPlane for any geometry.
func maxPlaneAny[C numeric](out []C, idx []int64, in []C, a *backend.PoolArgs) {
	ninf := C(math.Inf(-1))
	for oh := 0; oh < a.OH; oh++ {
		h0, h1, _ := poolWindow(oh, a.StrideH, a.PadH, a.KH, a.H)
		for ow := 0; ow < a.OW; ow++ {
			w0, w1, _ := poolWindow(ow, a.StrideW, a.PadW, a.KW, a.W)
			best, at := ninf, h0*a.W+w0
			for h := h0; h < h1; h++ {
				row := in[h*a.W:]
				for w := w0; w < w1; w++ {
					if v := row[w]; v > best || v != v {
						best, at = v, h*a.W+w
					}
				}
			}
			out[oh*a.OW+ow] = best
			idx[oh*a.OW+ow] = int64(at)
		}
	}
}

// maxPool2x2Packed reports whether a is a 2×2, stride-2 max-pool without padding
// whose windows tile the input's width (W = 2·OW), which maxPlane2x2Packed runs.
func maxPool2x2Packed(a *backend.PoolArgs) bool {
	return a.Kind == backend.MaxPool && a.KH == 2 && a.KW == 2 && a.StrideH == 2 && a.StrideW == 2 &&
		a.PadH == 0 && a.PadW == 0 && a.W == 2*a.OW && 2*a.OH <= a.H
}

// maxPlane2x2Packed is maxPlane for a maxPool2x2Packed geometry, plane s[off:]: it loads
// the even input rows into in[:OH·W] and the odd ones after them, so that the windows
// of the whole plane are one maxRow2x2 run (on the vector layer, however short the
// rows), whose indices it then moves from 2·(i·OW + j) + at to 2i·W + 2j + at.
func maxPlane2x2Packed(out []float32, idx []int64, in []float32, s *storage, off int, a *backend.PoolArgs) {
	w, oh, ow := a.W, a.OH, a.OW
	r0, r1 := in[:oh*w], in[oh*w:2*oh*w]
	for i := range oh {
		load(r0[i*w:(i+1)*w], s, off+2*i*w, 1)
		load(r1[i*w:(i+1)*w], s, off+(2*i+1)*w, 1)
	}
	vecMaxRow2x2(out[:oh*ow], idx, r0, r1, 0, w)
	for i := 1; i < oh; i++ {
		shift := int64(i * 2 * ow)
		x := idx[i*ow : (i+1)*ow]
		for j := range x {
			x[j] += shift
		}
	}
}

// maxPlane2x2 is maxPlane for 2×2 windows at stride 2 without padding, every window
// inside the w-wide input: maxRow2x2 row by row, on the vector layer for float32.
func maxPlane2x2[C numeric](out []C, idx []int64, in []C, w, oh, ow int) {
	for i := range oh {
		r0, r1 := in[2*i*w:][:2*ow], in[(2*i+1)*w:][:2*ow]
		o, x := out[i*ow:][:ow], idx[i*ow:][:ow]
		if of, ok := any(o).([]float32); ok {
			vecMaxRow2x2(of, x, any(r0).([]float32), any(r1).([]float32), 2*i*w, w)
		} else {
			maxRow2x2(o, x, r0, r1, 2*i*w, w)
		}
	}
}

func avgPlane[C numeric](out, in []C, a *backend.PoolArgs) {
	for oh := 0; oh < a.OH; oh++ {
		h0, h1, ph := poolWindow(oh, a.StrideH, a.PadH, a.KH, a.H)
		for ow := 0; ow < a.OW; ow++ {
			w0, w1, pw := poolWindow(ow, a.StrideW, a.PadW, a.KW, a.W)
			if h0 >= h1 || w0 >= w1 {
				out[oh*a.OW+ow] = 0
				continue
			}
			var sum C
			for h := h0; h < h1; h++ {
				for _, v := range in[h*a.W+w0 : h*a.W+w1] {
					sum += v
				}
			}
			out[oh*a.OW+ow] = sum / C(avgDivisor(a, h0, h1, w0, w1, ph, pw))
		}
	}
}

// avgDivisor is the number of positions an average-pool window is divided by.
func avgDivisor(a *backend.PoolArgs, h0, h1, w0, w1, ph, pw int) int {
	if a.CountIncludePad {
		return ph * pw
	}
	return (h1 - h0) * (w1 - w0)
}

func poolBackward[C numeric](g, y *storage, idx []int64, a backend.PoolArgs) {
	hw, ohw := a.H*a.W, a.OH*a.OW
	ParallelFor(a.N*a.C, max(1, grainElems/max(ohw*a.KH*a.KW, 1)), func(lo, hi int) {
		acc := make([]C, hw)
		gy := make([]C, ohw)
		for p := lo; p < hi; p++ {
			clear(acc)
			load(gy, y, p*ohw, 1)
			if a.Kind == backend.MaxPool {
				for o, i := range idx[p*ohw : (p+1)*ohw] {
					if i < 0 || i >= int64(hw) {
						panic(fmt.Sprintf("cpu: PoolBackward: index %d at output %d is outside the %d×%d input plane", i, p*ohw+o, a.H, a.W))
					}
					acc[i] += gy[o]
				}
			} else {
				avgPlaneBackward(acc, gy, &a)
			}
			store(g, p*hw, 1, acc)
		}
	})
}

func avgPlaneBackward[C numeric](acc, gy []C, a *backend.PoolArgs) {
	for oh := 0; oh < a.OH; oh++ {
		h0, h1, ph := poolWindow(oh, a.StrideH, a.PadH, a.KH, a.H)
		for ow := 0; ow < a.OW; ow++ {
			w0, w1, pw := poolWindow(ow, a.StrideW, a.PadW, a.KW, a.W)
			if h0 >= h1 || w0 >= w1 {
				continue
			}
			v := gy[oh*a.OW+ow] / C(avgDivisor(a, h0, h1, w0, w1, ph, pw))
			for h := h0; h < h1; h++ {
				row := acc[h*a.W+w0 : h*a.W+w1]
				for w := range row {
					row[w] += v
				}
			}
		}
	}
}
