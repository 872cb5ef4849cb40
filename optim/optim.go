package optim

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/gamp-ml/gamp/internal/tensorx"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// Optimizer updates parameters from their gradients. For a float16/bfloat16 parameter
// it keeps an FP32 master copy: MasterGrads gathers the gradients into FP32 (where the
// scaler unscales and checks them, and clipping measures them), Step updates the master
// and writes the rounded value back into the half parameter.
type Optimizer interface {
	// Params returns the parameters the optimizer updates.
	Params() []*nn.Param
	// MasterGrads returns, for each parameter in order, the FP32 gradient Step will
	// apply (nil for a parameter without a gradient). For FP32 parameters it is the
	// parameter's own gradient; for half ones a float32 copy made on first call after
	// backward (inf and NaN survive the copy). Later calls return the same tensors
	// until the next backward reaches the parameter or ZeroGrad, so what the scaler
	// unscaled in place is what clipping measures and Step applies.
	MasterGrads() []*tensor.Tensor
	// Step applies one update from MasterGrads. Parameters without a gradient are left
	// alone. gamp's optimizers make the state they need (moments, momentum buffers)
	// for every parameter before changing any, so running out of memory there panics
	// with nothing changed; their fused updates allocate nothing afterwards.
	Step()
	// ZeroGrad releases the parameters' and the master gradients.
	ZeroGrad()
	// LR returns the learning rate; SetLR changes it (schedules call it).
	LR() float64
	SetLR(lr float64)
	// StepCount is the number of updates applied.
	StepCount() int64
	// StateDict returns the optimizer state (moments, masters, counters) as named
	// tensors and scalars; LoadStateDict restores it exactly.
	StateDict() State
	LoadStateDict(s State) error
}

// State is an optimizer's serialisable state. Scalars hold the hyper-parameters
// ("lr", "momentum", "beta1", …), the step count ("step"), the number of parameters
// ("num_params") and per-parameter counters ("state.3.step"); Tensors hold the
// per-parameter buffers keyed "state.<index>.<name>" (momentum_buffer, exp_avg,
// exp_avg_sq, max_exp_avg_sq, master), as PyTorch numbers parameters by position.
type State struct {
	Scalars map[string]float64
	Tensors map[string]*tensor.Tensor
}

// Release releases every tensor of s (the snapshots StateDict returns are the caller's).
func (s State) Release() {
	for _, t := range s.Tensors {
		t.Release()
	}
}

// ErrConfig is wrapped by every error a constructor or LoadStateDict returns for bad
// hyper-parameters; check it with errors.Is.
var ErrConfig = errors.New("optim: invalid configuration")

// ErrStateMismatch is wrapped by the errors LoadStateDict returns when a state does not
// fit the optimizer (another optimizer kind, parameter count or shapes).
var ErrStateMismatch = errors.New("optim: state does not match the optimizer")

// core is what every optimizer shares: the parameters with their masters and master
// gradients, the learning rate and the step count.
type core struct {
	kind    string
	slots   []*slot
	lr      float64
	steps   int64
	masters Masters
	gen     *tensor.Generator // stochastic rounding's random bits (nil otherwise)
}

// slot is one parameter and what the optimizer keeps for it besides its algorithm state.
type slot struct {
	p      *nn.Param
	t      *tensor.Tensor // p.T when the optimizer was built
	master *tensor.Tensor // float32 copy of a half parameter (nil otherwise)
	mgrad  *tensor.Tensor // float32 master gradient of a half parameter
	mfrom  *tensor.Tensor // the half gradient mgrad was copied from
	stale  atomic.Bool    // a backward reached the parameter since mgrad was made
	mode   Masters        // how a half parameter is kept (FP32Masters for the others)
	lo     *tensor.Tensor // SplitMasters: the low 16 bits of the master, in a bfloat16 container
}

