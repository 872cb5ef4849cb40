package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// gDyadic draws elements in [lo, hi) that are multiples of 1/64. The norm kernels take
// their affine parameters in float32; a dyadic value stays exact there even after the
// gradcheck step normOpts.Eps is added, and the output is linear in those parameters,
// so the finite differences measure them exactly.
func gDyadic(lo, hi float64, shape ...int) gradInput {
	return gFrom(func(r *rand.Rand) float64 { return math.Round((lo+(hi-lo)*r.Float64())*64) / 64 }, shape...)
}

// normOpts is the gradcheck setting for rows with float32-rounded parameters (see
// gDyadic); the step is still small for the nonlinear dependence on x.
var normOpts = GradCheckOptions{Eps: 1.0 / 1024}

// constF64 is a constant float64 input (running statistics in gradcheck rows).
func constF64(v ...float64) gradInput {
	return gConst(func() *Tensor { return FromSlice(v, nil) })
}

func normGradCases() []gradCase {
	bn := func(training bool) func(xs []*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor {
			at := func(i int) *Tensor {
				if i < len(xs) {
					return xs[i]
				}
				return nil
			}
			return BatchNorm(xs[0], at(1), at(2), at(3), at(4), training, 0.1, 1e-5)
		}
	}
	bnNoAffine := func(training bool) func(xs []*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor {
			var rm, rv *Tensor
			if len(xs) > 1 {
				rm, rv = xs[1], xs[2]
			}
			return BatchNorm(xs[0], nil, nil, rm, rv, training, 0.1, 1e-5)
		}
	}
	bnReLU := func(training bool) func(xs []*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor {
			return BatchNormReLU(xs[0], xs[1], xs[2], xs[3], xs[4], training, 0.1, 1e-5)
		}
	}
	ln := func(ns Shape, affine bool) func(xs []*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor {
			if !affine {
				return LayerNorm(xs[0], ns, nil, nil, 1e-5)
			}
			return LayerNorm(xs[0], ns, xs[1], xs[2], 1e-5)
		}
	}
	return []gradCase{
		{op: "batch_norm", name: "training 2-d", in: []gradInput{gN(6, 3), gDyadic(0.5, 1.5, 3), gDyadic(-1, 1, 3),
			constF64(0, 0, 0), constF64(1, 1, 1)}, f: bn(true), opts: normOpts},
		{op: "batch_norm", name: "training 4-d", in: []gradInput{gN(3, 2, 3, 2), gDyadic(0.5, 1.5, 2), gDyadic(-1, 1, 2),
			constF64(0.5, -0.5), constF64(2, 0.5)}, f: bn(true), opts: normOpts},
		{op: "batch_norm", name: "training 3-d no running stats", in: []gradInput{gN(2, 3, 4), gDyadic(0.5, 1.5, 3), gDyadic(-1, 1, 3)},
			f: bn(true), opts: normOpts},
		{op: "batch_norm", name: "training no affine", in: []gradInput{gN(4, 3, 2)}, f: bnNoAffine(true), opts: normOpts},
		{op: "batch_norm", name: "transposed input", in: []gradInput{gN(3, 5), gDyadic(0.5, 1.5, 3), gDyadic(-1, 1, 3)},
			f: func(xs []*Tensor) *Tensor { return BatchNorm(xs[0].T(), xs[1], xs[2], nil, nil, true, 0.1, 1e-5) }, opts: normOpts},
		{op: "batch_norm", name: "eval 4-d", in: []gradInput{gN(2, 3, 2, 2), gDyadic(0.5, 1.5, 3), gDyadic(-1, 1, 3),
			constF64(0.25, -0.5, 1), constF64(0.5, 2, 1.5)}, f: bn(false), opts: normOpts},
		{op: "batch_norm", name: "eval no affine", in: []gradInput{gN(4, 2), constF64(0.25, -0.5), constF64(0.5, 2)},
			f: bnNoAffine(false), opts: normOpts},

		{op: "batch_norm_relu", name: "training 4-d", in: []gradInput{gN(3, 2, 3, 2), gDyadic(0.5, 1.5, 2), gDyadic(-1, 1, 2),
			constF64(0.5, -0.5), constF64(2, 0.5)}, f: bnReLU(true), opts: normOpts},
		{op: "batch_norm_relu", name: "eval, away from the kink", in: []gradInput{gAway(0.25, 2, 3, 2, 2),
			constF64(0, 0, 0), constF64(1, 1, 1)}, f: func(xs []*Tensor) *Tensor {
			return BatchNormReLU(xs[0], nil, nil, xs[1], xs[2], false, 0.1, 1e-5)
		}, opts: normOpts},

		{op: "layer_norm", name: "last dim", in: []gradInput{gN(4, 5), gDyadic(0.5, 1.5, 5), gDyadic(-1, 1, 5)},
			f: ln(Shape{5}, true), opts: normOpts},
		{op: "layer_norm", name: "two dims", in: []gradInput{gN(2, 3, 4), gDyadic(0.5, 1.5, 3, 4), gDyadic(-1, 1, 3, 4)},
			f: ln(Shape{3, 4}, true), opts: normOpts},
		{op: "layer_norm", name: "no affine", in: []gradInput{gN(3, 6)}, f: ln(Shape{6}, false), opts: normOpts},
		{op: "layer_norm", name: "transposed input", in: []gradInput{gN(5, 4), gDyadic(0.5, 1.5, 5), gDyadic(-1, 1, 5)},
			f: func(xs []*Tensor) *Tensor { return LayerNorm(xs[0].T(), Shape{5}, xs[1], xs[2], 1e-5) }, opts: normOpts},
	}
}

