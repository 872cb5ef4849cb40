package tensor

import (
	"fmt"
	"time"
)

// backwardFn computes the gradients of an op's inputs from the gradient of its output.
// It runs in bc, a Context with grad off and no autocast, so it runs in the dtypes the
// forward ran in. A nil entry means "no gradient" for that input.
type backwardFn func(bc *Context, g *Tensor) []*Tensor

// node is the autograd record of one op application.
type node struct {
	op       *Op
	inputs   []*Tensor
	backward backwardFn
	freed    bool
	// reusable nodes save no tensors (casts), so Backward may run through them again:
	// the weight-cast cache hands the same cast to every forward of a region.
	reusable bool
	// obs saw the forward; tag is what it returned then.
	obs Observer
	tag any
}

var opBind = defOp("bind", Passthrough)

// record attaches the autograd node to out when grad is on and an input needs grad.
func (c *Context) record(op *Op, out *Tensor, ins []*Tensor, bw backwardFn) *Tensor {
	return c.recordCustom(op, out, ins, bw, false)
}

// recordCustom is record that can force the node: custom ops attach it even when no
// input requires grad (their forward reached leaves that do by other means).
func (c *Context) recordCustom(op *Op, out *Tensor, ins []*Tensor, bw backwardFn, force bool) *Tensor {
	var tag any
	obs := c.Observer()
	if obs != nil {
		tag = obs.Forward(c, op, ins, out)
	}
	if !c.GradEnabled() || !force && !c.recording(ins) {
		return out
	}
	out.requiresGrad = true
	out.node = &node{op: op, inputs: ins, backward: bw, reusable: op == opCast, obs: obs, tag: tag}
	return out
}

// recording reports whether record attaches a node to the output of an op on ins:
// grad is on and some input requires grad (an op can skip saving for its backward
// otherwise).
func (c *Context) recording(ins []*Tensor) bool {
	if !c.GradEnabled() {
		return false
	}
	for _, in := range ins {
		if in != nil && in.requiresGrad {
			return true
		}
	}
	return false
}

// RequiresGrad reports whether gradients flow to or through the tensor.
func (t *Tensor) RequiresGrad() bool { return t.requiresGrad }

// SetRequiresGrad marks a leaf tensor as needing a gradient (requires_grad_).
func (t *Tensor) SetRequiresGrad(on bool) *Tensor {
	if t.node != nil {
		fail("SetRequiresGrad", []*Tensor{t}, "only leaf tensors can change requires-grad; use Detach first")
	}
	t.requiresGrad = on
	return t
}

// IsLeaf reports whether the tensor was not produced by a recorded op.
func (t *Tensor) IsLeaf() bool { return t.node == nil }

// Grad returns the accumulated gradient of a leaf (nil if none yet).
//
// The gradient of a float32 leaf that reached it only through a cast to half
// precision (an autocast weight cast) is kept in that half dtype until first asked
// for: Grad then allocates the float32 gradient, the half one widened (exactly, as
// the cast's backward would have), so it may panic with an out-of-memory error as
// any op does. Optimizers whose backend reads half gradients (backend.HalfGradSGD,
// backend.HalfGradAdam) update from the half gradient directly, saving the pass that
// widens it.
func (t *Tensor) Grad() *Tensor {
	if t.gradLow.Load() != nil {
		t.widenGrad()
	}
	return t.grad
}

// widenGrad makes the float32 gradient from a deferred half one (see Grad).
func (t *Tensor) widenGrad() {
	t.gradMu.Lock()
	defer t.gradMu.Unlock()
	low := t.gradLow.Load()
	if low == nil {
		return
	}
	g := low.untrackedCopy(t.dtype)
	t.grad = g
	t.gradLow.Store(nil)
	low.Release()
}

// lowGrad returns the deferred half gradient of t (nil when there is none): t's own,
// valid until t's gradient changes (Backward, SetGrad, ZeroGrad, Grad).
func (t *Tensor) lowGrad() *Tensor { return t.gradLow.Load() }

// SetGrad replaces the gradient (nil clears it, releasing the old one).
func (t *Tensor) SetGrad(g *Tensor) {
	t.gradMu.Lock()
	low := t.gradLow.Swap(nil)
	t.gradMu.Unlock()
	low.Release()
	if t.grad != nil && t.grad != g {
		t.grad.Release()
	}
	t.grad = g
}

// deferWiden reports whether node n, about to run its backward with output gradient
// g, is a cast of a float32 leaf whose gradient would be g widened: the leaf has no
// gradient yet (nor a deferred one) and no hooks, g is a dense half tensor whose
// storage nothing else holds, and the node has no Observer or one that is a
// WidenDeferrer saying yes. Backward then keeps g as the leaf's deferred gradient
// instead of widening it (see Grad); the numbers are the same.
func deferWiden(n *node, g *Tensor) *Tensor {
	if n.op != opCast || len(n.inputs) != 1 {
		return nil
	}
	if n.obs != nil {
		if d, ok := n.obs.(WidenDeferrer); !ok || !d.DeferWiden() {
			return nil
		}
	}
	in := n.inputs[0]
	if in == nil || in.node != nil || !in.requiresGrad || in.dtype != Float32 || len(in.hooks) > 0 ||
		in.grad != nil || in.gradLow.Load() != nil || in.released.Load() {
		return nil
	}
	if !g.dtype.IsHalf() || !g.shape.Equal(in.shape) || g.ctx != nil || g.offset != 0 ||
		!g.IsContiguous() || g.ref.refs.Load() != 1 || g.released.Load() {
		return nil
	}
	return in
}

