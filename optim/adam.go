package optim

import (
	"fmt"
	"github.com/gamp-ml/gamp/backend"
	"math"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// AdamConfig holds the hyper-parameters of Adam and AdamW (torch.optim.Adam/AdamW's
// arguments). Zero Beta1, Beta2 and Eps select PyTorch's defaults (0.9, 0.999, 1e-8),
// so AdamWConfig{LR: 3e-4, WeightDecay: 0.1} reads as torch.optim.AdamW(lr=3e-4,
// weight_decay=0.1). LR and WeightDecay are taken as given: 0 is no decay, for AdamW
// too (torch's AdamW defaults to 1e-2; DefaultAdamW has it).
type AdamConfig struct {
	LR float64
	// Beta1 and Beta2 are the moment decays, in [0, 1). A true 0 (no averaging, as in
	// some GAN recipes) is written ZeroBeta, since 0 selects the default.
	Beta1, Beta2 float64
	Eps          float64 // added to the denominator, outside the square root (> 0)
	WeightDecay  float64 // Adam: L2 penalty added to the gradient; AdamW: decoupled decay (≥ 0)
	AMSGrad      bool    // use the running maximum of the second moment
	Maximize     bool    // maximize the objective instead of minimizing
	// Masters says what is kept beside float16/bfloat16 parameters: FP32 masters (the
	// default), none, stochastic rounding or the 16+16 split (see Masters).
	Masters Masters
	// RoundingSeed seeds the random bits of StochasticRounding.
	RoundingSeed uint64
}

// AdamWConfig is AdamConfig, named for NewAdamW call sites.
type AdamWConfig = AdamConfig

// ZeroBeta asks for β = 0 in an AdamConfig, whose 0 selects the default: the
// constructors turn it into an exact 0.
const ZeroBeta = math.SmallestNonzeroFloat64

// DefaultAdam returns torch.optim.Adam's defaults: lr 1e-3, betas (0.9, 0.999),
// eps 1e-8, no weight decay.
func DefaultAdam() AdamConfig { return AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8} }

// DefaultAdamW returns torch.optim.AdamW's defaults: Adam's with weight decay 1e-2.
func DefaultAdamW() AdamConfig {
	c := DefaultAdam()
	c.WeightDecay = 1e-2
	return c
}

// withDefaults fills the zero Beta1, Beta2 and Eps and turns ZeroBeta into 0.
func (c AdamConfig) withDefaults() AdamConfig {
	d := DefaultAdam()
	beta := func(b, def float64) float64 {
		switch b {
		case 0:
			return def
		case ZeroBeta:
			return 0
		}
		return b
	}
	c.Beta1 = beta(c.Beta1, d.Beta1)
	c.Beta2 = beta(c.Beta2, d.Beta2)
	if c.Eps == 0 {
		c.Eps = d.Eps
	}
	return c
}

func (c AdamConfig) validate(kind string) error {
	if err := checkLR(kind, c.LR); err != nil {
		return err
	}
	beta := func(name string, b float64) error {
		if !(b >= 0 && b < 1) {
			return fmt.Errorf("%w: %s: %s must be in [0, 1), got %g", ErrConfig, kind, name, b)
		}
		return nil
	}
	if err := beta("Beta1", c.Beta1); err != nil {
		return err
	}
	if err := beta("Beta2", c.Beta2); err != nil {
		return err
	}
	if !(c.Eps > 0) || math.IsInf(c.Eps, 0) {
		return fmt.Errorf("%w: %s: Eps must be finite and > 0, got %g", ErrConfig, kind, c.Eps)
	}
	if !(c.WeightDecay >= 0) || math.IsInf(c.WeightDecay, 0) {
		return fmt.Errorf("%w: %s: weight decay must be finite and ≥ 0, got %g", ErrConfig, kind, c.WeightDecay)
	}
	return nil
}

// Adam is Adam or, built by NewAdamW, AdamW — torch.optim.Adam/AdamW step for step,
// with per-parameter step counts t:
//
//	g = -g if Maximize
//	Adam:  g = g + wd·w             AdamW:  w = w·(1 - lr·wd)
//	m = lerp(m, g, 1-β1)            v = β2·v + (1-β2)·g²
//	v̂ = max(v̂, v) if AMSGrad (and v̂ replaces v below)
//	w = w - lr/(1-β1^t) · m / (√v / √(1-β2^t) + eps)
type Adam struct {
	core
	cfg       AdamConfig
	decoupled bool // AdamW
	st        []adamState
}

