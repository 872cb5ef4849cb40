package scaler

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/optim"
)

// State is a GradScaler's serialisable state: plain numbers, so encoding/json (or any
// encoder) writes it as is. It holds everything Update's rule depends on, so a resumed
// run follows the same scale trajectory as an uninterrupted one.
type State struct {
	Scale             float64 `json:"scale"`
	GrowthTracker     int     `json:"growth_tracker"`
	HysteresisTracker int     `json:"hysteresis_tracker"`
	ConsecutiveSkips  int64   `json:"consecutive_skips"`
	SkippedSteps      int64   `json:"skipped_steps"`
	MinScaleOverflows int64   `json:"min_scale_overflows"`
	Updates           int64   `json:"updates"`
	Config            Config  `json:"config"`
}

// StateDict returns the scaler's state.
func (s *GradScaler) StateDict() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return State{
		Scale:             s.scale,
		GrowthTracker:     s.growth,
		HysteresisTracker: s.hysteresis,
		ConsecutiveSkips:  s.consec,
		SkippedSteps:      s.skipped,
		MinScaleOverflows: s.atMin,
		Updates:           s.updates,
		Config:            s.cfg,
	}
}

// LoadStateDict restores a state saved by StateDict, configuration included, and
// starts a fresh iteration (every optimizer READY). It returns an error wrapping
// ErrConfig, and changes nothing, for an inconsistent state or one saved from a
// disabled scaler. A disabled scaler ignores the state, as PyTorch's does.
func (s *GradScaler) LoadStateDict(st State) error {
	if !s.enabled {
		return nil
	}
	if err := st.Check(); err != nil {
		return err
	}
	cfg := st.Config.withDefaults()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg = cfg
	s.scale = st.Scale
	s.growth = st.GrowthTracker
	s.hysteresis = st.HysteresisTracker
	s.consec = st.ConsecutiveSkips
	s.skipped = st.SkippedSteps
	s.atMin = st.MinScaleOverflows
	s.updates = st.Updates
	s.per, s.order, s.last = map[optim.Optimizer]*optState{}, nil, nil
	return nil
}

// Check reports, as an error wrapping ErrConfig, why an enabled scaler's
// LoadStateDict would refuse st: a state saved from a disabled scaler, a bad
// configuration, a scale that is not a positive float32 within [MinScale, MaxScale],
// trackers outside their ranges or inconsistent counters. A loader checks every part
// of a file before restoring any.
func (st State) Check() error {
	if st.Config.Disabled {
		return fmt.Errorf("%w: the state was saved from a disabled scaler (it holds no scale); build this scaler disabled too, or start it fresh", ErrConfig)
	}
	if err := st.Config.Validate(); err != nil {
		return err
	}
	cfg := st.Config.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: state: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case !(st.Scale > 0) || st.Scale > math.MaxFloat32 || !(st.Scale >= cfg.floor()) || math.IsInf(st.Scale, 0) || (cfg.MaxScale > 0 && st.Scale > cfg.MaxScale) || st.Scale != toFloat32(st.Scale):
		return bad("scale %g is not a float32 in [%g, %g]", st.Scale, cfg.floor(), cfg.MaxScale)
	case st.GrowthTracker < 0 || st.GrowthTracker >= cfg.GrowthInterval:
		return bad("growth tracker %d is outside [0, %d)", st.GrowthTracker, cfg.GrowthInterval)
	case st.HysteresisTracker < 0 || st.HysteresisTracker > cfg.Hysteresis:
		return bad("hysteresis tracker %d is outside [0, %d]", st.HysteresisTracker, cfg.Hysteresis)
	case st.ConsecutiveSkips < 0 || st.SkippedSteps < st.ConsecutiveSkips || st.MinScaleOverflows < 0 || st.Updates < st.SkippedSteps:
		return bad("inconsistent counters (consecutive %d, skipped %d, at minimum %d, updates %d)", st.ConsecutiveSkips, st.SkippedSteps, st.MinScaleOverflows, st.Updates)
	}
	return nil
}

// DiscardIteration forgets what Unscale and Step recorded since the last Update, as if
// they had not run: every optimizer is READY again and the scale, trackers and
// counters are untouched. A training step that failed after unscaling (out of memory
// while clipping or in the optimizer) calls it before the gradients are dropped, so
// the retry starts a fresh iteration. A disabled scaler does nothing.
func (s *GradScaler) DiscardIteration() {
	if !s.enabled {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.per, s.order = map[optim.Optimizer]*optState{}, nil
}