func TestGradCheckNormOps(t *testing.T) { runGradCases(t, normGradCases()) }

// --- float64 references

// refBatchStats returns the per-channel mean and biased variance of x [N, C, S].
func refBatchStats(x []float64, n, c, s int) (mean, variance []float64) {
	mean, variance = make([]float64, c), make([]float64, c)
	cnt := float64(n * s)
	for ch := 0; ch < c; ch++ {
		for i := 0; i < n; i++ {
			for j := 0; j < s; j++ {
				mean[ch] += x[(i*c+ch)*s+j]
			}
		}
		mean[ch] /= cnt
		for i := 0; i < n; i++ {
			for j := 0; j < s; j++ {
				d := x[(i*c+ch)*s+j] - mean[ch]
				variance[ch] += d * d
			}
		}
		variance[ch] /= cnt
	}
	return mean, variance
}

// refBatchNormApply normalises x [N, C, S] with the given per-channel statistics.
func refBatchNormApply(x, mean, variance, w, b []float64, n, c, s int, eps float64) []float64 {
	y := make([]float64, len(x))
	for i := 0; i < n; i++ {
		for ch := 0; ch < c; ch++ {
			for j := 0; j < s; j++ {
				k := (i*c+ch)*s + j
				y[k] = (x[k] - mean[ch]) / math.Sqrt(variance[ch]+eps)
				if w != nil {
					y[k] *= w[ch]
				}
				if b != nil {
					y[k] += b[ch]
				}
			}
		}
	}
	return y
}

// refLayerNorm normalises each row of x [rows, cols].
func refLayerNorm(x, w, b []float64, rows, cols int, eps float64) []float64 {
	y := make([]float64, len(x))
	for r := 0; r < rows; r++ {
		row := x[r*cols : (r+1)*cols]
		m := meanOf(row)
		v := 0.0
		for _, e := range row {
			v += (e - m) * (e - m)
		}
		v /= float64(cols)
		for j, e := range row {
			k := r*cols + j
			y[k] = (e - m) / math.Sqrt(v+eps)
			if w != nil {
				y[k] *= w[j]
			}
			if b != nil {
				y[k] += b[j]
			}
		}
	}
	return y
}

