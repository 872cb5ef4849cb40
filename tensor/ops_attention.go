package tensor

import (
	"math"

	"github.com/gamp-ml/gamp/backend"
)

// Scaled dot-product attention as one op (PyTorch's scaled_dot_product_attention): a
// LowerPrecision op under autocast, as PyTorch lists it, computed by the backend's fused
// kernel (backend.Attention) where it has one. The fused kernel keeps only the output
// and one log-sum-exp per query row for the backward pass, so the memory of a step grows
// with the context length T, not T² as the composed ops' score matrix does.

var opAttention = defOp("scaled_dot_product_attention", LowerPrecision)

// AttentionOptions are the optional arguments of ScaledDotProductAttention; the zero
// value is unmasked attention scaled by 1/√D.
type AttentionOptions struct {
	// Causal masks keys after the query (query i sees keys j ≤ i), as is_causal=True.
	// Masked probabilities are exact zeros.
	Causal bool
	// Scale multiplies Q·Kᵀ; 0 means 1/√D.
	Scale float64
}

// scale returns the factor applied to the scores for head dimension d.
func (o AttentionOptions) scale(d int) float64 {
	if o.Scale != 0 {
		return o.Scale
	}
	return 1 / math.Sqrt(float64(max(d, 1)))
}

// ScaledDotProductAttention returns softmax(scale·Q·Kᵀ [+ causal mask])·V for q, k, v of
// one shape [..., T, D] (e.g. [N, heads, T, D]): self-attention, every leading index an
// independent head. It runs the device's fused kernel when the backend has one
// (backend.Attention) and, if the backend is a backend.AttentionChooser, chooses it for
// this shape; ComposedAttention otherwise. The two agree to rounding.
// Under autocast it runs in the low dtype: the softmax and every accumulation in
// float32; on the CPU, bf16 inputs also take bf16 products with the probabilities and
// score gradients rounded to bf16, as FlashAttention does on GPUs.
func ScaledDotProductAttention(q, k, v *Tensor, o AttentionOptions) *Tensor {
	return resolve(opAttention, q, k, v).attention(q, k, v, o)
}

// ComposedAttention is ScaledDotProductAttention built from matmul, masked fill,
// softmax and matmul, which materialises the [..., T, T] scores: the reference the
// fused kernels are tested against and the path for backends without one.
func ComposedAttention(q, k, v *Tensor, o AttentionOptions) *Tensor {
	d := q.shape[q.Dim()-1]
	s := MatMul(q, k.T()).MulScalar(o.scale(d))
	if o.Causal {
		t := q.shape[q.Dim()-2]
		mask := make([]bool, t*t)
		for i := range t {
			for j := i + 1; j < t; j++ {
				mask[i*t+j] = true
			}
		}
		m := FromSlice(mask, Shape{t, t}, WithContext(s.ctx), WithDevice(s.device))
		s = s.MaskedFill(m, math.Inf(-1))
	}
	return MatMul(Softmax(s, -1), v)
}

// fusedAttention returns b's fused attention kernel when b has one and, where b is a
// backend.AttentionChooser, chooses it for bh heads of t rows of d features of dt.
func fusedAttention(b backend.Backend, dt DType, bh, t, d int) (backend.Attention, bool) {
	fused, ok := b.(backend.Attention)
	if !ok {
		return nil, false
	}
	if ch, ok := b.(backend.AttentionChooser); ok && !ch.FusedAttention(dt, bh, t, d) {
		return nil, false
	}
	return fused, true
}

func (c *Context) attention(q, k, v *Tensor, o AttentionOptions) *Tensor {
	op := opAttention
	in := c.prep(op, q, k, v)
	q, k, v = in[0], in[1], in[2]
	if !q.dtype.IsFloat() || k.dtype != q.dtype || v.dtype != q.dtype {
		fail(op.Name(), in, "q, k and v must share one floating dtype; Cast them (or run under autocast)")
	}
	if q.Dim() < 2 || !k.shape.Equal(q.shape) || !v.shape.Equal(q.shape) {
		fail(op.Name(), in, "want q, k and v of one shape [..., T, D] (self-attention)")
	}
	if !(o.Scale == 0 || (o.Scale > 0 && !math.IsInf(o.Scale, 1))) {
		fail(op.Name(), in, "Scale %g must be positive and finite (0 selects 1/√D)", o.Scale)
	}
	t, d := q.shape[q.Dim()-2], q.shape[q.Dim()-1]
	if q.Numel() == 0 {
		return c.observe(op, in, ComposedAttention(q, k, v, o))
	}
	bh := q.Numel() / (t * d)
	fused, ok := fusedAttention(q.ref.b, q.dtype, bh, t, d)
	if !ok {
		return c.observe(op, in, ComposedAttention(q, k, v, o))
	}
	qd, kd, vd := q.dense(c), k.dense(c), v.dense(c)
	out := allocOut(c, q.dtype, q.device, q.shape)
	lseType := Float32
	if q.dtype == Float64 {
		lseType = Float64 // gradcheck precision
	}
	lse := allocOut(c, lseType, q.device, Shape{bh, t})
	args := backend.AttentionArgs{Q: qd.ref.s, K: kd.ref.s, V: vd.ref.s, O: out.ref.s, LSE: lse.ref.s,
		BH: bh, T: t, D: d, Scale: o.scale(d), Causal: o.Causal}
	fused.Attention(args)
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		g = g.dense(bc)
		gs := make([]*Tensor, 3)
		for i := range gs {
			gs[i] = allocOut(bc, g.dtype, g.device, g.shape)
		}
		a := args
		a.GO, a.GQ, a.GK, a.GV = g.ref.s, gs[0].ref.s, gs[1].ref.s, gs[2].ref.s
		fused.AttentionBackward(a)
		for i, x := range in {
			if !x.requiresGrad {
				gs[i].Release()
				gs[i] = nil
			}
		}
		return gs
	})
}
