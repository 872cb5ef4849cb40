package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// castAllPolicy is an autocast policy that applies every op's registry category, with
// low as the LowerPrecision dtype.
type castAllPolicy struct{ low DType }

func (p castAllPolicy) Category(op *Op, dev Device) CastCategory { return op.Category() }
func (p castAllPolicy) LowDType() DType                          { return p.low }

func labels64(v ...int64) func() *Tensor {
	return func() *Tensor { return FromSlice(v, nil) }
}

func nnGradCases() []gradCase {
	un := func(f func(x *Tensor) *Tensor) func(xs []*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return f(xs[0]) }
	}
	ce := func(eps float64, r ...Reduction) func(xs []*Tensor) *Tensor {
		if len(r) == 0 {
			return func(xs []*Tensor) *Tensor { return CrossEntropy(xs[0], xs[1], eps) }
		}
		return func(xs []*Tensor) *Tensor {
			return CrossEntropyWith(xs[0], xs[1], CrossEntropyOptions{Smoothing: eps, Reduction: r[0]})
		}
	}
	return []gradCase{
		{op: "softmax", name: "last dim", in: []gradInput{gN(3, 5)}, f: un(func(x *Tensor) *Tensor { return x.Softmax(-1) })},
		{op: "softmax", name: "dim 0", in: []gradInput{gN(3, 5)}, f: un(func(x *Tensor) *Tensor { return x.Softmax(0) })},
		{op: "softmax", name: "middle of 3-d", in: []gradInput{gN(2, 3, 4)}, f: un(func(x *Tensor) *Tensor { return Softmax(x, 1) })},
		{op: "softmax", name: "transposed input", in: []gradInput{gN(4, 3)}, f: un(func(x *Tensor) *Tensor { return x.T().Softmax(1) })},
		{op: "log_softmax", name: "last dim", in: []gradInput{gN(3, 5)}, f: un(func(x *Tensor) *Tensor { return x.LogSoftmax(-1) })},
		{op: "log_softmax", name: "dim 0 of 3-d", in: []gradInput{gN(3, 2, 4)}, f: un(func(x *Tensor) *Tensor { return LogSoftmax(x, 0) })},

		{op: "cross_entropy", name: "mean", in: []gradInput{gN(4, 5), gConst(labels64(0, 4, 2, 2))}, f: ce(0)},
		{op: "cross_entropy", name: "smoothing", in: []gradInput{gN(4, 5), gConst(labels64(1, 3, 0, 4))}, f: ce(0.1)},
		{op: "cross_entropy", name: "sum", in: []gradInput{gN(4, 5), gConst(labels64(1, 3, 0, 4))}, f: ce(0.2, ReductionSum)},
		{op: "cross_entropy", name: "none", in: []gradInput{gN(4, 5), gConst(labels64(1, 3, 0, 4))}, f: ce(0.1, ReductionNone)},
		{op: "cross_entropy", name: "spatial", in: []gradInput{gN(2, 3, 4), gConst(func() *Tensor {
			return FromSlice([]int32{0, 1, 2, 1, 2, 2, 0, 0}, Shape{2, 4})
		})}, f: ce(0.05)},
		{op: "cross_entropy", name: "single sample", in: []gradInput{gN(6), gConst(func() *Tensor {
			return FromSlice([]int64{3}, Shape{})
		})}, f: ce(0)},

		{op: "mse_loss", name: "mean", in: []gradInput{gN(3, 4), gN(3, 4)}, f: func(xs []*Tensor) *Tensor { return MSELoss(xs[0], xs[1]) }},
		{op: "mse_loss", name: "sum", in: []gradInput{gN(3, 4), gN(3, 4)}, f: func(xs []*Tensor) *Tensor { return MSELossWith(xs[0], xs[1], LossOptions{Reduction: ReductionSum}) }},
		{op: "mse_loss", name: "none", in: []gradInput{gN(3, 4), gN(3, 4)}, f: func(xs []*Tensor) *Tensor { return MSELossWith(xs[0], xs[1], LossOptions{Reduction: ReductionNone}) }},
		{op: "binary_cross_entropy_with_logits", name: "mean", in: []gradInput{gN(3, 4), gU(0, 1, 3, 4)}, f: func(xs []*Tensor) *Tensor {
			return BCEWithLogits(xs[0], xs[1])
		}},
		{op: "binary_cross_entropy_with_logits", name: "sum", in: []gradInput{gN(3, 4), gU(0, 1, 3, 4)}, f: func(xs []*Tensor) *Tensor {
			return BCEWithLogitsWith(xs[0].MulScalar(4), xs[1], LossOptions{Reduction: ReductionSum})
		}},
		{op: "binary_cross_entropy_with_logits", name: "none", in: []gradInput{gN(3, 4), gU(0, 1, 3, 4)}, f: func(xs []*Tensor) *Tensor {
			return BCEWithLogitsWith(xs[0], xs[1], LossOptions{Reduction: ReductionNone})
		}},

		{op: "dropout", name: "training", in: []gradInput{gN(4, 5)}, f: un(func(x *Tensor) *Tensor {
			// A fresh generator per call: every evaluation draws the same mask.
			return Dropout(x.Context().WithGenerator(NewGenerator(9)).Bind(x), 0.4, true)
		})},
	}
}

