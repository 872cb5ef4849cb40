package tensor

import (
	"slices"

	"github.com/gamp-ml/gamp/backend"
)

var (
	opSum  = defOp("sum", FP32)
	opMean = defOp("mean", FP32)
)

// Sum sums over dims (all dimensions when none are given). Reductions accumulate in
// float64 on the CPU (at least float32 everywhere) and autocast runs them in float32.
func (t *Tensor) Sum(dims ...int) *Tensor { return resolve(opSum, t).sumOp(opSum, t, dims, false) }

// SumKeep sums over dims keeping them as size-1 dimensions.
func (t *Tensor) SumKeep(dims ...int) *Tensor { return resolve(opSum, t).sumOp(opSum, t, dims, true) }

// Mean averages over dims (all when none are given).
func (t *Tensor) Mean(dims ...int) *Tensor {
	return resolve(opMean, t).sumOp(opMean, t, dims, false)
}

// MeanKeep averages over dims keeping them.
func (t *Tensor) MeanKeep(dims ...int) *Tensor {
	return resolve(opMean, t).sumOp(opMean, t, dims, true)
}

// normDims resolves dims (empty: all), sorted and unique.
func (t *Tensor) normDims(op string, dims []int) []int {
	if len(dims) == 0 {
		out := make([]int, t.Dim())
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, 0, len(dims))
	for _, d := range dims {
		out = append(out, t.axis(op, d))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// reducedShape is t's shape with dims reduced (kept as 1 or removed).
func reducedShape(s Shape, dims []int, keep bool) Shape {
	var out Shape
	for i, d := range s {
		if slices.Contains(dims, i) {
			if keep {
				out = append(out, 1)
			}
			continue
		}
		out = append(out, d)
	}
	return out
}

func (c *Context) sumOp(op *Op, t *Tensor, dims []int, keep bool) *Tensor {
	in := c.prep(op, t)
	t = in[0]
	if !t.dtype.IsFloat() {
		fail(op.Name(), in, "needs a floating-point tensor; Cast it first")
	}
	dims = t.normDims(op.Name(), dims)
	kind := backend.Sum
	if op == opMean {
		kind = backend.Mean
	}
	out := c.reduceRaw(kind, t, dims, keep)
	orig := t.shape
	count := 1
	for _, d := range dims {
		count *= orig[d]
	}
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		if !keep {
			g = bc.reshape(g, reducedShape(orig, dims, true))
		}
		if op == opMean {
			g = bc.unaryRaw(g, backend.MulScalar, 1/float64(count), 0)
		}
		gx := allocOut(bc, g.dtype, g.device, orig)
		g.ref.b.Copy(gx.bview(), g.expandView(orig))
		return []*Tensor{gx}
	})
}

// sum is the unrecorded-by-default helper other ops use (sumTo).
func (c *Context) sum(t *Tensor, dims []int, keep bool) *Tensor {
	return c.sumOp(opSum, t, dims, keep)
}

// reduceRaw runs a Sum/Mean/Max/Min reduction kernel over dims without recording.
// Each reduced dimension is one kernel pass over a [outer, n, inner] view; a run of
// adjacent reduced dimensions is merged into one pass.
func (c *Context) reduceRaw(kind backend.ReduceOp, t *Tensor, dims []int, keep bool) *Tensor {
	cur := t.dense(c)
	if len(dims) == 0 {
		// Always return a fresh tensor: the result gets its own autograd node.
		cur = t.untrackedCopy(t.dtype)
		adoptInto(c, cur)
	}
	shape := cur.shape.Clone()
	// Reduce from the last run of dims to the first so indices stay valid.
	for i := len(dims) - 1; i >= 0; {
		j := i
		for j > 0 && dims[j-1] == dims[j]-1 {
			j--
		}
		lo, hi := dims[j], dims[i]+1
		outer, n, inner := 1, 1, 1
		for k, d := range shape {
			switch {
			case k < lo:
				outer *= d
			case k < hi:
				n *= d
			default:
				inner *= d
			}
		}
		next := slices.Concat(shape[:lo], Shape{1}, shape[hi:])
		if kind == backend.Mean && len(dims) > 1 {
			// Mean over several passes: sum each, scale once at the end.
			r := allocOut(c, cur.dtype, cur.device, next)
			cur.ref.b.Reduce(backend.Sum, r.ref.s, cur.ref.s, outer, n, inner)
			cur = r
		} else {
			r := allocOut(c, cur.dtype, cur.device, next)
			cur.ref.b.Reduce(kind, r.ref.s, cur.ref.s, outer, n, inner)
			cur = r
		}
		shape = next
		i = j - 1
	}
	if kind == backend.Mean && len(dims) > 1 {
		count := 1
		for _, d := range dims {
			count *= t.shape[d]
		}
		cur = c.unaryRaw(cur, backend.MulScalar, 1/float64(count), 0)
	}
	final := reducedShape(t.shape, dims, keep)
	if !cur.shape.Equal(final) {
		cur = cur.view(c, final, contiguousStrides(final), cur.offset)
	}
	return cur
}
