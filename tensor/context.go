package tensor

import (
	"fmt"
	"sync"

	"github.com/gamp-ml/gamp/backend"
)

// Context carries the state PyTorch keeps in thread-locals — grad mode, the autocast
// policy, the random generator — and owns the memory of the tensors created in it.
// Go has no goroutine-local storage, so the state flows with the tensors instead: a
// tensor remembers the Context it was created in, and an op runs under the Context of
// its inputs. Two goroutines training two models with two Contexts never see each
// other's state.
//
// A root Context (NewContext) is a memory scope: Close releases every tensor created in
// it (and in the Contexts derived from it) except those passed to Keep. A training step
// is one scope, so device memory is returned at the end of the step, not when the GC
// runs. Derived Contexts (NoGrad, WithAutocast, WithGenerator) share the root's scope.
type Context struct {
	parent *Context
	root   *Context
	depth  int

	noGrad  bool
	policy  Autocaster
	hasCast bool // this Context sets the policy (owns a weight-cast cache)
	gen     *Generator
	obs     Observer

	// lastBackward is set on the Context a node's backward runs in when that backward
	// will not run again (no RetainGraph): it may then write into the tensors it saved
	// (linear_gelu computes the GELU's gradient over its saved factor).
	lastBackward bool

	mu        sync.Mutex
	tracked   []*Tensor
	closed    bool
	castCache map[*Tensor]*Tensor
}

// ContextOption configures a root Context.
type ContextOption func(*Context)

// NoGradMode makes the root Context record no autograd graph (inference, updates).
func NoGradMode() ContextOption { return func(c *Context) { c.noGrad = true } }

// UseGenerator makes random ops in the Context draw from g.
func UseGenerator(g *Generator) ContextOption { return func(c *Context) { c.gen = g } }

// UseAutocast puts the whole root Context under policy p (it owns the weight-cast
// cache, dropped at Close).
func UseAutocast(p Autocaster) ContextOption {
	return func(c *Context) { c.policy, c.hasCast = p, true }
}

// NewContext returns a root Context — a memory scope — with grad enabled, no autocast
// and the default generators unless options say otherwise. Close releases everything
// created in it. (NoGrad, WithAutocast and WithGenerator derive Contexts for nested
// regions; closing a derived Context ends only that region.)
func NewContext(opts ...ContextOption) *Context {
	c := &Context{}
	c.root = c
	for _, o := range opts {
		o(c)
	}
	return c
}

// Root returns the memory scope c belongs to.
func (c *Context) Root() *Context { return c.root }

func (c *Context) derive() *Context {
	if c == nil {
		// Deriving from "no Context" starts a new root scope with the defaults.
		return NewContext()
	}
	d := &Context{parent: c, root: c.root, depth: c.depth + 1, noGrad: c.noGrad, policy: c.policy, gen: c.gen, obs: c.obs}
	return d
}

// NoGrad returns a Context in which ops record no autograd graph (torch.no_grad).
func (c *Context) NoGrad() *Context {
	d := c.derive()
	d.noGrad = true
	return d
}

// EnableGrad returns a Context in which ops record the graph again.
func (c *Context) EnableGrad() *Context {
	d := c.derive()
	d.noGrad = false
	return d
}

// WithAutocast returns a Context whose ops cast their inputs as p says (nil disables
// autocast). The new Context has its own weight-cast cache, dropped by Close.
func (c *Context) WithAutocast(p Autocaster) *Context {
	d := c.derive()
	d.policy = p
	d.hasCast = true
	return d
}

// WithGenerator returns a Context whose random ops draw from g.
func (c *Context) WithGenerator(g *Generator) *Context {
	d := c.derive()
	d.gen = g
	return d
}

// GradEnabled reports whether ops in c record the autograd graph.
func (c *Context) GradEnabled() bool { return c == nil || !c.noGrad }

// Autocast returns the active autocast policy (nil: none).
func (c *Context) Autocast() Autocaster {
	if c == nil {
		return nil
	}
	return c.policy
}

// Generator returns the generator random ops in c use on dev.
func (c *Context) Generator(dev Device) *Generator { return c.generator(dev) }

func (c *Context) generator(dev Device) *Generator {
	if c != nil && c.gen != nil {
		return c.gen
	}
	return DefaultGenerator(dev)
}

// Bind returns t as seen from c: the same values and the same autograd identity
// (gradients flow back to t), with ops on it running under c's state. Use it to bring
// a batch, or the output of another region, into a Context.
func (c *Context) Bind(t *Tensor) *Tensor {
	if t.ctx == c {
		return t
	}
	t.mustLive("Bind")
	v := t.view(c, t.shape, t.strides, t.offset)
	if t.requiresGrad && c.GradEnabled() {
		src := t
		c.record(opBind, v, []*Tensor{src}, func(bc *Context, g *Tensor) []*Tensor { return []*Tensor{g} })
	}
	return v
}

