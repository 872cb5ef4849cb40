package tensor

import (
	"github.com/gamp-ml/gamp/backend"
)

var (
	opMatMul = defOp("matmul", LowerPrecision)
	opLinear = defOp("linear", LowerPrecision)
	// linear_relu is Linear then Relu as one op (LowerPrecision like linear; relu is
	// Passthrough, so it runs in linear's dtype).
	opLinearReLU = defOp("linear_relu", LowerPrecision)
	// linear_gelu is Linear then Gelu (exact) as one op, LowerPrecision as linear_relu.
	opLinearGELU = defOp("linear_gelu", LowerPrecision)
)

// linearAct is the activation a linear op applies to its output.
type linearAct uint8

const (
	linearNone linearAct = iota
	linearReLU
	linearGELU
)

// MatMul is the matrix product with NumPy semantics: 1-d operands are promoted to
// matrices and the added dimension removed, leading (batch) dimensions broadcast.
// Transposed views are passed to the GEMM as they are, never copied. Half inputs
// accumulate in float32.
func MatMul(a, b *Tensor) *Tensor { return resolve(opMatMul, a, b).matmul(a, b) }

// MatMul returns t·o (see MatMul).
func (t *Tensor) MatMul(o *Tensor) *Tensor { return MatMul(t, o) }

func (c *Context) matmul(a, b *Tensor) *Tensor {
	in := c.prep(opMatMul, a, b)
	a, b = in[0], in[1]
	if !a.dtype.IsFloat() || a.dtype != b.dtype {
		fail("matmul", in, "operands must share one floating dtype; Cast one of them (or run under autocast)")
	}
	if a.Dim() == 0 || b.Dim() == 0 {
		fail("matmul", in, "operands must have at least one dimension")
	}
	if a.Dim() == 1 && b.Dim() == 1 {
		// The dot product: [1, k]·[k, 1] viewed as a 0-d result.
		out := c.matmul(c.reshape(a, Shape{1, a.shape[0]}), c.reshape(b, Shape{b.shape[0], 1}))
		return c.observe(opMatMul, in, c.reshape(out, Shape{}))
	}
	if a.Dim() == 1 {
		out := c.matmul(c.reshape(a, Shape{1, a.shape[0]}), b)
		return c.observe(opMatMul, in, c.reshape(out, slices2(out.shape, -2)))
	}
	if b.Dim() == 1 {
		out := c.matmul(a, c.reshape(b, Shape{b.shape[0], 1}))
		return c.observe(opMatMul, in, c.reshape(out, slices2(out.shape, -1)))
	}
	m, k := a.shape[a.Dim()-2], a.shape[a.Dim()-1]
	k2, n := b.shape[b.Dim()-2], b.shape[b.Dim()-1]
	if k != k2 {
		fail("matmul", in, "inner dimensions differ (%d and %d)", k, k2)
	}
	batch := broadcastBatch(in, a.shape[:a.Dim()-2], b.shape[:b.Dim()-2])
	out := allocOut(c, a.dtype, a.device, append(batch.Clone(), m, n))
	c.gemmInto(out, a, b, batch, 0)
	return c.record(opMatMul, out, in, func(bc *Context, g *Tensor) []*Tensor {
		var ga, gb *Tensor
		if a.requiresGrad {
			// dA = g·Bᵀ, summed over broadcast batch dimensions.
			full := allocOut(bc, g.dtype, g.device, append(batch.Clone(), m, k))
			bc.gemmInto(full, g, b.mT(bc), batch, 0)
			ga = bc.sumTo(full, a.shape)
		}
		if b.requiresGrad {
			full := allocOut(bc, g.dtype, g.device, append(batch.Clone(), k, n))
			bc.gemmInto(full, a.mT(bc), g, batch, 0)
			gb = bc.sumTo(full, b.shape)
		}
		return []*Tensor{ga, gb}
	})
}

// slices2 returns s without dimension d (negative from the end).
func slices2(s Shape, d int) Shape {
	d += len(s)
	out := append(Shape(nil), s[:d]...)
	return append(out, s[d+1:]...)
}

