package tensor

import (
	"slices"

	"github.com/gamp-ml/gamp/backend"
)

// Indexing, selection, joining and slicing ops, and the reductions over one dimension
// that return positions (max/min with their arg-max, argmax/argmin).

var (
	opEmbedding   = defOp("embedding", Passthrough)
	opIndexSelect = defOp("index_select", Passthrough)
	opWhere       = defOp("where", Passthrough)
	opMaskedFill  = defOp("masked_fill", Passthrough)
	opConcat      = defOp("cat", Promote)
	opStack       = defOp("stack", Promote)
	opSlice       = defOp("slice", Passthrough)
	opMax         = defOp("max", Passthrough)
	opMin         = defOp("min", Passthrough)
	opArgMax      = defOpDiff("argmax", Passthrough, false)
	opArgMin      = defOpDiff("argmin", Passthrough, false)
)

// splitAt views shape as [outer, n, inner] around dimension d.
func splitAt(shape Shape, d int) (outer, n, inner int) {
	outer, inner = 1, 1
	for i, s := range shape {
		switch {
		case i < d:
			outer *= s
		case i > d:
			inner *= s
		}
	}
	return outer, shape[d], inner
}

// guardIndex runs a gather or scatter kernel and turns the panic it raises for an index
// out of range into an OpError naming the op and its inputs. Out-of-memory errors and
// OpErrors pass through unchanged.
func guardIndex(op string, in []*Tensor, kernel func()) {
	defer func() {
		if r := recover(); r != nil {
			switch r.(type) {
			case *backend.OOMError, *OpError:
				panic(r)
			}
			fail(op, in, "%v; every index must lie in [0, size of the indexed dimension)", r)
		}
	}()
	kernel()
}

// --- gathering

// Embedding looks up rows of weight [V, D] for the Int32 or Int64 indices idx of any
// shape, giving [idx..., D] (torch.nn.functional.embedding). The gradient of weight
// accumulates the gradients of the rows picked (repeated indices add up); idx gets none.
func Embedding(idx, weight *Tensor) *Tensor {
	return resolve(opEmbedding, idx, weight).embedding(idx, weight)
}

func (c *Context) embedding(idx, w *Tensor) *Tensor {
	op := opEmbedding
	in := c.prep(op, idx, w)
	idx, w = in[0], in[1]
	if !idx.dtype.IsInt() {
		fail(op.Name(), in, "indices must be Int32 or Int64; Cast them first")
	}
	if w.Dim() != 2 {
		fail(op.Name(), in, "weight must be [V, D] (one row per index value)")
	}
	v, d := w.shape[0], w.shape[1]
	m := idx.Numel()
	idd, wd := idx.dense(c), w.dense(c)
	out := allocOut(c, w.dtype, w.device, append(idx.shape.Clone(), d))
	guardIndex(op.Name(), in, func() { w.ref.b.IndexSelect(out.ref.s, wd.ref.s, idd.ref.s, 1, v, d, m) })
	releaseTemp(wd, w)
	wshape := w.shape
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		gd := g.dense(bc)
		gw := allocTensor(bc, g.dtype, g.device, wshape)
		g.ref.b.IndexAdd(gw.ref.s, gd.ref.s, idd.ref.s, 1, v, d, m)
		return []*Tensor{nil, gw}
	})
}

// IndexSelect gathers the entries idx (a 1-d Int32 or Int64 tensor) of x along dim, as
// torch.index_select. The gradient scatters back, adding where idx repeats.
func IndexSelect(x *Tensor, dim int, idx *Tensor) *Tensor {
	return resolve(opIndexSelect, x, idx).indexSelect(x, dim, idx)
}

// IndexSelect gathers entries of t along dim (see IndexSelect).
func (t *Tensor) IndexSelect(dim int, idx *Tensor) *Tensor { return IndexSelect(t, dim, idx) }

