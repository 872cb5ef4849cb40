package tensor

import (
	"math"

	"github.com/gamp-ml/gamp/backend"
)

// Multi-head self-attention on a packed projection, as one op: the head split of the
// queries, keys and values, the fused attention kernel (backend.Attention) and the merge
// of the heads. A transformer block computes Q, K and V with one Linear of width 3·D
// (PyTorch's in_proj); splitting that output with Reshape, Permute and Select makes the
// attention op copy each of q, k and v, and in the backward pass each Select's gradient
// is a zero-filled tensor of the whole packed width that the autograd engine then adds
// up — three full-width zero fills, three copies and two additions where one strided
// copy will do. Here the forward copies the packed input once into the kernel's three
// dense [N·H, T, Dh] operands and the output once into [N, T, D]; the backward does the
// reverse. The results are the ones ScaledDotProductAttention gives on the split views.

var opSelfAttention = defOp("self_attention", LowerPrecision)

// SelfAttention returns multi-head self-attention over qkv [N, T, 3·D], the output of
// one projection laid out as (3, heads, D/heads) along the last dimension — queries,
// then keys, then values, each head's Dh = D/heads features contiguous — as [N, T, D]
// with the heads concatenated: for qkv = x·Wᵀ this is
//
//	y := qkv.Reshape(n, t, 3, heads, dh).Permute(2, 0, 3, 1, 4)
//	a := ScaledDotProductAttention(y.Select(0, 0), y.Select(0, 1), y.Select(0, 2), o)
//	return a.Permute(0, 2, 1, 3).Reshape(n, t, d)
//
// computed without the intermediate copies (the values are the same). Under autocast it
// runs in the low dtype, as ScaledDotProductAttention does.
func SelfAttention(qkv *Tensor, heads int, o AttentionOptions) *Tensor {
	return resolve(opSelfAttention, qkv).selfAttention(qkv, heads, o)
}

// selfAttentionComposed is SelfAttention from the ops its doc comment names.
func selfAttentionComposed(qkv *Tensor, heads int, o AttentionOptions) *Tensor {
	n, t, d := qkv.shape[0], qkv.shape[1], qkv.shape[2]/3
	y := qkv.Reshape(n, t, 3, heads, d/heads).Permute(2, 0, 3, 1, 4)
	a := ScaledDotProductAttention(y.Select(0, 0), y.Select(0, 1), y.Select(0, 2), o)
	return a.Permute(0, 2, 1, 3).Reshape(n, t, d)
}

// headsView is the [N, H, T, Dh] view of part p (0 for queries, 1 keys, 2 values; 0 for
// an unpacked [N, T, D] tensor) of x [N, T, parts·D].
func headsView(x *Tensor, p, heads, dh int) backend.View {
	s := x.strides
	return backend.View{S: x.ref.s, Offset: x.offset + p*heads*dh*s[2],
		Shape:   []int{x.shape[0], heads, x.shape[1], dh},
		Strides: []int{s[0], dh * s[2], s[1], s[2]}}
}

func (c *Context) selfAttention(qkv *Tensor, heads int, o AttentionOptions) *Tensor {
	op := opSelfAttention
	in := c.prep(op, qkv)
	x := in[0]
	if !x.dtype.IsFloat() {
		fail(op.Name(), in, "qkv must be floating point; Cast it (or run under autocast)")
	}
	if x.Dim() != 3 || heads < 1 || x.shape[2]%(3*heads) != 0 {
		fail(op.Name(), in, "want qkv [N, T, 3·D] with D divisible by heads = %d", heads)
	}
	if !(o.Scale == 0 || (o.Scale > 0 && !math.IsInf(o.Scale, 1))) {
		fail(op.Name(), in, "Scale %g must be positive and finite (0 selects 1/√D)", o.Scale)
	}
	n, t, d := x.shape[0], x.shape[1], x.shape[2]/3
	dh := d / heads
	fused, ok := x.ref.b.(backend.Attention)
	if !ok || x.Numel() == 0 {
		return c.observe(op, in, selfAttentionComposed(x, heads, o))
	}
	b := x.ref.b
	hs := Shape{n, heads, t, dh}
	var qkvd [3]*Tensor
	for p := range qkvd {
		qkvd[p] = allocOut(c, x.dtype, x.device, hs)
		b.Copy(qkvd[p].bview(), headsView(x, p, heads, dh))
	}
	att := allocOut(c, x.dtype, x.device, hs)
	lseType := Float32
	if x.dtype == Float64 {
		lseType = Float64 // gradcheck precision
	}
	lse := allocOut(c, lseType, x.device, Shape{n * heads, t})
	args := backend.AttentionArgs{Q: qkvd[0].ref.s, K: qkvd[1].ref.s, V: qkvd[2].ref.s, O: att.ref.s, LSE: lse.ref.s,
		BH: n * heads, T: t, D: dh, Scale: o.scale(dh), Causal: o.Causal}
	fused.Attention(args)
	out := allocOut(c, x.dtype, x.device, Shape{n, t, d})
	b.Copy(headsView(out, 0, heads, dh), att.bview())
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		gh := allocOut(bc, g.dtype, g.device, hs)
		b.Copy(gh.bview(), headsView(g, 0, heads, dh))
		var gp [3]*Tensor
		for p := range gp {
			gp[p] = allocOut(bc, g.dtype, g.device, hs)
		}
		a := args
		a.GO, a.GQ, a.GK, a.GV = gh.ref.s, gp[0].ref.s, gp[1].ref.s, gp[2].ref.s
		fused.AttentionBackward(a)
		gh.Release()
		gx := allocOut(bc, g.dtype, g.device, x.shape)
		for p, gi := range gp {
			b.Copy(headsView(gx, p, heads, dh), gi.bview())
			gi.Release()
		}
		return []*Tensor{gx}
	})
}
