package tensor

import "time"

// Observer sees every op a Context runs: the overflow harness and the profiler are
// Observers. Attach one with Context.WithObserver or the UseObserver option; like the
// autocast policy it flows with the tensors, so two models watched by two Observers in
// two goroutines never mix.
//
// Begin is called when an op starts (before autocast casts its inputs) and Forward when
// it has produced its output; ops nested inside another op (an autocast cast, a sum
// inside a loss) get their own Begin/Forward pairs in between. Forward's result is kept
// with the op's autograd node and handed to Backward when backward runs through that
// node, with the time the node's backward took. Calls come from the goroutine running
// the ops.
type Observer interface {
	Begin(c *Context, op *Op)
	Forward(c *Context, op *Op, inputs []*Tensor, output *Tensor) (tag any)
	Backward(op *Op, tag any, gradOut *Tensor, gradIn []*Tensor, took time.Duration)
}

// BackwardStarter is implemented by Observers that time each node's backward on a clock
// of their own (the profiler's device clock): StartBackward is called just before the
// node's backward runs, with the tag its Forward returned and the gradient it gets,
// and Backward follows when it has run. On an asynchronous device (CUDA) Backward's
// took is only the host time spent queueing the node's kernels; a device event marked
// at StartBackward and another at Backward bracket the kernels themselves.
type BackwardStarter interface {
	StartBackward(op *Op, tag any, gradOut *Tensor)
}

// WidenDeferrer is implemented by Observers that need no gradient tensor from the cast
// that feeds a float32 leaf (a weight under autocast). Unobserved, Backward keeps such
// a leaf's half gradient and widens it only when something asks (see Tensor.Grad); with
// an Observer whose DeferWiden reports true it does the same, and reports the cast's
// backward as Backward(op, tag, g, []*Tensor{nil}, 0): the half gradient g arrived, no
// float32 one was made. So an observed run does the work an unobserved one does (the
// profiler implements it). Other Observers (the overflow harness, which measures the
// gradients a node sends) get the cast widened at once and see the float32 gradient.
type WidenDeferrer interface {
	DeferWiden() bool
}

// UseObserver attaches an Observer to a root Context.
func UseObserver(o Observer) ContextOption { return func(c *Context) { c.obs = o } }

// WithObserver returns a Context whose ops are reported to o (nil: none).
func (c *Context) WithObserver(o Observer) *Context {
	d := c.derive()
	d.obs = o
	return d
}

// Observer returns the Context's observer (nil: none).
func (c *Context) Observer() Observer {
	if c == nil {
		return nil
	}
	return c.obs
}

// observe reports the output of an op that returns without record (no gradient, or
// nothing to compute), so every Begin gets its Forward.
func (c *Context) observe(op *Op, ins []*Tensor, out *Tensor) *Tensor {
	if obs := c.Observer(); obs != nil {
		obs.Forward(c, op, ins, out)
	}
	return out
}

func (c *Context) begin(op *Op) {
	if c != nil && c.obs != nil {
		c.obs.Begin(c, op)
	}
}

// observeBackward reports a node's backward to the Observer that saw its forward.
func (n *node) observeBackward(g *Tensor, ins []*Tensor, took time.Duration) {
	if n.obs != nil {
		n.obs.Backward(n.op, n.tag, g, ins, took)
	}
}
