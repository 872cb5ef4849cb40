package amp

import (
	"errors"
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/autocast"
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/scaler"
	"github.com/gamp-ml/gamp/tensor"
)

// Trainer runs the mixed-precision training step PyTorch users write by hand:
//
//	for each micro-batch:  forward under autocast → loss / N → scaler.Scale(loss).Backward()
//	at the window's end:   unscale → clip → step (skipped on inf/NaN) → update scale → zero grad
//
// Every micro-batch runs in a Context of its own that is closed before the next, so
// the activation memory of a step is released deterministically.
type Trainer struct {
	Model  nn.Module
	Opt    optim.Optimizer
	Scaler *scaler.GradScaler
	// Sched, when set, is advanced after every step that was not skipped.
	Sched *optim.Scheduler
	Loss  nn.LossFunc
	// ForwardLoss, when set, replaces "run Model, then Loss on its output and the
	// target" in a training micro-step: it receives the input already in the step's
	// autocast region (cast to the half dtype at O2/O3) and the target, and returns the
	// loss. parallel.Trainer sets it so that each replica computes its own chunk's
	// loss. Evaluate still calls Model.
	ForwardLoss func(x, target *tensor.Tensor) *tensor.Tensor
	// Gen is the generator dropout and other random ops draw from; it is part of the
	// saved training state.
	Gen *tensor.Generator

	cfg    Config
	low    tensor.DType
	policy *autocast.Policy
	steps  int64
	div    divergence
	split  int // pieces each micro-batch runs as (0 or 1: whole); see SplitMicroBatches
}

// Result reports one optimizer step.
type Result struct {
	Loss     float64 // mean loss over the micro-batches (unscaled)
	Skipped  bool    // the step was skipped because a gradient was Inf or NaN
	Scale    float64 // the loss scale after the update
	GradNorm float64 // global 2-norm of the unscaled gradients before clipping (NaN unless ClipNorm > 0 or ReportGradNorm)
	Step     int64   // optimizer steps taken so far (skipped ones included)
	// Replanned, set on the one step that changed the plan, says how: the step ran out
	// of memory and, with Config.OOMFallback, was redone with smaller micro-batches.
	Replanned string
}

// NewTrainer checks cfg and builds a Trainer for a model already Prepared for
// cfg.Level, its optimizer and a loss function. dev picks the default half dtype.
func NewTrainer(model nn.Module, opt optim.Optimizer, loss nn.LossFunc, dev tensor.Device, cfg Config) (*Trainer, error) {
	if cfg.Level < O0 || cfg.Level > O3 {
		return nil, fmt.Errorf("amp: bad opt level %d", cfg.Level)
	}
	if cfg.Accum == 0 {
		cfg.Accum = 1
	}
	if cfg.Accum < 0 {
		return nil, fmt.Errorf("amp: Accum must be ≥ 1, got %d", cfg.Accum)
	}
	if cfg.ClipNorm < 0 || math.IsNaN(cfg.ClipNorm) {
		return nil, fmt.Errorf("amp: ClipNorm must be ≥ 0, got %g", cfg.ClipNorm)
	}
	low := resolveLow(cfg.Low, dev)
	if cfg.Low != 0 && !cfg.Low.IsHalf() {
		return nil, fmt.Errorf("amp: Low must be float16 or bfloat16, not %s", cfg.Low)
	}
	if err := cfg.Divergence.validate(); err != nil {
		return nil, err
	}
	pol := cfg.policy(low)
	if pol != nil {
		if err := pol.Validate(); err != nil {
			return nil, err
		}
	}
	sc := cfg.Scaler // the zero Config: PyTorch's defaults
	if cfg.Level == O0 || cfg.Level == O3 {
		sc.Disabled = true
	}
	s, err := scaler.NewFor(low, sc)
	if err != nil {
		return nil, err
	}
	return &Trainer{
		Model: model, Opt: opt, Scaler: s, Loss: loss, Gen: tensor.NewGenerator(0),
		cfg: cfg, low: low, policy: pol,
	}, nil
}

