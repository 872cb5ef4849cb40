package tensor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/backend"
)

// mulSquare is a custom op a·b² whose backward is written by hand; it computes its
// forward in the caller's Context with no graph, and its backward from what the
// closure kept.
func mulSquare(a, b *Tensor) *Tensor {
	return Custom("test_mul_square", []*Tensor{a, b},
		func(c *Context, in []*Tensor) *Tensor {
			nc := c.NoGrad()
			a, b := nc.Bind(in[0]), nc.Bind(in[1])
			return a.Mul(b).Mul(b)
		},
		func(c *Context, g *Tensor) []*Tensor {
			a, b := c.Bind(a), c.Bind(b)
			ga := g.Mul(b).Mul(b)
			gb := g.Mul(a).Mul(b).MulScalar(2)
			return []*Tensor{ga, gb}
		})
}

func TestCustomGradCheck(t *testing.T) {
	a := FromSlice([]float64{0.5, -1.25, 2, 0.75, -0.3, 1.1}, Shape{2, 3}, WithGrad())
	b := FromSlice([]float64{1.5, 0.25, -0.7}, Shape{3}, WithGrad())
	defer a.Release()
	defer b.Release()
	// b broadcasts in the forward, so its gradient must be summed back: do it in a
	// wrapper op that uses the engine's own broadcasting backward.
	f := func(xs []*Tensor) *Tensor { return mulSquare(xs[0], xs[1].Expand(2, 3).Contiguous()) }
	require.NoError(t, GradCheck(f, []*Tensor{a, b}, GradCheckOptions{}))

	c := NewContext()
	defer c.Close()
	y := f([]*Tensor{c.Bind(a), c.Bind(b)})
	require.True(t, recordsOp(y, "test_mul_square"))
	require.Equal(t, c, y.Context())
	_, registered := LookupOp("test_mul_square")
	require.False(t, registered, "custom ops are not registry rows")
}

// Memory: whatever forward and backward allocate is released — with the step's
// Context, or when backward is done — whichever way the tensors were made.
func TestCustomOwnership(t *testing.T) {
	dev := CPUDevice(6)
	bk := backend.MustGet(dev)
	w := FromSlice([]float32{1, 2, 3}, nil, WithDevice(dev), WithGrad())
	outside := FromSlice([]float32{10, 20, 30}, nil, WithDevice(dev))
	defer w.Release()
	defer outside.Release()
	base := bk.MemoryStats().Allocated

	for name, fwd := range map[string]func(c *Context, in []*Tensor) *Tensor{
		// computed in a scope of its own and kept: Custom takes it over
		"kept from own scope": func(c *Context, in []*Tensor) *Tensor {
			s := NewContext(NoGradMode())
			defer s.Close()
			y := s.Bind(in[0]).MulScalar(2)
			s.Keep(y)
			return y
		},
		// computed in the caller's Context: it stays the Context's
		"in the caller's context": func(c *Context, in []*Tensor) *Tensor {
			return c.NoGrad().Bind(in[0]).MulScalar(2)
		},
		// untracked: Custom takes it over
		"untracked": func(c *Context, in []*Tensor) *Tensor {
			y := Empty(in[0].Shape(), WithDevice(dev))
			return y.CopyFrom(in[0]).MulScalarInPlace(2)
		},
		// an input itself
		"an input": func(c *Context, in []*Tensor) *Tensor { return in[1] },
	} {
		for gname, bwd := range map[string]func(c *Context, g *Tensor, x *Tensor) *Tensor{
			"made in backward": func(c *Context, g, x *Tensor) *Tensor { return g.MulScalar(2) },
			"g itself":         func(c *Context, g, x *Tensor) *Tensor { return g },
			"a view of g":      func(c *Context, g, x *Tensor) *Tensor { return g.Reshape(3) },
			"g, released early": func(c *Context, g, x *Tensor) *Tensor {
				y := g.MulScalar(2)
				g.Release()
				return y
			},
			"from outside": func(c *Context, g, x *Tensor) *Tensor { return outside },
			"float64":      func(c *Context, g, x *Tensor) *Tensor { return g.Cast(Float64) },
		} {
			ctx := NewContext()
			x := ctx.Bind(w)
			var fwdIn []*Tensor
			y := Custom("test_ownership", []*Tensor{x, x},
				func(c *Context, in []*Tensor) *Tensor { fwdIn = in; return fwd(c, in) },
				func(c *Context, g *Tensor) []*Tensor { return []*Tensor{bwd(c, g, x)} })
			require.True(t, y.RequiresGrad())
			if name == "an input" {
				require.Same(t, x, fwdIn[1])
				require.NotSame(t, x, y, "the output is a handle of its own")
				require.Equal(t, []float32{1, 2, 3}, y.Float32s())
			} else {
				require.Equal(t, []float32{2, 4, 6}, y.Float32s())
			}
			y.Sum().Backward()
			want := map[string][]float32{
				"made in backward": {2, 2, 2}, "g itself": {1, 1, 1}, "a view of g": {1, 1, 1},
				"g, released early": {2, 2, 2}, "from outside": {10, 20, 30}, "float64": {1, 1, 1},
			}[gname]
			require.Equal(t, want, w.Grad().Float32s(), "%s / %s", name, gname)
			w.ZeroGrad()
			ctx.Close()
			require.Equal(t, base, bk.MemoryStats().Allocated, "%s / %s leaked", name, gname)
			require.Equal(t, []float32{10, 20, 30}, outside.Float32s())
		}
	}
}

