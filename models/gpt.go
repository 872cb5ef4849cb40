package models

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/checkpoint"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// GPTConfig sizes a GPT; zero fields take the defaults, which are the CPU defaults of
// examples/chargpt.
type GPTConfig struct {
	Vocab   int     // token ids are in [0, Vocab) (default 256)
	Context int     // maximum sequence length (default 128)
	Dim     int     // model width (default 128)
	Heads   int     // attention heads; must divide Dim (default 4)
	Layers  int     // transformer blocks (default 4)
	Dropout float64 // after the embeddings, the attention output and the MLP
	// TieWeights makes the output head reuse the token embedding matrix (as GPT-2).
	TieWeights bool
	// Composed computes attention from matmul, mask and softmax (tensor.ComposedAttention)
	// instead of the fused op: for comparisons, it needs memory quadratic in Context.
	Composed bool
	// Checkpoint recomputes each block in the backward pass instead of keeping its
	// activations (activation checkpointing).
	Checkpoint bool
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c GPTConfig) WithDefaults() GPTConfig {
	c.Vocab, c.Context, c.Dim = or(c.Vocab, 256), or(c.Context, 128), or(c.Dim, 128)
	c.Heads, c.Layers = or(c.Heads, 4), or(c.Layers, 4)
	return c
}

// GPT is a decoder-only transformer language model, nanoGPT's: token embedding plus a
// learned position embedding, Layers pre-LayerNorm blocks [LayerNorm → causal
// multi-head self-attention → residual, LayerNorm → Linear-GELU-Linear → residual], a
// final LayerNorm and a linear head to Vocab logits. Input: Int64 token ids [N, T] with
// T ≤ Context; output: logits [N, T, Vocab].
//
// Parameter names (tok.weight, pos, blocks.0.attn.qkv.weight, …, lnf.weight,
// head.weight) match scripts/torch_chargpt.py's module, so a state dict moves between
// the two as a safetensors file.
type GPT struct {
	nn.Base
	cfg    GPTConfig
	tok    *nn.Embedding
	pos    *nn.Param
	drop   *nn.Dropout
	blocks *nn.Sequential
	lnf    *nn.LayerNorm
	head   *nn.Linear // nil with TieWeights
}

// NewGPT builds the model with nanoGPT's initialisation: N(0, 0.02) weights and
// embeddings, zero biases, and N(0, 0.02/√(2·Layers)) for the projections that feed
// the residual stream. It panics on a configuration whose Dim is not divisible by Heads.
func NewGPT(cfg GPTConfig, init nn.Init) *GPT {
	cfg = cfg.WithDefaults()
	if cfg.Dim%cfg.Heads != 0 {
		panic(fmt.Sprintf("models: GPT Dim %d is not divisible by Heads %d", cfg.Dim, cfg.Heads))
	}
	if cfg.Dropout < 0 || cfg.Dropout >= 1 {
		panic(fmt.Sprintf("models: GPT Dropout %g is outside [0, 1)", cfg.Dropout))
	}
	g := init.Gen
	if g == nil {
		g = tensor.NewGenerator(0)
	}
	m := &GPT{cfg: cfg}
	m.tok = nn.NewEmbedding(cfg.Vocab, cfg.Dim, nn.Init{Gen: g})
	nn.Normal(m.tok.Weight, 0, 0.02, g)
	m.AddModule("tok", m.tok)
	m.pos = m.AddParam("pos", tensor.Zeros(tensor.Shape{cfg.Context, cfg.Dim}))
	nn.Normal(m.pos, 0, 0.02, g)
	m.drop = nn.NewDropout(cfg.Dropout)
	m.AddModule("drop", m.drop)
	m.blocks = nn.NewSequential()
	for range cfg.Layers {
		m.blocks.Append(newGPTBlock(cfg, g))
	}
	m.AddModule("blocks", m.blocks)
	m.lnf = nn.NewLayerNorm(tensor.Shape{cfg.Dim})
	m.AddModule("lnf", m.lnf)
	if !cfg.TieWeights {
		m.head = nn.NewLinear(cfg.Dim, cfg.Vocab, nn.Init{Gen: g, NoBias: true})
		nn.Normal(m.head.Weight, 0, 0.02, g)
		m.AddModule("head", m.head)
	}
	return m
}

// gptLinear is a Linear with N(0, std) weights and a zero bias.
func gptLinear(in, out int, std float64, g *tensor.Generator) *nn.Linear {
	l := nn.NewLinear(in, out, nn.Init{Gen: g})
	nn.Normal(l.Weight, 0, std, g)
	nn.Zeros(l.Bias)
	return l
}

// Config returns the configuration with defaults filled in.
func (m *GPT) Config() GPTConfig { return m.cfg }