// adamState is one parameter's state; m is nil until its first step.
type adamState struct {
	step      int64
	m, v, vmx *tensor.Tensor
}

// NewAdam returns an Adam optimizer over params, or an error wrapping ErrConfig. Zero
// Beta1, Beta2 and Eps take PyTorch's defaults.
func NewAdam(params []*nn.Param, cfg AdamConfig) (*Adam, error) {
	return newAdam("Adam", params, cfg, false)
}

// NewAdamW returns an AdamW optimizer (decoupled weight decay) over params, or an error
// wrapping ErrConfig. Zero Beta1, Beta2 and Eps take PyTorch's defaults.
func NewAdamW(params []*nn.Param, cfg AdamConfig) (*Adam, error) {
	return newAdam("AdamW", params, cfg, true)
}

func newAdam(kind string, params []*nn.Param, cfg AdamConfig, decoupled bool) (*Adam, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(kind); err != nil {
		return nil, err
	}
	c, err := newCore(kind, params, cfg.LR, cfg.Masters, cfg.RoundingSeed)
	if err != nil {
		return nil, err
	}
	return &Adam{core: c, cfg: cfg, decoupled: decoupled, st: make([]adamState, len(params))}, nil
}

// Config returns the hyper-parameters (defaults filled in), with LR the current
// learning rate.
func (o *Adam) Config() AdamConfig {
	c := o.cfg
	c.LR = o.lr
	return c
}

// Decoupled reports whether this is AdamW.
func (o *Adam) Decoupled() bool { return o.decoupled }

// Step implements Optimizer.
func (o *Adam) Step() {
	cfg, lr := o.cfg, o.lr
	alloc := func(i int, w *tensor.Tensor) func() {
		st := &o.st[i]
		if st.m != nil {
			return nil
		}
		n := 2
		if cfg.AMSGrad {
			n = 3
		}
		b := newStates(w, stateDType(w), n)
		st.m, st.v = b[0], b[1]
		if cfg.AMSGrad {
			st.vmx = b[2]
		}
		return func() {
			for _, x := range b {
				x.Release()
			}
			*st = adamState{}
		}
	}
	var lowOK func(w, g *tensor.Tensor) bool
	if fused {
		lowOK = adamHalfGradOK
	}
	o.eachUpdateLow(lowOK, alloc, func(ctx *tensor.Context, i int, w, g *tensor.Tensor) bool {
		st := &o.st[i]
		st.step++
		t := float64(st.step)
		if g.DType().IsHalf() {
			// A half gradient adamHalfGradOK accepted, deferred (a float32 parameter) or
			// the half parameter's own (its FP32 master w, which the update writes into
			// the parameter too): the backend widens it as it reads it.
			half := o.slots[i].half()
			if !fusedAdamStep(w, g, st.m, st.v, st.vmx, half, backend.AdamArgs{
				LR: lr, Beta1: cfg.Beta1, Beta2: cfg.Beta2, Eps: cfg.Eps, WeightDecay: cfg.WeightDecay,
				Step: st.step, Decoupled: o.decoupled, AMSGrad: cfg.AMSGrad, Maximize: cfg.Maximize,
			}) {
				panic(fmt.Errorf("optim: %s: internal error: the fused update of %q refused the half gradient it accepted", o.kind, o.slots[i].p.Name))
			}
			fusedSteps.Add(1)
			halfGradSteps.Add(1)
			return half != nil
		}
		if s := o.slots[i]; s.mode != FP32Masters {
			if !fusedAdamHalfStep(w, s.lo, g, st.m, st.v, st.vmx, backend.AdamArgs{
				LR: lr, Beta1: cfg.Beta1, Beta2: cfg.Beta2, Eps: cfg.Eps, WeightDecay: cfg.WeightDecay,
				Step: st.step, Decoupled: o.decoupled, AMSGrad: cfg.AMSGrad, Maximize: cfg.Maximize,
				HalfWeights: o.halfWeights(s),
			}) {
				halfStepFailed(o.kind, s)
			}
			fusedSteps.Add(1)
			return true
		}
		if fused {
			half := o.slots[i].half()
			if fusedAdamStep(w, g, st.m, st.v, st.vmx, half, backend.AdamArgs{
				LR: lr, Beta1: cfg.Beta1, Beta2: cfg.Beta2, Eps: cfg.Eps, WeightDecay: cfg.WeightDecay,
				Step: st.step, Decoupled: o.decoupled, AMSGrad: cfg.AMSGrad, Maximize: cfg.Maximize,
			}) {
				fusedSteps.Add(1)
				return half != nil
			}
		}

		if cfg.Maximize {
			g = ctx.Bind(g).Neg()
		}
		if cfg.WeightDecay != 0 {
			if o.decoupled {
				w.MulScalarInPlace(1 - lr*cfg.WeightDecay)
			} else {
				g = ctx.Bind(w).MulScalar(cfg.WeightDecay).AddInPlace(g)
			}
		}
		lerp(ctx, st.m, g, 1-cfg.Beta1)
		// v = β2·v + ((1-β2)·g)·g, the order of torch's addcmul_.
		st.v.MulScalarInPlace(cfg.Beta2)
		st.v.AddInPlace(ctx.Bind(g).MulScalar(1 - cfg.Beta2).MulInPlace(g))

		bc1 := 1 - math.Pow(cfg.Beta1, t)
		bc2 := 1 - math.Pow(cfg.Beta2, t)
		stepSize := lr / bc1
		v := st.v
		if cfg.AMSGrad {
			st.vmx.CopyFrom(tensor.Maximum(ctx.Bind(st.vmx), st.v))
			v = st.vmx
		}
		denom := ctx.Bind(v).Sqrt()
		denom.DivInPlace(scalarLike(ctx, denom, math.Sqrt(bc2)))
		denom.AddScalarInPlace(cfg.Eps)
		upd := ctx.Bind(st.m).Div(denom)
		w.SubInPlace(upd.MulScalarInPlace(stepSize))
		return false
	})
}

