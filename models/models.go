// Package models holds the networks gamp's commands train and measure: the MLP the
// CPU-speed work benchmarks, the Fashion-MNIST CNN of the main job, and a small
// transformer encoder. cmd/ampbench, cmd/overflowcheck and examples/fashion build their
// models here, so they all measure the same networks.
//
//	m := models.FashionCNN(models.CNNConfig{}, nn.Seeded(1))
//	ctx := tensor.NewContext()
//	defer ctx.Close()
//	logits := m.Forward(ctx.Bind(x)) // x [N, 1, 28, 28]
package models

import (
	"fmt"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// MLP returns Flatten, then Linear+ReLU for each hidden width, then a Linear to
// classes. MLP(784, []int{1024, 1024}, 10, init) is the 784-1024-1024-10 benchmark MLP.
func MLP(in int, hidden []int, classes int, init nn.Init) *nn.Sequential {
	layers := []nn.Module{nn.NewFlatten()}
	prev := in
	for _, h := range hidden {
		layers = append(layers, nn.NewLinear(prev, h, init), nn.NewReLU())
		prev = h
	}
	layers = append(layers, nn.NewLinear(prev, classes, init))
	return nn.NewSequential(layers...)
}

// CNNConfig sizes the Fashion-MNIST CNN; zero fields take the defaults.
type CNNConfig struct {
	C1, C2  int // channels of the two conv blocks (default 16, 32)
	Hidden  int // width of the first linear layer (default 128)
	Classes int // default 10
}

// FashionCNN returns 2×[conv 5×5 (padding 2) + BatchNorm + ReLU + max-pool 2×2] + 2
// linear layers, for [N, 1, 28, 28] inputs.
func FashionCNN(c CNNConfig, init nn.Init) *nn.Sequential {
	c1, c2, hidden, classes := or(c.C1, 16), or(c.C2, 32), or(c.Hidden, 128), or(c.Classes, 10)
	block := func(in, out int) []nn.Module {
		return []nn.Module{
			nn.NewConv2d(in, out, [2]int{5, 5}, tensor.ConvOptions{Padding: [2]int{2, 2}}, init),
			nn.NewBatchNorm2d(out), nn.NewReLU(),
			nn.NewMaxPool2d([2]int{2, 2}, [2]int{2, 2}, [2]int{}),
		}
	}
	layers := append(block(1, c1), block(c1, c2)...)
	layers = append(layers, nn.NewFlatten(), nn.NewLinear(c2*7*7, hidden, init), nn.NewReLU(), nn.NewLinear(hidden, classes, init))
	return nn.NewSequential(layers...)
}

func or(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// TransformerConfig sizes the encoder; zero fields take the defaults.
type TransformerConfig struct {
	Vocab   int // token ids are in [0, Vocab) (default 1000)
	SeqLen  int // maximum sequence length (default 64)
	Dim     int // model width (default 128)
	Heads   int // attention heads; must divide Dim (default 4)
	Layers  int // encoder blocks (default 2)
	Classes int // default 10
	Dropout float64
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c TransformerConfig) WithDefaults() TransformerConfig {
	c.Vocab, c.SeqLen, c.Dim = or(c.Vocab, 1000), or(c.SeqLen, 64), or(c.Dim, 128)
	c.Heads, c.Layers, c.Classes = or(c.Heads, 4), or(c.Layers, 2), or(c.Classes, 10)
	return c
}

// Transformer is a small pre-LayerNorm encoder classifier: token embedding plus a
// learned position embedding, Layers × [LayerNorm → multi-head self-attention →
// residual, LayerNorm → Linear-GELU-Linear → residual], mean pooling, LayerNorm and a
// linear classifier. Input: Int64 token ids [N, T] with T ≤ SeqLen.
type Transformer struct {
	nn.Base
	cfg    TransformerConfig
	tok    *nn.Embedding
	pos    *nn.Param
	blocks *nn.Sequential
	norm   *nn.LayerNorm
	head   *nn.Linear
}

// NewTransformer builds the encoder; it panics on a configuration whose Dim is not
// divisible by Heads (a programming error).
func NewTransformer(cfg TransformerConfig, init nn.Init) *Transformer {
	cfg = cfg.WithDefaults()
	if cfg.Dim%cfg.Heads != 0 {
		panic(fmt.Sprintf("models: Dim %d is not divisible by Heads %d", cfg.Dim, cfg.Heads))
	}
	t := &Transformer{cfg: cfg}
	t.tok = nn.NewEmbedding(cfg.Vocab, cfg.Dim, init)
	t.AddModule("tok", t.tok)
	pos := tensor.Randn(tensor.Shape{cfg.SeqLen, cfg.Dim}, tensor.WithContext(genContext(init)))
	t.pos = t.AddParam("pos", scaled(pos, 0.02))
	t.blocks = nn.NewSequential()
	for i := 0; i < cfg.Layers; i++ {
		t.blocks.Append(NewEncoderBlock(cfg.Dim, cfg.Heads, cfg.Dropout, init))
	}
	t.AddModule("blocks", t.blocks)
	t.norm = nn.NewLayerNorm(tensor.Shape{cfg.Dim})
	t.AddModule("norm", t.norm)
	t.head = nn.NewLinear(cfg.Dim, cfg.Classes, init)
	t.AddModule("head", t.head)
	return t
}

// genContext returns a throwaway Context drawing from init's generator.
func genContext(init nn.Init) *tensor.Context {
	if init.Gen != nil {
		return tensor.NewContext(tensor.UseGenerator(init.Gen))
	}
	return tensor.NewContext()
}

// scaled returns s·t as a new untracked leaf and closes t's Context.
func scaled(t *tensor.Tensor, s float64) *tensor.Tensor {
	c := t.Context()
	out := t.MulScalar(s)
	c.Keep(out)
	c.Close()
	return out
}

// Config returns the configuration with defaults filled in.
func (t *Transformer) Config() TransformerConfig { return t.cfg }

// Blocks returns the chain of encoder blocks (to checkpoint it, for example).
func (t *Transformer) Blocks() *nn.Sequential { return t.blocks }

// Embed returns token plus position embeddings of ids [N, T]: the blocks' input.
func (t *Transformer) Embed(ids *tensor.Tensor) *tensor.Tensor {
	if ids.Dim() != 2 || ids.Shape()[1] > t.cfg.SeqLen {
		panic(&tensor.OpError{Op: "transformer", Msg: fmt.Sprintf("want token ids [N, T≤%d], got %v", t.cfg.SeqLen, ids.Shape())})
	}
	x := nn.Call(t.tok, ids) // [N, T, D]
	return x.Add(ids.Context().Bind(t.pos.T).Slice(0, 0, ids.Shape()[1], 1))
}

// Head pools the blocks' output [N, T, D] over tokens and classifies it.
func (t *Transformer) Head(x *tensor.Tensor) *tensor.Tensor {
	return nn.Call(t.head, nn.CallInto(t.norm, t.head, x.Mean(1)))
}

// Forward implements nn.Module.
func (t *Transformer) Forward(ids *tensor.Tensor) *tensor.Tensor {
	return t.Head(nn.Call(t.blocks, t.Embed(ids)))
}

// EncoderBlock is one pre-LayerNorm transformer block.
type EncoderBlock struct {
	nn.Base
	ln1, ln2 *nn.LayerNorm
	attn     *MultiHeadAttention
	fc1, fc2 *nn.Linear
	act      *nn.GELU
	drop     *nn.Dropout
}

// NewEncoderBlock returns a block of width dim with heads attention heads.
func NewEncoderBlock(dim, heads int, dropout float64, init nn.Init) *EncoderBlock {
	b := &EncoderBlock{
		ln1: nn.NewLayerNorm(tensor.Shape{dim}), ln2: nn.NewLayerNorm(tensor.Shape{dim}),
		attn: NewMultiHeadAttention(dim, heads, init),
		fc1:  nn.NewLinear(dim, 4*dim, init), fc2: nn.NewLinear(4*dim, dim, init),
		act: nn.NewGELU(), drop: nn.NewDropout(dropout),
	}
	b.AddModule("ln1", b.ln1)
	b.AddModule("attn", b.attn)
	b.AddModule("ln2", b.ln2)
	b.AddModule("fc1", b.fc1)
	b.AddModule("fc2", b.fc2)
	b.AddModule("act", b.act)
	b.AddModule("drop", b.drop)
	return b
}

// Forward implements nn.Module.
func (b *EncoderBlock) Forward(x *tensor.Tensor) *tensor.Tensor {
	x = x.Add(nn.Call(b.drop, nn.Call(b.attn, nn.CallInto(b.ln1, b.attn, x))))
	h := nn.Call(b.fc2, nn.CallPair(b.fc1, b.act, nn.CallInto(b.ln2, b.fc1, x)))
	return x.Add(nn.Call(b.drop, h))
}

// MultiHeadAttention is scaled dot-product self-attention with Heads heads: one Linear
// to the packed queries, keys and values (PyTorch's in_proj), the fused attention op on
// it (tensor.SelfAttention; low precision under autocast, softmax statistics in FP32
// inside the kernel) and an output Linear.
type MultiHeadAttention struct {
	nn.Base
	qkv, out *nn.Linear
	heads    int
}

// NewMultiHeadAttention returns attention over width dim with heads heads.
func NewMultiHeadAttention(dim, heads int, init nn.Init) *MultiHeadAttention {
	m := &MultiHeadAttention{qkv: nn.NewLinear(dim, 3*dim, init), out: nn.NewLinear(dim, dim, init), heads: heads}
	m.AddModule("qkv", m.qkv)
	m.AddModule("out", m.out)
	return m
}

// InputLinear implements nn.InputLinear: x goes to the query-key-value projection alone.
func (m *MultiHeadAttention) InputLinear() *nn.Linear { return m.qkv }

// Forward implements nn.Module on x [N, T, D].
func (m *MultiHeadAttention) Forward(x *tensor.Tensor) *tensor.Tensor {
	return nn.Call(m.out, tensor.SelfAttention(nn.Call(m.qkv, x), m.heads, tensor.AttentionOptions{}))
}