// LowDType is the half dtype the trainer computes in (at O1–O3).
func (t *Trainer) LowDType() tensor.DType { return t.low }

// Config returns the configuration.
func (t *Trainer) Config() Config { return t.cfg }

// Steps returns the number of optimizer steps taken (skipped ones included).
func (t *Trainer) Steps() int64 { return t.steps }

// Forward runs the model on x inside ctx as the opt level says (autocast region for O1,
// half input for O2/O3) and returns the output in float32 (O3: in half), still inside
// the region, plus the region's Context (close it after use).
func (t *Trainer) Forward(ctx *tensor.Context, x *tensor.Tensor) (*tensor.Tensor, *tensor.Context) {
	x, region := t.input(ctx, x)
	out := nn.Call(t.Model, x)
	if t.cfg.Level == O2 {
		out = out.Cast(tensor.Float32)
	}
	return out, region
}

// input enters the step's autocast region under ctx and brings x into it, cast to the
// half dtype at O2/O3 (the model's weights are half there).
func (t *Trainer) input(ctx *tensor.Context, x *tensor.Tensor) (*tensor.Tensor, *tensor.Context) {
	region := ctx
	if t.policy != nil {
		region = autocast.Enter(ctx, *t.policy)
	} else {
		region = ctx.WithAutocast(nil)
	}
	x = region.Bind(x)
	if (t.cfg.Level == O2 || t.cfg.Level == O3) && x.DType().IsFloat() {
		x = x.Cast(t.low)
	}
	return x, region
}

// step is Step without the out-of-memory fallback.
//
// Step runs one optimizer step from len(xs) == Accum micro-batches. The tensors in xs
// and ys stay the caller's; everything the step creates is released before it
// returns. An error is returned for bad input and for the scaler's skip alarm (the
// step itself still completed).
//
// A step that fails leaves the trainer as it was before the call: running out of
// memory in forward, backward, unscaling, clipping or the optimizer update returns an
// error wrapping tensor.ErrOutOfMemory (any other panic is re-raised) after the
// gradients are dropped and the buffers (BatchNorm statistics), generator, scaler
// iteration, optimizer, scheduler and step count are back to their values before the
// step; so a retry with a smaller batch (memory.FindExecutableBatchSize) starts clean.
// The optimizer's parameters and state are untouched because gamp's optimizers create
// their state before updating any parameter (see optim.Optimizer.Step).
func (t *Trainer) step(xs, ys []*tensor.Tensor) (res Result, err error) {
	if len(xs) != t.cfg.Accum || len(ys) != len(xs) {
		return Result{}, fmt.Errorf("amp: Step needs %d micro-batches (Accum) of inputs and targets, got %d and %d", t.cfg.Accum, len(xs), len(ys))
	}
	snap, err := t.snapshot()
	if err != nil {
		return Result{}, fmt.Errorf("amp: step: nothing changed: %w", err)
	}
	defer snap.release()
	committed := false
	defer func() {
		if committed {
			return
		}
		t.rollback(snap)
		if r := recover(); r != nil {
			if e, ok := r.(error); ok && errors.Is(e, tensor.ErrOutOfMemory) {
				res, err = Result{}, fmt.Errorf("amp: step failed and was undone: %w", e)
				return
			}
			panic(r)
		}
	}()
	t.Model.SetTraining(true)
	var total float64
	for i := range xs {
		total += t.microSteps(xs[i], ys[i])
	}
	t.Scaler.Unscale(t.Opt)
	norm := math.NaN()
	if t.cfg.ClipNorm > 0 || t.cfg.ReportGradNorm {
		norm = optim.ClipGradNorm(t.Opt.MasterGrads(), clipOrInf(t.cfg.ClipNorm), 2)
	}
	stepped := t.Scaler.Step(t.Opt)
	// Nothing below can run out of memory: from here on the step counts.
	committed = true
	uerr := t.Scaler.Update()
	if t.Sched != nil {
		t.Sched.Step(stepped)
	}
	t.Opt.ZeroGrad()
	t.steps++
	r := Result{
		Loss: total / float64(len(xs)), Skipped: !stepped, Scale: t.Scaler.ScaleValue(),
		GradNorm: norm, Step: t.steps,
	}
	return r, joinErrs(uerr, t.div.observe(t.cfg.Divergence, r, t.Scaler.Config().MinScale))
}

