package scaler

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// PyTorch's defaults (torch.amp.GradScaler).
const (
	DefaultInitScale      = 65536.0
	DefaultGrowthFactor   = 2.0
	DefaultBackoffFactor  = 0.5
	DefaultGrowthInterval = 2000
)

// minNormalFloat32 is the smallest scale ever used, whatever MinScale says: halving
// the scale further would reach float32 subnormals and then 0, and an infinite inverse
// scale turns every gradient into NaN forever (the "scale collapsed to 0" failure).
const minNormalFloat32 = 0x1p-126

// ErrConfig is wrapped by the errors New, NewFor and LoadStateDict return for a bad
// configuration; check it with errors.Is.
var ErrConfig = errors.New("scaler: invalid configuration")

// Config configures a GradScaler. The zero Config is PyTorch's defaults: an enabled
// dynamic scaler with init scale 2^16, growth 2, backoff 0.5, growth interval 2000,
// hysteresis 1, no minimum, no maximum and no alarm; each numeric field left 0 takes
// its default. Turning the scaler off is explicit: Disabled: true.
type Config struct {
	InitScale     float64 `json:"init_scale"`
	GrowthFactor  float64 `json:"growth_factor"`  // > 1
	BackoffFactor float64 `json:"backoff_factor"` // in (0, 1)
	// GrowthInterval is the number of consecutive clean steps after which the scale
	// grows.
	GrowthInterval int `json:"growth_interval"`
	// MinScale is the floor the scale never backs off below (0: none, though the scale
	// never goes below the smallest normal float32). At the floor, overflowing steps
	// are still skipped and counted (MinScaleOverflows); the scale is never reset.
	MinScale float64 `json:"min_scale"`
	// MaxScale caps growth (0: none): a growth that would pass it is not applied
	// (Apex uses 2^24).
	MaxScale float64 `json:"max_scale"`
	// Hysteresis is the number of overflows tolerated before the scale backs off
	// (DeepSpeed/Megatron; 0 or 1: back off at every overflow, as PyTorch). Every
	// overflow still skips its step. The counter is refilled when the scale grows, and
	// after every clean step when ConsecutiveHysteresis is set.
	Hysteresis            int  `json:"hysteresis"`
	ConsecutiveHysteresis bool `json:"consecutive_hysteresis"`
	// SkipAlarm, when > 0, makes Update return a *SkipAlarmError once this many
	// consecutive steps were skipped (and after every further skipped step), naming the
	// parameters whose gradients were not finite.
	SkipAlarm int `json:"skip_alarm"`
	// Disabled turns the scaler off: a disabled scaler has scale 1, never skips and
	// costs nothing.
	Disabled bool `json:"disabled"`
	// Static keeps the scale at InitScale (no growth, no backoff). Steps with Inf/NaN
	// gradients are still skipped.
	Static bool `json:"static"`
}

// DefaultConfig returns PyTorch's defaults written out: New treats it exactly as the
// zero Config, which is what it returns with its numeric defaults filled in.
func DefaultConfig() Config {
	return Config{}.withDefaults()
}

// UnmarshalJSON reads a Config as encoding/json would, and also the form saved before
// Disabled replaced Enabled: "enabled": false reads as Disabled (a "disabled" field,
// when present, wins). Such a file is written back in the new form. The old
// "force_enabled" field, which only NewFor read, is ignored.
func (c *Config) UnmarshalJSON(b []byte) error {
	type plain Config // no UnmarshalJSON method: no recursion
	aux := struct {
		*plain
		Disabled *bool `json:"disabled"`
		Enabled  *bool `json:"enabled"`
	}{plain: (*plain)(c)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	switch {
	case aux.Disabled != nil:
		c.Disabled = *aux.Disabled
	case aux.Enabled != nil:
		c.Disabled = !*aux.Enabled
	}
	return nil
}

// withDefaults fills the zero numeric fields.
func (c Config) withDefaults() Config {
	if c.InitScale == 0 {
		c.InitScale = DefaultInitScale
	}
	if c.GrowthFactor == 0 {
		c.GrowthFactor = DefaultGrowthFactor
	}
	if c.BackoffFactor == 0 {
		c.BackoffFactor = DefaultBackoffFactor
	}
	if c.GrowthInterval == 0 {
		c.GrowthInterval = DefaultGrowthInterval
	}
	if c.Hysteresis == 0 {
		c.Hysteresis = 1
	}
	return c
}

// Validate reports a bad configuration (after filling in defaults) as an error
// wrapping ErrConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !(c.InitScale >= minNormalFloat32) || c.InitScale > math.MaxFloat32:
		return bad("InitScale must be a normal float32 > 0, got %g", c.InitScale)
	case !(c.GrowthFactor > 1) || !finite(c.GrowthFactor):
		return bad("GrowthFactor must be finite and > 1, got %g", c.GrowthFactor)
	case !(c.BackoffFactor > 0 && c.BackoffFactor < 1):
		return bad("BackoffFactor must be in (0, 1), got %g", c.BackoffFactor)
	case c.GrowthInterval < 1:
		return bad("GrowthInterval must be ≥ 1, got %d", c.GrowthInterval)
	case !(c.MinScale >= 0) || !finite(c.MinScale):
		return bad("MinScale must be finite and ≥ 0, got %g", c.MinScale)
	case !(c.MaxScale >= 0) || c.MaxScale > math.MaxFloat32:
		return bad("MaxScale must be ≥ 0 (0: none) and fit a float32, got %g", c.MaxScale)
	case c.MaxScale > 0 && c.MinScale > c.MaxScale:
		return bad("MinScale %g is above MaxScale %g", c.MinScale, c.MaxScale)
	case c.InitScale < c.MinScale || (c.MaxScale > 0 && c.InitScale > c.MaxScale):
		return bad("InitScale %g is outside [MinScale %g, MaxScale %g]", c.InitScale, c.MinScale, c.MaxScale)
	case c.Hysteresis < 0:
		return bad("Hysteresis must be ≥ 0, got %d", c.Hysteresis)
	case c.SkipAlarm < 0:
		return bad("SkipAlarm must be ≥ 0 (0: off), got %d", c.SkipAlarm)
	}
	return nil
}

// floor is the lowest scale the scaler backs off to.
func (c Config) floor() float64 { return math.Max(c.MinScale, minNormalFloat32) }

// toFloat32 rounds a scale to float32, as PyTorch stores it; +Inf past the range.
func toFloat32(x float64) float64 {
	if x > math.MaxFloat32 {
		return math.Inf(1)
	}
	return float64(float32(x))
}
