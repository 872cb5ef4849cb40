package optim

import (
	"fmt"
	"github.com/gamp-ml/gamp/backend"
	"math"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// SGDConfig holds SGD's hyper-parameters (torch.optim.SGD's arguments). The zero value
// is plain SGD with a learning rate of 0: set LR.
type SGDConfig struct {
	LR          float64
	Momentum    float64 // ≥ 0; 0 disables the momentum buffer
	Dampening   float64 // momentum dampening; must be 0 with Nesterov
	WeightDecay float64 // L2 penalty, added to the gradient (≥ 0)
	Nesterov    bool    // Nesterov momentum (needs Momentum > 0 and Dampening 0)
	Maximize    bool    // maximize the objective instead of minimizing
	// Masters says what is kept beside float16/bfloat16 parameters: FP32 masters (the
	// default), none, stochastic rounding or the 16+16 split (see Masters).
	Masters Masters
	// RoundingSeed seeds the random bits of StochasticRounding.
	RoundingSeed uint64
}

func (c SGDConfig) validate() error {
	if err := checkLR("SGD", c.LR); err != nil {
		return err
	}
	switch {
	case !(c.Momentum >= 0) || math.IsInf(c.Momentum, 0):
		return fmt.Errorf("%w: SGD: momentum must be finite and ≥ 0, got %g", ErrConfig, c.Momentum)
	case math.IsNaN(c.Dampening) || math.IsInf(c.Dampening, 0):
		return fmt.Errorf("%w: SGD: dampening must be finite, got %g", ErrConfig, c.Dampening)
	case !(c.WeightDecay >= 0) || math.IsInf(c.WeightDecay, 0):
		return fmt.Errorf("%w: SGD: weight decay must be finite and ≥ 0, got %g", ErrConfig, c.WeightDecay)
	case c.Nesterov && (c.Momentum <= 0 || c.Dampening != 0):
		return fmt.Errorf("%w: SGD: Nesterov momentum needs Momentum > 0 and Dampening 0 (got momentum %g, dampening %g)", ErrConfig, c.Momentum, c.Dampening)
	}
	return nil
}

// SGD is stochastic gradient descent with optional momentum, dampening, Nesterov
// momentum and weight decay, exactly as torch.optim.SGD:
//
//	d = g + wd·w                                   (if wd ≠ 0; g negated first if Maximize)
//	b = d on the first step, else momentum·b + (1-dampening)·d
//	d = d + momentum·b if Nesterov, else b          (if momentum ≠ 0)
//	w = w - lr·d
type SGD struct {
	core
	cfg SGDConfig
	buf []*tensor.Tensor // momentum buffers, nil until a parameter's first step
}

// NewSGD returns an SGD optimizer over params, or an error wrapping ErrConfig for a bad
// configuration. Masters of half parameters are made now, from their current values.
func NewSGD(params []*nn.Param, cfg SGDConfig) (*SGD, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c, err := newCore("SGD", params, cfg.LR, cfg.Masters, cfg.RoundingSeed)
	if err != nil {
		return nil, err
	}
	return &SGD{core: c, cfg: cfg, buf: make([]*tensor.Tensor, len(params))}, nil
}

// Config returns the hyper-parameters, with LR the current learning rate.
func (o *SGD) Config() SGDConfig {
	c := o.cfg
	c.LR = o.lr
	return c
}

// Step implements Optimizer.
func (o *SGD) Step() {
	cfg := o.cfg
	// first marks the parameters whose momentum buffer this step creates: the buffer
	// is allocated before any parameter changes and takes d on its first update.
	first := make([]bool, len(o.slots))
	var alloc func(i int, w *tensor.Tensor) func()
	if cfg.Momentum != 0 {
		alloc = func(i int, w *tensor.Tensor) func() {
			if o.buf[i] != nil {
				return nil
			}
			o.buf[i], first[i] = newState(w, stateDType(w)), true
			return func() {
				o.buf[i].Release()
				o.buf[i], first[i] = nil, false
			}
		}
	}
	var lowOK func(w, g *tensor.Tensor) bool
	if fused {
		lowOK = sgdHalfGradOK
	}
	o.eachUpdateLow(lowOK, alloc, func(ctx *tensor.Context, i int, w, g *tensor.Tensor) bool {
		if g.DType().IsHalf() {
			// A half gradient sgdHalfGradOK accepted, deferred (a float32 parameter) or
			// the half parameter's own (its FP32 master w, which the update writes into
			// the parameter too): the backend widens it as it reads it.
			half := o.slots[i].half()
			if !fusedSGDStep(w, g, o.buf[i], half, backend.SGDArgs{
				LR: o.lr, Momentum: cfg.Momentum, Dampening: cfg.Dampening, WeightDecay: cfg.WeightDecay,
				Nesterov: cfg.Nesterov, Maximize: cfg.Maximize, First: first[i],
			}) {
				panic(fmt.Errorf("optim: SGD: internal error: the fused update of %q refused the half gradient it accepted", o.slots[i].p.Name))
			}
			fusedSteps.Add(1)
			halfGradSteps.Add(1)
			return half != nil
		}
		if s := o.slots[i]; s.mode != FP32Masters {
			if !fusedSGDHalfStep(w, s.lo, g, o.buf[i], backend.SGDArgs{
				LR: o.lr, Momentum: cfg.Momentum, Dampening: cfg.Dampening, WeightDecay: cfg.WeightDecay,
				Nesterov: cfg.Nesterov, Maximize: cfg.Maximize, First: first[i], HalfWeights: o.halfWeights(s),
			}) {
				halfStepFailed(o.kind, s)
			}
			fusedSteps.Add(1)
			return true
		}
		if fused {
			half := o.slots[i].half()
			if fusedSGDStep(w, g, o.buf[i], half, backend.SGDArgs{
				LR: o.lr, Momentum: cfg.Momentum, Dampening: cfg.Dampening, WeightDecay: cfg.WeightDecay,
				Nesterov: cfg.Nesterov, Maximize: cfg.Maximize, First: first[i],
			}) {
				fusedSteps.Add(1)
				return half != nil
			}
		}
		d := g
		if cfg.Maximize {
			d = ctx.Bind(g).Neg()
		}
		if cfg.WeightDecay != 0 {
			wd := ctx.Bind(w).MulScalar(cfg.WeightDecay)
			d = wd.AddInPlace(d)
		}
		if cfg.Momentum != 0 {
			b := o.buf[i]
			if first[i] {
				b.CopyFrom(d)
			} else {
				b.MulScalarInPlace(cfg.Momentum)
				if cfg.Dampening == 0 {
					b.AddInPlace(d)
				} else {
					b.AddInPlace(ctx.Bind(d).MulScalar(1 - cfg.Dampening))
				}
			}
			if cfg.Nesterov {
				d = ctx.Bind(b).MulScalar(cfg.Momentum).AddInPlace(d)
			} else {
				d = b
			}
		}
		w.SubInPlace(ctx.Bind(d).MulScalar(o.lr))
		return false
	})
}

// Release frees the optimizer's state (momentum buffers, masters, master gradients).
// The optimizer must not be used afterwards.
func (o *SGD) Release() {
	for i, b := range o.buf {
		b.Release()
		o.buf[i] = nil
	}
	o.release()
}

var sgdSpec = stateSpec{
	hyper:   []string{"momentum", "dampening", "weight_decay", "nesterov", "maximize"},
	tensors: []string{"momentum_buffer"},
}

// StateDict implements Optimizer: hyper-parameters, the step count, momentum buffers
// and masters. The tensors are snapshots owned by the caller (State.Release frees
// them).
func (o *SGD) StateDict() State {
	s := o.baseState()
	s.Scalars["momentum"] = o.cfg.Momentum
	s.Scalars["dampening"] = o.cfg.Dampening
	s.Scalars["weight_decay"] = o.cfg.WeightDecay
	s.Scalars["nesterov"] = bool01(o.cfg.Nesterov)
	s.Scalars["maximize"] = bool01(o.cfg.Maximize)
	for i, b := range o.buf {
		if b != nil {
			s.Tensors[stateKey(i, "momentum_buffer")] = snapshot(b)
		}
	}
	return s
}

// LoadStateDict implements Optimizer. It returns an error wrapping ErrStateMismatch
// or ErrConfig, and changes nothing, when s does not fit.
func (o *SGD) LoadStateDict(s State) error { return loadState(o, "SGD", s) }

// CheckState implements StreamLoader.
func (o *SGD) CheckState(s StateSpec) error {
	_, err := o.checkSGD(s)
	return err
}

// checkSGD validates s and returns the configuration it holds.
func (o *SGD) checkSGD(s StateSpec) (SGDConfig, error) {
	if err := o.checkState(s, sgdSpec); err != nil {
		return SGDConfig{}, err
	}
	cfg := SGDConfig{
		LR:          s.Scalars["lr"],
		Momentum:    s.Scalars["momentum"],
		Dampening:   s.Scalars["dampening"],
		WeightDecay: s.Scalars["weight_decay"],
		Nesterov:    s.Scalars["nesterov"] != 0,
		Maximize:    s.Scalars["maximize"] != 0,
		Masters:     o.cfg.Masters, RoundingSeed: o.cfg.RoundingSeed,
	}
	if err := cfg.validate(); err != nil {
		return SGDConfig{}, err
	}
	return cfg, nil
}

// LoadStateFrom implements StreamLoader.
func (o *SGD) LoadStateFrom(s StateSpec, read func(key string, dst *tensor.Tensor) error) error {
	cfg, err := o.checkSGD(s)
	if err != nil {
		return err
	}
	fresh := make([]*tensor.Tensor, len(o.slots))
	err = allocStates("SGD", func(keep func(*tensor.Tensor) *tensor.Tensor) {
		for i, sl := range o.slots {
			if _, ok := s.Tensors[stateKey(i, "momentum_buffer")]; ok && o.buf[i] == nil {
				w := sl.weight()
				fresh[i] = keep(newState(w, stateDType(w)))
			}
		}
	})
	if err != nil {
		return err
	}
	o.cfg = cfg
	for i := range o.slots {
		if _, ok := s.Tensors[stateKey(i, "momentum_buffer")]; !ok {
			o.buf[i].Release()
			o.buf[i] = nil
		} else if fresh[i] != nil {
			o.buf[i] = fresh[i]
		}
	}
	if err := o.loadBase(s, read); err != nil {
		return err
	}
	for i, b := range o.buf {
		if b != nil {
			if err := read(stateKey(i, "momentum_buffer"), b); err != nil {
				return err
			}
		}
	}
	return nil
}
