package nn

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/tensor"
)

// halfPolicy is a minimal autocast policy: every op keeps its registry category and
// LowerPrecision ops run in float16 (the CUDA default of the autocast package).
type halfPolicy struct{}

func (halfPolicy) Category(op *tensor.Op, _ tensor.Device) tensor.CastCategory { return op.Category() }
func (halfPolicy) LowDType() tensor.DType                                      { return tensor.Float16 }

// bnNet is a small conv/linear network whose first BatchNorm sees activations of
// magnitude ~1e4 when fed bnInput: their variance (~1e7) is far beyond float16's
// largest finite value, 65504.
func bnNet() (*Sequential, *BatchNorm2d, *BatchNorm1d) {
	g := tensor.NewGenerator(21)
	bn2, bn1 := NewBatchNorm2d(4), NewBatchNorm1d(8)
	m := NewSequential(
		NewConv2d(2, 4, Pair(3), tensor.ConvOptions{Padding: Pair(1)}, Init{Gen: g}),
		bn2, NewReLU(), NewFlatten(),
		NewLinear(4*4*4, 8, Init{Gen: g}), bn1)
	return m, bn2, bn1
}

// bnInput is a batch [8, 2, 4, 4] with values up to ~3e4 (representable in float16).
func bnInput(c *tensor.Context, dt tensor.DType) *tensor.Tensor {
	v := wave(8*2*4*4, 8000)
	for i := range v {
		v[i] *= 1 + 2.5*math.Sin(float64(i)) // spread the magnitudes
	}
	return tensor.FromSlice(v, tensor.Shape{8, 2, 4, 4}, tensor.WithDType(dt), tensor.WithContext(c))
}

// trainSteps runs two training forward/backward passes; mk builds each step's input
// (and may wrap the Context in autocast).
func trainSteps(t *testing.T, m Module, mk func(c *tensor.Context) *tensor.Tensor) (outDType tensor.DType) {
	t.Helper()
	for i := 0; i < 2; i++ {
		ctx := tensor.NewContext()
		y := m.Forward(mk(ctx))
		outDType = y.DType()
		y.Cast(tensor.Float32).Sum().Backward()
		ctx.Close()
	}
	return outDType
}

func stats(p *Param) []float64 { return p.T.Float64s() }

func TestBatchNormStaysFP32UnderHalfCompute(t *testing.T) {
	// Reference: everything in float32.
	ref, ref2, _ := bnNet()
	trainSteps(t, ref, func(c *tensor.Context) *tensor.Tensor { return bnInput(c, tensor.Float32) })
	refVar := stats(ref2.RunningVar)
	for _, v := range refVar {
		require.Greater(t, v, 65504.0, "the test needs running variances beyond the float16 range")
	}

	for _, tc := range []struct {
		name  string
		setup func(m Module)
		input func(c *tensor.Context) *tensor.Tensor
	}{
		{
			// O1: float32 model, float16 compute through autocast.
			"autocast", func(Module) {},
			func(c *tensor.Context) *tensor.Tensor {
				return c.WithAutocast(halfPolicy{}).Bind(bnInput(c, tensor.Float16))
			},
		},
		{
			// O2: float16 model except BatchNorm, float16 input.
			"cast model", func(m Module) { Cast(m, tensor.Float16) },
			func(c *tensor.Context) *tensor.Tensor { return bnInput(c, tensor.Float16) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, bn2, bn1 := bnNet()
			tc.setup(m)
			out := trainSteps(t, m, tc.input)
			assert.Equal(t, tensor.Float16, out, "BatchNorm casts its output back to the compute dtype")
			for _, bn := range []*BatchNorm{&bn2.BatchNorm, &bn1.BatchNorm} {
				for _, p := range append(bn.Params(), bn.RunningMean, bn.RunningVar) {
					assert.Equal(t, tensor.Float32, p.T.DType(), p.Name)
					assert.True(t, allFinite(stats(p)), "%s stays finite: %v", p.Name, stats(p))
				}
				for _, p := range bn.Params() {
					require.NotNil(t, p.Grad(), p.Name)
					assert.Equal(t, tensor.Float32, p.Grad().DType(), p.Name)
					assert.True(t, allFinite(p.Grad().Float64s()), "gradient of %s", p.Name)
				}
			}
			// Half compute only rounds the statistics a little.
			requireClose(t, refVar, stats(bn2.RunningVar), 1e-2)
			requireClose(t, stats(ref2.RunningMean), stats(bn2.RunningMean), 1e-2)
		})
	}

	t.Run("pure float16 model overflows", func(t *testing.T) {
		// O3: the same network cast entirely to float16 keeps float16 statistics, which
		// cannot hold the variance: the running variance becomes Inf (and NaN follows).
		m, bn2, _ := bnNet()
		CastAll(m, tensor.Float16)
		trainSteps(t, m, func(c *tensor.Context) *tensor.Tensor { return bnInput(c, tensor.Float16) })
		require.Equal(t, tensor.Float16, bn2.RunningVar.T.DType())
		inf, nan, _ := bn2.RunningVar.T.NonFiniteStats()
		assert.Equal(t, bn2.Features, inf+nan, "float16 running variance %v", stats(bn2.RunningVar))
	})
}
