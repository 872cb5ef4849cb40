package scaler

import (
	"fmt"
	"math"
	"sync"

	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
)

// HistoryLen is how many scales History keeps (the most recent ones).
const HistoryLen = 10_000

// stage is where an optimizer is between two Updates.
type stage uint8

const (
	ready    stage = iota // nothing done since the last Update
	unscaled              // Unscale ran
	stepped               // Step ran (or skipped)
)

// optState is what the scaler records for one optimizer in one iteration.
type optState struct {
	stage     stage
	foundInf  bool
	nonFinite []string // names of the parameters whose gradients were Inf or NaN
}

// GradScaler scales the loss, unscales and checks the gradients, skips steps with
// Inf/NaN gradients and adapts the scale. It is safe for concurrent use, though a
// training loop normally drives it from one goroutine.
type GradScaler struct {
	mu      sync.Mutex
	cfg     Config // with defaults filled in
	enabled bool

	scale      float64
	growth     int // clean steps since the last growth or overflow
	hysteresis int // overflows still tolerated before backing off
	consec     int64
	skipped    int64
	atMin      int64
	updates    int64

	hist     []float64 // ring of the last HistoryLen scales
	histNext int

	per   map[optim.Optimizer]*optState // this iteration
	order []optim.Optimizer             // per's keys in first-use order
	last  map[optim.Optimizer]*optState // the previous iteration

	reduceFoundInf func(found bool) bool // combines found-inf across processes (nil: local)
}

// New returns a GradScaler for cfg, or an error wrapping ErrConfig. New(Config{}) is
// PyTorch's dynamic scaler; a Config with Disabled set gives a disabled scaler (the
// rest of it is not checked). New scales whatever the training dtype: it is the way to
// scale bfloat16 training anyway, where NewFor would not.
func New(cfg Config) (*GradScaler, error) {
	s := &GradScaler{enabled: !cfg.Disabled, scale: 1}
	if cfg.Disabled {
		s.cfg = cfg
		return s, nil
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s.cfg = cfg.withDefaults()
	s.scale = toFloat32(s.cfg.InitScale)
	s.hysteresis = s.cfg.Hysteresis
	s.per = map[optim.Optimizer]*optState{}
	return s, nil
}

// Needed reports whether training whose low-precision dtype is low needs loss scaling:
// true only for Float16, whose narrow exponent range flushes small gradients to zero.
// BFloat16 and Float32 share float32's exponent range: nothing underflows that would
// not in float32, so scaling them only costs time.
func Needed(low tensor.DType) bool { return low == tensor.Float16 }

// NewFor returns a GradScaler for training whose low-precision dtype is low (Float16,
// BFloat16 or Float32): New(cfg) when Needed(low), a disabled scaler otherwise. To
// scale bfloat16 training anyway, call New(cfg).
func NewFor(low tensor.DType, cfg Config) (*GradScaler, error) {
	switch low {
	case tensor.Float16, tensor.BFloat16, tensor.Float32:
	default:
		return nil, fmt.Errorf("%w: NewFor: low-precision dtype must be float16, bfloat16 or float32, got %s", ErrConfig, low)
	}
	if !Needed(low) {
		cfg.Disabled = true
	}
	return New(cfg)
}

// Enabled reports whether the scaler scales and checks (false: a pass-through).
func (s *GradScaler) Enabled() bool { return s.enabled }

// Config returns the configuration, with defaults filled in.
func (s *GradScaler) Config() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// ScaleValue returns the current loss scale (1 when disabled). It is a host value:
// reading it never synchronises with the device.
func (s *GradScaler) ScaleValue() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scale
}

// Scale returns loss multiplied by the scale, computed in float32: a float16 or
// bfloat16 loss is cast up first, so the scaled loss cannot overflow half. A disabled
// scaler returns loss itself.
func (s *GradScaler) Scale(loss *tensor.Tensor) *tensor.Tensor {
	if !s.enabled {
		return loss
	}
	if !loss.DType().IsFloat() {
		panic(misuse("Scale needs a floating-point loss, got %s", loss.DType()))
	}
	if loss.DType().IsHalf() {
		loss = loss.Cast(tensor.Float32)
	}
	return loss.MulScalar(s.ScaleValue())
}