func TestBatchNormForwardAndRunningStats(t *testing.T) {
	const n, ch, s, mom, eps = 4, 3, 6, 0.1, 1e-5
	xs := Shape{n, ch, 2, 3}
	wv, bv := randVals(31, ch, 1), randVals(32, ch, 1)
	for _, dt := range []DType{Float64, Float32} {
		t.Run(dt.String(), func(t *testing.T) {
			c := NewContext()
			defer c.Close()
			tol := 1e-6 // statistics pass through float32
			w := FromSlice(wv, nil, WithDType(dt), WithContext(c))
			b := FromSlice(bv, nil, WithDType(dt), WithContext(c))
			rm := Zeros(Shape{ch}, WithContext(c))
			rv := Ones(Shape{ch}, WithContext(c))
			wantRM, wantRV := []float64{0, 0, 0}, []float64{1, 1, 1}
			for step := 0; step < 2; step++ {
				xv := randVals(uint64(33+step), xs.Numel(), 2)
				for i := range xv {
					xv[i] += float64(step + 1) // a non-zero mean
				}
				x := FromSlice(xv, xs, WithDType(dt), WithContext(c))
				y := BatchNorm(x, w, b, rm, rv, true, mom, eps)
				require.Equal(t, dt, y.DType())
				require.Equal(t, xs, y.Shape())
				mean, variance := refBatchStats(xv, n, ch, s)
				requireClose(t, refBatchNormApply(xv, mean, variance, wv, bv, n, ch, s, eps), y.Float64s(), tol, "training output")
				for k := range wantRM {
					wantRM[k] = (1-mom)*wantRM[k] + mom*mean[k]
					wantRV[k] = (1-mom)*wantRV[k] + mom*variance[k]*float64(n*s)/float64(n*s-1)
				}
				requireClose(t, wantRM, rm.Float64s(), tol, "running mean")
				requireClose(t, wantRV, rv.Float64s(), tol, "running var")
			}
			// Eval normalises with the running statistics and leaves them alone.
			xv := randVals(35, xs.Numel(), 1)
			x := FromSlice(xv, xs, WithDType(dt), WithContext(c))
			y := BatchNorm(x, w, b, rm, rv, false, mom, eps)
			rm32, rv32 := rm.Float64s(), rv.Float64s()
			requireClose(t, refBatchNormApply(xv, rm32, rv32, wv, bv, n, ch, s, eps), y.Float64s(), tol, "eval output")
			requireClose(t, wantRM, rm.Float64s(), tol, "eval keeps the running mean")
			// 2-d input: statistics over the batch only; no affine, no running stats.
			x2 := FromSlice(xv[:8*3], Shape{8, 3}, WithDType(dt), WithContext(c))
			m2, v2 := refBatchStats(xv[:8*3], 8, 3, 1)
			requireClose(t, refBatchNormApply(xv[:8*3], m2, v2, nil, nil, 8, 3, 1, eps),
				BatchNorm(x2, nil, nil, nil, nil, true, mom, eps).Float64s(), tol, "2-d")
		})
	}
}

// TestBatchNormRunningStatsInCallerDType checks that running statistics of any dtype
// and layout are updated in place: float64 ones keep float32-accurate values, and a
// strided float32 view is written through to its storage.
func TestBatchNormRunningStatsInCallerDType(t *testing.T) {
	c := NewContext()
	defer c.Close()
	xv := randVals(36, 5*2, 1)
	x := FromSlice(xv, Shape{5, 2}, WithContext(c))
	mean, variance := refBatchStats(xv, 5, 2, 1)
	rm64 := Zeros(Shape{2}, WithDType(Float64), WithContext(c))
	rv64 := Ones(Shape{2}, WithDType(Float64), WithContext(c))
	BatchNorm(x, nil, nil, rm64, rv64, true, 0.5, 1e-5)
	requireClose(t, []float64{0.5 * mean[0], 0.5 * mean[1]}, rm64.Float64s(), 1e-6, "float64 running mean")
	requireClose(t, []float64{0.5 + 0.5*variance[0]*5/4, 0.5 + 0.5*variance[1]*5/4}, rv64.Float64s(), 1e-6, "float64 running var")

	// Column 0 of buf holds the running mean, column 1 the variance: strided views.
	buf := FromSlice([]float32{0, 1, 0, 1}, Shape{2, 2}, WithContext(c))
	col := func(j int) *Tensor { return buf.view(c, Shape{2}, []int{2}, j) }
	BatchNorm(x, nil, nil, col(0), col(1), true, 0.5, 1e-5)
	requireClose(t, []float64{0.5 * mean[0], 0.5 + 0.5*variance[0]*5/4, 0.5 * mean[1], 0.5 + 0.5*variance[1]*5/4},
		buf.Float64s(), 1e-6, "strided running statistics")
}

