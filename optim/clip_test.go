package optim

import (
	"math"
	"testing"

	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

func TestClipGradNorm(t *testing.T) {
	mk := func() []*tensor.Tensor {
		return []*tensor.Tensor{
			tensor.FromSlice([]float32{3, -4}, nil),
			nil,
			tensor.FromSlice([]float32{-12}, tensor.Shape{1, 1}),
		}
	}
	cases := []struct {
		name     string
		maxNorm  float64
		normType float64
		total    float64
		coef     float64 // expected scale factor, 1 when untouched
	}{
		{"2-norm clipped", 6.5, 2, 13, 6.5 / (13 + 1e-6)},
		{"2-norm under max", 20, 2, 13, 1},
		{"inf-norm clipped", 6, math.Inf(1), 12, 6 / (12 + 1e-6)},
		{"1-norm clipped", 9.5, 1, 19, 9.5 / (19 + 1e-6)},
		{"3-norm", 100, 3, math.Cbrt(27 + 64 + 1728), 1},
		{"infinite max measures only", math.Inf(1), 2, 13, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gs := mk()
			total := ClipGradNorm(gs, c.maxNorm, c.normType)
			require.InDelta(t, c.total, total, 1e-12*c.total)
			want := []float32{float32(3 * c.coef), float32(-4 * c.coef), float32(-12 * c.coef)}
			got := append(gs[0].Float32s(), gs[2].Float32s()...)
			require.InDeltaSlice(t, want, got, 1e-6)
			if c.coef == 1 {
				require.Equal(t, []float32{3, -4, -12}, got, "untouched bit for bit")
			}
		})
	}
}

func TestClipGradNormNonFinite(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bad      float64
		normType float64
		want     float64
	}{
		{"inf 2-norm", math.Inf(1), 2, math.Inf(1)},
		{"-inf 2-norm", math.Inf(-1), 2, math.Inf(1)},
		{"nan 2-norm", math.NaN(), 2, math.NaN()},
		{"inf inf-norm", math.Inf(-1), math.Inf(1), math.Inf(1)},
		{"nan inf-norm", math.NaN(), math.Inf(1), math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tensor.FromSlice([]float32{30, 40}, nil)
			b := tensor.FromSlice([]float64{1, tc.bad}, nil, tensor.WithDType(tensor.Float32))
			before := append(bits(a), bits(b)...)
			total := ClipGradNorm([]*tensor.Tensor{a, b}, 1, tc.normType)
			if math.IsNaN(tc.want) {
				require.True(t, math.IsNaN(total))
			} else {
				require.Equal(t, tc.want, total)
			}
			require.Equal(t, before, append(bits(a), bits(b)...), "gradients left untouched: the scaler skips the step")
		})
	}
}

// TestClipGradNormFloat64Accumulation checks that float32 gradients whose squares
// overflow float32 still have a finite norm, and that half gradients are measured.
func TestClipGradNormFloat64Accumulation(t *testing.T) {
	g := tensor.FromSlice([]float32{3e30, 4e30}, nil)
	total := ClipGradNorm([]*tensor.Tensor{g}, 5e30, 2)
	require.InEpsilon(t, 5e30, total, 1e-7, "3e30 and 4e30 round to float32")
	h := tensor.FromSlice([]float32{300, 400}, nil, tensor.WithDType(tensor.Float16))
	require.Equal(t, 500.0, ClipGradNorm([]*tensor.Tensor{h}, 50, 2))
	require.InDeltaSlice(t, []float64{30, 40}, h.Float64s(), 0.05)
	require.Equal(t, 0.0, ClipGradNorm(nil, 1, 2))
}

func TestClipGradNormMisuse(t *testing.T) {
	g := []*tensor.Tensor{tensor.FromSlice([]float32{1}, nil)}
	require.Panics(t, func() { ClipGradNorm(g, -1, 2) })
	require.Panics(t, func() { ClipGradNorm(g, 1, 0) })
	require.Panics(t, func() { ClipGradNorm(g, 1, math.NaN()) })
}