func (c *Context) indexSelect(x *Tensor, dim int, idx *Tensor) *Tensor {
	op := opIndexSelect
	in := c.prep(op, x, idx)
	x, idx = in[0], in[1]
	if !idx.dtype.IsInt() || idx.Dim() > 1 {
		fail(op.Name(), in, "the index must be a 1-d Int32 or Int64 tensor")
	}
	d := x.axis(op.Name(), dim)
	outer, n, inner := splitAt(x.shape, d)
	m := idx.Numel()
	shape := x.shape.Clone()
	shape[d] = m
	idd, xd := idx.dense(c), x.dense(c)
	out := allocTensor(c, x.dtype, x.device, shape)
	guardIndex(op.Name(), in, func() { x.ref.b.IndexSelect(out.ref.s, xd.ref.s, idd.ref.s, outer, n, inner, m) })
	releaseTemp(xd, x)
	xshape := x.shape
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		gd := g.dense(bc)
		gx := allocTensor(bc, g.dtype, g.device, xshape)
		g.ref.b.IndexAdd(gx.ref.s, gd.ref.s, idd.ref.s, outer, n, inner, m)
		return []*Tensor{gx, nil}
	})
}

// --- selecting

// Where returns cond ? a : b elementwise with broadcasting (torch.where); cond is Bool.
// Mixed dtypes of a and b compute in the wider one. Each branch gets the gradient where
// it was chosen.
func Where(cond, a, b *Tensor) *Tensor { return resolve(opWhere, cond, a, b).where(cond, a, b) }

func (c *Context) where(cond, a, b *Tensor) *Tensor {
	op := opWhere
	in := c.prep(op, cond, a, b)
	cond, a, b = in[0], in[1], in[2]
	if cond.dtype != Bool {
		fail(op.Name(), in, "the condition must be Bool (from a comparison such as Gt); got %s", cond.dtype)
	}
	if a.dtype != b.dtype {
		w := promote(a.dtype, b.dtype)
		a, b = c.cast(a, w), c.cast(b, w)
		in = []*Tensor{cond, a, b}
	}
	out := c.whereRaw(cond, a, b)
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		zero := allocTensor(bc, g.dtype, g.device, Shape{})
		var ga, gb *Tensor
		if a.requiresGrad {
			ga = bc.sumTo(bc.whereRaw(cond, g, zero), a.shape)
		}
		if b.requiresGrad {
			gb = bc.sumTo(bc.whereRaw(cond, zero, g), b.shape)
		}
		return []*Tensor{nil, ga, gb}
	})
}

// MaskedFill returns x with v wherever mask (Bool, broadcastable to x's shape) is true,
// as torch.Tensor.masked_fill. The filled positions get no gradient.
func MaskedFill(x, mask *Tensor, v float64) *Tensor {
	return resolve(opMaskedFill, x, mask).maskedFill(x, mask, v)
}

// MaskedFill returns t with v where mask is true (see MaskedFill).
func (t *Tensor) MaskedFill(mask *Tensor, v float64) *Tensor { return MaskedFill(t, mask, v) }

func (c *Context) maskedFill(x, mask *Tensor, v float64) *Tensor {
	op := opMaskedFill
	in := c.prep(op, x, mask)
	x, mask = in[0], in[1]
	if mask.dtype != Bool {
		fail(op.Name(), in, "the mask must be Bool (from a comparison such as Gt); got %s", mask.dtype)
	}
	if !broadcastShapes(op.Name(), x, mask).Equal(x.shape) {
		fail(op.Name(), in, "mask %v does not broadcast to the input's shape %v", mask.shape, x.shape)
	}
	fill := allocTensor(c, x.dtype, x.device, Shape{})
	x.ref.b.Fill(fill.bview(), v)
	out := allocTensor(c, x.dtype, x.device, x.shape)
	x.ref.b.Where(out.bview(), mask.expandView(x.shape), fill.expandView(x.shape), x.bview())
	fill.Release()
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		zero := allocTensor(bc, g.dtype, g.device, Shape{})
		gx := allocTensor(bc, g.dtype, g.device, g.shape)
		g.ref.b.Where(gx.bview(), mask.expandView(g.shape), zero.expandView(g.shape), g.bview())
		return []*Tensor{gx, nil}
	})
}