// Forward implements nn.Module: ids [N, T] → logits [N, T, Vocab].
func (m *GPT) Forward(ids *tensor.Tensor) *tensor.Tensor {
	if ids.Dim() != 2 || ids.Shape()[1] > m.cfg.Context || ids.Shape()[1] < 1 || !ids.DType().IsInt() {
		panic(&tensor.OpError{Op: "gpt", Msg: fmt.Sprintf("want Int64 token ids [N, T] with 1 ≤ T ≤ %d, got %s %v", m.cfg.Context, ids.DType(), ids.Shape())})
	}
	t := ids.Shape()[1]
	x := nn.Call(m.tok, ids).Add(ids.Context().Bind(m.pos.T).Slice(0, 0, t, 1))
	x = nn.Call(m.drop, x)
	for i := range m.blocks.Len() {
		b := m.blocks.At(i)
		if m.cfg.Checkpoint && ids.Context().GradEnabled() {
			x = checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor { return nn.Call(b, xs[0]) }, x)
		} else {
			x = nn.Call(b, x)
		}
	}
	if m.head != nil {
		return nn.Call(m.head, nn.CallInto(m.lnf, m.head, x))
	}
	return tensor.Linear(nn.Call(m.lnf, x), m.tok.Weight.T, nil)
}

// GPTBlock is one pre-LayerNorm decoder block.
type GPTBlock struct {
	nn.Base
	ln1, ln2 *nn.LayerNorm
	attn     *CausalSelfAttention
	fc1, fc2 *nn.Linear
	act      *nn.GELU
	drop     *nn.Dropout
}

func newGPTBlock(cfg GPTConfig, g *tensor.Generator) *GPTBlock {
	proj := 0.02 / math.Sqrt(2*float64(cfg.Layers))
	b := &GPTBlock{
		ln1: nn.NewLayerNorm(tensor.Shape{cfg.Dim}), ln2: nn.NewLayerNorm(tensor.Shape{cfg.Dim}),
	}
	b.attn = &CausalSelfAttention{heads: cfg.Heads, dropout: cfg.Dropout, composed: cfg.Composed}
	b.attn.qkv = gptLinear(cfg.Dim, 3*cfg.Dim, 0.02, g)
	b.attn.proj = gptLinear(cfg.Dim, cfg.Dim, proj, g)
	b.attn.AddModule("qkv", b.attn.qkv)
	b.attn.AddModule("proj", b.attn.proj)
	b.fc1 = gptLinear(cfg.Dim, 4*cfg.Dim, 0.02, g)
	b.fc2 = gptLinear(4*cfg.Dim, cfg.Dim, proj, g)
	b.act, b.drop = nn.NewGELU(), nn.NewDropout(cfg.Dropout)
	b.AddModule("ln1", b.ln1)
	b.AddModule("attn", b.attn)
	b.AddModule("ln2", b.ln2)
	b.AddModule("fc1", b.fc1)
	b.AddModule("fc2", b.fc2)
	b.AddModule("act", b.act)
	b.AddModule("drop", b.drop)
	return b
}

// Forward implements nn.Module on x [N, T, Dim].
func (b *GPTBlock) Forward(x *tensor.Tensor) *tensor.Tensor {
	x = x.Add(nn.Call(b.attn, nn.CallInto(b.ln1, b.attn, x)))
	h := nn.Call(b.fc2, nn.CallPair(b.fc1, b.act, nn.CallInto(b.ln2, b.fc1, x)))
	return x.Add(nn.Call(b.drop, h))
}

// CausalSelfAttention is multi-head self-attention where position t attends to
// positions ≤ t: one Linear to queries, keys and values, the fused causal attention op
// on its packed output (tensor.SelfAttention, low precision under autocast) and an output
// projection followed by dropout. Dropout on the attention probabilities is not
// offered: the fused op never forms them.
type CausalSelfAttention struct {
	nn.Base
	qkv, proj *nn.Linear
	heads     int
	dropout   float64
	composed  bool
}

// InputLinear implements nn.InputLinear: x goes to the query-key-value projection alone.
func (a *CausalSelfAttention) InputLinear() *nn.Linear { return a.qkv }

// Forward implements nn.Module on x [N, T, D].
func (a *CausalSelfAttention) Forward(x *tensor.Tensor) *tensor.Tensor {
	o := tensor.AttentionOptions{Causal: true}
	var y *tensor.Tensor
	if a.composed {
		s := x.Shape()
		n, t, d := s[0], s[1], s[2]
		dh := d / a.heads
		// [N, T, 3D] → [3, N, H, T, Dh]
		qkv := nn.Call(a.qkv, x).Reshape(n, t, 3, a.heads, dh).Permute(2, 0, 3, 1, 4)
		y = tensor.ComposedAttention(qkv.Select(0, 0), qkv.Select(0, 1), qkv.Select(0, 2), o)
		y = y.Permute(0, 2, 1, 3).Reshape(n, t, d)
	} else {
		// The packed op splits and merges the heads itself (no Select gradients of the
		// whole packed width to add up in the backward pass).
		y = tensor.SelfAttention(nn.Call(a.qkv, x), a.heads, o)
	}
	return tensor.Dropout(nn.Call(a.proj, y), a.dropout, a.Training())
}
