package scaler

import (
	"errors"
	"fmt"
	"strings"
)

// MisuseError is the panic value for calling the scaler out of order (Unscale twice,
// Unscale after Step, Step twice before Update, Update with nothing to update). Its
// message says what to do.
type MisuseError struct{ Msg string }

func (e *MisuseError) Error() string { return "scaler: " + e.Msg }

func misuse(format string, args ...any) *MisuseError {
	return &MisuseError{Msg: fmt.Sprintf(format, args...)}
}

// ErrSkipAlarm matches every *SkipAlarmError with errors.Is.
var ErrSkipAlarm = errors.New("scaler: too many consecutive skipped steps")

// SkipAlarmError is what Update returns when Config.SkipAlarm consecutive steps were
// skipped: training is not progressing (a NaN loss, a diverging model, or an op that
// overflows whatever the scale).
type SkipAlarmError struct {
	Consecutive int64    // consecutive skipped steps
	Scale       float64  // the scale after the last Update
	Params      []string // parameters whose gradients were Inf or NaN in the last step
}

// Error names the parameters (the first ten) and says what to look at.
func (e *SkipAlarmError) Error() string {
	names := e.Params
	more := ""
	if len(names) > 10 {
		more = fmt.Sprintf(" and %d more", len(names)-10)
		names = names[:10]
	}
	return fmt.Sprintf("scaler: %d consecutive steps skipped for Inf/NaN gradients (loss scale now %g); non-finite gradients in the last step: %s%s. "+
		"Check the loss for NaN, lower the learning rate, or find the overflowing op with the overflow harness",
		e.Consecutive, e.Scale, strings.Join(names, ", "), more)
}

// Is makes errors.Is(err, ErrSkipAlarm) hold.
func (e *SkipAlarmError) Is(target error) bool { return target == ErrSkipAlarm }