// ZeroGrad releases the gradient (PyTorch's zero_grad(set_to_none=True)).
func (t *Tensor) ZeroGrad() { t.SetGrad(nil) }

// RegisterHook adds a function called with the gradient arriving at this leaf before
// it is accumulated; a non-nil result replaces the gradient.
func (t *Tensor) RegisterHook(h func(g *Tensor) *Tensor) {
	if t.node != nil {
		fail("RegisterHook", []*Tensor{t}, "gradient hooks are supported on leaf tensors")
	}
	t.hooks = append(t.hooks, h)
}

// Detach returns a tensor sharing t's storage with no autograd history.
func (t *Tensor) Detach() *Tensor {
	return t.view(t.ctx, t.shape, t.strides, t.offset)
}

// BackwardOption configures Backward.
type BackwardOption func(*bwOptions)

type bwOptions struct {
	grad   *Tensor
	retain bool
}

// RetainGraph keeps the graph after backward so backward can run through it again.
func RetainGraph() BackwardOption { return func(o *bwOptions) { o.retain = true } }

// GradOutput sets the gradient of the tensor Backward starts from (required when it is
// not a scalar).
func GradOutput(g *Tensor) BackwardOption { return func(o *bwOptions) { o.grad = g } }

// Backward computes the gradients of t with respect to every leaf that requires grad
// and adds them into the leaves' Grad (so calls accumulate, which is how gradient
// accumulation works). Intermediate gradients are released as soon as they are used;
// without RetainGraph the graph's saved tensors are dropped afterwards.
func (t *Tensor) Backward(opts ...BackwardOption) {
	var o bwOptions
	for _, f := range opts {
		f(&o)
	}
	if !t.requiresGrad {
		fail("backward", []*Tensor{t}, "tensor does not require grad (no input of the computation requires grad, or it ran with grad off)")
	}
	var g0 *Tensor
	if o.grad == nil {
		if t.Numel() != 1 {
			fail("backward", []*Tensor{t}, "backward from a non-scalar needs GradOutput")
		}
		g0 = allocTensor(nil, t.dtype, t.device, t.shape)
		g0.ref.b.Fill(g0.bview(), 1)
	} else {
		if !o.grad.shape.Equal(t.shape) {
			fail("backward", []*Tensor{t, o.grad}, "GradOutput shape %v differs from the tensor's %v", o.grad.shape, t.shape)
		}
		g0 = o.grad.untrackedCopy(t.dtype)
	}

	order := topoOrder(t)
	grads := map[*Tensor]*Tensor{t: g0}
	if t.node == nil {
		accumulateLeaf(t, g0)
		return
	}
	// An op that panics mid-backward (out of memory, say) must not leak the gradients
	// in flight: nothing else owns them.
	defer func() {
		for _, g := range grads {
			g.Release()
		}
	}()
	for i := len(order) - 1; i >= 0; i-- {
		out := order[i]
		g := grads[out]
		delete(grads, out)
		n := out.node
		if g == nil {
			continue
		}
		if n.freed {
			g.Release()
			panic(&OpError{Op: "backward", Msg: fmt.Sprintf("the graph through %q was already freed by an earlier Backward; pass RetainGraph() to the first call to backward twice", n.op.Name())})
		}
		if leaf := deferWiden(n, g); leaf != nil {
			n.observeBackward(g, []*Tensor{nil}, 0) // a WidenDeferrer: no float32 gradient made
			leaf.gradLow.Store(g)                   // the leaf owns g now; casts keep no state to free
			continue
		}
		last := !o.retain && !n.reusable
		ins := runBackward(n, g, last)
		if last {
			n.backward = nil
			n.freed = true
		}
		for k, in := range n.inputs {
			if k >= len(ins) {
				break
			}
			gi := ins[k]
			if gi == nil {
				continue
			}
			if in == nil || !in.requiresGrad {
				gi.Release()
				continue
			}
			if !gi.shape.Equal(in.shape) || gi.dtype != in.dtype {
				panic(fmt.Sprintf("tensor: internal error: backward of %q gave a %v %s gradient for a %v %s input", n.op.Name(), gi.shape, gi.dtype, in.shape, in.dtype))
			}
			if in.node == nil {
				accumulateLeaf(in, gi)
				continue
			}
			if prev, ok := grads[in]; ok {
				if prev.ref.refs.Load() > 1 {
					// prev shares its storage with another gradient (add's backward gives
					// g to both inputs): add out of place, with the same operands.
					sum := allocOut(nil, prev.dtype, prev.device, prev.shape)
					sum.ref.b.Binary(addOp, sum.bview(), prev.bview(), gi.bview())
					prev.Release()
					grads[in] = sum
				} else {
					prev.ref.b.Binary(addOp, prev.bview(), prev.bview(), gi.bview())
				}
				gi.Release()
			} else {
				grads[in] = gi
			}
		}
	}
	for _, g := range grads {
		g.Release()
	}
}

