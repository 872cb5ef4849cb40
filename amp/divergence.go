package amp

import (
	"errors"
	"fmt"
	"math"
)

// Defaults of DivergenceConfig's zero fields.
const (
	// DefaultDivergencePatience is the number of consecutive bad steps that make a run
	// diverged: enough that one spike or one overflow burst does not stop a run.
	DefaultDivergencePatience = 10
	// DefaultDivergenceFactor is how many times the reference loss a loss must exceed
	// to count as exploding.
	DefaultDivergenceFactor = 1e3
	// DefaultDivergenceScaleFloor is the loss scale at or below which a skipped step
	// counts as diverging: below 1 the scaler shrinks the gradients instead of
	// protecting them, so overflows there come from the model, not the scale
	// (DeepSpeed stops at a minimum scale of 1 for the same reason).
	DefaultDivergenceScaleFloor = 1.0
)

// DivergenceConfig configures the divergence check of a Trainer. The zero value turns
// it on with the defaults above.
//
// A step is bad when its loss is NaN or ±Inf; or when |loss| exceeds Factor times the
// reference, max(|first finite loss|, 1) — the loss of the model as it started (the
// first step this Trainer ran: after a Load, the first step after it), so a loss that
// falls and rises again is judged against where it began, and the floor of 1 keeps a
// loss that starts near 0 from tripping on ordinary noise; or when the step
// was skipped for Inf/NaN gradients with the loss scale at or below ScaleFloor (or the
// scaler's MinScale, if higher). Patience consecutive bad steps make Step return a
// *DivergenceError (and every further bad step too); a good step resets the count.
//
// Rejected: a finiteness check alone (at a learning rate of 1e4 an FP32 loss climbs to
// ~4e13 and stays finite) and a reference that follows the loss (an EMA or the best
// loss: an EMA climbs along with a loss that grows steadily, and the best loss of a
// well-trained model is so small that normal fluctuations look like explosions).
type DivergenceConfig struct {
	// Off turns the check off.
	Off bool
	// Patience is the number of consecutive bad steps that make a run diverged
	// (0: DefaultDivergencePatience).
	Patience int
	// Factor: a loss above Factor × the reference counts as exploding
	// (0: DefaultDivergenceFactor). Must be > 1.
	Factor float64
	// ScaleFloor: a skipped step with the loss scale at or below it counts as bad
	// (0: DefaultDivergenceScaleFloor).
	ScaleFloor float64
}

// withDefaults fills the zero fields.
func (c DivergenceConfig) withDefaults() DivergenceConfig {
	if c.Patience == 0 {
		c.Patience = DefaultDivergencePatience
	}
	if c.Factor == 0 {
		c.Factor = DefaultDivergenceFactor
	}
	if c.ScaleFloor == 0 {
		c.ScaleFloor = DefaultDivergenceScaleFloor
	}
	return c
}

// validate reports a bad configuration.
func (c DivergenceConfig) validate() error {
	c = c.withDefaults()
	switch {
	case c.Patience < 1:
		return fmt.Errorf("amp: Divergence.Patience must be ≥ 1 (0: the default %d), got %d", DefaultDivergencePatience, c.Patience)
	case !(c.Factor > 1) || math.IsInf(c.Factor, 0):
		return fmt.Errorf("amp: Divergence.Factor must be finite and > 1 (0: the default %g), got %g", float64(DefaultDivergenceFactor), c.Factor)
	case !(c.ScaleFloor > 0) || math.IsInf(c.ScaleFloor, 0):
		return fmt.Errorf("amp: Divergence.ScaleFloor must be finite and > 0 (0: the default %g), got %g", DefaultDivergenceScaleFloor, c.ScaleFloor)
	}
	return nil
}

// ErrDiverged matches every *DivergenceError with errors.Is.
var ErrDiverged = errors.New("amp: training diverged")

// DivergenceError is what Trainer.Step returns once Patience consecutive steps were
// bad (see DivergenceConfig). The step itself completed; the Result is valid.
type DivergenceError struct {
	Step      int64   // the optimizer step that tripped the check (from 1)
	BadSteps  int     // consecutive bad steps, this one included
	Loss      float64 // the loss of this step
	Reference float64 // the reference loss exploding is judged against
	Scale     float64 // the loss scale after this step
	Reason    string  // what made this step bad
}

// Error says what happened and what to try.
func (e *DivergenceError) Error() string {
	return fmt.Sprintf("amp: training diverged at step %d: %d consecutive bad steps, the last because %s. "+
		"Lower the learning rate, add warm-up or gradient clipping (Config.ClipNorm), or check the data; "+
		"Config.Divergence tunes this check (Patience, Factor, ScaleFloor) or turns it off (Off)",
		e.Step, e.BadSteps, e.Reason)
}

// Is makes errors.Is(err, ErrDiverged) hold.
func (e *DivergenceError) Is(target error) bool { return target == ErrDiverged }

// divergence is the check's state: the reference loss and the run of bad steps.
type divergence struct {
	ref    float64 // |first finite loss|, once refSet
	refSet bool
	bad    int
	reduce func(bad bool) bool // combines the verdict over processes; nil: local
}

// SetDivergenceReducer makes the divergence check decide over several processes: f
// gets whether this process's step was bad and returns whether any process's was
// (dist.SyncDivergence all-reduces it). Data-parallel ranks see different local losses,
// so without it one rank could stop while the others wait for it in a collective; with
// it every rank stops at the same step. f runs once per Step on every process while
// the check is on, so every process must call Step alike. nil restores the local
// verdict.
func (t *Trainer) SetDivergenceReducer(f func(bad bool) bool) { t.div.reduce = f }

// observe judges one finished step. minScale is the scaler's MinScale; enabled says
// whether it scales at all (a disabled scaler never skips).
func (d *divergence) observe(c DivergenceConfig, r Result, minScale float64) error {
	if c.Off {
		return nil
	}
	c = c.withDefaults()
	reason := ""
	ref := math.Max(d.ref, 1)
	floor := math.Max(c.ScaleFloor, minScale)
	switch {
	case math.IsNaN(r.Loss) || math.IsInf(r.Loss, 0):
		reason = fmt.Sprintf("the loss is %g", r.Loss)
	case d.refSet && math.Abs(r.Loss) > c.Factor*ref:
		reason = fmt.Sprintf("the loss %.4g is over %g× the reference %.4g (the first loss, at least 1)", r.Loss, c.Factor, ref)
	case r.Skipped && r.Scale <= floor:
		reason = fmt.Sprintf("the step was skipped for Inf/NaN gradients with the loss scale at %g, at or below the floor %g", r.Scale, floor)
	}
	if !d.refSet && !math.IsNaN(r.Loss) && !math.IsInf(r.Loss, 0) {
		d.ref, d.refSet = math.Abs(r.Loss), true
	}
	if d.reduce != nil && d.reduce(reason != "") && reason == "" {
		reason = "another process's step was bad"
	}
	if reason == "" {
		d.bad = 0
		return nil
	}
	d.bad++
	if d.bad < c.Patience {
		return nil
	}
	return &DivergenceError{Step: r.Step, BadSteps: d.bad, Loss: r.Loss, Reference: ref, Scale: r.Scale, Reason: reason}
}

// joinErrs returns the non-nil one of a and b, or both joined: a caller that matches
// one error by type (not errors.As) still sees it when it is the only one.
func joinErrs(a, b error) error {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return errors.Join(a, b)
}
