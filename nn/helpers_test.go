package nn

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/tensor"
)

// wave returns n deterministic values in [-scale, scale] that are not a simple ramp,
// each exactly representable in float32.
func wave(n int, scale float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(float32(scale * math.Sin(0.7*float64(i)+0.3) * math.Cos(0.13*float64(i))))
	}
	return v
}

// set copies vals into p's tensor.
func set(p *Param, vals []float64) {
	src := tensor.FromSlice(vals, p.T.Shape())
	p.T.CopyFrom(src)
	src.Release()
}

// input builds a float32 tensor of the given shape from vals inside c.
func input(c *tensor.Context, vals []float64, shape ...int) *tensor.Tensor {
	return tensor.FromSlice(vals, tensor.Shape(shape), tensor.WithDType(tensor.Float32), tensor.WithContext(c))
}

// requireClose checks got against want elementwise with a relative-and-absolute tolerance.
func requireClose(t *testing.T, want, got []float64, tol float64, msgAndArgs ...any) {
	t.Helper()
	require.Len(t, got, len(want), msgAndArgs...)
	for i := range want {
		if math.Abs(want[i]-got[i]) > tol*(1+math.Abs(want[i])) {
			require.Failf(t, "values differ", "element %d: want %g, got %g (tolerance %g) %v", i, want[i], got[i], tol, msgAndArgs)
		}
	}
}

// allFinite reports whether every value is finite.
func allFinite(v []float64) bool {
	for _, x := range v {
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return false
		}
	}
	return true
}