func TestBatchNormHalf(t *testing.T) {
	const n, ch, s, eps = 8, 4, 9, 1e-5
	xs := Shape{n, ch, 3, 3}
	for _, dt := range []DType{Float16, BFloat16} {
		t.Run(dt.String(), func(t *testing.T) {
			c := NewContext()
			defer c.Close()
			xv := roundTo(randVals(41, xs.Numel(), 3), dt)
			wv, bv := randVals(42, ch, 1), randVals(43, ch, 1)
			mean, variance := refBatchStats(xv, n, ch, s)
			want := refBatchNormApply(xv, mean, variance, wv, bv, n, ch, s, eps)

			// Half activations with FP32 parameters and statistics (O1/O2).
			x := FromSlice(xv, xs, WithDType(dt), WithContext(c), WithGrad())
			w := FromSlice(wv, nil, WithDType(Float32), WithContext(c), WithGrad())
			b := FromSlice(bv, nil, WithDType(Float32), WithContext(c), WithGrad())
			rm, rv := Zeros(Shape{ch}, WithContext(c)), Ones(Shape{ch}, WithContext(c))
			y := BatchNorm(x, w, b, rm, rv, true, 0.1, eps)
			require.Equal(t, dt, y.DType(), "the output has x's dtype")
			requireClose(t, want, y.Float64s(), halfTol(dt), "half x, float32 params")
			require.Equal(t, Float32, rm.DType())
			wantRM := make([]float64, ch)
			for k := range wantRM {
				wantRM[k] = 0.1 * mean[k]
			}
			requireClose(t, wantRM, rm.Float64s(), 1e-6, "float32 running mean from half x")
			y.Cast(Float32).Square().Sum().Backward()
			require.Equal(t, dt, x.Grad().DType())
			require.Equal(t, Float32, w.Grad().DType())
			require.Equal(t, Float32, b.Grad().DType())

			// All-half (O3): parameters and statistics in half too.
			wh := FromSlice(wv, nil, WithDType(dt), WithContext(c), WithGrad())
			bh := FromSlice(bv, nil, WithDType(dt), WithContext(c), WithGrad())
			rmh, rvh := Zeros(Shape{ch}, WithDType(dt), WithContext(c)), Ones(Shape{ch}, WithDType(dt), WithContext(c))
			yh := BatchNorm(x, wh, bh, rmh, rvh, true, 0.1, eps)
			require.Equal(t, dt, yh.DType())
			require.Equal(t, dt, rmh.DType())
			requireClose(t, refBatchNormApply(xv, mean, variance, roundTo(wv, dt), roundTo(bv, dt), n, ch, s, eps),
				yh.Float64s(), halfTol(dt), "all-half")
			requireClose(t, wantRM, rmh.Float64s(), halfTol(dt), "half running mean")
			yh.Cast(Float32).Sum().Backward()
			require.Equal(t, dt, wh.Grad().DType())
			require.Equal(t, dt, bh.Grad().DType())
			// Σ y over a channel is N·S·b, so the bias gradient is N·S.
			require.Equal(t, []float64{n * s, n * s, n * s, n * s}, bh.Grad().Float64s())
		})
	}
}