// stepSnapshot is what a step may change before it can fail: the generator's
// position and the model's buffers (forward updates BatchNorm's running statistics).
type stepSnapshot struct {
	gen  backend.RNG
	bufs []*nn.Param
	vals []*tensor.Tensor // copies of bufs' tensors, outside any Context
}

// snapshot records the generator and copies the buffers; it returns an error wrapping
// tensor.ErrOutOfMemory, having changed nothing, when the copies do not fit.
func (t *Trainer) snapshot() (s stepSnapshot, err error) {
	s.gen = t.Gen.State()
	s.bufs = t.Model.Buffers()
	err = tensor.CatchOOM(func() {
		for _, b := range s.bufs {
			v := tensor.Empty(b.T.Shape(), tensor.WithDType(b.T.DType()), tensor.WithDevice(b.T.Device()))
			s.vals = append(s.vals, v.CopyFrom(b.T))
		}
	})
	if err != nil {
		s.release()
	}
	return s, err
}

func (s stepSnapshot) release() {
	for _, v := range s.vals {
		v.Release()
	}
}

// rollback undoes a failed step: the scaler forgets the iteration, the gradients go,
// and the buffers and generator get their values back.
func (t *Trainer) rollback(s stepSnapshot) {
	t.Scaler.DiscardIteration()
	t.Opt.ZeroGrad()
	nn.ZeroGrad(t.Model)
	for i, b := range s.bufs {
		b.T.CopyFrom(s.vals[i])
	}
	t.Gen.SetState(s.gen)
}

func clipOrInf(v float64) float64 {
	if v <= 0 {
		return math.Inf(1)
	}
	return v
}

// microStep runs forward and scaled backward for one micro-batch in its own Context,
// closed before it returns or while an out-of-memory panic unwinds (Step recovers it).
func (t *Trainer) microStep(x, y *tensor.Tensor, p piece) (loss float64) {
	ctx := tensor.NewContext(tensor.UseGenerator(t.Gen), tensor.UseObserver(t.cfg.Observer))
	defer ctx.Close()
	w := 1 / float64(t.cfg.Accum)
	if p.of > 0 {
		// A piece of a split micro-batch weighs its share of the examples, so the pieces'
		// mean losses add up to the micro-batch's.
		x, y = ctx.Bind(x).Narrow(0, p.start, p.length), ctx.Bind(y).Narrow(0, p.start, p.length)
		w = float64(p.length) / float64(p.of*t.cfg.Accum)
	}
	var l *tensor.Tensor
	if t.ForwardLoss != nil {
		xin, region := t.input(ctx, x)
		defer region.Close()
		l = t.ForwardLoss(xin, region.Bind(y))
	} else {
		out, region := t.Forward(ctx, x)
		defer region.Close()
		l = t.Loss(out, region.Bind(y))
	}
	if w != 1 {
		l = l.MulScalar(w)
	}
	t.Scaler.Scale(l).Backward()
	return l.Item() * float64(t.cfg.Accum)
}

// Evaluate runs the model in eval mode without gradients on x and returns the float32
// output, kept out of any Context (the caller releases it).
func (t *Trainer) Evaluate(x *tensor.Tensor) *tensor.Tensor {
	t.Model.SetTraining(false)
	defer t.Model.SetTraining(true)
	ctx := tensor.NewContext(tensor.NoGradMode(), tensor.UseObserver(t.cfg.Observer))
	defer ctx.Close()
	out, region := t.Forward(ctx, x)
	defer region.Close()
	out = out.Cast(tensor.Float32)
	res := out.Contiguous()
	if res == out {
		res = out.MulScalar(1)
	}
	ctx.Keep(res)
	return res
}