// --- joining

// Concat joins tensors along dim (torch.cat); they must agree on every other
// dimension. Mixed dtypes are promoted to the widest.
func Concat(ts []*Tensor, dim int) *Tensor {
	return resolve(opConcat, ts...).join(opConcat, ts, dim)
}

// Stack joins tensors of one shape along a new dimension dim (torch.stack); dim may be
// t.Dim() (last), and negative dims count from the end of the result.
func Stack(ts []*Tensor, dim int) *Tensor {
	return resolve(opStack, ts...).join(opStack, ts, dim)
}

// join implements Concat and Stack: each input is copied into a strided window of the
// output, and the gradient of each is copied out of the same window.
func (c *Context) join(op *Op, ts []*Tensor, dim int) *Tensor {
	if len(ts) == 0 {
		panic(&OpError{Op: op.Name(), Msg: "needs at least one tensor"})
	}
	for _, t := range ts {
		if t == nil {
			panic(&OpError{Op: op.Name(), Msg: "nil tensor in the list"})
		}
	}
	in := c.prep(op, ts...)
	first := in[0]
	stack := op == opStack
	var d int
	var shape Shape
	if stack {
		d = dim
		if d < 0 {
			d += first.Dim() + 1
		}
		if d < 0 || d > first.Dim() {
			fail(op.Name(), in, "dimension %d out of range for stacking %d-d tensors", dim, first.Dim())
		}
		for _, t := range in {
			if !t.shape.Equal(first.shape) {
				fail(op.Name(), in, "all tensors must have one shape; got %v and %v", first.shape, t.shape)
			}
		}
		shape = slices.Insert(first.shape.Clone(), d, len(in))
	} else {
		if first.Dim() == 0 {
			fail(op.Name(), in, "cannot concatenate 0-d tensors; use Stack")
		}
		d = first.axis(op.Name(), dim)
		shape = first.shape.Clone()
		shape[d] = 0
		for _, t := range in {
			if t.Dim() != first.Dim() {
				fail(op.Name(), in, "all tensors must have %d dimensions", first.Dim())
			}
			for k := range t.shape {
				if k != d && t.shape[k] != first.shape[k] {
					fail(op.Name(), in, "sizes must match except in dimension %d; got %v and %v", d, first.shape, t.shape)
				}
			}
			shape[d] += t.shape[d]
		}
	}
	// window returns the part of a tensor with shape `shape` and strides st (offset
	// base) that input i occupies, shaped like input i.
	starts := make([]int, len(in))
	for i := 1; i < len(in); i++ {
		starts[i] = starts[i-1] + 1
		if !stack {
			starts[i] = starts[i-1] + in[i-1].shape[d]
		}
	}
	window := func(s backend.Storage, base int, st []int, i int) backend.View {
		v := backend.View{S: s, Offset: base + starts[i]*st[d], Shape: in[i].shape}
		if stack {
			v.Strides = slices.Delete(slices.Clone(st), d, d+1)
		} else {
			v.Strides = st
		}
		return v
	}
	out := allocOut(c, first.dtype, first.device, shape)
	for i, t := range in {
		t.ref.b.Copy(window(out.ref.s, 0, out.strides, i), t.bview())
	}
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		gs := make([]*Tensor, len(in))
		for i, t := range in {
			if !t.requiresGrad {
				continue
			}
			gi := allocOut(bc, g.dtype, g.device, t.shape)
			g.ref.b.Copy(gi.bview(), window(g.ref.s, g.offset, g.strides, i))
			gs[i] = gi
		}
		return gs
	})
}

// --- slicing