// TestBatchNormO3Overflow is the reason BatchNorm statistics stay FP32: activations
// around 1e3 have a variance around 1e6, and a float16 running variance overflows.
func TestBatchNormO3Overflow(t *testing.T) {
	c := NewContext()
	defer c.Close()
	xs := Shape{16, 2, 2, 2}
	xv := randVals(51, xs.Numel(), 1000)
	x := FromSlice(xv, xs, WithDType(Float16), WithContext(c))

	rmh, rvh := Zeros(Shape{2}, WithDType(Float16), WithContext(c)), Ones(Shape{2}, WithDType(Float16), WithContext(c))
	w, b := Ones(Shape{2}, WithDType(Float16), WithContext(c)), Zeros(Shape{2}, WithDType(Float16), WithContext(c))
	y := BatchNorm(x, w, b, rmh, rvh, true, 0.1, 1e-5)
	for _, v := range rvh.Float64s() {
		require.True(t, math.IsInf(v, 1), "a float16 running variance of ~1e5 overflows, got %g", v)
	}
	inf, nan, _ := y.NonFiniteStats()
	require.Zero(t, inf+nan, "the batch statistics themselves are FP32, so the output is finite")

	rm, rv := Zeros(Shape{2}, WithContext(c)), Ones(Shape{2}, WithContext(c))
	BatchNorm(x, Ones(Shape{2}, WithContext(c)), Zeros(Shape{2}, WithContext(c)), rm, rv, true, 0.1, 1e-5)
	_, variance := refBatchStats(roundTo(xv, Float16), 16, 2, 4)
	for k, v := range rv.Float64s() {
		require.False(t, math.IsInf(v, 0))
		require.InDelta(t, 0.9+0.1*variance[k]*64/63, v, 1e-6*v)
		require.Greater(t, v, 65504.0, "beyond float16's range")
	}
}

func TestLayerNormForward(t *testing.T) {
	c := NewContext()
	defer c.Close()
	xv := randVals(61, 2*3*4, 2)
	for i := range xv {
		xv[i] += 5 // a mean far from zero
	}
	for _, tc := range []struct {
		ns         Shape
		rows, cols int
	}{{Shape{4}, 6, 4}, {Shape{3, 4}, 2, 12}, {Shape{2, 3, 4}, 1, 24}} {
		wv, bv := randVals(62, tc.cols, 1), randVals(63, tc.cols, 1)
		for _, dt := range []DType{Float64, Float32} {
			x := FromSlice(xv, Shape{2, 3, 4}, WithDType(dt), WithContext(c))
			w := FromSlice(wv, tc.ns, WithDType(dt), WithContext(c))
			b := FromSlice(bv, tc.ns, WithDType(dt), WithContext(c))
			y := LayerNorm(x, tc.ns, w, b, 1e-5)
			require.Equal(t, dt, y.DType())
			require.Equal(t, Shape{2, 3, 4}, y.Shape())
			requireClose(t, refLayerNorm(xv, wv, bv, tc.rows, tc.cols, 1e-5), y.Float64s(), 1e-5, "affine")
			requireClose(t, refLayerNorm(xv, nil, nil, tc.rows, tc.cols, 1e-5), LayerNorm(x, tc.ns, nil, nil, 1e-5).Float64s(), 1e-5, "plain")
		}
	}
}

