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
// copy will do. Here, on a backend whose kernel takes a backend.AttentionLayout, the
// kernel reads the heads straight out of the packed input and writes the output into
// [N, T, D] (and the backward its three gradients into one [N, T, 3·D]): no copies.
// Elsewhere (or with features that are not contiguous) the forward copies the packed
// input once into the kernel's three dense [N·H, T, Dh] operands and the output once
// into [N, T, D]; the backward does the reverse. The results are the ones
// ScaledDotProductAttention gives on the split views.

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
	fused, ok := fusedAttention(x.ref.b, x.dtype, n*heads, t, dh)
	if !ok || x.Numel() == 0 {
		return c.observe(op, in, selfAttentionComposed(x, heads, o))
	}
	b := x.ref.b
	if lb, ok := b.(backend.AttentionLayouts); ok && lb.AttentionLayouts() && x.strides[2] == 1 {
		return c.selfAttentionInPlace(op, in, fused, heads, o)
	}
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

// attnStride is the place of part p of x [N, T, parts·D] (last dimension contiguous) in
// a backend.AttentionLayout of heads of dh features.
func attnStride(x *Tensor, p, heads, dh int) backend.AttentionStride {
	return backend.AttentionStride{Off: x.offset + p*heads*dh, Batch: x.strides[0], Head: dh, Row: x.strides[1]}
}

// selfAttentionInPlace is selfAttention on a backend whose kernel reads the heads out of
// the packed qkv and writes them into [N, T, D] itself (backend.AttentionLayouts): no
// head copies either way. The values are those of the copying path.
func (c *Context) selfAttentionInPlace(op *Op, in []*Tensor, fused backend.Attention, heads int, o AttentionOptions) *Tensor {
	x := in[0]
	n, t, d := x.shape[0], x.shape[1], x.shape[2]/3
	dh := d / heads
	lseType := Float32
	if x.dtype == Float64 {
		lseType = Float64 // gradcheck precision
	}
	lse := allocOut(c, lseType, x.device, Shape{n * heads, t})
	out := allocOut(c, x.dtype, x.device, Shape{n, t, d})
	lay := backend.AttentionLayout{Heads: heads,
		Q: attnStride(x, 0, heads, dh), K: attnStride(x, 1, heads, dh), V: attnStride(x, 2, heads, dh),
		O: attnStride(out, 0, heads, dh)}
	args := backend.AttentionArgs{Q: x.ref.s, K: x.ref.s, V: x.ref.s, O: out.ref.s, LSE: lse.ref.s,
		BH: n * heads, T: t, D: dh, Scale: o.scale(dh), Causal: o.Causal, Layout: &lay}
	fused.Attention(args)
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		if g.strides[2] != 1 {
			g = bc.contiguous(g)
		}
		gx := allocOut(bc, g.dtype, g.device, x.shape)
		l := lay
		l.GO = attnStride(g, 0, heads, dh)
		l.GQ, l.GK, l.GV = attnStride(gx, 0, heads, dh), attnStride(gx, 1, heads, dh), attnStride(gx, 2, heads, dh)
		a := args
		a.Layout = &l
		a.GO, a.GQ, a.GK, a.GV = g.ref.s, gx.ref.s, gx.ref.s, gx.ref.s
		fused.AttentionBackward(a)
		return []*Tensor{gx}
	})
}