// Slice returns x[start:end:step] along dim as a view, with Python's rules: negative
// start and end count from the end, both are clamped to the dimension, and step ≥ 1.
// Pass math.MaxInt as end to slice to the end.
func Slice(x *Tensor, dim, start, end, step int) *Tensor {
	return resolve(opSlice, x).slice(opSlice.Name(), x, dim, start, end, step)
}

// Slice returns t[start:end:step] along dim (see Slice).
func (t *Tensor) Slice(dim, start, end, step int) *Tensor { return Slice(t, dim, start, end, step) }

// Narrow returns length entries of x along dim starting at start (negative: from the
// end), as a view (torch.narrow). Unlike Slice it does not clamp: the range must fit.
func Narrow(x *Tensor, dim, start, length int) *Tensor {
	d := x.axis("narrow", dim)
	n := x.shape[d]
	if start < 0 {
		start += n
	}
	if start < 0 || length < 0 || start+length > n {
		fail("narrow", []*Tensor{x}, "range [%d, %d+%d) does not fit dimension %d of size %d", start, start, length, d, n)
	}
	return resolve(opSlice, x).slice("narrow", x, d, start, start+length, 1)
}

// Narrow returns length entries of t along dim from start (see Narrow).
func (t *Tensor) Narrow(dim, start, length int) *Tensor { return Narrow(t, dim, start, length) }

// Select returns entry i of x along dim with that dimension removed (x[..., i, ...];
// negative i counts from the end): a view when the entry is contiguous, else a copy.
func (t *Tensor) Select(dim, i int) *Tensor {
	d := t.axis("select", dim)
	return t.Narrow(d, i, 1).Squeeze(d)
}

// clampIndex applies Python's slice-bound rules to i for a dimension of size n.
func clampIndex(i, n int) int {
	if i < 0 {
		i += n
		if i < 0 {
			i = 0
		}
	}
	return min(i, n)
}

func (c *Context) slice(name string, x *Tensor, dim, start, end, step int) *Tensor {
	in := c.prep(opSlice, x)
	x = in[0]
	d := x.axis(name, dim)
	if step < 1 {
		fail(name, in, "step %d must be at least 1", step)
	}
	n := x.shape[d]
	start, end = clampIndex(start, n), clampIndex(end, n)
	length := 0
	if end > start {
		length = (end - start + step - 1) / step
	}
	shape := x.shape.Clone()
	shape[d] = length
	strides := slices.Clone(x.strides)
	strides[d] *= step
	offset := x.offset
	if length > 0 {
		offset += start * x.strides[d]
	}
	out := x.view(c, shape, strides, offset)
	xshape := x.shape
	return c.record(opSlice, out, in, func(bc *Context, g *Tensor) []*Tensor {
		gx := allocTensor(bc, g.dtype, g.device, xshape)
		st := slices.Clone(gx.strides)
		off := start * st[d]
		st[d] *= step
		if length > 0 {
			g.ref.b.Copy(backend.View{S: gx.ref.s, Offset: off, Shape: shape, Strides: st}, g.bview())
		}
		return []*Tensor{gx}
	})
}

// --- extremes over one dimension

// Max returns the largest entries of t along dim, dropping dim (the values of
// torch.max(t, dim)); MaxKeep keeps it as size 1, as Sum and SumKeep do. The gradient
// flows to the first position of each maximum, as in PyTorch; a NaN counts as the
// maximum.
func (t *Tensor) Max(dim int) *Tensor { return resolve(opMax, t).extreme(opMax, t, dim, false) }

// MaxKeep is Max with dim kept as size 1 (torch.max(t, dim, keepdim=True)).
func (t *Tensor) MaxKeep(dim int) *Tensor { return resolve(opMax, t).extreme(opMax, t, dim, true) }

// Min returns the smallest entries of t along dim, dropping dim (see Max).
func (t *Tensor) Min(dim int) *Tensor { return resolve(opMin, t).extreme(opMin, t, dim, false) }

// MinKeep is Min with dim kept as size 1.
func (t *Tensor) MinKeep(dim int) *Tensor { return resolve(opMin, t).extreme(opMin, t, dim, true) }