func TestCustomMisuse(t *testing.T) {
	x := FromSlice([]float32{1, 2, 3}, nil, WithGrad())
	defer x.Release()
	ident := func(c *Context, in []*Tensor) *Tensor { return in[0] }
	for name, c := range map[string]struct {
		f    func()
		want string
	}{
		"registry name": {func() { Custom("matmul", []*Tensor{x}, ident, nil) }, "registry op"},
		"empty name":    {func() { Custom("", []*Tensor{x}, ident, nil) }, "needs a name"},
		"nil output": {func() {
			Custom("test_misuse", []*Tensor{x}, func(c *Context, in []*Tensor) *Tensor { return nil }, nil)
		}, "returned no tensor"},
		"wrong shape": {func() {
			y := Custom("test_misuse", []*Tensor{x}, ident, func(c *Context, g *Tensor) []*Tensor {
				return []*Tensor{Ones(Shape{2})}
			})
			y.Sum().Backward()
		}, "returned a [2] gradient on cpu for input 0, which is [3] on cpu"},
		"wrong device": {func() {
			y := Custom("test_misuse", []*Tensor{x}, ident, func(c *Context, g *Tensor) []*Tensor {
				return []*Tensor{g.To(CPUDevice(5))}
			})
			y.Sum().Backward()
		}, "on cpu:5"},
		"too many gradients": {func() {
			y := Custom("test_misuse", []*Tensor{x}, ident, func(c *Context, g *Tensor) []*Tensor {
				return []*Tensor{g, g}
			})
			y.Sum().Backward()
		}, "returned 2 gradients for 1 inputs"},
	} {
		err := requireOpError(t, c.f)
		require.Contains(t, err.Error(), c.want, name)
	}
}

// The output requires grad when forward's result does, even if no input does: the
// forward reached a leaf by other means, and backward is called to deliver its
// gradient.
func TestCustomRequiresGradFromForward(t *testing.T) {
	w := FromSlice([]float32{1, 2}, nil, WithGrad())
	defer w.Release()
	ctx := NewContext()
	defer ctx.Close()
	x := FromSlice([]float32{3, 4}, nil, WithContext(ctx))
	called := false
	y := Custom("test_captured", []*Tensor{x},
		func(c *Context, in []*Tensor) *Tensor { return in[0].Mul(c.Bind(w)) },
		func(c *Context, g *Tensor) []*Tensor {
			called = true
			w.SetGrad(g.Mul(c.Bind(x)).Contiguous().Detach())
			c.Keep(w.Grad())
			return nil
		})
	require.True(t, y.RequiresGrad())
	y.Sum().Backward()
	require.True(t, called)
	require.Equal(t, []float32{3, 4}, w.Grad().Float32s())

	// Grad off: no node, whatever the forward did.
	ng := ctx.NoGrad()
	z := Custom("test_captured", []*Tensor{ng.Bind(x)},
		func(c *Context, in []*Tensor) *Tensor { return ctx.Bind(w).Mul(ctx.Bind(x)) }, nil)
	require.False(t, z.RequiresGrad())
	require.True(t, z.IsLeaf())
}