// Keep removes t from its Context's scope, so closing the Context leaves it alive;
// the caller releases it (Release) when done.
func (c *Context) Keep(ts ...*Tensor) {
	r := c.root
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range ts {
		for i, x := range r.tracked {
			if x == t {
				r.tracked[i] = nil
			}
		}
		t.ctx = nil
	}
}

// Run calls fn with c and closes c afterwards; outputs fn wants to keep it must Keep.
func (c *Context) Run(fn func(c *Context)) {
	defer c.Close()
	fn(c)
}

// Close ends the Context. For a root Context it releases every tensor created in it
// and not kept; for a derived one it drops its weight-cast cache. Closing twice is a
// no-op.
func (c *Context) Close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	// Drop the weight-cast cache; the cast copies themselves are tracked by the root
	// scope and released with it.
	c.castCache = nil
	c.mu.Unlock()
	if c.root != c {
		return
	}
	c.mu.Lock()
	ts := c.tracked
	c.tracked = nil
	c.mu.Unlock()
	for _, t := range ts {
		if t != nil {
			t.node = nil
			t.Release()
		}
	}
}

// Tracked returns the number of tensors the root scope currently owns.
func (c *Context) Tracked() int {
	r := c.root
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, t := range r.tracked {
		if t != nil {
			n++
		}
	}
	return n
}

func (c *Context) track(t *Tensor) {
	r := c.root
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		panic(&OpError{Op: "track", Msg: "tensor created in a closed Context; create a new Context for each step"})
	}
	r.tracked = append(r.tracked, t)
}

// resolve picks the Context an op on ts runs in: the innermost of the inputs'
// Contexts. Inputs from two unrelated Contexts are a programming error.
func resolve(op *Op, ts ...*Tensor) *Context {
	var c *Context
	for _, t := range ts {
		if t == nil || t.ctx == nil || t.ctx == c {
			continue
		}
		switch {
		case c == nil:
			c = t.ctx
		case isAncestor(c, t.ctx):
			c = t.ctx
		case isAncestor(t.ctx, c):
		default:
			fail(op.Name(), ts, "inputs belong to two unrelated Contexts; Bind one into the other's Context")
		}
	}
	return c
}

// isAncestor reports whether a is an ancestor of (or equal to) b.
func isAncestor(a, b *Context) bool {
	for x := b; x != nil; x = x.parent {
		if x == a {
			return true
		}
	}
	return false
}

// Generator is a counter-based random generator: a seed and an offset advanced by every
// draw. Saving (State) and restoring (SetState) it replays draws exactly, which is how
// checkpoint recompute reproduces dropout masks.
type Generator struct {
	mu    sync.Mutex
	state backend.RNG
}

// NewGenerator returns a generator seeded with seed.
func NewGenerator(seed uint64) *Generator { return &Generator{state: backend.RNG{Seed: seed}} }

// Next reserves n counters and returns the state to draw them from.
func (g *Generator) Next(n uint64) backend.RNG {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.state
	g.state.Offset += n
	return s
}

// State returns the current state.
func (g *Generator) State() backend.RNG {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state
}

// SetState restores a state returned by State.
func (g *Generator) SetState(s backend.RNG) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.state = s
}

// Seed resets the generator to seed with offset 0.
func (g *Generator) Seed(seed uint64) { g.SetState(backend.RNG{Seed: seed}) }

var (
	genMu      sync.Mutex
	generators = map[Device]*Generator{}
	baseSeed   uint64
)

// DefaultGenerator returns the generator of dev used when a Context sets none.
func DefaultGenerator(dev Device) *Generator {
	genMu.Lock()
	defer genMu.Unlock()
	g, ok := generators[dev]
	if !ok {
		g = NewGenerator(baseSeed + uint64(dev.Kind)<<32 + uint64(dev.Index))
		generators[dev] = g
	}
	return g
}

// ManualSeed reseeds the default generator of every device (torch.manual_seed).
func ManualSeed(seed uint64) {
	genMu.Lock()
	defer genMu.Unlock()
	baseSeed = seed
	for dev, g := range generators {
		g.Seed(seed + uint64(dev.Kind)<<32 + uint64(dev.Index))
	}
}

// CatchOOM runs fn and returns the out-of-memory error an op inside it panicked with
// (errors.Is(err, ErrOutOfMemory) holds); other panics propagate. Ops panic on OOM so
// that model code stays free of error plumbing; a training step wraps itself in
// CatchOOM to retry with a smaller batch.
func CatchOOM(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(*backend.OOMError); ok {
				err = e
				return
			}
			panic(r)
		}
	}()
	fn()
	return nil
}

func (c *Context) String() string {
	if c == nil {
		return "Context(nil)"
	}
	return fmt.Sprintf("Context(depth %d, grad %v, autocast %v)", c.depth, !c.noGrad, c.policy != nil)
}