// ArgMax returns the Int64 position of the first largest entry of t along dim,
// dropping dim (torch.argmax). It has no gradient.
func (t *Tensor) ArgMax(dim int) *Tensor {
	return resolve(opArgMax, t).extreme(opArgMax, t, dim, false)
}

// ArgMaxKeep is ArgMax with dim kept as size 1.
func (t *Tensor) ArgMaxKeep(dim int) *Tensor {
	return resolve(opArgMax, t).extreme(opArgMax, t, dim, true)
}

// ArgMin returns the Int64 position of the first smallest entry of t along dim,
// dropping dim (see ArgMax).
func (t *Tensor) ArgMin(dim int) *Tensor {
	return resolve(opArgMin, t).extreme(opArgMin, t, dim, false)
}

// ArgMinKeep is ArgMin with dim kept as size 1.
func (t *Tensor) ArgMinKeep(dim int) *Tensor {
	return resolve(opArgMin, t).extreme(opArgMin, t, dim, true)
}

func (c *Context) extreme(op *Op, x *Tensor, dim int, keep bool) *Tensor {
	in := c.prep(op, x)
	x = in[0]
	if x.dtype == Bool {
		fail(op.Name(), in, "needs a numeric tensor; Cast it first")
	}
	var d int
	shape := x.shape
	if x.Dim() == 0 {
		// A 0-d tensor is its own extreme, at position 0 (as PyTorch).
		if dim != 0 && dim != -1 {
			fail(op.Name(), in, "dimension %d out of range for a 0-d tensor", dim)
		}
		shape = Shape{1}
	} else {
		d = x.axis(op.Name(), dim)
	}
	outer, n, inner := splitAt(shape, d)
	if n == 0 {
		fail(op.Name(), in, "dimension %d is empty and has no extreme", d)
	}
	oshape := Shape{}
	if x.Dim() > 0 {
		oshape = reducedShape(x.shape, []int{d}, keep)
	}
	xd := x.dense(c)
	defer releaseTemp(xd, x)
	arg := backend.ArgMax
	if op == opMin || op == opArgMin {
		arg = backend.ArgMin
	}
	if op == opArgMax || op == opArgMin {
		out := allocTensor(c, Int64, x.device, oshape)
		x.ref.b.Reduce(arg, out.ref.s, xd.ref.s, outer, n, inner)
		return c.observe(op, []*Tensor{x}, out)
	}
	kind := backend.Max
	if op == opMin {
		kind = backend.Min
	}
	out := allocTensor(c, x.dtype, x.device, oshape)
	x.ref.b.Reduce(kind, out.ref.s, xd.ref.s, outer, n, inner)
	if !c.GradEnabled() || !x.requiresGrad {
		return c.observe(op, []*Tensor{x}, out)
	}
	// The positions the gradient goes to, saved in place of x.
	idx := allocTensor(c, Int64, x.device, Shape{outer, 1, inner})
	x.ref.b.Reduce(arg, idx.ref.s, xd.ref.s, outer, n, inner)
	xshape := x.shape
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		// gx[o, j, i] = g[o, i] where j == idx[o, i], else 0.
		full := Shape{outer, n, inner}
		pos := allocTensor(bc, Int64, g.device, Shape{1, n, 1})
		g.ref.b.Arange(pos.ref.s, n, 0, 1)
		hit := allocTensor(bc, Bool, g.device, full)
		g.ref.b.Binary(backend.Eq, hit.bview(), pos.expandView(full), idx.expandView(full))
		gd := bc.reshapeRaw(g.dense(bc), Shape{outer, 1, inner})
		zero := allocTensor(bc, g.dtype, g.device, Shape{})
		gx := allocTensor(bc, g.dtype, g.device, full)
		g.ref.b.Where(gx.bview(), hit.bview(), gd.expandView(full), zero.expandView(full))
		return []*Tensor{bc.reshapeRaw(gx, xshape)}
	})
}