func newCore(kind string, params []*nn.Param, lr float64, masters Masters, seed uint64) (core, error) {
	c := core{kind: kind, masters: masters}
	if err := checkLR(kind, lr); err != nil {
		return c, err
	}
	if len(params) == 0 {
		return c, fmt.Errorf("%w: %s got an empty parameter list", ErrConfig, kind)
	}
	seen := map[*tensor.Tensor]int{}
	for i, p := range params {
		if p == nil || p.T == nil {
			return c, fmt.Errorf("%w: %s: parameter %d is nil", ErrConfig, kind, i)
		}
		if j, dup := seen[p.T]; dup {
			return c, fmt.Errorf("%w: %s: parameter %d (%q) is the same tensor as parameter %d; pass each parameter once", ErrConfig, kind, i, p.Name, j)
		}
		seen[p.T] = i
		if p.Buffer {
			return c, fmt.Errorf("%w: %s: %q is a buffer, not a trainable parameter", ErrConfig, kind, p.Name)
		}
		if dt := p.T.DType(); !dt.IsFloat() {
			return c, fmt.Errorf("%w: %s: parameter %q is %s; only floating-point parameters can be optimized", ErrConfig, kind, p.Name, dt)
		}
		if p.T.Released() {
			return c, fmt.Errorf("%w: %s: parameter %q was released", ErrConfig, kind, p.Name)
		}
	}
	if err := checkMasters(kind, masters, params); err != nil {
		return c, err
	}
	c.lr = lr
	if masters == StochasticRounding {
		c.gen = tensor.NewGenerator(seed)
	}
	for _, p := range params {
		s := &slot{p: p, t: p.T}
		if p.T.DType().IsHalf() {
			switch s.mode = masters; masters {
			case FP32Masters:
				s.master = newState(p.T, tensor.Float32).CopyFrom(p.T)
			case SplitMasters:
				// The master is the bfloat16 weight widened: its low bits are 0.
				s.lo = newState(p.T, tensor.BFloat16)
			}
			// A backward that reaches the parameter makes the cached master gradient
			// stale, including one that accumulates into the existing half gradient.
			p.T.RegisterHook(func(g *tensor.Tensor) *tensor.Tensor {
				s.stale.Store(true)
				return nil
			})
		}
		c.slots = append(c.slots, s)
	}
	return c, nil
}

func checkLR(kind string, lr float64) error {
	if !(lr >= 0) || math.IsInf(lr, 0) {
		return fmt.Errorf("%w: %s: learning rate must be finite and ≥ 0, got %g", ErrConfig, kind, lr)
	}
	return nil
}

// newState returns zeros shaped like t in dtype dt on t's device, outside any Context.
func newState(t *tensor.Tensor, dt tensor.DType) *tensor.Tensor {
	return tensor.Zeros(t.Shape(), tensor.WithDType(dt), tensor.WithDevice(t.Device()))
}

// stateDType is the dtype of the optimizer state of a parameter: float32, or float64
// for float64 parameters (as PyTorch keeps state in the parameter's dtype).
func stateDType(p *tensor.Tensor) tensor.DType {
	if p.DType() == tensor.Float64 {
		return tensor.Float64
	}
	return tensor.Float32
}

// Params implements Optimizer.
func (c *core) Params() []*nn.Param {
	out := make([]*nn.Param, len(c.slots))
	for i, s := range c.slots {
		out[i] = s.p
	}
	return out
}

// MasterParams returns, for each parameter in order, the tensor Step updates: the
// float32 master of a half parameter, the parameter itself otherwise. They are the
// optimizer's own; do not release them.
func (c *core) MasterParams() []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(c.slots))
	for i, s := range c.slots {
		out[i] = s.weight()
	}
	return out
}

// MasterGrads implements Optimizer.
func (c *core) MasterGrads() []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(c.slots))
	for i, s := range c.slots {
		out[i] = s.masterGrad()
	}
	return out
}

// ZeroGrad implements Optimizer.
func (c *core) ZeroGrad() {
	for _, s := range c.slots {
		s.p.T.ZeroGrad()
		s.dropMasterGrad()
	}
}

