package models

import (
	"testing"

	"github.com/gamp-ml/gamp/autocast"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

func tokens(c *tensor.Context, n, t, vocab int) *tensor.Tensor {
	ids := make([]int64, n*t)
	for i := range ids {
		ids[i] = int64((i*7919 + 13) % vocab)
	}
	return tensor.FromSlice(ids, tensor.Shape{n, t}, tensor.WithContext(c))
}

// Every model produces [N, classes] and gradients reach every parameter, in FP32 and
// under bf16 autocast.
func TestModelsForwardBackward(t *testing.T) {
	cases := []struct {
		name  string
		model nn.Module
		input func(c *tensor.Context) *tensor.Tensor
	}{
		{"mlp", MLP(784, []int{64, 32}, 10, nn.Seeded(1)), func(c *tensor.Context) *tensor.Tensor {
			return tensor.Randn(tensor.Shape{4, 784}, tensor.WithContext(c))
		}},
		{"cnn", FashionCNN(CNNConfig{C1: 4, C2: 8, Hidden: 16}, nn.Seeded(1)), func(c *tensor.Context) *tensor.Tensor {
			return tensor.Randn(tensor.Shape{4, 1, 28, 28}, tensor.WithContext(c))
		}},
		{"transformer", NewTransformer(TransformerConfig{Vocab: 50, SeqLen: 12, Dim: 16, Heads: 4, Layers: 2}, nn.Seeded(1)), func(c *tensor.Context) *tensor.Tensor {
			return tokens(c, 4, 12, 50)
		}},
	}
	for _, tc := range cases {
		for _, pol := range []*autocast.Policy{nil, ptr(autocast.Half(tensor.BFloat16))} {
			c := tensor.NewContext(tensor.UseGenerator(tensor.NewGenerator(1)))
			region := c
			if pol != nil {
				region = autocast.Enter(c, *pol)
			}
			out := tc.model.Forward(region.Bind(tc.input(c)))
			require.Equal(t, tensor.Shape{4, 10}, out.Shape(), tc.name)
			want := tensor.Float32
			if pol != nil {
				want = tensor.BFloat16
			}
			require.Equal(t, want, out.DType(), tc.name)
			labels := tensor.FromSlice([]int64{1, 2, 3, 4}, nil, tensor.WithContext(c))
			tensor.CrossEntropy(out, region.Bind(labels), 0).Backward()
			for _, p := range tc.model.Params() {
				require.NotNil(t, p.Grad(), "%s: %s has no gradient", tc.name, p.Name)
				require.Equal(t, tensor.Float32, p.Grad().DType())
				p.T.ZeroGrad()
			}
			region.Close()
			c.Close()
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestTransformerNamesAndMisuse(t *testing.T) {
	m := NewTransformer(TransformerConfig{Vocab: 20, SeqLen: 8, Dim: 8, Heads: 2, Layers: 1}, nn.Seeded(2))
	names := map[string]bool{}
	for _, p := range m.Params() {
		names[p.Name] = true
	}
	for _, want := range []string{"tok.weight", "pos", "blocks.0.attn.qkv.weight", "blocks.0.fc2.bias", "head.weight"} {
		require.True(t, names[want], "missing parameter %s in %v", want, names)
	}
	c := tensor.NewContext()
	defer c.Close()
	require.Panics(t, func() { m.Forward(tokens(c, 2, 9, 20)) }, "longer than SeqLen")
	require.Panics(t, func() { NewTransformer(TransformerConfig{Dim: 10, Heads: 4}, nn.Init{}) })
}