// copySharedGrads makes runBackward copy a gradient that shares storage with another
// the same backward returned, as it did before they were shared: the tests compare.
var copySharedGrads = false

// runBackward runs one node's backward in a scope of its own, keeps the input
// gradients it returns and releases every temporary and g. Each returned gradient is a
// distinct handle the caller owns. last says that the node's backward will not run
// again (no RetainGraph): its saved tensors are dead once it returns, and it may
// overwrite them (Context.lastBackward).
func runBackward(n *node, g *Tensor, last bool) []*Tensor {
	nc := NewContext(NoGradMode())
	nc.lastBackward = last
	done := false
	defer func() {
		if !done { // a panic inside the node's backward: release its scope and g
			nc.Close()
			g.Release()
		}
	}()
	if st, ok := n.obs.(BackwardStarter); ok {
		st.StartBackward(n.op, n.tag, g)
	}
	start := time.Now()
	ins := n.backward(nc, g)
	if n.obs != nil {
		n.observeBackward(g, ins, time.Since(start))
	}
	seen := map[*storageRef]bool{}
	for k, gi := range ins {
		if gi == nil {
			continue
		}
		switch {
		case seen[gi.ref] && copySharedGrads:
			gi = gi.untrackedCopy(gi.dtype)
			ins[k] = gi
		case seen[gi.ref] || gi == g || gi.ctx == nil || gi.ctx.root != nc.root:
			// Two gradients may share storage (add gives g to both inputs): each gets
			// a handle of its own, and whoever would write into a shared one (an
			// accumulation, a leaf taking it as its gradient) sees the storage's
			// other holders and does not (Backward, accumulateLeaf). A copy here
			// cost a pass over the gradient on one thread, per residual connection.
			// Aliases of g and tensors from other scopes get their own handle.
			gi = gi.view(nil, gi.shape, gi.strides, gi.offset)
			ins[k] = gi
		}
		seen[gi.ref] = true
		nc.Keep(gi)
	}
	done = true
	nc.Close()
	g.Release()
	return ins
}

// accumulateLeaf runs the leaf's hooks and adds g into its gradient, taking ownership
// of g.
func accumulateLeaf(leaf, g *Tensor) {
	if leaf.gradLow.Load() != nil {
		leaf.widenGrad()
	}
	if len(leaf.hooks) > 0 && g.ref.refs.Load() > 1 {
		// A hook may keep or change the gradient it is given: give it one that
		// shares storage with no other gradient.
		c := g.untrackedCopy(g.dtype)
		g.Release()
		g = c
	}
	for _, h := range leaf.hooks {
		if r := h(g); r != nil && r != g {
			if !r.shape.Equal(leaf.shape) {
				fail("hook", []*Tensor{leaf, r}, "a gradient hook returned shape %v for a leaf of shape %v", r.shape, leaf.shape)
			}
			r = r.untrackedCopy(leaf.dtype)
			g.Release()
			g = r
		}
	}
	if leaf.grad == nil {
		if g.ctx != nil || !g.IsContiguous() || g.dtype != leaf.dtype || g.ref.refs.Load() > 1 {
			c := g.untrackedCopy(leaf.dtype)
			g.Release()
			g = c
		}
		leaf.grad = g
		return
	}
	leaf.grad.ref.b.Binary(addOp, leaf.grad.bview(), leaf.grad.bview(), g.bview())
	g.Release()
}

// untrackedCopy returns a contiguous copy of t in dtype dt owned by the caller.
func (t *Tensor) untrackedCopy(dt DType) *Tensor {
	c := allocOut(nil, dt, t.device, t.shape)
	c.ref.b.Copy(c.bview(), t.bview())
	return c
}

// topoOrder returns the tensors with nodes reachable from t, each after all tensors it
// depends on (so iterating backwards visits consumers before producers).
func topoOrder(t *Tensor) []*Tensor {
	var order []*Tensor
	seen := map[*Tensor]bool{}
	type frame struct {
		t *Tensor
		i int
	}
	if t.node == nil {
		return nil
	}
	stack := []frame{{t, 0}}
	seen[t] = true
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.i < len(f.t.node.inputs) {
			in := f.t.node.inputs[f.i]
			f.i++
			if in != nil && in.node != nil && !seen[in] {
				seen[in] = true
				stack = append(stack, frame{in, 0})
			}
			continue
		}
		order = append(order, f.t)
		stack = stack[:len(stack)-1]
	}
	return order
}

// GraphSize counts the autograd nodes reachable from t (used to detect history that
// grows across steps).
func (t *Tensor) GraphSize() int { return len(topoOrder(t)) }
