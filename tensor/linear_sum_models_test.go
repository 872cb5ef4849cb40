package tensor_test

import (
	"math"
	"testing"

	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// TestLinearBiasInGemmTraining runs float32 training steps (forward, cross-entropy,
// backward, SGD with momentum) of models.MLP and a small models.NewTransformer with
// the bias gradients from the weight gradients' GEMMs and from Reduce: every loss,
// gradient and parameter must have the same bits.
func TestLinearBiasInGemmTraining(t *testing.T) {
	defer func(v bool) { *tensor.LinearBiasInGemm = v }(*tensor.LinearBiasInGemm)
	cases := []struct {
		name  string
		model func() nn.Module
		input func(c *tensor.Context) *tensor.Tensor
	}{
		{"mlp", func() nn.Module { return models.MLP(784, []int{256, 64}, 10, nn.Seeded(1)) }, func(c *tensor.Context) *tensor.Tensor {
			return tensor.Randn(tensor.Shape{96, 784}, tensor.WithContext(c))
		}},
		{"transformer", func() nn.Module {
			return models.NewTransformer(models.TransformerConfig{Vocab: 50, SeqLen: 24, Dim: 32, Heads: 4, Layers: 2}, nn.Seeded(1))
		}, func(c *tensor.Context) *tensor.Tensor {
			ids := make([]int64, 8*24)
			for i := range ids {
				ids[i] = int64((i*7919 + 13) % 50)
			}
			return tensor.FromSlice(ids, tensor.Shape{8, 24}, tensor.WithContext(c))
		}},
	}
	for _, tc := range cases {
		run := func(inGemm bool) (out [][]uint32) {
			*tensor.LinearBiasInGemm = inGemm
			m := tc.model()
			opt, err := optim.NewSGD(m.Params(), optim.SGDConfig{LR: 0.05, Momentum: 0.9})
			require.NoError(t, err)
			for step := range 3 {
				c := tensor.NewContext(tensor.UseGenerator(tensor.NewGenerator(uint64(step + 1))))
				labels := make([]int64, 0, 96)
				x := tc.input(c)
				for i := range x.Shape()[0] {
					labels = append(labels, int64(i%10))
				}
				loss := tensor.CrossEntropy(m.Forward(x), tensor.FromSlice(labels, nil, tensor.WithContext(c)), 0)
				loss.Backward()
				out = append(out, bits(loss.Float32s()))
				for _, p := range m.Params() {
					out = append(out, bits(p.Grad().Float32s()))
				}
				opt.Step()
				for _, p := range m.Params() {
					out = append(out, bits(p.T.Float32s()))
					p.T.ZeroGrad()
				}
				c.Close()
			}
			return out
		}
		want, got := run(false), run(true)
		require.Equal(t, len(want), len(got), tc.name)
		for i := range want {
			require.Equal(t, want[i], got[i], "%s: value %d", tc.name, i)
		}
	}
}

func bits(v []float32) []uint32 {
	u := make([]uint32, len(v))
	for i, x := range v {
		u[i] = math.Float32bits(x)
	}
	return u
}
