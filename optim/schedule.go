package optim

import (
	"fmt"
	"math"
)

// Schedule maps a step count to a learning rate. step is the number of optimizer
// updates taken so far, so LR(base, 0) is the rate of the first update.
type Schedule interface {
	LR(base float64, step int64) float64
	// Validate reports a bad configuration (an error wrapping ErrConfig).
	Validate() error
}

// Constant keeps the base learning rate.
type Constant struct{}

// LR implements Schedule.
func (Constant) LR(base float64, _ int64) float64 { return base }

// Validate implements Schedule.
func (Constant) Validate() error { return nil }

// StepLR multiplies the rate by Gamma every StepSize steps (torch's StepLR):
// base·Gamma^⌊step/StepSize⌋.
type StepLR struct {
	StepSize int64
	Gamma    float64
}

// LR implements Schedule.
func (s StepLR) LR(base float64, step int64) float64 {
	return base * math.Pow(s.Gamma, float64(step/s.StepSize))
}

// Validate implements Schedule.
func (s StepLR) Validate() error {
	if s.StepSize < 1 {
		return fmt.Errorf("%w: StepLR: StepSize must be ≥ 1, got %d", ErrConfig, s.StepSize)
	}
	if !(s.Gamma >= 0) || math.IsInf(s.Gamma, 0) {
		return fmt.Errorf("%w: StepLR: Gamma must be finite and ≥ 0, got %g", ErrConfig, s.Gamma)
	}
	return nil
}

// CosineAnnealing anneals the rate from base to EtaMin over TMax steps along half a
// cosine (torch's CosineAnnealingLR in its closed form):
// EtaMin + (base-EtaMin)·(1+cos(π·step/TMax))/2. As in PyTorch the curve is periodic:
// past TMax the rate climbs back; use TMax = the total number of steps.
type CosineAnnealing struct {
	TMax   int64
	EtaMin float64
}

// LR implements Schedule.
func (s CosineAnnealing) LR(base float64, step int64) float64 {
	return s.EtaMin + (base-s.EtaMin)*(1+math.Cos(math.Pi*float64(step)/float64(s.TMax)))/2
}

// Validate implements Schedule.
func (s CosineAnnealing) Validate() error {
	if s.TMax < 1 {
		return fmt.Errorf("%w: CosineAnnealing: TMax must be ≥ 1, got %d", ErrConfig, s.TMax)
	}
	if !(s.EtaMin >= 0) || math.IsInf(s.EtaMin, 0) {
		return fmt.Errorf("%w: CosineAnnealing: EtaMin must be finite and ≥ 0, got %g", ErrConfig, s.EtaMin)
	}
	return nil
}

// LinearWarmup ramps the rate linearly over Steps updates — the k-th update (k = 1 …
// Steps) uses base·k/Steps — then follows Then from its step 0 (nil Then: Constant).
type LinearWarmup struct {
	Steps int64
	Then  Schedule
}

// LR implements Schedule.
func (s LinearWarmup) LR(base float64, step int64) float64 {
	if step < s.Steps {
		return base * float64(step+1) / float64(s.Steps)
	}
	if s.Then == nil {
		return base
	}
	return s.Then.LR(base, step-s.Steps)
}

// Validate implements Schedule.
func (s LinearWarmup) Validate() error {
	if s.Steps < 0 {
		return fmt.Errorf("%w: LinearWarmup: Steps must be ≥ 0, got %d", ErrConfig, s.Steps)
	}
	if s.Then != nil {
		return s.Then.Validate()
	}
	return nil
}

// ScheduleFunc adapts a function to a Schedule (torch's LambdaLR with the base rate
// passed in).
type ScheduleFunc func(base float64, step int64) float64

// LR implements Schedule.
func (f ScheduleFunc) LR(base float64, step int64) float64 { return f(base, step) }

// Validate implements Schedule.
func (f ScheduleFunc) Validate() error {
	if f == nil {
		return fmt.Errorf("%w: nil ScheduleFunc", ErrConfig)
	}
	return nil
}

// Scheduler drives an optimizer's learning rate from a Schedule. Advance it once per
// optimizer step with Step(stepped), passing whether the step ran: a step the loss
// scaler skipped does not advance the schedule (so warmup and decay count real
// updates), unlike torch's schedulers which drift and warn.
type Scheduler struct {
	opt   Optimizer
	sched Schedule
	base  float64
	step  int64
}

// SchedulerState is a Scheduler's serialisable state.
type SchedulerState struct {
	Step   int64   `json:"step"`    // updates counted so far
	BaseLR float64 `json:"base_lr"` // the rate the schedule scales
}

// NewScheduler takes the optimizer's current rate as the base rate and sets the rate
// of the first update. It returns an error wrapping ErrConfig for a bad schedule.
func NewScheduler(opt Optimizer, s Schedule) (*Scheduler, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil Schedule", ErrConfig)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	sc := &Scheduler{opt: opt, sched: s, base: opt.LR()}
	sc.apply()
	return sc, nil
}

func (s *Scheduler) apply() { s.opt.SetLR(s.sched.LR(s.base, s.step)) }

// Step advances the schedule by one update and sets the optimizer's rate for the next,
// if stepped is true (the value GradScaler.Step returns); a skipped step changes
// nothing.
func (s *Scheduler) Step(stepped bool) {
	if !stepped {
		return
	}
	s.step++
	s.apply()
}

// StepCount returns the number of updates the schedule has counted.
func (s *Scheduler) StepCount() int64 { return s.step }

// LR returns the rate the schedule gives for the next update.
func (s *Scheduler) LR() float64 { return s.sched.LR(s.base, s.step) }

// BaseLR returns the base rate.
func (s *Scheduler) BaseLR() float64 { return s.base }

// StateDict returns the step count and base rate.
func (s *Scheduler) StateDict() SchedulerState { return SchedulerState{Step: s.step, BaseLR: s.base} }

// Validate reports a state LoadStateDict would refuse: a negative step count or a
// base rate that is negative, infinite or NaN.
func (st SchedulerState) Validate() error {
	if st.Step < 0 {
		return fmt.Errorf("%w: scheduler step %d is negative", ErrStateMismatch, st.Step)
	}
	return checkLR("Scheduler", st.BaseLR)
}

// LoadStateDict restores a state and sets the optimizer's rate from it; a state that
// fails Validate is an error and changes nothing.
func (s *Scheduler) LoadStateDict(st SchedulerState) error {
	if err := st.Validate(); err != nil {
		return err
	}
	s.step, s.base = st.Step, st.BaseLR
	s.apply()
	return nil
}
