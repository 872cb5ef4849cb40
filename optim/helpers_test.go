package optim

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// shapes of the two test parameters.
var testShapes = []tensor.Shape{{2, 3}, {4}}

func initValues(i int, s tensor.Shape) []float64 {
	v := make([]float64, s.Numel())
	for j := range v {
		v[j] = math.Cos(float64(j) + 0.5*float64(i))
	}
	return v
}

// gradValues is the gradient of parameter i at step k (1-based); nil for parameter 1 at
// step 2, to check that a parameter without a gradient is left alone.
func gradValues(k, i int, s tensor.Shape) []float64 {
	if k == 2 && i == 1 {
		return nil
	}
	v := make([]float64, s.Numel())
	for j := range v {
		v[j] = 0.8 * math.Sin(1.3*float64(k)+0.7*float64(j)+float64(i))
	}
	return v
}

// makeParams builds the test parameters in dtype dt.
func makeParams(dt tensor.DType) []*nn.Param {
	var ps []*nn.Param
	for i, s := range testShapes {
		ps = append(ps, &nn.Param{Name: []string{"w", "b"}[i], T: tensor.FromSlice(initValues(i, s), s, tensor.WithDType(dt), tensor.WithGrad())})
	}
	return ps
}

// setGrads sets the step-k gradients in the parameters' dtype and returns them as the
// float64 values the parameters actually hold (rounded to the dtype).
func setGrads(ps []*nn.Param, k int) [][]float64 {
	out := make([][]float64, len(ps))
	for i, p := range ps {
		v := gradValues(k, i, p.T.Shape())
		if v == nil {
			p.T.ZeroGrad()
			continue
		}
		g := tensor.FromSlice(v, p.T.Shape(), tensor.WithDType(p.T.DType()))
		p.T.SetGrad(g)
		out[i] = g.Float64s()
	}
	return out
}

func values(ps []*nn.Param) [][]float64 {
	out := make([][]float64, len(ps))
	for i, p := range ps {
		out[i] = p.T.Float64s()
	}
	return out
}

func requireClose(t *testing.T, want, got [][]float64, tol float64, msg string) {
	t.Helper()
	require.Equal(t, len(want), len(got))
	for i := range want {
		require.Equal(t, len(want[i]), len(got[i]))
		for j := range want[i] {
			w, g := want[i][j], got[i][j]
			require.InDelta(t, w, g, tol*math.Max(1, math.Abs(w)), "%s: param %d elem %d", msg, i, j)
		}
	}
}

// bits returns the raw bits of t (any floating dtype) for bit-exact comparisons.
func bits(t *tensor.Tensor) []uint64 {
	switch t.DType() {
	case tensor.Float16, tensor.BFloat16:
		var out []uint64
		for _, b := range t.Uint16s() {
			out = append(out, uint64(b))
		}
		return out
	case tensor.Float64:
		var out []uint64
		for _, v := range t.Float64s() {
			out = append(out, math.Float64bits(v))
		}
		return out
	}
	var out []uint64
	for _, v := range t.Float32s() {
		out = append(out, uint64(math.Float32bits(v)))
	}
	return out
}

// requireStateEqual checks that two states hold the same scalars and bit-identical
// tensors.
func requireStateEqual(t *testing.T, a, b State) {
	t.Helper()
	require.Equal(t, a.Scalars, b.Scalars)
	require.Equal(t, len(a.Tensors), len(b.Tensors))
	for k, ta := range a.Tensors {
		tb, ok := b.Tensors[k]
		require.True(t, ok, k)
		require.Equal(t, ta.DType(), tb.DType(), k)
		require.Equal(t, bits(ta), bits(tb), k)
	}
}

// dtypeTol is the tolerance of the engine against a float64 reference.
func dtypeTol(dt tensor.DType) float64 {
	if dt == tensor.Float64 {
		return 1e-13
	}
	return 2e-6
}

// cosParams returns parameters of the given shapes in dtype dt, element j of
// parameter i holding cos(0.37·j + i).
func cosParams(dt tensor.DType, shapes []tensor.Shape) []*nn.Param {
	var ps []*nn.Param
	for i, s := range shapes {
		v := make([]float64, s.Numel())
		for j := range v {
			v[j] = math.Cos(float64(j)*0.37 + float64(i))
		}
		ps = append(ps, &nn.Param{Name: fmt.Sprint("p", i), T: tensor.FromSlice(v, s, tensor.WithDType(dt), tensor.WithGrad())})
	}
	return ps
}

// sinGrad returns step k's gradient values for parameter i of n elements:
// 0.9·sin(1.1·k + 0.3·j + i), every 97th from the 5th scaled by 1e-6 (tiny values,
// subnormal in float16, that exercise the roundings).
func sinGrad(k, i, n int) []float64 {
	v := make([]float64, n)
	for j := range v {
		v[j] = 0.9 * math.Sin(1.1*float64(k)+0.3*float64(j)+float64(i))
		if j%97 == 5 {
			v[j] *= 1e-6
		}
	}
	return v
}

// requireRunsAgree runs each mode and requires the parameters (bit for bit) and the
// optimizer state of every later run to equal the first's.
func requireRunsAgree(t *testing.T, run func(mode string) ([]*nn.Param, Optimizer), modes ...string) {
	t.Helper()
	p0, o0 := run(modes[0])
	for _, m := range modes[1:] {
		p, o := run(m)
		for i := range p0 {
			require.Equal(t, bits(p[i].T), bits(p0[i].T), "parameter %d: %s vs %s", i, modes[0], m)
		}
		requireStateEqual(t, o.StateDict(), o0.StateDict())
	}
}
