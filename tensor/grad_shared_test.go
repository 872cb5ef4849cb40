package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSharedGradients checks the gradients that add's backward hands to both of its
// inputs in one storage: accumulated into, taken by leaves, given to hooks that
// change them in place, and for x + x. Each case's gradients are compared bit for bit
// with those of the same graph when the engine copies the second share
// (copySharedGrads, its old way), and the leaves' gradients must not share storage.
func TestSharedGradients(t *testing.T) {
	x0, y0, w0 := Randn(Shape{6, 5}), Randn(Shape{6, 5}), Randn(Shape{5, 5})
	leaves := func() (x, y, w *Tensor) {
		return x0.Detach().SetRequiresGrad(true), y0.Detach().SetRequiresGrad(true), w0.Detach().SetRequiresGrad(true)
	}
	plus := func(a, b *Tensor) *Tensor { return a.Add(b) }
	type result struct{ gx, gy, gw []uint32 }
	cases := map[string]func(x, y, w *Tensor) *Tensor{
		// A residual block: h = u + f(u), u used again below, so u's gradient is the
		// shared one plus f's, accumulated.
		"residual": func(x, y, w *Tensor) *Tensor {
			u := x.Mul(y)
			h := plus(u, u.MatMul(w).Tanh())
			return h.Mul(h).Sum().Add(u.Sum())
		},
		// The other share still waits while one is accumulated into: the product
		// consumes both u and v, so their nodes run after it, and it adds into
		// whichever gradient the add gave first, in either order of the terms.
		"pending": func(x, y, w *Tensor) *Tensor {
			u := x.Mul(y)
			v := u.MatMul(w).Tanh()
			return plus(u, v).Sum().Add(u.Mul(v).Sum())
		},
		"pending-swapped": func(x, y, w *Tensor) *Tensor {
			u := x.Mul(y)
			v := u.MatMul(w).Tanh()
			return u.Mul(v).Sum().Add(plus(u, v).Sum())
		},
		// Both inputs leaves: each takes its gradient.
		"leaves": func(x, y, w *Tensor) *Tensor {
			return plus(x, y).MatMul(w).Sum()
		},
		// x + x: the two shares land on one tensor.
		"self": func(x, y, w *Tensor) *Tensor {
			u := x.Mul(y)
			return plus(u, u).MatMul(w).Tanh().Sum()
		},
	}
	for name, f := range cases {
		run := func(shared, hooks bool) result {
			defer func(v bool) { copySharedGrads = v }(copySharedGrads)
			copySharedGrads = !shared
			x, y, w := leaves()
			if hooks {
				// Hooks that change their gradient in place: the other leaf's
				// gradient must not see it, whichever leaf is reached first.
				x.RegisterHook(func(g *Tensor) *Tensor { g.MulScalarInPlace(3); return nil })
				y.RegisterHook(func(g *Tensor) *Tensor { g.MulScalarInPlace(5); return nil })
			}
			c := NewContext()
			f(c.Bind(x), c.Bind(y), c.Bind(w)).Backward()
			c.Close()
			r := result{x.Grad().f32bitsForTest(), y.Grad().f32bitsForTest(), w.Grad().f32bitsForTest()}
			if x.Grad() != nil && y.Grad() != nil {
				require.NotSame(t, x.Grad().ref, y.Grad().ref, "%s: two leaves share one gradient's storage", name)
				// Changing one leaf's gradient leaves the other's alone.
				before := y.Grad().f32bitsForTest()
				x.Grad().MulScalarInPlace(2)
				require.Equal(t, before, y.Grad().f32bitsForTest(), "%s", name)
			}
			return r
		}
		for _, hooks := range []bool{false, true} {
			require.Equal(t, run(false, hooks), run(true, hooks), "%s hooks=%v", name, hooks)
		}
	}
}