// lerp sets m = m + wt·(g - m) as torch.lerp_ computes it (the form switches at
// wt = 0.5 for accuracy).
func lerp(ctx *tensor.Context, m, g *tensor.Tensor, wt float64) {
	diff := ctx.Bind(g).Sub(m)
	if math.Abs(wt) < 0.5 {
		m.AddInPlace(diff.MulScalarInPlace(wt))
		return
	}
	diff.MulScalarInPlace(1 - wt)
	m.CopyFrom(g)
	m.SubInPlace(diff)
}

// Release frees the optimizer's state (moments, masters, master gradients). The
// optimizer must not be used afterwards.
func (o *Adam) Release() {
	for i := range o.st {
		st := &o.st[i]
		st.m.Release()
		st.v.Release()
		st.vmx.Release()
		*st = adamState{}
	}
	o.release()
}

var adamSpec = stateSpec{
	hyper:   []string{"beta1", "beta2", "eps", "weight_decay", "amsgrad", "maximize", "decoupled"},
	tensors: []string{"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
	scalars: []string{"step"},
}

// StateDict implements Optimizer: hyper-parameters, the step count, each parameter's
// step count and moments, and the masters. The tensors are snapshots owned by the
// caller (State.Release frees them).
func (o *Adam) StateDict() State {
	s := o.baseState()
	s.Scalars["beta1"] = o.cfg.Beta1
	s.Scalars["beta2"] = o.cfg.Beta2
	s.Scalars["eps"] = o.cfg.Eps
	s.Scalars["weight_decay"] = o.cfg.WeightDecay
	s.Scalars["amsgrad"] = bool01(o.cfg.AMSGrad)
	s.Scalars["maximize"] = bool01(o.cfg.Maximize)
	s.Scalars["decoupled"] = bool01(o.decoupled)
	for i, st := range o.st {
		if st.m == nil {
			continue
		}
		s.Scalars[stateKey(i, "step")] = float64(st.step)
		s.Tensors[stateKey(i, "exp_avg")] = snapshot(st.m)
		s.Tensors[stateKey(i, "exp_avg_sq")] = snapshot(st.v)
		if st.vmx != nil {
			s.Tensors[stateKey(i, "max_exp_avg_sq")] = snapshot(st.vmx)
		}
	}
	return s
}

// LoadStateDict implements Optimizer. It returns an error wrapping ErrStateMismatch
// or ErrConfig, and changes nothing, when s does not fit (an Adam state into AdamW
// included).
func (o *Adam) LoadStateDict(s State) error { return loadState(o, o.kind, s) }

// CheckState implements StreamLoader.
func (o *Adam) CheckState(s StateSpec) error {
	_, err := o.checkAdam(s)
	return err
}

// checkAdam validates s and returns the configuration it holds.
func (o *Adam) checkAdam(s StateSpec) (AdamConfig, error) {
	if err := o.checkState(s, adamSpec); err != nil {
		return AdamConfig{}, err
	}
	if (s.Scalars["decoupled"] != 0) != o.decoupled {
		return AdamConfig{}, fmt.Errorf("%w: %s: the state was saved by %s", ErrStateMismatch, o.kind, map[bool]string{true: "AdamW", false: "Adam"}[!o.decoupled])
	}
	cfg := AdamConfig{
		LR:          s.Scalars["lr"],
		Beta1:       s.Scalars["beta1"],
		Beta2:       s.Scalars["beta2"],
		Eps:         s.Scalars["eps"],
		WeightDecay: s.Scalars["weight_decay"],
		AMSGrad:     s.Scalars["amsgrad"] != 0,
		Maximize:    s.Scalars["maximize"] != 0,
		Masters:     o.cfg.Masters, RoundingSeed: o.cfg.RoundingSeed,
	}
	if err := cfg.validate(o.kind); err != nil {
		return AdamConfig{}, err
	}
	for i := range o.slots {
		_, hasStep := s.Scalars[stateKey(i, "step")]
		_, m := s.Tensors[stateKey(i, "exp_avg")]
		_, v := s.Tensors[stateKey(i, "exp_avg_sq")]
		_, vmx := s.Tensors[stateKey(i, "max_exp_avg_sq")]
		if hasStep != m || hasStep != v || (hasStep && cfg.AMSGrad) != vmx {
			return AdamConfig{}, fmt.Errorf("%w: %s: parameter %d has an incomplete state (step, exp_avg, exp_avg_sq and, with AMSGrad, max_exp_avg_sq go together)", ErrStateMismatch, o.kind, i)
		}
	}
	return cfg, nil
}

// LoadStateFrom implements StreamLoader.
func (o *Adam) LoadStateFrom(s StateSpec, read func(key string, dst *tensor.Tensor) error) error {
	cfg, err := o.checkAdam(s)
	if err != nil {
		return err
	}
	// The buffers the state needs and the optimizer lacks, made before anything changes.
	fresh := make([]adamState, len(o.slots))
	err = allocStates(o.kind, func(keep func(*tensor.Tensor) *tensor.Tensor) {
		for i, sl := range o.slots {
			if _, ok := s.Scalars[stateKey(i, "step")]; !ok {
				continue
			}
			w, st := sl.weight(), o.st[i]
			dt := stateDType(w)
			if st.m == nil {
				fresh[i].m, fresh[i].v = keep(newState(w, dt)), keep(newState(w, dt))
			}
			if cfg.AMSGrad && st.vmx == nil {
				fresh[i].vmx = keep(newState(w, dt))
			}
		}
	})
	if err != nil {
		return err
	}
	o.cfg = cfg
	for i := range o.slots {
		st, f := &o.st[i], fresh[i]
		step, ok := s.Scalars[stateKey(i, "step")]
		if !ok {
			st.m.Release()
			st.v.Release()
			st.vmx.Release()
			*st = adamState{}
			continue
		}
		st.step = int64(step)
		if f.m != nil {
			st.m, st.v = f.m, f.v
		}
		if f.vmx != nil {
			st.vmx = f.vmx
		}
		if !cfg.AMSGrad {
			st.vmx.Release()
			st.vmx = nil
		}
	}
	if err := o.loadBase(s, read); err != nil {
		return err
	}
	for i := range o.slots {
		st := &o.st[i]
		if st.m == nil {
			continue
		}
		for name, dst := range map[string]*tensor.Tensor{"exp_avg": st.m, "exp_avg_sq": st.v, "max_exp_avg_sq": st.vmx} {
			if dst == nil {
				continue
			}
			if err := read(stateKey(i, name), dst); err != nil {
				return err
			}
		}
	}
	return nil
}