func TestGradCheckNNOps(t *testing.T) { runGradCases(t, nnGradCases()) }

// --- float64 references

func refSoftmax(x []float64, outer, n, inner int, log bool) []float64 {
	out := make([]float64, len(x))
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			at := func(j int) int { return (o*n+j)*inner + i }
			m := math.Inf(-1)
			for j := 0; j < n; j++ {
				m = math.Max(m, x[at(j)])
			}
			var s float64
			for j := 0; j < n; j++ {
				s += math.Exp(x[at(j)] - m)
			}
			for j := 0; j < n; j++ {
				if log {
					out[at(j)] = x[at(j)] - m - math.Log(s)
				} else {
					out[at(j)] = math.Exp(x[at(j)]-m) / s
				}
			}
		}
	}
	return out
}

// refCrossEntropy returns the per-row losses of logits [rows, classes].
func refCrossEntropy(x []float64, labels []int64, classes int, eps float64) []float64 {
	rows := len(labels)
	lp := refSoftmax(x, rows, classes, 1, true)
	out := make([]float64, rows)
	for r := 0; r < rows; r++ {
		for k := 0; k < classes; k++ {
			q := eps / float64(classes)
			if int64(k) == labels[r] {
				q += 1 - eps
			}
			out[r] -= q * lp[r*classes+k]
		}
	}
	return out
}