// LR implements Optimizer.
func (c *core) LR() float64 { return c.lr }

// SetLR implements Optimizer. A negative, infinite or NaN rate panics.
func (c *core) SetLR(lr float64) {
	if err := checkLR(c.kind, lr); err != nil {
		panic(err)
	}
	c.lr = lr
}

// StepCount implements Optimizer.
func (c *core) StepCount() int64 { return c.steps }

// release frees the masters and master gradients.
func (c *core) release() {
	for _, s := range c.slots {
		s.dropMasterGrad()
		s.master.Release()
		s.lo.Release()
	}
}

func (s *slot) checkLive() {
	if s.p.T != s.t {
		panic(fmt.Errorf("optim: parameter %q was replaced (cast or moved) after the optimizer was built; build the optimizer after amp.Prepare, nn.Cast or moving the model", s.p.Name))
	}
}

// weight is the tensor the update is applied to.
func (s *slot) weight() *tensor.Tensor {
	if s.master != nil {
		return s.master
	}
	return s.p.T
}

// masterGrad returns the float32 (or float64) gradient Step applies, nil if none.
func (s *slot) masterGrad() *tensor.Tensor {
	s.checkLive()
	g := s.p.T.Grad()
	if !s.t.DType().IsHalf() || g == nil {
		if g == nil {
			s.dropMasterGrad()
		}
		return g
	}
	if s.mgrad != nil && s.mfrom == g && !s.stale.Load() {
		return s.mgrad
	}
	if s.mgrad == nil || !s.mgrad.Shape().Equal(g.Shape()) || s.mgrad.Device() != g.Device() {
		s.mgrad.Release()
		s.mgrad = newState(g, tensor.Float32)
	}
	s.mgrad.CopyFrom(g)
	s.mfrom = g
	s.stale.Store(false)
	return s.mgrad
}

func (s *slot) dropMasterGrad() {
	s.mgrad.Release()
	s.mgrad, s.mfrom = nil, nil
}

// half is the half parameter a fused update writes, nil when there is no master.
func (s *slot) half() *tensor.Tensor {
	if s.master != nil {
		return s.p.T
	}
	return nil
}

// fused selects the fused update kernels of backends that have them (the default);
// tests turn it off to compare with the composed ops bit for bit.
var fused = true

// fusedSteps counts parameter updates that took the fused path (for tests), and
// halfGradSteps those of them that read a half gradient as it is (eachUpdateLow).
var fusedSteps, halfGradSteps atomic.Int64

// writeBack rounds the master into the half parameter.
func (s *slot) writeBack() {
	if s.master != nil {
		s.p.T.CopyFrom(s.master)
	}
}

