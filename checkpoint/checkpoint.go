package checkpoint

import (
	"fmt"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/tensor"
)

// Func is the piece of a model Checkpoint runs: it maps its inputs to one output.
// It runs twice — in the forward pass and again in the backward pass — and must
// compute the same thing both times from the same inputs. The inputs carry the
// Context to create new tensors in (xs[0].Context()).
type Func func(xs []*tensor.Tensor) *tensor.Tensor

// Checkpoint returns fn(inputs) without keeping fn's intermediates for backward
// (torch.utils.checkpoint.checkpoint(fn, *args)): fn runs in a memory scope of its
// own that is released as soon as fn returns, so only the inputs and the output stay.
// When backward reaches the output, fn runs again with grad on, from detached copies
// of the inputs, under the autocast policy and from the random generator state that
// the forward had, and the output's gradient is backpropagated through that
// recomputation: the inputs get their gradients, the parameters fn uses accumulate
// theirs as usual, and the recomputation is released.
//
// The forward runs with the caller's grad mode, so the output requires grad exactly
// when fn's result does — also when no input requires grad and only parameters fn
// captured do (PyTorch's reentrant checkpoint loses their gradients; this one, like
// its non-reentrant one, does not). The graph fn records is dropped with its scope.
//
// Replay: the generator the caller's Context draws from on the inputs' device is set
// back to its forward-time state for the recompute and restored afterwards, so dropout
// masks repeat exactly and the caller's random stream is left where the caller had
// it. The autocast policy is the one in force at the forward, whatever the Context
// backward runs in. A recomputation whose output differs from the forward's in shape,
// dtype or device panics with a *RecomputeError.
//
// Buffers fn updates in place — BatchNorm's running statistics — are updated a second
// time by the recompute, as in PyTorch (pytorch#96136); list them in Options.Buffers
// to have them restored after the recompute (Sequential does this for its modules).
//
// Checkpoints nest: fn may call Checkpoint. At least one input is needed; nil inputs
// are passed to fn as nil.
func Checkpoint(fn Func, inputs ...*tensor.Tensor) *tensor.Tensor {
	return Options{}.Checkpoint(fn, inputs...)
}

// Options configures a checkpoint. The zero value is Checkpoint's behaviour.
type Options struct {
	// Buffers are tensors fn updates in place, such as BatchNorm's running
	// statistics and batch counter. They are saved before the recompute and restored
	// after it, so each is updated once per forward, as without checkpointing.
	Buffers []*tensor.Tensor
}

// Checkpoint is the package-level Checkpoint with o's options.
func (o Options) Checkpoint(fn Func, inputs ...*tensor.Tensor) *tensor.Tensor {
	return o.run("checkpoint", fn, inputs, false)
}

// run records fn on inputs as the custom op name. With keep, the forward's graph and
// activations are kept until backward first runs through the op and released then:
// the segment is not recomputed (unless a retained graph is backpropagated again),
// but its memory is freed as soon as it is no longer needed, as in PyTorch, rather
// than when the caller's Context closes.
func (o Options) run(name string, fn Func, inputs []*tensor.Tensor, keep bool) *tensor.Tensor {
	dev, ok := deviceOf(inputs)
	if !ok {
		panic(&tensor.OpError{Op: name, Msg: "needs at least one input tensor; pass the tensors fn computes from as inputs"})
	}
	bufs := append([]*tensor.Tensor(nil), o.Buffers...)
	var r replay
	var want Meta
	var kept *graph
	forward := func(c *tensor.Context, in []*tensor.Tensor) *tensor.Tensor {
		r = capture(c, dev)
		sc := r.scope(c.GradEnabled())
		defer sc.Close()
		var xs []*tensor.Tensor
		keep := keep && c != nil && c.GradEnabled()
		if keep {
			xs = leaves(sc, in)
		} else {
			xs = bind(sc, in)
		}
		out := fn(append([]*tensor.Tensor(nil), xs...))
		if out == nil {
			panic(&tensor.OpError{Op: name, Msg: "fn returned nil; it must return the tensor to checkpoint"})
		}
		// A handle of our own, kept out of the scope; it tells Custom whether fn's
		// result needs a gradient, and Custom takes it over.
		res := out.Detach()
		if out.RequiresGrad() {
			res.SetRequiresGrad(true)
		}
		if oc := res.Context(); oc != nil {
			oc.Keep(res)
		}
		want = metaOf(res)
		if keep {
			kept = &graph{out: out, xs: xs, owned: c.Adopt(sc)}
		}
		return res
	}
	backward := func(bc *tensor.Context, g *tensor.Tensor) []*tensor.Tensor {
		if kept != nil {
			k := kept
			kept = nil
			defer k.release()
			return backprop(bc, g, k.out, k.xs)
		}
		return r.recompute(bc, g, fn, inputs, want, bufs)
	}
	return tensor.Custom(name, inputs, forward, backward)
}

