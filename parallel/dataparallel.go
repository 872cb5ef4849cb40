package parallel

import (
	"errors"
	"fmt"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// Options configures a DataParallel.
type Options struct {
	// Serial runs the replicas one after the other in the calling goroutine instead of
	// one goroutine each — for debugging, and for an Observer (profiler, overflow
	// harness) that is not safe for concurrent use. The results are the same.
	Serial bool
}

// DataParallel trains one model on several devices of one process, as
// torch.nn.DataParallel: the model lives on the main device (devices[0]); every
// forward splits the batch along dimension 0 into one chunk per device, runs a
// replica of the model on each chunk in a goroutine of its own, and backward sums the
// replicas' gradients onto the model's parameters. See the package documentation for
// how replicas, gradients, BatchNorm statistics and memory are handled.
//
// A DataParallel is an nn.Module, so amp.NewTrainer, an optimizer built on its Params
// and nn.State work on it as on the model itself; its parameters keep the model's
// names (no "module." prefix), so checkpoints move freely between the two.
type DataParallel struct {
	nn.Base
	module  nn.Module
	devices []tensor.Device
	opts    Options
}

// ErrDevices is wrapped by the errors NewDataParallel and NewPipeline return for an
// unusable device list or a model not placed on it.
var ErrDevices = errors.New("parallel: bad device configuration")

// NewDataParallel returns model replicated over devices at every forward. The model's
// parameters and buffers must already be on devices[0] (Place moves them; do it before
// building the optimizer); devices must be distinct and present.
func NewDataParallel(model nn.Module, devices []tensor.Device, opts Options) (*DataParallel, error) {
	if model == nil {
		return nil, fmt.Errorf("%w: no model", ErrDevices)
	}
	if err := checkDevices(devices); err != nil {
		return nil, err
	}
	for _, p := range append(model.Params(), model.Buffers()...) {
		if d := p.T.Device(); d != devices[0] {
			return nil, fmt.Errorf("%w: %q is on %s, not on the main device %s; move the model there first (parallel.Place(model, %s)) and build the optimizer afterwards",
				ErrDevices, p.Name, d, devices[0], devices[0])
		}
	}
	return &DataParallel{module: model, devices: append([]tensor.Device(nil), devices...), opts: opts}, nil
}

// checkDevices reports an empty list, a repeated device and a device that cannot be
// opened.
func checkDevices(devices []tensor.Device) error {
	if len(devices) == 0 {
		return fmt.Errorf("%w: no devices", ErrDevices)
	}
	seen := map[tensor.Device]bool{}
	for _, d := range devices {
		if seen[d] {
			return fmt.Errorf("%w: device %s is listed twice", ErrDevices, d)
		}
		seen[d] = true
		if _, err := backend.Get(d); err != nil {
			return fmt.Errorf("%w: %w", ErrDevices, err)
		}
	}
	return nil
}

// Module returns the wrapped model (torch's DataParallel.module).
func (dp *DataParallel) Module() nn.Module { return dp.module }

// Devices returns the devices, the main one first.
func (dp *DataParallel) Devices() []tensor.Device { return append([]tensor.Device(nil), dp.devices...) }

// Params returns the model's parameters, with the model's names.
func (dp *DataParallel) Params() []*nn.Param { return dp.module.Params() }

// Buffers returns the model's buffers.
func (dp *DataParallel) Buffers() []*nn.Param { return dp.module.Buffers() }

// SetTraining switches the model's train/eval mode.
func (dp *DataParallel) SetTraining(on bool) { dp.module.SetTraining(on) }

// Training reports the model's mode.
func (dp *DataParallel) Training() bool { return dp.module.Training() }

// Forward runs the replicas on the chunks of x and returns their outputs concatenated
// along dimension 0 on the main device — the same output as the model's, with the
// same dtype. x must be in a Context (the step's: the replicas' parameter copies and
// activations belong to it) and may be on any device; its Context's grad mode,
// autocast policy and observer apply inside every replica. The model's output must
// be batch-first.
//
// Backward through the output runs the replicas' backward passes concurrently, each on
// its own device, and adds the sum of their gradients (float32, in replica order) into
// the model's parameters; a gradient for x flows back too when x requires one.
func (dp *DataParallel) Forward(x *tensor.Tensor) *tensor.Tensor {
	return dp.run(x, nil, nil)
}

// ForwardLoss computes the loss inside the replicas: each replica runs the model on
// its chunk of x and loss on its output and its chunk of y (split like x), and backward
// runs each replica's backward from its own loss in its own goroutine. It returns the
// batch loss on the main device, the chunk losses weighted by chunk size — which, for a
// loss that is a mean over the samples (the default reduction of every gamp loss),
// is the full-batch mean and gives the full-batch gradient.
//
// Forward gathers every replica's output on the main device and computes the loss and
// the start of backward there, so the main device holds all outputs and does that
// work alone while the others wait — the load imbalance of torch's DataParallel.
// ForwardLoss moves only one scalar per replica. Use it when the outputs are large
// (language-model logits) or the loss is expensive.
//
// x and y must be in a Context (see Forward). loss must return a scalar; a loss that
// sums over the samples gets weights meant for a mean (divide it by the chunk size,
// or use Forward).
func (dp *DataParallel) ForwardLoss(x, y *tensor.Tensor, loss func(out, target *tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
	if y == nil || loss == nil {
		misuse(opLoss, "ForwardLoss needs targets and a loss function")
	}
	return dp.run(x, y, loss)
}

const (
	opForward = "data_parallel"
	opLoss    = "data_parallel_loss"
)

// run records one data-parallel forward as a custom op whose inputs are x (and y) and
// the model's parameters, so the autograd engine delivers the summed gradients to the
// parameters like any op's — through their hooks, cast to their dtype.
func (dp *DataParallel) run(x, y *tensor.Tensor, loss func(out, target *tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
	s := &dpStep{dp: dp, params: dp.module.Params(), buffers: dp.module.Buffers(), loss: loss}
	name := opForward
	ins := []*tensor.Tensor{x}
	if loss != nil {
		name = opLoss
		ins = append(ins, y)
	}
	s.first = len(ins)
	main := dp.devices[0]
	for _, p := range s.params {
		if d := p.T.Device(); d != main {
			panic(&tensor.OpError{Op: name, Msg: fmt.Sprintf("parameter %q is on %s but the main device is %s; keep the model on the main device", p.Name, d, main),
				Shapes: []tensor.Shape{p.T.Shape()}, DTypes: []tensor.DType{p.T.DType()}, Devices: []tensor.Device{d}})
		}
		ins = append(ins, p.T)
	}
	return tensor.Custom(name, ins, s.forward, s.backward)
}

// dpStep is one data-parallel forward and its backward.
type dpStep struct {
	dp              *DataParallel
	params, buffers []*nn.Param // the model's, in Params/Buffers order
	loss            func(out, target *tensor.Tensor) *tensor.Tensor
	first           int // index of the first parameter among the custom op's inputs
	x               *tensor.Tensor
	reps            []*replica
}

// replica is one device's share of a step.
type replica struct {
	dev         tensor.Device
	start, size int     // its rows of the batch
	weight      float64 // size / batch: its loss's weight
	module      nn.Module
	leaves      []*tensor.Tensor // its parameters, aligned with dpStep.params
	x, y        *tensor.Tensor   // its chunk, on dev
	out         *tensor.Tensor   // its output, or its loss
	grads       []*tensor.Tensor // after backward: its parameter gradients, float32, on the main device
	gx          *tensor.Tensor   // after backward: its input gradient, on x's device
}

func (s *dpStep) name() string {
	if s.loss != nil {
		return opLoss
	}
	return opForward
}

func (s *dpStep) forward(c *tensor.Context, in []*tensor.Tensor) *tensor.Tensor {
	x := in[0]
	var y *tensor.Tensor
	if s.loss != nil {
		y = in[1]
	}
	if c == nil {
		misuse(s.name(), "the input must belong to a Context (tensor.NewContext, then ctx.Bind(x)): the replicas' parameter copies and activations are released when it closes")
	}
	if x.Dim() == 0 || x.Size(0) == 0 {
		misuse(s.name(), "the input %v must have a non-empty batch dimension 0 to split over the devices", x.Shape())
	}
	n := x.Size(0)
	if y != nil && (y.Dim() == 0 || y.Size(0) != n) {
		misuse(s.name(), "the targets %v must have the input's batch size %d in dimension 0", y.Shape(), n)
	}
	s.x = x
	sizes := split(n, len(s.dp.devices))
	s.reps = make([]*replica, len(sizes))
	start := 0
	for i, sz := range sizes {
		s.reps[i] = &replica{dev: s.dp.devices[i], start: start, size: sz, weight: float64(sz) / float64(n)}
		start += sz
	}
	gens := childGenerators(c, s.dp.devices[0], len(s.reps))
	// Copies first, all of them, then the forwards: the main replica updates the
	// model's BatchNorm statistics in place, which the other copies must not see half
	// done.
	each(len(s.reps), s.dp.opts.Serial, func(i int) { s.setup(c, i, x, y) })
	each(len(s.reps), s.dp.opts.Serial, func(i int) { s.reps[i].run(c, gens[i], s.loss) })
	return s.gather(c)
}

// setup builds replica i: a copy of the module tree whose parameters are leaves on
// the replica's device (views of the model's own on the main device) and whose
// buffers are copies (the model's own on the main device), and its chunk of the batch.
func (s *dpStep) setup(c *tensor.Context, i int, x, y *tensor.Tensor) {
	r := s.reps[i]
	sc := tensor.NewContext(tensor.NoGradMode())
	defer c.Adopt(sc)
	r.module = replicate(s.dp.module)
	ps, bs := r.module.Params(), r.module.Buffers()
	if len(ps) != len(s.params) || len(bs) != len(s.buffers) {
		panic(fmt.Sprintf("parallel: internal error: the replica has %d parameters and %d buffers, the model %d and %d", len(ps), len(bs), len(s.params), len(s.buffers)))
	}
	r.leaves = make([]*tensor.Tensor, len(ps))
	for k, p := range ps {
		src := s.params[k].T
		p.T = leaf(sc, src, r.dev, src.RequiresGrad())
		r.leaves[k] = p.T
	}
	if i > 0 {
		for k, b := range bs {
			b.T = leaf(sc, s.buffers[k].T, r.dev, false)
		}
	}
	r.x = leaf(sc, sc.Bind(x).Narrow(0, r.start, r.size), r.dev, x.RequiresGrad())
	if y != nil {
		r.y = leaf(sc, sc.Bind(y).Narrow(0, r.start, r.size), r.dev, false)
	}
}

// run computes the replica's output (and loss) in a Context derived from the step's.
func (r *replica) run(c *tensor.Context, g *tensor.Generator, loss func(out, target *tensor.Tensor) *tensor.Tensor) {
	rc, closer := region(c, g)
	defer closer.Close()
	out := nn.Call(r.module, rc.Bind(r.x))
	if loss != nil {
		out = loss(out, rc.Bind(r.y))
		if out.Numel() != 1 {
			misuse(opLoss, "the loss function returned shape %v; it must return a scalar (a mean over the samples)", out.Shape())
		}
	}
	r.out = out
}

// gather returns the outputs concatenated on the main device, or the weighted sum of
// the losses, computed without recording (backward splits the gradient itself).
func (s *dpStep) gather(c *tensor.Context) *tensor.Tensor {
	nc := c.NoGrad()
	main := s.dp.devices[0]
	parts := make([]*tensor.Tensor, len(s.reps))
	for i, r := range s.reps {
		parts[i] = nc.Bind(r.out).To(main)
	}
	var res *tensor.Tensor
	if s.loss == nil {
		res = tensor.Concat(parts, 0)
	} else {
		for i, p := range parts {
			w := p.MulScalar(s.reps[i].weight)
			if res == nil {
				res = w
			} else {
				res = res.Add(w)
			}
		}
	}
	for _, p := range parts {
		p.Release()
	}
	return res
}

// backward runs every replica's backward from its share of g, concurrently, then
// returns the gradients of the custom op's inputs: x's gathered from the replicas, and
// each parameter's summed over them in float32 on the main device.
func (s *dpStep) backward(bc *tensor.Context, g *tensor.Tensor) []*tensor.Tensor {
	main := s.dp.devices[0]
	defer func() {
		for _, r := range s.reps {
			for _, l := range r.leaves {
				l.ZeroGrad()
			}
			r.x.ZeroGrad()
		}
	}()
	each(len(s.reps), s.dp.opts.Serial, func(i int) {
		r := s.reps[i]
		if r.out.RequiresGrad() {
			var gi *tensor.Tensor
			if s.loss == nil {
				gi = g.Narrow(0, r.start, r.size).To(r.dev)
			} else {
				gi = g.MulScalar(r.weight).To(r.dev)
			}
			// Retain: the caller's backward may itself retain the graph and run again.
			r.out.Backward(tensor.GradOutput(gi), tensor.RetainGraph())
			gi.Release()
		}
		r.grads = make([]*tensor.Tensor, len(r.leaves))
		for k, l := range r.leaves {
			if lg := l.Grad(); lg != nil {
				r.grads[k] = bc.Bind(lg).To(main).Cast(tensor.Float32)
			}
		}
		if s.x.RequiresGrad() {
			if lg := r.x.Grad(); lg != nil {
				r.gx = bc.Bind(lg).To(s.x.Device())
			} else {
				r.gx = tensor.Zeros(r.x.Shape(), tensor.WithDType(r.x.DType()), tensor.WithDevice(s.x.Device()), tensor.WithContext(bc))
			}
		}
	})
	grads := make([]*tensor.Tensor, s.first+len(s.params))
	if s.x.RequiresGrad() {
		parts := make([]*tensor.Tensor, len(s.reps))
		for i, r := range s.reps {
			parts[i] = r.gx
		}
		grads[0] = tensor.Concat(parts, 0)
	}
	for k := range s.params {
		var acc *tensor.Tensor
		for _, r := range s.reps {
			gk := r.grads[k]
			if gk == nil {
				continue
			}
			if acc == nil {
				acc = tensor.ZerosLike(gk, tensor.WithContext(bc))
			}
			acc.AddInPlace(gk)
		}
		grads[s.first+k] = acc
	}
	return grads
}