func meanOf(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func TestSoftmaxForward(t *testing.T) {
	c := NewContext()
	defer c.Close()
	v := randVals(11, 2*3*4, 3)
	x := FromSlice(v, Shape{2, 3, 4}, WithContext(c))
	for d, split := range [][3]int{{1, 2, 12}, {2, 3, 4}, {6, 4, 1}} {
		for _, log := range []bool{false, true} {
			var y *Tensor
			if log {
				y = x.LogSoftmax(d)
			} else {
				y = x.Softmax(d)
			}
			require.Equal(t, x.Shape(), y.Shape())
			requireClose(t, refSoftmax(v, split[0], split[1], split[2], log), y.Float64s(), 1e-12, "softmax")
		}
	}
	// Rows sum to 1, also for huge logits.
	big := FromSlice([]float32{1000, 1001, 1002, -1000, 0, 1000}, Shape{2, 3}, WithContext(c))
	s := big.Softmax(-1)
	require.InDelta(t, 1, s.Sum(1).Float64s()[0], 1e-6)
	require.InDelta(t, 1, s.Sum(1).Float64s()[1], 1e-6)
	for _, p := range s.Float64s() {
		require.False(t, math.IsNaN(p))
	}
	ls := big.LogSoftmax(-1).Float64s()
	require.InDelta(t, -0.40760596444, ls[2], 1e-5)
	require.InDelta(t, -2000-math.Log1p(math.Exp(-1000)+math.Exp(-1000)), ls[3], 1e-3)
	// A 0-d tensor is a row of one.
	require.Equal(t, 1.0, Scalar(3, WithContext(c)).Softmax(0).Item())
	require.Equal(t, 0.0, Scalar(3, WithContext(c)).LogSoftmax(-1).Item())
}

func TestCrossEntropyForward(t *testing.T) {
	c := NewContext()
	defer c.Close()
	logits := FromSlice([]float64{1, 2, 3, 1, 1, 1}, Shape{2, 3}, WithContext(c))
	lab := FromSlice([]int64{2, 0}, nil, WithContext(c))
	// By hand: nll = [log(e+e²+e³) - 3, log 3].
	require.InDelta(t, 0.753109126556245, CrossEntropy(logits, lab, 0).Item(), 1e-12)
	// Smoothing ε: (1-ε)·nll + ε·mean(-log p).
	require.InDelta(t, 0.8031091265562449, CrossEntropy(logits, lab, 0.1).Item(), 1e-12)
	require.InDelta(t, 2*0.8031091265562449, CrossEntropyWith(logits, lab, CrossEntropyOptions{Smoothing: 0.1, Reduction: ReductionSum}).Item(), 1e-12)
	none := CrossEntropyWith(logits, lab, CrossEntropyOptions{Smoothing: 0, Reduction: ReductionNone})
	require.Equal(t, Shape{2}, none.Shape())
	requireClose(t, []float64{math.Log(math.E+math.E*math.E+math.E*math.E*math.E) - 3, math.Log(3)}, none.Float64s(), 1e-12, "none")

	// Random batch against the reference, Int32 labels.
	v := randVals(12, 6*10, 2)
	lv := []int64{9, 0, 3, 3, 7, 1}
	x := FromSlice(v, Shape{6, 10}, WithContext(c))
	l32 := FromSlice([]int32{9, 0, 3, 3, 7, 1}, nil, WithContext(c))
	for _, eps := range []float64{0, 0.1, 1} {
		want := meanOf(refCrossEntropy(v, lv, 10, eps))
		require.InDelta(t, want, CrossEntropy(x, l32, eps).Item(), 1e-12, "eps %g", eps)
	}

	// [N, C, d] logits equal the same rows laid out as [N·d, C].
	sp := randVals(13, 2*3*4, 1)
	spl := []int64{0, 1, 2, 1, 2, 2, 0, 0}
	xs := FromSlice(sp, Shape{2, 3, 4}, WithContext(c))
	ls := FromSlice(spl, Shape{2, 4}, WithContext(c))
	rows := xs.Permute(0, 2, 1).Reshape(8, 3)
	require.InDelta(t, CrossEntropy(rows, FromSlice(spl, nil, WithContext(c)), 0.1).Item(), CrossEntropy(xs, ls, 0.1).Item(), 1e-12)
	require.Equal(t, Shape{2, 4}, CrossEntropyWith(xs, ls, CrossEntropyOptions{Smoothing: 0, Reduction: ReductionNone}).Shape())

	// The gradient is (softmax - target)/N.
	w := FromSlice([]float64{1, 2, 3, 1, 1, 1}, Shape{2, 3}, WithGrad(), WithContext(c))
	CrossEntropy(w, lab, 0).Backward()
	p := refSoftmax([]float64{1, 2, 3, 1, 1, 1}, 2, 3, 1, false)
	p[2]--
	p[3]--
	for i := range p {
		p[i] /= 2
	}
	requireClose(t, p, w.Grad().Float64s(), 1e-12, "gradient")
}

func TestCrossEntropyBadLabels(t *testing.T) {
	c := NewContext()
	defer c.Close()
	x := Zeros(Shape{3, 4}, WithContext(c))
	e := requireOpError(t, func() { CrossEntropy(x, FromSlice([]int64{0, 4, 1}, nil, WithContext(c)), 0) })
	require.Equal(t, "cross_entropy", e.Op)
	require.Contains(t, e.Error(), "label 4 at position 1")
	require.Contains(t, e.Error(), "[0, 4)")
	e = requireOpError(t, func() { CrossEntropy(x, FromSlice([]int32{-1, 0, 0}, nil, WithContext(c)), 0) })
	require.Contains(t, e.Error(), "label -1 at position 0")
	requireOpError(t, func() { CrossEntropy(x, FromSlice([]float32{0, 1, 2}, nil, WithContext(c)), 0) })
	requireOpError(t, func() { CrossEntropy(x, FromSlice([]int64{0, 1}, nil, WithContext(c)), 0) })
	requireOpError(t, func() { CrossEntropy(x, FromSlice([]int64{0, 1, 2}, nil, WithContext(c)), 1.5) })
	requireOpError(t, func() {
		CrossEntropyWith(x, FromSlice([]int64{0, 1, 2}, nil, WithContext(c)), CrossEntropyOptions{Smoothing: 0, Reduction: Reduction(9)})
	})
	requireOpError(t, func() {
		CrossEntropy(x, FromSlice([]int64{0, 1, 2}, nil, WithDevice(CPUDevice(1)), WithContext(c)), 0)
	})
}

func TestMSELossForward(t *testing.T) {
	c := NewContext()
	defer c.Close()
	x := FromSlice([]float32{1, 2, 3, 4}, Shape{2, 2}, WithContext(c))
	y := FromSlice([]float32{0, 2, 5, 1}, Shape{2, 2}, WithContext(c))
	require.InDelta(t, (1+0+4+9)/4.0, MSELoss(x, y).Item(), 1e-6)
	require.InDelta(t, 14, MSELossWith(x, y, LossOptions{Reduction: ReductionSum}).Item(), 1e-6)
	require.Equal(t, []float32{1, 0, 4, 9}, MSELossWith(x, y, LossOptions{Reduction: ReductionNone}).Float32s())
	// Mixed dtypes compute in the wider one.
	require.Equal(t, Float32, MSELoss(x.Cast(Float16), y).DType())
	requireOpError(t, func() { MSELoss(x, y.Reshape(4)) })
	requireOpError(t, func() { MSELossWith(x, y, LossOptions{Reduction: Reduction(9)}) })
}

func TestBCEWithLogitsIsStable(t *testing.T) {
	c := NewContext()
	defer c.Close()
	xv := []float64{100, -100, 100, -100, 0, 3}
	yv := []float64{0, 1, 1, 0, 0.5, 0.25}
	want := make([]float64, len(xv))
	for i, x := range xv {
		want[i] = math.Max(x, 0) - x*yv[i] + math.Log1p(math.Exp(-math.Abs(x)))
	}
	for _, dt := range []DType{Float64, Float32} {
		x := FromSlice(xv, nil, WithDType(dt), WithGrad(), WithContext(c))
		y := FromSlice(yv, nil, WithDType(dt), WithContext(c))
		per := BCEWithLogitsWith(x, y, LossOptions{Reduction: ReductionNone})
		requireClose(t, want, per.Float64s(), 1e-6, dt.String())
		l := BCEWithLogits(x, y)
		require.InDelta(t, meanOf(want), l.Item(), 1e-5)
		l.Backward()
		g := x.Grad().Float64s()
		for i, xi := range xv {
			sig := 1 / (1 + math.Exp(-xi))
			require.InDelta(t, (sig-yv[i])/6, g[i], 1e-7, "gradient %d", i)
		}
	}
}

func TestDropout(t *testing.T) {
	c := NewContext()
	defer c.Close()
	g := NewGenerator(5)
	dc := c.WithGenerator(g)
	const n, p = 100000, 0.3
	x := Ones(Shape{n}, WithContext(dc))

	st := g.State()
	a := Dropout(x, p, true)
	av := a.Float64s()
	kept := 0
	for _, v := range av {
		if v != 0 {
			require.InDelta(t, 1/(1-p), v, 1e-6)
			kept++
		}
	}
	require.InDelta(t, 1-p, float64(kept)/n, 0.01, "fraction kept")
	require.InDelta(t, 1, meanOf(av), 0.02, "the scale keeps the mean")

	// Restoring the generator replays the mask exactly; not restoring draws a new one.
	g.SetState(st)
	require.Equal(t, av, Dropout(x, p, true).Float64s())
	require.NotEqual(t, av, Dropout(x, p, true).Float64s())

	require.Same(t, x, Dropout(x, 0, true), "p = 0 is the identity")
	require.Same(t, x, Dropout(x, 0.5, false), "eval mode is the identity")
	require.Equal(t, make([]float64, 10), Dropout(Ones(Shape{10}, WithContext(dc)), 1, true).Float64s())
	for _, bad := range []float64{-0.1, 1.5, math.NaN()} {
		e := requireOpError(t, func() { Dropout(x, bad, true) })
		require.Equal(t, "dropout", e.Op)
	}

	// The gradient is the mask.
	w := Ones(Shape{1000}, WithGrad(), WithContext(dc))
	y := Dropout(w, 0.5, true)
	y.Sum().Backward()
	require.Equal(t, y.Float64s(), w.Grad().Float64s())

	h := Dropout(Ones(Shape{64}, WithDType(Float16), WithContext(dc)), 0.5, true)
	require.Equal(t, Float16, h.DType(), "dropout is passthrough")
}

func TestHalfPrecisionNNOps(t *testing.T) {
	v := randVals(21, 8*10, 2)
	lv := []int64{1, 9, 4, 4, 0, 2, 7, 3}
	for _, dt := range []DType{Float16, BFloat16} {
		t.Run(dt.String(), func(t *testing.T) {
			c := NewContext()
			defer c.Close()
			vr := roundTo(v, dt)
			x := FromSlice(vr, Shape{8, 10}, WithDType(dt), WithContext(c))
			tol := halfTol(dt)
			for _, log := range []bool{false, true} {
				var y *Tensor
				if log {
					y = x.LogSoftmax(-1)
				} else {
					y = x.Softmax(-1)
				}
				require.Equal(t, dt, y.DType(), "no autocast: runs in the input dtype")
				requireClose(t, refSoftmax(vr, 8, 10, 1, log), y.Float64s(), tol, "softmax")
			}
			requireClose(t, refSoftmax(vr, 1, 8, 10, false), x.Softmax(0).Float64s(), tol, "softmax dim 0")
			lab := FromSlice(lv, nil, WithContext(c))
			for _, eps := range []float64{0, 0.1} {
				want := meanOf(refCrossEntropy(vr, lv, 10, eps))
				got := CrossEntropy(x, lab, eps)
				require.Equal(t, dt, got.DType())
				require.InDelta(t, want, got.Item(), tol*math.Max(1, math.Abs(want)), "cross entropy eps %g", eps)
			}
			// The backward runs in the forward's dtype and matches float64.
			w := FromSlice(vr, Shape{8, 10}, WithDType(dt), WithGrad(), WithContext(c))
			CrossEntropy(w, lab, 0.1).Backward()
			require.Equal(t, dt, w.Grad().DType())
			w64 := FromSlice(vr, Shape{8, 10}, WithGrad(), WithContext(c))
			CrossEntropy(w64, lab, 0.1).Backward()
			requireClose(t, w64.Grad().Float64s(), w.Grad().Float64s(), tol/4, "cross entropy gradient")
		})
	}
}

func TestAutocastRunsSoftmaxAndLossesInFloat32(t *testing.T) {
	c := NewContext()
	defer c.Close()
	ac := c.WithAutocast(castAllPolicy{Float16})
	x := FromSlice(randVals(31, 4*5, 1), Shape{4, 5}, WithDType(Float16), WithGrad(), WithContext(c))
	xb := ac.Bind(x)
	require.Equal(t, Float32, xb.Softmax(-1).DType())
	require.Equal(t, Float32, xb.LogSoftmax(-1).DType())
	loss := CrossEntropy(xb, FromSlice([]int64{0, 1, 2, 3}, nil, WithContext(ac)), 0.1)
	require.Equal(t, Float32, loss.DType())
	require.Equal(t, Float32, MSELoss(xb, xb.Tanh()).DType())
	require.Equal(t, Float32, BCEWithLogits(xb, xb.Sigmoid()).DType())
	require.Equal(t, Float16, Dropout(xb, 0.1, true).DType(), "dropout is passthrough")
	loss.Backward()
	require.Equal(t, Float16, x.Grad().DType(), "the gradient is cast back to the input's dtype")
}

func TestNNMisusePanicsWithOpError(t *testing.T) {
	c := NewContext()
	defer c.Close()
	x := Ones(Shape{2, 3}, WithContext(c))
	require.Equal(t, "softmax", requireOpError(t, func() { FromSlice([]int64{1, 2}, nil).Softmax(0) }).Op)
	require.Equal(t, "log_softmax", requireOpError(t, func() { x.LogSoftmax(2) }).Op)
	requireOpError(t, func() { Scalar(1).Softmax(1) })
	requireOpError(t, func() { BCEWithLogits(x, Ones(Shape{3}, WithContext(c))) })
	requireOpError(t, func() { MSELoss(x, Ones(Shape{2, 3}, WithDevice(CPUDevice(1)))) })
	requireOpError(t, func() { Dropout(FromSlice([]int32{1}, nil), 0.5, true) })
}