// graph is a forward kept for backward: its output, its input leaves and every
// tensor it made.
type graph struct {
	out   *tensor.Tensor
	xs    []*tensor.Tensor
	owned []*tensor.Tensor
}

func (k *graph) release() {
	for _, t := range k.owned {
		t.Release()
	}
}

// replay is the state a forward ran under, which its recomputation runs under again.
type replay struct {
	policy tensor.Autocaster
	gen    *tensor.Generator
	ownGen bool // the Context set gen (rather than using the device default)
	rng    backend.RNG
	obs    tensor.Observer
}

func capture(c *tensor.Context, dev tensor.Device) replay {
	g := c.Generator(dev)
	return replay{policy: c.Autocast(), gen: g, ownGen: g != tensor.DefaultGenerator(dev), rng: g.State(), obs: c.Observer()}
}

// scope returns a root Context under the replayed state.
func (r replay) scope(grad bool) *tensor.Context {
	var opts []tensor.ContextOption
	if !grad {
		opts = append(opts, tensor.NoGradMode())
	}
	if r.policy != nil {
		opts = append(opts, tensor.UseAutocast(r.policy))
	}
	if r.ownGen {
		opts = append(opts, tensor.UseGenerator(r.gen))
	}
	if r.obs != nil {
		opts = append(opts, tensor.UseObserver(r.obs))
	}
	return tensor.NewContext(opts...)
}

// recompute runs fn again from detached copies of inputs and backpropagates g
// through it; it returns the inputs' gradients, bound into bc.
func (r replay) recompute(bc *tensor.Context, g *tensor.Tensor, fn Func, inputs []*tensor.Tensor, want Meta, bufs []*tensor.Tensor) []*tensor.Tensor {
	now := r.gen.State()
	r.gen.SetState(r.rng)
	defer r.gen.SetState(now)
	sc := r.scope(true)
	defer sc.Close()
	xs := leaves(sc, inputs)
	restore := save(bufs)
	out := func() *tensor.Tensor {
		defer restore()
		return fn(append([]*tensor.Tensor(nil), xs...))
	}()
	got := Meta{}
	if out != nil {
		got = metaOf(out)
	}
	if out == nil || !got.equal(want) {
		panic(&RecomputeError{Forward: want, Recomputed: got})
	}
	return backprop(bc, g, out, xs)
}

// backprop backpropagates g from out, a graph built on the leaves xs, and returns the
// leaves' gradients bound into bc (nil where none arrived).
func backprop(bc *tensor.Context, g, out *tensor.Tensor, xs []*tensor.Tensor) []*tensor.Tensor {
	grads := make([]*tensor.Tensor, len(xs))
	if !out.RequiresGrad() {
		return grads // fn's result depends on nothing that needs a gradient
	}
	seed(out, g).Backward()
	for i, x := range xs {
		if x != nil && x.Grad() != nil {
			grads[i] = bc.Bind(x.Grad())
			x.SetGrad(nil)
		}
	}
	return grads
}

