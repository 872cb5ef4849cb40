package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The values below are PyTorch 1.13's (Debian python3-torch), printed by:
//
//	x = torch.tensor(rows, dtype=torch.float64, requires_grad=True)
//	l = F.cross_entropy(x, torch.tensor(labels), label_smoothing=eps, reduction=red)
//	l.sum().backward(); print(l.tolist(), x.grad.tolist())

// TestCrossEntropyMaskedLogit is issue 16's report: a -Inf logit (a masked class) gave
// NaN because the one-hot target multiplied its -Inf log-probability by 0.
func TestCrossEntropyMaskedLogit(t *testing.T) {
	inf := math.Inf(1)
	for _, dt := range []DType{Float64, Float32} {
		c := NewContext()
		x := FromSlice([]float64{0, -inf, 1}, Shape{1, 3}, WithDType(dt), WithGrad(), WithContext(c))
		l := CrossEntropy(x, FromSlice([]int64{0}, nil, WithContext(c)), 0)
		require.InDelta(t, 1.31326162815094, l.Item(), 1e-6, "%s", dt)
		l.Backward()
		g := x.Grad().Float64s()
		require.InDelta(t, -0.7310585975646973, g[0], 1e-6)
		require.Equal(t, 0.0, g[1], "the masked class's gradient is exactly 0")
		require.InDelta(t, 0.7310585975646973, g[2], 1e-6)
		c.Close()
	}
}

func TestCrossEntropyMatchesTorchWithMaskAndIgnore(t *testing.T) {
	inf := math.Inf(1)
	rows := []float64{0, -inf, 1, 2, 0.5, -1, 0.3, 0.1, 0.2, 1.5, -inf, -inf}
	labels := []int64{0, -100, 1, 0}
	gradNoSmooth := []float64{-0.7310585786300049, 0, 0.7310585786300049, 0, 0, 0, 0.3671654011109255, -0.6993903946442727, 0.33222499353334733, 0, 0, 0}
	gradSmooth := []float64{-0.5977252452966716, -0.06666666666666667, 0.6643919119633382, 0, 0, 0, 0.30049873444425884, -0.5660570613109394, 0.2655583268666807, 0.1333333333333333, -0.06666666666666667, -0.06666666666666667}
	for _, tc := range []struct {
		eps  float64
		red  Reduction
		loss []float64
		grad []float64 // for the summed loss; the mean's is it over 3 counted labels
	}{
		{0, ReductionMean, []float64{0.8384015119158222}, gradNoSmooth},
		{0, ReductionSum, []float64{2.5152045357474666}, gradNoSmooth},
		{0, ReductionNone, []float64{1.3132616875182228, 0, 1.201942848229244, 0}, gradNoSmooth},
		{0.2, ReductionMean, []float64{inf}, gradSmooth},
		{0.2, ReductionSum, []float64{inf}, gradSmooth},
		{0.2, ReductionNone, []float64{inf, 0, 1.181942848229244, inf}, gradSmooth},
	} {
		c := NewContext()
		x := FromSlice(rows, Shape{4, 3}, WithGrad(), WithContext(c))
		l := CrossEntropyWith(x, FromSlice(labels, nil, WithContext(c)), CrossEntropyOptions{
			Smoothing: tc.eps, Reduction: tc.red, Ignore: true, IgnoreIndex: DefaultIgnoreIndex})
		got := l.Float64s()
		for i, w := range tc.loss {
			if math.IsInf(w, 1) {
				require.True(t, math.IsInf(got[i], 1), "eps %g %s loss[%d] = %g", tc.eps, tc.red, i, got[i])
				continue
			}
			require.InDelta(t, w, got[i], 1e-12, "eps %g %s loss[%d]", tc.eps, tc.red, i)
		}
		l.Sum().Backward()
		want := append([]float64(nil), tc.grad...)
		if tc.red == ReductionMean {
			for i := range want {
				want[i] /= 3
			}
		}
		requireClose(t, want, x.Grad().Float64s(), 1e-12, tc.red.String())
		c.Close()
	}
}