// Unscale divides opt's master gradients by the scale in place — one fused pass per
// gradient multiplying by float32(1/float64(scale)) and checking for Inf/NaN — and
// records whether any was not finite, and which. Call it before clipping or reading
// the gradients; Step calls it when you did not. It panics when called twice for opt
// before Update, after Step, or when a master gradient is half precision (the
// optimizer must keep FP32 master gradients, as gamp's optimizers do). A disabled
// scaler does nothing.
func (s *GradScaler) Unscale(opt optim.Optimizer) {
	if !s.enabled {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state(opt)
	switch st.stage {
	case unscaled:
		panic(misuse("Unscale already called on this optimizer since the last Update: call it once, after backward and before clipping"))
	case stepped:
		panic(misuse("Unscale called after Step on this optimizer: Step unscales by itself; call Unscale (if at all) before Step, once per Update"))
	}
	s.unscale(opt, st)
}

func (s *GradScaler) unscale(opt optim.Optimizer, st *optState) {
	grads := opt.MasterGrads()
	params := opt.Params()
	name := func(i int) string {
		if i < len(params) && params[i] != nil && params[i].Name != "" {
			return params[i].Name
		}
		return fmt.Sprintf("param[%d]", i)
	}
	for i, g := range grads {
		if g != nil && g.DType().IsHalf() {
			panic(misuse("attempting to unscale %s gradients (%s): the optimizer must hand the scaler FP32 master gradients; gamp's optimizers keep FP32 masters for half parameters", g.DType(), name(i)))
		}
	}
	inv := float32(1 / s.scale)
	st.foundInf, st.nonFinite = false, nil
	for i, f := range unscaleCheckAll(grads, inv) {
		if f {
			st.foundInf = true
			st.nonFinite = append(st.nonFinite, name(i))
		}
	}
	if s.reduceFoundInf != nil && s.reduceFoundInf(st.foundInf) && !st.foundInf {
		st.foundInf = true
		st.nonFinite = append(st.nonFinite, "(a gradient in another process)")
	}
	st.stage = unscaled
}

// SetFoundInfReducer makes every Unscale pass its local found-inf result to f and use
// what f returns instead: data-parallel training installs an all-reduce (MAX) across
// processes, so every process skips the same steps and keeps the same scale
// (dist.SyncScaler does this). f runs once per Unscale, in the same order on every
// process; nil restores the local decision.
func (s *GradScaler) SetFoundInfReducer(f func(found bool) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reduceFoundInf = f
}

// Step unscales opt's gradients if Unscale was not called, then runs opt.Step unless a
// gradient of opt was Inf or NaN, and reports whether it ran. A skipped step leaves the
// parameters, the optimizer's state and its step count untouched. It panics when
// called twice for opt before Update. A disabled scaler always steps.
func (s *GradScaler) Step(opt optim.Optimizer) (didStep bool) {
	if !s.enabled {
		opt.Step()
		return true
	}
	s.mu.Lock()
	st := s.state(opt)
	if st.stage == stepped {
		s.mu.Unlock()
		panic(misuse("Step already called on this optimizer since the last Update: step each optimizer once, then call Update"))
	}
	if st.stage == ready {
		// An out-of-memory panic while gathering the master gradients must not leave
		// the mutex locked: the caller may recover and call DiscardIteration.
		func() {
			defer func() {
				if r := recover(); r != nil {
					s.mu.Unlock()
					panic(r)
				}
			}()
			s.unscale(opt, st)
		}()
	}
	st.stage = stepped
	skip := st.foundInf
	s.mu.Unlock()
	if skip {
		return false
	}
	opt.Step()
	return true
}

// Update ends the iteration: it adapts the scale from what the optimizers' Unscale
// found and resets them to READY. PyTorch's rule: after an overflow scale ×= backoff
// (not below MinScale) and the growth tracker restarts; after GrowthInterval clean
// steps in a row scale ×= growth (kept only if finite and ≤ MaxScale). With
// Hysteresis h the scale backs off only at the h-th overflow (DeepSpeed/Megatron).
//
// It returns a *SkipAlarmError once SkipAlarm consecutive steps were skipped. It
// panics if no optimizer was unscaled or stepped since the last Update. A disabled
// scaler does nothing.
func (s *GradScaler) Update() error {
	if !s.enabled {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	found := false
	var bad []string
	for _, opt := range s.order {
		st := s.per[opt]
		if st.stage == ready {
			continue
		}
		if st.foundInf {
			found = true
			bad = append(bad, st.nonFinite...)
		}
	}
	if len(s.order) == 0 || !s.anyRecorded() {
		panic(misuse("Update called but no optimizer was unscaled or stepped since the last Update: call Step for each optimizer first (with gradient accumulation, only at the end of the window)"))
	}
	if !s.cfg.Static {
		s.adapt(found)
	}
	s.updates++
	if found {
		s.skipped++
		s.consec++
	} else {
		s.consec = 0
	}
	s.record(s.scale)
	s.last, s.per, s.order = s.per, map[optim.Optimizer]*optState{}, nil

	if found && s.cfg.SkipAlarm > 0 && s.consec >= int64(s.cfg.SkipAlarm) {
		return &SkipAlarmError{Consecutive: s.consec, Scale: s.scale, Params: bad}
	}
	return nil
}

func (s *GradScaler) anyRecorded() bool {
	for _, st := range s.per {
		if st.stage != ready {
			return true
		}
	}
	return false
}

// adapt applies the update rule for one iteration.
func (s *GradScaler) adapt(found bool) {
	c := s.cfg
	if found {
		s.growth = 0
		if s.hysteresis > 0 {
			s.hysteresis--
		}
		if s.hysteresis == 0 {
			floor := c.floor()
			if s.scale <= floor {
				s.atMin++
			}
			s.scale = math.Max(toFloat32(s.scale*c.BackoffFactor), floor)
		}
		return
	}
	if c.ConsecutiveHysteresis {
		s.hysteresis = c.Hysteresis
	}
	s.growth++
	if s.growth == c.GrowthInterval {
		s.growth = 0
		s.hysteresis = c.Hysteresis
		next := toFloat32(s.scale * c.GrowthFactor)
		if !math.IsInf(next, 0) && (c.MaxScale == 0 || next <= c.MaxScale) {
			s.scale = next
		}
	}
}

func (s *GradScaler) record(v float64) {
	if len(s.hist) < HistoryLen {
		s.hist = append(s.hist, v)
		return
	}
	s.hist[s.histNext] = v
	s.histNext = (s.histNext + 1) % HistoryLen
}

// state returns this iteration's record for opt, creating it.
func (s *GradScaler) state(opt optim.Optimizer) *optState {
	if opt == nil {
		panic(misuse("nil optimizer"))
	}
	st, ok := s.per[opt]
	if !ok {
		st = &optState{}
		s.per[opt] = st
		s.order = append(s.order, opt)
	}
	return st
}

// lookup returns the record of opt in this iteration, else in the previous one.
func (s *GradScaler) lookup(opt optim.Optimizer) *optState {
	if st, ok := s.per[opt]; ok && st.stage != ready {
		return st
	}
	if st, ok := s.last[opt]; ok {
		return st
	}
	return nil
}

// FoundInf reports whether the latest Unscale of opt (in this iteration, or the
// previous one once Update ran) found an Inf or NaN gradient.
func (s *GradScaler) FoundInf(opt optim.Optimizer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.lookup(opt)
	return st != nil && st.foundInf
}

// NonFiniteParams names the parameters of opt whose gradients were Inf or NaN at its
// latest Unscale (see FoundInf).
func (s *GradScaler) NonFiniteParams(opt optim.Optimizer) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.lookup(opt); st != nil {
		return append([]string(nil), st.nonFinite...)
	}
	return nil
}

// SkippedSteps returns the number of iterations whose step was skipped (an iteration
// counts once however many of its optimizers skipped).
func (s *GradScaler) SkippedSteps() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skipped
}

// ConsecutiveSkips returns the number of skipped iterations since the last clean one.
func (s *GradScaler) ConsecutiveSkips() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.consec
}

// MinScaleOverflows counts the overflows that would have backed the scale off while it
// was already at its minimum.
func (s *GradScaler) MinScaleOverflows() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.atMin
}

// History returns the scale after each Update, oldest first (the last HistoryLen).
func (s *GradScaler) History() []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]float64, 0, len(s.hist))
	out = append(out, s.hist[s.histNext:]...)
	return append(out, s.hist[:s.histNext]...)
}
