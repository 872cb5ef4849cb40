package models

import (
	"math"
	"testing"

	"github.com/gamp-ml/gamp/autocast"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

var tinyGPT = GPTConfig{Vocab: 11, Context: 9, Dim: 16, Heads: 2, Layers: 2}

// gptLoss runs m on ids [n, t] (targets: ids shifted) in c and returns the loss.
func gptLoss(c *tensor.Context, m *GPT, ids *tensor.Tensor) *tensor.Tensor {
	logits := m.Forward(ids)
	s := logits.Shape()
	tgt := c.Bind(ids).Slice(1, 1, s[1], 1).Reshape(s[0] * (s[1] - 1))
	return tensor.CrossEntropy(logits.Slice(1, 0, s[1]-1, 1).Reshape(s[0]*(s[1]-1), s[2]), tgt, 0)
}

// Logits have shape [N, T, Vocab] and every parameter gets an FP32 gradient, in FP32
// and under BF16 autocast, with and without weight tying.
func TestGPTForwardBackward(t *testing.T) {
	for _, tie := range []bool{false, true} {
		cfg := tinyGPT
		cfg.TieWeights = tie
		m := NewGPT(cfg, nn.Seeded(1))
		for _, pol := range []*autocast.Policy{nil, ptr(autocast.Half(tensor.BFloat16))} {
			c := tensor.NewContext()
			region := c
			if pol != nil {
				region = autocast.Enter(c, *pol)
			}
			ids := region.Bind(tokens(c, 3, 9, 11))
			out := m.Forward(ids)
			require.Equal(t, tensor.Shape{3, 9, 11}, out.Shape())
			gptLoss(region, m, ids).Backward()
			for _, p := range m.Params() {
				require.NotNil(t, p.Grad(), "%s has no gradient", p.Name)
				require.Equal(t, tensor.Float32, p.Grad().DType())
				p.T.ZeroGrad()
			}
			region.Close()
			c.Close()
		}
		names := map[string]bool{}
		for _, p := range m.Params() {
			names[p.Name] = true
		}
		require.Equal(t, !tie, names["head.weight"])
		for _, want := range []string{"tok.weight", "pos", "blocks.0.attn.qkv.weight", "blocks.1.attn.proj.bias", "blocks.0.fc2.weight", "lnf.weight"} {
			require.True(t, names[want], "missing %s in %v", want, names)
		}
	}
}

// A token never influences the logits of earlier positions.
func TestGPTIsCausal(t *testing.T) {
	m := nn.Eval(NewGPT(tinyGPT, nn.Seeded(2)))
	c := tensor.NewContext(tensor.NoGradMode())
	defer c.Close()
	a := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}
	b := append([]int64(nil), a...)
	b[5] = 0
	la := m.Forward(tensor.FromSlice(a, tensor.Shape{1, 9}, tensor.WithContext(c))).Float64s()
	lb := m.Forward(tensor.FromSlice(b, tensor.Shape{1, 9}, tensor.WithContext(c))).Float64s()
	require.Equal(t, la[:5*11], lb[:5*11], "positions before the change")
	require.NotEqual(t, la[5*11:6*11], lb[5*11:6*11], "the changed position")
}

// The fused attention, the composed ops and activation checkpointing give the same loss
// and gradients (FP32, to rounding).
func TestGPTFusedComposedCheckpointAgree(t *testing.T) {
	run := func(cfg GPTConfig) (float64, map[string][]float64) {
		m := NewGPT(cfg, nn.Seeded(3))
		c := tensor.NewContext()
		defer c.Close()
		l := gptLoss(c, m, tokens(c, 2, 9, 11))
		l.Backward()
		gs := map[string][]float64{}
		for _, p := range m.Params() {
			gs[p.Name] = p.Grad().Float64s()
		}
		return l.Item(), gs
	}
	l0, g0 := run(tinyGPT)
	for _, cfg := range []GPTConfig{{Composed: true}, {Checkpoint: true}} {
		cfg.Vocab, cfg.Context, cfg.Dim, cfg.Heads, cfg.Layers = tinyGPT.Vocab, tinyGPT.Context, tinyGPT.Dim, tinyGPT.Heads, tinyGPT.Layers
		l1, g1 := run(cfg)
		require.InDelta(t, l0, l1, 1e-5)
		require.InDelta(t, math.Log(11), l0, 0.1, "initial loss is about log(vocab)")
		for name, g := range g0 {
			for i := range g {
				require.InDelta(t, g[i], g1[name][i], 1e-5+1e-4*math.Abs(g[i]), "%s[%d] with %+v", name, i, cfg)
			}
		}
	}
}

func TestGPTMisuse(t *testing.T) {
	m := NewGPT(tinyGPT, nn.Seeded(1))
	c := tensor.NewContext()
	defer c.Close()
	require.Panics(t, func() { m.Forward(tokens(c, 2, 10, 11)) }, "longer than Context")
	require.Panics(t, func() { NewGPT(GPTConfig{Dim: 10, Heads: 4}, nn.Init{}) })
	require.Panics(t, func() { NewGPT(GPTConfig{Dropout: 1}, nn.Init{}) })
}