func TestLayerNormHalfAndAutocast(t *testing.T) {
	c := NewContext()
	defer c.Close()
	xv := roundTo(randVals(64, 4*8, 1), Float16)
	wv, bv := randVals(65, 8, 1), randVals(66, 8, 1)
	want := refLayerNorm(xv, wv, bv, 4, 8, 1e-5)

	// Without autocast a half input with FP32 parameters stays half.
	x := FromSlice(xv, Shape{4, 8}, WithDType(Float16), WithContext(c), WithGrad())
	w := FromSlice(wv, nil, WithDType(Float32), WithContext(c), WithGrad())
	b := FromSlice(bv, nil, WithDType(Float32), WithContext(c), WithGrad())
	y := LayerNorm(x, Shape{8}, w, b, 1e-5)
	require.Equal(t, Float16, y.DType())
	requireClose(t, want, y.Float64s(), halfTol(Float16), "half")
	y.Cast(Float32).Square().Sum().Backward()
	require.Equal(t, Float16, x.Grad().DType())
	require.Equal(t, Float32, w.Grad().DType())

	// Under autocast layer_norm runs in float32.
	ac := c.WithAutocast(castAllPolicy{low: Float16})
	xa := FromSlice(xv, Shape{4, 8}, WithDType(Float16), WithContext(ac))
	ya := LayerNorm(xa, Shape{8}, FromSlice(wv, nil, WithDType(Float16), WithContext(ac)), FromSlice(bv, nil, WithDType(Float32), WithContext(ac)), 1e-5)
	require.Equal(t, Float32, ya.DType())
	requireClose(t, refLayerNorm(xv, roundTo(wv, Float16), bv, 4, 8, 1e-5), ya.Float64s(), 1e-5, "autocast")
}

func TestNormMisuse(t *testing.T) {
	c := NewContext()
	defer c.Close()
	x := Zeros(Shape{4, 3, 2}, WithContext(c))
	v := func(n int) *Tensor { return Ones(Shape{n}, WithContext(c)) }
	for _, tc := range []struct {
		name, want string
		f          func()
	}{
		{"bn wrong channel count", "weight must be [3]", func() { BatchNorm(x, v(4), v(3), nil, nil, true, 0.1, 1e-5) }},
		{"bn wrong running stats", "runningVar must be [3]", func() { BatchNorm(x, nil, nil, v(3), v(2), true, 0.1, 1e-5) }},
		{"bn 1-d input", "input must be [N, C]", func() { BatchNorm(v(3), nil, nil, nil, nil, true, 0.1, 1e-5) }},
		{"bn eval without stats", "eval mode", func() { BatchNorm(x, nil, nil, nil, nil, false, 0.1, 1e-5) }},
		{"bn one running stat", "both runningMean and runningVar", func() { BatchNorm(x, nil, nil, v(3), nil, true, 0.1, 1e-5) }},
		{"bn one value per channel", "more than one value per channel", func() {
			BatchNorm(Zeros(Shape{1, 3}, WithContext(c)), nil, nil, nil, nil, true, 0.1, 1e-5)
		}},
		{"ln shape mismatch", "trailing dimensions", func() { LayerNorm(x, Shape{3}, nil, nil, 1e-5) }},
		{"ln empty shape", "non-empty", func() { LayerNorm(x, Shape{}, nil, nil, 1e-5) }},
		{"ln weight shape", "weight must have the normalized shape", func() { LayerNorm(x, Shape{3, 2}, v(6), nil, 1e-5) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := requireOpError(t, tc.f)
			require.Contains(t, e.Error(), tc.want)
		})
	}
	// One value per channel is fine in eval.
	one := BatchNorm(Zeros(Shape{1, 3}, WithContext(c)), nil, nil, v(3).MulScalar(0), v(3), false, 0.1, 0)
	require.Equal(t, []float64{0, 0, 0}, one.Float64s())
}

