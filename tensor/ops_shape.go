package tensor

import "slices"

var (
	opReshape   = defOp("reshape", Passthrough)
	opPermute   = defOp("permute", Passthrough)
	opExpand    = defOp("expand", Passthrough)
	opSqueeze   = defOp("squeeze", Passthrough)
	opUnsqueeze = defOp("unsqueeze", Passthrough)
)

// Reshape returns t with a new shape holding the same elements; one dimension may be
// -1 (inferred). It is a view when t is contiguous, a copy otherwise.
func (t *Tensor) Reshape(shape ...int) *Tensor { return resolve(opReshape, t).reshape(t, shape) }

// View is Reshape (PyTorch's view, without the contiguity requirement).
func (t *Tensor) View(shape ...int) *Tensor { return t.Reshape(shape...) }

// Flatten merges dimensions start..end (inclusive, negative from the end) into one.
func (t *Tensor) Flatten(start, end int) *Tensor {
	if t.Dim() == 0 {
		return t.Reshape(1)
	}
	s, e := t.axis("flatten", start), t.axis("flatten", end)
	shape := append(Shape(nil), t.shape[:s]...)
	n := 1
	for _, d := range t.shape[s : e+1] {
		n *= d
	}
	shape = append(shape, n)
	shape = append(shape, t.shape[e+1:]...)
	return t.Reshape(shape...)
}

func (c *Context) reshape(t *Tensor, shape Shape) *Tensor { return c.reshapeOp(opReshape, t, shape) }

// reshapeOp is reshape recorded as op (squeeze and unsqueeze are reshapes).
func (c *Context) reshapeOp(op *Op, t *Tensor, shape Shape) *Tensor {
	in := c.prep(op, t)
	t = in[0]
	shape = inferShape(t, shape)
	if shape.Equal(t.shape) {
		return c.observe(op, in, t)
	}
	var out *Tensor
	if t.IsContiguous() {
		out = t.view(c, shape, contiguousStrides(shape), t.offset)
	} else {
		out = allocOut(c, t.dtype, t.device, shape)
		dst := out.bview()
		dst.Shape, dst.Strides = t.shape, contiguousStrides(t.shape)
		t.ref.b.Copy(dst, t.bview())
	}
	orig := t.shape
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		return []*Tensor{bc.reshape(g, orig)}
	})
}

func inferShape(t *Tensor, shape Shape) Shape {
	shape = shape.Clone()
	neg, n := -1, 1
	for i, d := range shape {
		switch {
		case d == -1 && neg < 0:
			neg = i
		case d < 0:
			fail("reshape", []*Tensor{t}, "bad target shape %v", shape)
		default:
			n *= d
		}
	}
	if neg >= 0 {
		if n == 0 || t.Numel()%n != 0 {
			fail("reshape", []*Tensor{t}, "cannot infer -1 in %v for %d elements", shape, t.Numel())
		}
		shape[neg] = t.Numel() / n
	} else if n != t.Numel() {
		fail("reshape", []*Tensor{t}, "shape %v holds %d elements, the tensor has %d", shape, n, t.Numel())
	}
	return shape
}

// Permute reorders the dimensions (a view).
func (t *Tensor) Permute(dims ...int) *Tensor { return resolve(opPermute, t).permute(t, dims) }

// Transpose swaps two dimensions (a view).
func (t *Tensor) Transpose(d0, d1 int) *Tensor {
	dims := make([]int, t.Dim())
	for i := range dims {
		dims[i] = i
	}
	a, b := t.axis("transpose", d0), t.axis("transpose", d1)
	dims[a], dims[b] = dims[b], dims[a]
	return t.Permute(dims...)
}

// T transposes the last two dimensions (a view).
func (t *Tensor) T() *Tensor { return t.Transpose(-2, -1) }

func (c *Context) permute(t *Tensor, dims []int) *Tensor {
	in := c.prep(opPermute, t)
	t = in[0]
	if len(dims) != t.Dim() {
		fail("permute", in, "permutation %v has %d entries for a %d-d tensor", dims, len(dims), t.Dim())
	}
	seen := make([]bool, len(dims))
	shape := make(Shape, len(dims))
	strides := make([]int, len(dims))
	inv := make([]int, len(dims))
	for i, d := range dims {
		d = t.axis("permute", d)
		if seen[d] {
			fail("permute", in, "permutation %v repeats dimension %d", dims, d)
		}
		seen[d] = true
		shape[i], strides[i], inv[d] = t.shape[d], t.strides[d], i
	}
	out := t.view(c, shape, strides, t.offset)
	return c.record(opPermute, out, in, func(bc *Context, g *Tensor) []*Tensor {
		return []*Tensor{bc.permute(g, inv)}
	})
}

// Expand broadcasts t to shape (a view with zero strides; -1 keeps a dimension).
func (t *Tensor) Expand(shape ...int) *Tensor {
	c := resolve(opExpand, t)
	in := c.prep(opExpand, t)
	t = in[0]
	s := Shape(shape).Clone()
	off := len(s) - t.Dim()
	if off < 0 {
		fail("expand", in, "cannot expand to fewer dimensions %v", s)
	}
	for i := range s {
		if s[i] == -1 && i >= off {
			s[i] = t.shape[i-off]
		}
		if i >= off && t.shape[i-off] != 1 && t.shape[i-off] != s[i] {
			fail("expand", in, "cannot expand to %v", s)
		}
	}
	v := t.expandView(s)
	out := t.view(c, s, v.Strides, t.offset)
	orig := t.shape
	return c.record(opExpand, out, in, func(bc *Context, g *Tensor) []*Tensor {
		return []*Tensor{bc.sumTo(g, orig)}
	})
}

// Squeeze removes dimension d, which must have size 1.
func (t *Tensor) Squeeze(d int) *Tensor {
	d = t.axis("squeeze", d)
	if t.shape[d] != 1 {
		fail("squeeze", []*Tensor{t}, "dimension %d has size %d, not 1", d, t.shape[d])
	}
	s := slices.Delete(t.shape.Clone(), d, d+1)
	return resolve(opSqueeze, t).reshapeOp(opSqueeze, t, s)
}

// Unsqueeze inserts a dimension of size 1 at position d.
func (t *Tensor) Unsqueeze(d int) *Tensor {
	if d < 0 {
		d += t.Dim() + 1
	}
	if d < 0 || d > t.Dim() {
		fail("unsqueeze", []*Tensor{t}, "position %d out of range", d)
	}
	s := slices.Insert(t.shape.Clone(), d, 1)
	return resolve(opUnsqueeze, t).reshapeOp(opUnsqueeze, t, s)
}