func broadcastBatch(in []*Tensor, a, b []int) Shape {
	n := max(len(a), len(b))
	out := make(Shape, n)
	for i := 0; i < n; i++ {
		da, db := 1, 1
		if j := i - (n - len(a)); j >= 0 {
			da = a[j]
		}
		if j := i - (n - len(b)); j >= 0 {
			db = b[j]
		}
		switch {
		case da == db || db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			fail("matmul", in, "batch dimensions cannot be broadcast")
		}
	}
	return out
}

// mT returns a view of t with the last two dimensions swapped (not recorded).
func (t *Tensor) mT(c *Context) *Tensor {
	n := t.Dim()
	shape := t.shape.Clone()
	st := append([]int(nil), t.strides...)
	shape[n-2], shape[n-1] = shape[n-1], shape[n-2]
	st[n-2], st[n-1] = st[n-1], st[n-2]
	return t.view(c, shape, st, t.offset)
}

// matLayout describes how a GEMM reads a (batched) matrix operand in place.
type matLayout struct {
	t           *Tensor
	trans       bool
	ld, bstride int
}

// layoutFor returns how to read t broadcast to batch as a stack of matrices, copying
// it to dense storage only when its strides cannot be expressed as (batch stride,
// leading dimension, transposed or not).
func (c *Context) layoutFor(t *Tensor, batch Shape) matLayout {
	n := t.Dim()
	rows, cols := t.shape[n-2], t.shape[n-1]
	rs, cs := t.strides[n-2], t.strides[n-1]
	l := matLayout{t: t}
	switch {
	case cs == 1 && (rs >= cols || rows == 1):
		l.ld = max(rs, cols)
	case rs == 1 && (cs >= rows || cols == 1):
		l.trans, l.ld = true, max(cs, rows)
	default:
		return c.layoutFor(t.dense(c), batch)
	}
	// Batch dims of t (broadcast to batch) must collapse to a single stride.
	v := t.expandView(append(batch.Clone(), rows, cols))
	bst := v.Strides[:len(batch)]
	stride, ok := -1, true
	expect := -1
	for i := len(batch) - 1; i >= 0; i-- {
		if batch[i] == 1 {
			continue
		}
		if stride == -1 {
			stride = bst[i]
			expect = bst[i] * batch[i]
			continue
		}
		if stride == 0 && bst[i] == 0 {
			continue
		}
		if bst[i] != expect {
			ok = false
			break
		}
		expect = bst[i] * batch[i]
	}
	if !ok {
		d := allocOut(c, t.dtype, t.device, append(batch.Clone(), rows, cols))
		t.ref.b.Copy(d.bview(), v)
		return c.layoutFor(d, batch)
	}
	l.bstride = max(stride, 0)
	return l
}

// gemmInto computes out = a·b (+ beta·out) over the batch dims.
func (c *Context) gemmInto(out, a, b *Tensor, batch Shape, beta float32) {
	c.gemmReLUInto(out, a, b, batch, beta, false)
}

// gemmReLUInto is gemmInto with backend.MatMulArgs.ReLU set to relu.
func (c *Context) gemmReLUInto(out, a, b *Tensor, batch Shape, beta float32, relu bool) {
	la, lb := c.layoutFor(a, batch), c.layoutFor(b, batch)
	m, k, n := out.shape[out.Dim()-2], a.shape[a.Dim()-1], out.shape[out.Dim()-1]
	out.ref.b.MatMul(backend.MatMulArgs{
		A: la.t.ref.s, B: lb.t.ref.s, C: out.ref.s,
		OffA: la.t.offset, OffB: lb.t.offset, OffC: out.offset,
		Batch: batch.Numel(), M: m, N: n, K: k,
		TransA: la.trans, TransB: lb.trans,
		LDA: la.ld, LDB: lb.ld, LDC: n,
		StrideA: la.bstride, StrideB: lb.bstride, StrideC: m * n,
		Alpha: 1, Beta: beta, ReLU: relu,
	})
}