type customEvents struct{ events []string }

func (r *customEvents) Begin(c *Context, op *Op) { r.events = append(r.events, "begin "+op.Name()) }
func (r *customEvents) Forward(c *Context, op *Op, in []*Tensor, out *Tensor) any {
	r.events = append(r.events, "forward "+op.Name())
	return op.Name()
}
func (r *customEvents) Backward(op *Op, tag any, g *Tensor, gi []*Tensor, took time.Duration) {
	g.Float32s() // the gradient is still alive when an Observer sees it
	r.events = append(r.events, "backward "+tag.(string))
}

func TestCustomObserved(t *testing.T) {
	rec := &customEvents{}
	ctx := NewContext(UseObserver(rec))
	defer ctx.Close()
	x := FromSlice([]float32{1, 2}, nil, WithContext(ctx), WithGrad())
	y := Custom("test_observed", []*Tensor{x},
		func(c *Context, in []*Tensor) *Tensor { return in[0].Relu() },
		func(c *Context, g *Tensor) []*Tensor {
			g.Release() // released early: the Observer still gets to see it
			return nil
		})
	y.Backward(GradOutput(Ones(Shape{2}, WithContext(ctx))))
	require.Equal(t, []string{"begin test_observed", "begin relu", "forward relu", "forward test_observed", "backward test_observed"}, rec.events)
}

// A custom op's inputs are not cast under autocast: its forward decides.
func TestCustomIsPassthroughUnderAutocast(t *testing.T) {
	ctx := NewContext(UseAutocast(lowPolicy{}))
	defer ctx.Close()
	x := FromSlice([]float32{1, 2}, nil, WithContext(ctx))
	var seen DType
	Custom("test_autocast", []*Tensor{x}, func(c *Context, in []*Tensor) *Tensor {
		seen = in[0].DType()
		return in[0].MatMul(in[0].Reshape(2, 1))
	}, nil)
	require.Equal(t, Float32, seen)
}

// lowPolicy runs every LowerPrecision op in float16.
type lowPolicy struct{}

func (lowPolicy) Category(op *Op, dev Device) CastCategory { return op.Category() }
func (lowPolicy) LowDType() DType                          { return Float16 }

func TestAdopt(t *testing.T) {
	dev := CPUDevice(6)
	bk := backend.MustGet(dev)
	base := bk.MemoryStats().Allocated
	c := NewContext()
	s := NewContext(NoGradMode())
	a := Ones(Shape{4}, WithContext(s), WithDevice(dev))
	b := a.MulScalar(3)
	kept := b.MulScalar(2)
	s.Keep(kept)
	owned := c.Adopt(s)
	require.ElementsMatch(t, []*Tensor{a, b}, owned)
	require.Equal(t, 0, s.Tracked())
	require.Equal(t, 2, c.Tracked())
	require.Equal(t, c, b.Context(), "adopted tensors are c's")
	require.True(t, b.Add(b).RequiresGrad() == false)
	require.Panics(t, func() { Ones(Shape{1}, WithContext(s)) }, "the adopted scope is closed")
	a.Release() // early
	require.Equal(t, []float32{3, 3, 3, 3}, b.Float32s())
	c.Close()
	require.True(t, b.Released())
	require.Equal(t, []float32{6, 6, 6, 6}, kept.Float32s())
	kept.Release()
	require.Equal(t, base, bk.MemoryStats().Allocated)

	requireOpError(t, func() { c.Adopt(c.NoGrad()) })
	d := NewContext()
	defer d.Close()
	requireOpError(t, func() { d.Adopt(d) })
	requireOpError(t, func() { d.NoGrad().Adopt(d) })
}