// seed returns a scalar whose gradient with respect to out is g, so that Backward from
// it backpropagates g through out's graph. Backward(GradOutput(g)) would copy g and
// keep g alive until the end; the seed hands g's storage on to out's gradient and
// drops our hold on it, so it is freed as soon as out's node has used it, as without
// checkpointing: one output-sized buffer less at the peak.
func seed(out, g *tensor.Tensor) *tensor.Tensor {
	dev := out.Device()
	return tensor.Custom("checkpoint_seed", []*tensor.Tensor{out},
		func(c *tensor.Context, in []*tensor.Tensor) *tensor.Tensor {
			return tensor.Zeros(tensor.Shape{}, tensor.WithDevice(dev))
		},
		func(c *tensor.Context, _ *tensor.Tensor) []*tensor.Tensor {
			v := c.Bind(g)
			g.Release()
			return []*tensor.Tensor{v}
		})
}

// leaves returns detached copies of in, bound into c, that require grad where in's
// tensors do: a graph built on them ends there, so backpropagating through it leaves
// the caller's graph alone.
func leaves(c *tensor.Context, in []*tensor.Tensor) []*tensor.Tensor {
	xs := make([]*tensor.Tensor, len(in))
	for i, x := range in {
		if x == nil {
			continue
		}
		d := x.Detach()
		xs[i] = c.Bind(d)
		d.Release()
		xs[i].SetRequiresGrad(x.RequiresGrad())
	}
	return xs
}

// save copies bufs and returns the function that copies them back (once).
func save(bufs []*tensor.Tensor) func() {
	saved := make([]*tensor.Tensor, len(bufs))
	for i, b := range bufs {
		saved[i] = tensor.Empty(b.Shape(), tensor.WithDType(b.DType()), tensor.WithDevice(b.Device())).CopyFrom(b)
	}
	return func() {
		for i, b := range bufs {
			if saved[i] != nil {
				b.CopyFrom(saved[i])
				saved[i].Release()
				saved[i] = nil
			}
		}
	}
}

func bind(c *tensor.Context, in []*tensor.Tensor) []*tensor.Tensor {
	xs := make([]*tensor.Tensor, len(in))
	for i, x := range in {
		if x != nil {
			xs[i] = c.Bind(x)
		}
	}
	return xs
}

func deviceOf(ts []*tensor.Tensor) (tensor.Device, bool) {
	for _, t := range ts {
		if t != nil {
			return t.Device(), true
		}
	}
	return tensor.Device{}, false
}

// Meta is what the recomputation must reproduce of the forward's output.
type Meta struct {
	Shape  tensor.Shape
	DType  tensor.DType
	Device tensor.Device
}

func metaOf(t *tensor.Tensor) Meta {
	return Meta{Shape: t.Shape().Clone(), DType: t.DType(), Device: t.Device()}
}

func (m Meta) equal(o Meta) bool {
	return m.Shape.Equal(o.Shape) && m.DType == o.DType && m.Device == o.Device
}

func (m Meta) String() string { return fmt.Sprintf("%v %s on %s", m.Shape, m.DType, m.Device) }

// RecomputeError is the panic value when the recomputation in backward does not give
// an output like the forward's (torch.utils.checkpoint's determinism check). It is a
// programming error: fn depends on something other than its inputs that changed
// between forward and backward (a flag, a module's mode, a captured tensor). Pass such
// state as an input, or keep it fixed until backward has run.
type RecomputeError struct {
	Forward, Recomputed Meta // Recomputed is zero when fn returned nil
}

func (e *RecomputeError) Error() string {
	got := "nil"
	if e.Recomputed.DType != backend.Invalid {
		got = "a " + e.Recomputed.String() + " tensor"
	}
	return fmt.Sprintf("checkpoint: the recomputation in backward returned %s where the forward returned a %s tensor; fn must compute the same thing from the same inputs both times (it depends on state that changed between forward and backward: pass that state as an input)",
		got, e.Forward)
}