// gemmBiasInto is gemmInto (no batch) with C starting from the bias row bias
// (backend.MatMulArgs.Bias) in every row, and the ReLU applied where relu is set
// (backend.MatMulArgs.ReLU).
func (c *Context) gemmBiasInto(out, a, b, bias *Tensor, relu bool) {
	la, lb := c.layoutFor(a, Shape{}), c.layoutFor(b, Shape{})
	m, k, n := out.shape[0], a.shape[1], out.shape[1]
	out.ref.b.MatMul(backend.MatMulArgs{
		A: la.t.ref.s, B: lb.t.ref.s, C: out.ref.s,
		OffA: la.t.offset, OffB: lb.t.offset, OffC: out.offset,
		Batch: 1, M: m, N: n, K: k,
		TransA: la.trans, TransB: lb.trans,
		LDA: la.ld, LDB: lb.ld, LDC: n,
		StrideA: la.bstride, StrideB: lb.bstride, StrideC: m * n,
		Alpha: 1, Bias: bias.ref.s, OffBias: bias.offset, ReLU: relu,
	})
}

// Linear computes x·wᵀ + b for x [..., in], w [out, in] and b [out] (b may be nil), as
// torch.nn.functional.linear. Under autocast it runs in the low dtype.
func Linear(x, w, b *Tensor) *Tensor {
	return resolve(opLinear, x, w, b).linear(x, w, b, linearNone)
}

// LinearReLU is Linear(x, w, b).Relu() as one op, with the same results and
// gradients, bit for bit. Where the backend applies the ReLU inside the GEMM
// (backend.GemmReLU, for the dtype the op runs in) each block of the output is
// rectified by the worker that computed it, while it is in its cache; otherwise the
// op runs the GEMM, then the ReLU kernel. Backward masks the gradient with the
// output (y > 0 exactly where x·wᵀ + b > 0, NaN and -0 included) as the ReLU's
// backward does, then runs Linear's backward. Under autocast it runs in the low
// dtype, as Linear (and the Relu after it) would.
func LinearReLU(x, w, b *Tensor) *Tensor {
	return resolve(opLinearReLU, x, w, b).linear(x, w, b, linearReLU)
}

// LinearGELU is Linear(x, w, b).Gelu() as one op, with the same results and
// gradients, bit for bit. It exists for memory: where the backend writes the GELU's
// backward factor in its forward pass (backend.GeluWithGrad, for the dtype the op
// runs in) and a gradient will be needed, the GELU overwrites the GEMM's output in
// place and the op saves the factor, so that it holds two tensors of the output's
// size, as Linear then Gelu do (Linear's output, which the caller's Context keeps,
// and the GELU's); Gelu alone, saving the factor, would hold three. Otherwise it runs
// the GEMM, then the Gelu kernel, and saves the GEMM's output for the GELU's
// backward. Under autocast it runs in the low dtype, as Linear (and the Gelu after
// it) would.
func LinearGELU(x, w, b *Tensor) *Tensor {
	return resolve(opLinearGELU, x, w, b).linear(x, w, b, linearGELU)
}