// TestNormReleaseMemory checks that no-grad norms keep nothing but their output, and
// that a recorded forward and backward leave nothing once the Context closes.
func TestNormReleaseMemory(t *testing.T) {
	dev := CPUDevice(8)
	before := cpuAllocated(t, dev)
	root := NewContext()
	ng := root.NoGrad()
	x := Randn(Shape{4, 3, 5}, WithDevice(dev), WithContext(ng))
	w := Ones(Shape{3}, WithDType(Float16), WithDevice(dev), WithContext(ng))
	rm, rv := Zeros(Shape{3}, WithDevice(dev), WithContext(ng)), Ones(Shape{3}, WithDevice(dev), WithContext(ng))
	mid := cpuAllocated(t, dev)
	BatchNorm(x, w, nil, rm, rv, true, 0.1, 1e-5)
	BatchNorm(x, w, nil, rm, rv, false, 0.1, 1e-5)
	LayerNorm(x, Shape{5}, nil, nil, 1e-5)
	require.Equal(t, int64(3*x.Numel()*4), cpuAllocated(t, dev)-mid, "only the three outputs stay")
	root.Close()
	require.Equal(t, before, cpuAllocated(t, dev))

	c := NewContext()
	x = Randn(Shape{4, 3, 5}, WithDevice(dev), WithContext(c), WithGrad())
	wg := Ones(Shape{3}, WithDevice(dev), WithContext(c), WithGrad())
	y := BatchNorm(x, wg, nil, nil, nil, true, 0.1, 1e-5)
	LayerNorm(y, Shape{3, 5}, nil, nil, 1e-5).Square().Sum().Backward()
	x.ZeroGrad()
	wg.ZeroGrad()
	c.Close()
	require.Equal(t, before, cpuAllocated(t, dev))
}

// compositeNorm normalises x over dims with the engine's elementwise ops (float64,
// autograd through every step): the reference for the fused kernels' gradients.
func compositeNorm(x, w, b *Tensor, dims []int, eps float64) *Tensor {
	d := x.Sub(x.MeanKeep(dims...))
	y := d.Mul(d.Square().MeanKeep(dims...).AddScalar(eps).Rsqrt())
	return y.Mul(w).Add(b)
}

// TestNormLargeMatchesComposite runs the fused norms on shapes that split their
// kernels over workers (long channel rows for batch norm, many row blocks for layer
// norm) and compares values and all three gradients with the composite.
func TestNormLargeMatchesComposite(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   Shape
	}{
		{"batch_norm long rows", Shape{3, 5, 40, 40}},
		{"batch_norm many channels", Shape{6, 70, 20}},
		{"layer_norm many rows", Shape{300, 4, 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewContext()
			defer c.Close()
			isBN := tc.name[0] == 'b'
			xv := randVals(81, tc.xs.Numel(), 2)
			var ps Shape // parameter shape
			if isBN {
				ps = Shape{tc.xs[1]}
			} else {
				ps = tc.xs[1:]
			}
			wv := roundTo(randVals(82, ps.Numel(), 1), Float32)
			bv := roundTo(randVals(83, ps.Numel(), 1), Float32)
			gv := randVals(84, tc.xs.Numel(), 1)
			run := func(fused bool) (y []float64, grads [3][]float64) {
				x := FromSlice(xv, tc.xs, WithContext(c), WithGrad())
				w := FromSlice(wv, ps, WithContext(c), WithGrad())
				b := FromSlice(bv, ps, WithContext(c), WithGrad())
				var out *Tensor
				switch {
				case fused && isBN:
					out = BatchNorm(x, w, b, nil, nil, true, 0.1, 1e-5)
				case fused:
					out = LayerNorm(x, ps, w, b, 1e-5)
				case isBN:
					// Parameters as [1, C, 1, …]; statistics over every dimension but 1.
					bshape, dims := Shape{1, ps[0]}, []int{0}
					for i := 2; i < len(tc.xs); i++ {
						bshape, dims = append(bshape, 1), append(dims, i)
					}
					out = compositeNorm(x, w.Reshape(bshape...), b.Reshape(bshape...), dims, 1e-5)
				default:
					out = compositeNorm(x, w, b, []int{1, 2}, 1e-5)
				}
				out.Backward(GradOutput(FromSlice(gv, tc.xs, WithContext(c))))
				return out.Float64s(), [3][]float64{x.Grad().Float64s(), w.Grad().Float64s(), b.Grad().Float64s()}
			}
			y, g := run(true)
			wantY, wantG := run(false)
			requireClose(t, wantY, y, 1e-6, "output")
			for i, name := range []string{"gx", "gweight", "gbias"} {
				// Parameter gradients are sums over thousands of terms, stored in float32.
				requireClose(t, wantG[i], g[i], 1e-5, name)
			}
		})
	}
}