func TestCrossEntropyIgnoreIndex(t *testing.T) {
	c := NewContext()
	defer c.Close()
	// Smoothing with an ignored label: the mean counts the two other labels.
	x := FromSlice([]float64{2, 0.5, -1, 0.3, 0.1, 0.2, 1, 2, 3}, Shape{3, 3}, WithGrad(), WithContext(c))
	l := CrossEntropyWith(x, FromSlice([]int64{1, -100, 2}, nil, WithContext(c)),
		CrossEntropyOptions{Smoothing: 0.2, Ignore: true, IgnoreIndex: DefaultIgnoreIndex})
	require.InDelta(t, 1.174458630550769, l.Item(), 1e-12)
	l.Backward()
	requireClose(t, []float64{0.3594651839613046, -0.345688137263315, -0.013777046697989608, 0, 0, 0,
		0.011681953251856884, 0.08903090219406548, -0.10071285544592246}, x.Grad().Float64s(), 1e-12, "grad")

	// A class index as ignore_index (padding id 3 of 3 classes is out of range, so use 1).
	y := FromSlice([]float64{0, 5, 1, 1, 2, 3}, Shape{2, 3}, WithGrad(), WithContext(c))
	l = CrossEntropyWith(y, FromSlice([]int32{1, 1}, nil, WithContext(c)), CrossEntropyOptions{Ignore: true, IgnoreIndex: 1})
	require.True(t, math.IsNaN(l.Item()), "every label ignored: the mean is 0/0, as in PyTorch")
	l.Backward()
	require.Equal(t, make([]float64, 6), y.Grad().Float64s(), "ignored rows get no gradient")

	// Without Ignore, -100 is still a bad label.
	e := requireOpError(t, func() { CrossEntropy(x, FromSlice([]int64{1, -100, 2}, nil, WithContext(c)), 0) })
	require.Contains(t, e.Error(), "label -100 at position 1")
	require.Contains(t, e.Error(), "Ignore")
}

func TestCrossEntropySpatialIgnore(t *testing.T) {
	// [N, C, d] with an ignored position equals the counted rows laid out as [k, C].
	c := NewContext()
	defer c.Close()
	sp := randVals(21, 2*3*4, 1)
	xs := FromSlice(sp, Shape{2, 3, 4}, WithContext(c))
	lab := FromSlice([]int64{0, 7, 2, 1, 7, 2, 0, 0}, Shape{2, 4}, WithContext(c))
	o := CrossEntropyOptions{Smoothing: 0.1, Ignore: true, IgnoreIndex: 7}
	got := CrossEntropyWith(xs, lab, o).Item()
	rows := xs.Permute(0, 2, 1).Reshape(8, 3).IndexSelect(0, FromSlice([]int64{0, 2, 3, 5, 6, 7}, nil, WithContext(c)))
	want := CrossEntropy(rows, FromSlice([]int64{0, 2, 1, 2, 0, 0}, nil, WithContext(c)), 0.1).Item()
	require.InDelta(t, want, got, 1e-12)
	o.Reduction = ReductionNone
	none := CrossEntropyWith(xs, lab, o)
	require.Equal(t, Shape{2, 4}, none.Shape())
	require.Equal(t, 0.0, none.Float64s()[1])
	require.Equal(t, 0.0, none.Float64s()[4])
}

// TestCrossEntropyLabelsOnlyBits checks that the backward's subtraction of the target
// at the labels alone gives the full subtraction's gradient bit for bit: float32 and
// float64 logits with wide magnitudes, -Inf (masked) classes, NaN and +Inf logits in
// some rows, [N, C] and [N, C, d] layouts and every reduction.
func TestCrossEntropyLabelsOnlyBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, dt := range []DType{Float32, Float64} {
		for _, shape := range []Shape{{300, 113}, {7, 5, 9}} {
			for _, red := range []Reduction{ReductionMean, ReductionSum, ReductionNone} {
				n := shape.Numel()
				xs := make([]float64, n)
				for i := range xs {
					xs[i] = rng.NormFloat64() * math.Ldexp(1, rng.IntN(12)-4)
				}
				xs[3], xs[17], xs[n/2], xs[n-1] = math.Inf(-1), math.Inf(-1), math.NaN(), math.Inf(1)
				labShape := Shape{shape[0]}
				classes := shape[1]
				if len(shape) == 3 {
					labShape = Shape{shape[0], shape[2]}
				}
				labs := make([]int64, labShape.Numel())
				for i := range labs {
					labs[i] = int64(rng.IntN(classes))
				}
				grad := func(labelsOnly bool) []float64 {
					defer func(v bool) { ceLabelsOnly = v }(ceLabelsOnly)
					ceLabelsOnly = labelsOnly
					c := NewContext()
					defer c.Close()
					x := FromSlice(xs, shape, WithDType(dt), WithGrad(), WithContext(c))
					l := CrossEntropyWith(x, FromSlice(labs, labShape, WithContext(c)), CrossEntropyOptions{Reduction: red})
					l.Sum().Backward()
					return x.Grad().Float64s()
				}
				got, want := grad(true), grad(false)
				for i := range want {
					if math.Float64bits(got[i]) != math.Float64bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
						t.Fatalf("%s %v reduction %d: gradient [%d] = %v, full subtraction %v", dt, shape, red, i, got[i], want[i])
					}
				}
			}
		}
	}
}