// linear runs linear, or linear_relu or linear_gelu as act says.
func (c *Context) linear(x, w, b *Tensor, act linearAct) *Tensor {
	op, relu := opLinear, act == linearReLU
	switch act {
	case linearReLU:
		op = opLinearReLU
	case linearGELU:
		op = opLinearGELU
	}
	name := op.Name()
	var in []*Tensor
	if b == nil {
		in = c.prep(op, x, w)
		x, w = in[0], in[1]
		in = append(in, nil)
	} else {
		in = c.prep(op, x, w, b)
		x, w, b = in[0], in[1], in[2]
	}
	if w.Dim() != 2 || x.Dim() < 1 || x.shape[x.Dim()-1] != w.shape[1] || (b != nil && (b.Dim() != 1 || b.shape[0] != w.shape[0])) {
		fail(name, in, "want x [..., in], w [out, in], b [out]")
	}
	if x.dtype != w.dtype || (b != nil && b.dtype != x.dtype) || !x.dtype.IsFloat() {
		fail(name, in, "x, w and b must share one floating dtype; Cast them (or run under autocast)")
	}
	inF, outF := w.shape[1], w.shape[0]
	rows := x.Numel() / inF
	x2 := c.reshapeRaw(x.dense(c), Shape{rows, inF})
	outShape := append(x.shape[:x.Dim()-1].Clone(), outF)
	out := allocOut(c, x.dtype, x.device, Shape{rows, outF})
	// inGemm: the GEMM applies the ReLU (backend.MatMulArgs.ReLU).
	gr, ok := out.ref.b.(backend.GemmReLU)
	inGemm := relu && ok && gr.GemmReLU(x.dtype)
	switch gb, ok := out.ref.b.(backend.GemmBias); {
	case b == nil:
		c.gemmReLUInto(out, x2, w.mT(c), Shape{}, 0, inGemm)
	case ok && gb.GemmBias() && (b.strides[0] == 1 || outF == 1) && b.ref.s != out.ref.s:
		// The GEMM starts each tile of out from the bias row: the bits of
		// the copy below with beta 1, without a pass of its own.
		c.gemmBiasInto(out, x2, w.mT(c), b, inGemm)
	default:
		out.ref.b.Copy(out.bview(), b.expandView(Shape{rows, outF}))
		c.gemmReLUInto(out, x2, w.mT(c), Shape{}, 1, inGemm)
	}
	if relu && !inGemm {
		// The ReLU kernel on the GEMM's output, as Relu runs it.
		y := allocOut(c, out.dtype, out.device, out.shape)
		out.ref.b.Unary(backend.Relu, y.ref.s, out.ref.s, out.Numel(), 0, 0)
		out.Release()
		out = y
	}
	// GELU: pre holds what its backward reads, the factor T (gelu set) or the GEMM's
	// output, its input.
	var pre *Tensor
	gelu, _ := out.ref.b.(backend.GeluWithGrad)
	if act == linearGELU {
		if gelu != nil && gelu.GeluWithGrad(out.dtype) && c.recording(in) {
			pre = allocOut(c, out.dtype, out.device, out.shape)
			gelu.GeluForwardGrad(out.ref.s, pre.ref.s, out.ref.s, out.Numel())
		} else {
			gelu = nil
			y := allocOut(c, out.dtype, out.device, out.shape)
			out.ref.b.Unary(backend.Gelu, y.ref.s, out.ref.s, out.Numel(), 0, 0)
			if c.recording(in) {
				pre = out
			} else {
				out.Release()
			}
			out = y
		}
	}
	out = c.reshapeRaw(out, outShape)
	y := out
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		g2 := bc.reshapeRaw(g.dense(bc), Shape{rows, outF})
		switch {
		case act == linearGELU && gelu != nil:
			// The gradient over the saved factor where it is seen for the last time:
			// no tensor of the output's size more than the two the forward kept.
			da := pre
			if !bc.lastBackward {
				da = allocOut(bc, g2.dtype, g2.device, g2.shape)
			}
			gelu.GeluBackwardGrad(da.ref.s, g2.ref.s, pre.ref.s, g2.Numel())
			g2 = da
		case act == linearGELU:
			da := allocOut(bc, g2.dtype, g2.device, g2.shape)
			g2.ref.b.UnaryBackward(backend.Gelu, da.ref.s, g2.ref.s, pre.ref.s, nil, g2.Numel(), 0, 0)
			g2 = da
		}
		if relu {
			// The ReLU's backward, reading the output for its input: y > 0
			// exactly where its input is > 0.
			da := allocOut(bc, g2.dtype, g2.device, g2.shape)
			g2.ref.b.UnaryBackward(backend.Relu, da.ref.s, g2.ref.s, y.ref.s, nil, g2.Numel(), 0, 0)
			g2 = da
		}
		var gx, gw, gb *Tensor
		if x.requiresGrad {
			gx = allocOut(bc, g.dtype, g.device, Shape{rows, inF})
			bc.gemmInto(gx, g2, w, Shape{}, 0)
			gx = bc.reshapeRaw(gx, x.shape)
		}
		if w.requiresGrad {
			gw = allocOut(bc, g.dtype, g.device, Shape{outF, inF})
			bc.gemmInto(gw, g2.mT(bc), x2, Shape{}, 0)
		}
		if b != nil && b.requiresGrad {
			gb = bc.reduceRaw(backend.Sum, g2, []int{0}, false)
		}
		return []*Tensor{gx, gw, gb}
	})
}

// reshapeRaw views a contiguous tensor with another shape, without recording.
func (c *Context) reshapeRaw(t *Tensor, shape Shape) *Tensor {
	if t.shape.Equal(shape) {
		return t
	}
	if !t.IsContiguous() {
		t = t.dense(c)
	}
	return t.view(c, shape, contiguousStrides(shape), t.offset)
}