// eachUpdateLow calls update for every parameter with a gradient, each in a no-grad
// scope of its own (so at most one parameter's temporaries are alive), writes masters
// back and counts the step.
//
// Before any parameter changes, alloc (when not nil) is called for every parameter with
// a gradient to create the state the update needs (moments, momentum buffers), and
// returns a function undoing that (nil when it allocated nothing). An out-of-memory
// panic while allocating undoes every allocation of this step and propagates with
// nothing changed, so a step that runs out of memory can be retried. The fused
// updates allocate nothing; the composed fallback (backends without fused kernels,
// strided parameters) allocates temporaries per parameter and is not all-or-nothing.
//
// update returns true when it also wrote the half parameter (a fused kernel did), so
// the write-back is skipped.
//
// update may be handed a half gradient as it is, when lowOK (not nil) says update can
// apply it so (a backend reading half gradients, backend.HalfGradSGD or
// backend.HalfGradAdam):
//   - for a float32 parameter whose gradient is still deferred in half precision
//     (tensorx.LowGrad), that gradient instead of widening it first;
//   - for a half parameter with an FP32 master (O2), its own half gradient instead of
//     the float32 master gradient, when none was made this step (nothing called
//     MasterGrads: no unscaling, clipping or norm): the update then writes the master
//     and the half parameter from it in one pass, with no float32 gradient allocated,
//     copied or read.
//
// Every other gradient (all of them with a nil lowOK) is gathered, a deferred one
// widened, before anything changes.
func (c *core) eachUpdateLow(lowOK func(w, g *tensor.Tensor) bool, alloc func(i int, w *tensor.Tensor) (undo func()), update func(ctx *tensor.Context, i int, w, g *tensor.Tensor) (wroteHalf bool)) {
	grads := make([]*tensor.Tensor, len(c.slots))
	low := make([]bool, len(c.slots))
	for i, s := range c.slots {
		if lowOK != nil && s.master == nil && s.t.DType() == tensor.Float32 {
			s.checkLive()
			if lg := tensorx.LowGrad(s.p.T); lg != nil && lg.Shape().Equal(s.p.T.Shape()) && lowOK(s.p.T, lg) {
				grads[i], low[i] = lg, true
				continue
			}
		}
		if lowOK != nil && s.master != nil && s.mode == FP32Masters && s.mgrad == nil {
			s.checkLive()
			if g := s.p.T.Grad(); g != nil && g.DType().IsHalf() && g.Shape().Equal(s.master.Shape()) && lowOK(s.master, g) {
				grads[i], low[i] = g, true
				continue
			}
		}
		grads[i] = s.masterGrad()
	}
	for i, s := range c.slots {
		g := grads[i]
		if g == nil || low[i] {
			continue
		}
		w := s.weight()
		if g.DType() != stateDType(w) || !g.Shape().Equal(w.Shape()) {
			panic(fmt.Errorf("optim: %s: gradient of %q is %v %s but the parameter is %v %s", c.kind, s.p.Name, g.Shape(), g.DType(), w.Shape(), w.DType()))
		}
	}
	if alloc != nil {
		c.allocAll(grads, alloc)
	}
	for i, s := range c.slots {
		g := grads[i]
		if g == nil {
			continue
		}
		w := s.weight()
		wrote := func() bool {
			ctx := tensor.NewContext(tensor.NoGradMode())
			defer ctx.Close()
			return update(ctx, i, w, g)
		}()
		if !wrote {
			s.writeBack()
		}
	}
	c.steps++
}

// allocAll runs alloc for every parameter with a gradient; if one panics, the undo
// functions of those that ran are called before the panic goes on.
func (c *core) allocAll(grads []*tensor.Tensor, alloc func(i int, w *tensor.Tensor) (undo func())) {
	var undos []func()
	done := false
	defer func() {
		if !done {
			for _, u := range undos {
				u()
			}
		}
	}()
	for i, s := range c.slots {
		if grads[i] != nil {
			if u := alloc(i, s.weight()); u != nil {
				undos = append(undos, u)
			}
		}
	}
	done = true
}

// newStates returns n zero tensors like t in dtype dt; when one cannot be allocated
// the others are released before the panic goes on.
func newStates(t *tensor.Tensor, dt tensor.DType, n int) []*tensor.Tensor {
	out := make([]*tensor.Tensor, 0, n)
	done := false
	defer func() {
		if !done {
			for _, x := range out {
				x.Release()
			}
		}
	}()
	for range n {
		out = append(out, newState(t, dt))
	}
	done = true
	return out
}

// scalarLike returns a 0-d tensor holding v in t's dtype and device, inside ctx.
func scalarLike(ctx *tensor.Context, t *tensor.Tensor, v float64) *tensor.Tensor {
	return tensor.Scalar(v, tensor.WithDType(t.DType()), tensor.WithDevice(t.Device()), tensor.WithContext(ctx))
}

var (
	_ Optimizer    = (*SGD)(nil)
	_ Optimizer    = (*Adam)(nil)
	_ StreamLoader = (*SGD)(nil)
	_ StreamLoader = (*Adam)(nil)
)
