package tensor

import (
	"fmt"
	"sync"
)

// Custom records a user-defined op named name on inputs, with a backward of its own
// (torch.autograd.Function): activation checkpointing is built on it.
//
// forward computes the output in any way it likes — with the ops of this package in
// c, the Context the op runs in (the innermost of the inputs'), or under other state in
// a scope of its own. Custom returns a new handle on forward's result, tracked by c, to
// which it attaches the op's autograd node. The result stays owned by its Context when
// it has one; a result with no Context (one forward made outside every Context, or
// Kept from a scope of its own before closing it) is taken over and released with c,
// unless it is one of the inputs. So do not return a tensor someone else owns without
// a Context, such as a parameter: return a view of it (Detach).
//
// The output requires grad when grad is on in c and an input requires grad, or when
// forward's result itself requires grad — forward computed it with grad on from leaves
// that need a gradient without being inputs, such as parameters a closure captured.
// Custom routes gradients to the inputs only: backward must deliver such leaves'
// gradients itself (checkpointing does, by backpropagating through a recomputation).
//
// backward runs when Backward reaches the output. It gets a Context with grad off and
// no autocast, which is released when backward returns, and the output's gradient g,
// owned by that Context: backward may Release g as soon as it no longer needs it, to
// free its memory early. It returns one gradient per input (nil or a short slice:
// none), each of its input's shape and on its device (a gradient of another dtype is
// converted, as PyTorch does). Custom takes care of ownership: gradients made in the
// backward's Context are handed on, tensors from elsewhere are copied (a leaf's
// gradient is accumulated into in place). Wrong gradients panic with an *OpError
// naming the op.
//
// Custom ops are not rows of the op registry (Ops): they run in the dtypes their
// forward chooses, so autocast treats them as passthrough, and the ops inside forward
// are cast by their own rows. Observers see the op under name, with the ops of forward
// nested between its Begin and Forward. name must not be a registry op's.
func Custom(name string, inputs []*Tensor, forward func(c *Context, in []*Tensor) *Tensor, backward func(c *Context, g *Tensor) []*Tensor) *Tensor {
	op := customOp(name)
	in := append([]*Tensor(nil), inputs...)
	for _, t := range in {
		if t != nil {
			t.mustLive(name)
		}
	}
	c := resolve(op, in...)
	c.begin(op)
	res := forward(c, append([]*Tensor(nil), in...))
	if res == nil {
		fail(name, in, "the custom op's forward returned no tensor")
	}
	res.mustLive(name)
	out := res.view(c, res.shape, res.strides, res.offset)
	needs := res.requiresGrad
	if res.ctx == nil && !holds(in, res) {
		res.node = nil
		res.Release()
	}
	obs := c.Observer()
	bw := func(bc *Context, g *Tensor) []*Tensor {
		// backward owns g and may release it early, which frees its storage at once —
		// unless an Observer will be shown g afterwards: then it gets a view.
		if obs != nil || g.ctx != nil {
			g = bc.Bind(g)
		} else {
			adoptInto(bc, g)
		}
		gs := backward(bc, g)
		if len(gs) > len(in) {
			fail(name, in, "the custom op's backward returned %d gradients for %d inputs", len(gs), len(in))
		}
		gs = append([]*Tensor(nil), gs...)
		for k, gk := range gs {
			x := in[k]
			if gk == nil || x == nil {
				continue
			}
			gk.mustLive(name)
			if !gk.shape.Equal(x.shape) || gk.device != x.device {
				fail(name, []*Tensor{x, gk}, "the custom op's backward returned a %v gradient on %s for input %d, which is %v on %s",
					gk.shape, gk.device, k, x.shape, x.device)
			}
			switch {
			case gk.dtype != x.dtype:
				gs[k] = bc.cast(gk, x.dtype)
			case gk != g && (gk.ctx == nil || gk.ctx.root != bc.root):
				// A tensor from outside backward may be used elsewhere: a leaf's
				// gradient is accumulated into in place, so hand on a copy.
				gs[k] = gk.untrackedCopy(gk.dtype)
				adoptInto(bc, gs[k])
			}
		}
		return gs
	}
	return c.recordCustom(op, out, in, bw, needs)
}

// holds reports whether t is one of ts.
func holds(ts []*Tensor, t *Tensor) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// customOps holds one *Op per custom op name, so Observers see the same value on
// every call.
var customOps sync.Map // string → *Op

func customOp(name string) *Op {
	if op, ok := customOps.Load(name); ok {
		return op.(*Op)
	}
	if name == "" {
		panic(&OpError{Op: "Custom", Msg: "a custom op needs a name"})
	}
	if _, ok := LookupOp(name); ok {
		panic(&OpError{Op: "Custom", Msg: fmt.Sprintf("%q is a registry op; give the custom op a name of its own", name)})
	}
	op, _ := customOps.LoadOrStore(name, &Op{name: name, cast: Passthrough, differentiable: true})
	return op.(*Op)
}

// Adopt moves every tensor the root Context sc owns into c's memory scope and closes
// sc: from then on the tensors are c's — ops on them run under c's state, and closing
// c releases them. It returns them, so that a caller that knows they are no longer
// needed can Release them before c closes (Release is idempotent, and Close skips
// released tensors). Activation checkpointing uses it to keep the activations of a
// segment it does not recompute until backward has run through the segment, and no
// longer, while a step that never runs backward still releases them at its end.
func (c *Context) Adopt(sc *Context) []*Tensor {
	if sc == nil || sc.root != sc {
		panic(&OpError{Op: "Adopt", Msg: "Adopt takes a root Context (from NewContext)"})
	}
	if c == nil || c.root == sc {
		panic(&OpError{Op: "Adopt", Msg: "a Context cannot adopt its own scope, and a nil Context has no scope to adopt into"})
	}
	sc.mu.Lock()
	ts := make([]*Tensor, 0, len(sc.tracked))
	for _, t := range sc.tracked {
		if t != nil {
			ts = append(ts, t)
		}
	}
	sc.tracked, sc.closed, sc.castCache = nil, true, nil
	sc.mu.Unlock()
	r := c.root
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		panic(&OpError{Op: "Adopt", Msg: "the adopting Context is closed"})
	}
	for _, t := range ts {
		t.ctx = c
	}
	r.tracked = append(r.tracked, ts...)
	return ts
}
