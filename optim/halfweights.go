package optim

import (
	"fmt"
	"math"
	"strings"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// Masters says what an optimizer keeps beside a float16/bfloat16 parameter. The
// gradient the update applies is float32 in every case (MasterGrads), and so is the
// optimizer state (momentum, moments); only the weight's own storage differs.
type Masters uint8

// The choices of Masters.
const (
	// FP32Masters keeps a float32 copy of each half parameter, updates it and writes it
	// back rounded (Apex O2): 6 bytes per parameter. The default.
	FP32Masters Masters = iota
	// NoMasters updates the half weight itself, rounding to nearest: 2 bytes per
	// parameter, but an update smaller than half an ulp of the weight is lost, so
	// small learning rates stall. float16 or bfloat16. Shown as the baseline the two
	// others fix.
	NoMasters
	// StochasticRounding updates the half weight and rounds up or down at random, with
	// the probability of each the nearness of the other neighbour, so updates below an
	// ulp survive in expectation (Zamirai et al. 2020, "Revisiting BFloat16 Training").
	// The random bits come from a counter-based generator seeded by the configuration's
	// RoundingSeed and saved in StateDict, so a resumed run rounds as the uninterrupted
	// one. bfloat16 or float16 (where past the largest finite float16 it rounds to
	// nearest: there is no upper neighbour to draw). 2 bytes per parameter.
	StochasticRounding
	// SplitMasters ("16+16") keeps, beside the bfloat16 weight, the low 16 bits of the
	// float32 master, so the pair is the master exactly: the update is O2's bit for bit
	// at 4 bytes per parameter instead of 6. The weight is the master rounded to nearest
	// except at an exact tie (one update in 2¹⁷), where it is the other, equally near,
	// neighbour: 32 bits cannot hold a float32 and its round-to-nearest-even bfloat16
	// for every value. bfloat16 only.
	SplitMasters
)

var mastersNames = [...]string{"fp32-masters", "no-masters", "stochastic-rounding", "16+16"}

func (m Masters) String() string {
	if int(m) < len(mastersNames) {
		return mastersNames[m]
	}
	return fmt.Sprintf("Masters(%d)", int(m))
}

// rounding is the fused kernels' name for m.
func (m Masters) rounding() backend.HalfRounding {
	switch m {
	case NoMasters:
		return backend.RoundNearest
	case StochasticRounding:
		return backend.RoundStochastic
	case SplitMasters:
		return backend.RoundSplit
	}
	return backend.RoundMaster
}

// checkMasters validates the choice for params before any state is made.
func checkMasters(kind string, m Masters, params []*nn.Param) error {
	if m > SplitMasters {
		return fmt.Errorf("%w: %s: unknown Masters %d", ErrConfig, kind, int(m))
	}
	if m == FP32Masters {
		return nil
	}
	for _, p := range params {
		dt := p.T.DType()
		if !dt.IsHalf() {
			continue
		}
		if m == SplitMasters && dt != tensor.BFloat16 {
			return fmt.Errorf("%w: %s: %v needs bfloat16 parameters, %q is %s; cast the model to bfloat16 or keep FP32 masters", ErrConfig, kind, m, p.Name, dt)
		}
		if !p.T.IsContiguous() {
			return fmt.Errorf("%w: %s: %v updates parameters in place with the fused kernels, and %q is not contiguous; make it contiguous or keep FP32 masters", ErrConfig, kind, m, p.Name)
		}
	}
	return nil
}

// halfStepFailed is the panic of an update the backend cannot fuse: without a master
// there is no composed fallback.
func halfStepFailed(kind string, s *slot) {
	panic(fmt.Errorf("optim: %s: %v needs a backend with fused optimizer kernels (cpu, cuda) and dense parameters; %q on %v has none: keep FP32 masters there", kind, s.mode, s.p.Name, s.p.T.Device()))
}

// halfWeights are the kernel arguments of slot s's update, drawing n counters from the
// generator for stochastic rounding.
func (c *core) halfWeights(s *slot) backend.HalfWeights {
	hw := backend.HalfWeights{Rounding: s.mode.rounding()}
	if s.mode == StochasticRounding {
		hw.RNG = c.gen.Next(uint64(s.p.T.Numel()))
	}
	return hw
}

// The scalars a state of half weights without masters holds.
const (
	keyMasters    = "masters"          // the Masters value (absent: FP32Masters)
	keySeedHi     = "rounding_seed_hi" // the stochastic-rounding seed's high 32 bits
	keySeedLo     = "rounding_seed_lo"
	keyOffset     = "rounding_offset" // the generator's next counter
	keyMasterLow  = "master_low"      // per parameter: the low halves of a 16+16 master
	maxExactCount = 1 << 53
)

// halfState adds the half-weights entries to s.
func (c *core) halfState(s State) {
	if c.masters == FP32Masters {
		return
	}
	s.Scalars[keyMasters] = float64(c.masters)
	if c.gen != nil {
		r := c.gen.State()
		s.Scalars[keySeedHi], s.Scalars[keySeedLo] = float64(r.Seed>>32), float64(r.Seed&0xffffffff)
		s.Scalars[keyOffset] = float64(r.Offset)
	}
	for i, sl := range c.slots {
		if sl.lo != nil {
			s.Tensors[stateKey(i, keyMasterLow)] = snapshot(sl.lo)
		}
	}
}

// checkHalfState checks the half-weights entries of s against the optimizer.
func (c *core) checkHalfState(s StateSpec) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrStateMismatch, c.kind, fmt.Sprintf(format, args...))
	}
	if m := Masters(s.Scalars[keyMasters]); float64(m) != s.Scalars[keyMasters] || m != c.masters {
		return bad("the state was saved with %v, the optimizer uses %v", Masters(s.Scalars[keyMasters]), c.masters)
	}
	if c.gen != nil {
		for _, k := range []string{keySeedHi, keySeedLo, keyOffset} {
			v, ok := s.Scalars[k]
			if !ok || v < 0 || v != math.Trunc(v) || v >= maxExactCount || (k != keyOffset && v >= 1<<32) {
				return bad("scalar %q is missing or not a valid counter (%g)", k, v)
			}
		}
	}
	for i, sl := range c.slots {
		t, ok := s.Tensors[stateKey(i, keyMasterLow)]
		if ok != (sl.lo != nil) {
			return bad("parameter %d (%q): the 16+16 low halves are %s the state", i, sl.p.Name, map[bool]string{true: "missing from", false: "unexpected in"}[sl.lo != nil])
		}
		if ok && t.DType != tensor.BFloat16 {
			return bad("parameter %d (%q): the 16+16 low halves are %s, want the bfloat16 container they were saved in", i, sl.p.Name, t.DType)
		}
	}
	return nil
}

// isHalfKey reports whether a scalar key belongs to the half-weights state.
func isHalfKey(k string) bool {
	return k == keyMasters || k == keySeedHi || k == keySeedLo || k == keyOffset
}

// loadHalfState restores the generator and reads the low halves.
func (c *core) loadHalfState(s StateSpec, read func(key string, dst *tensor.Tensor) error) error {
	if c.gen != nil {
		seed := uint64(s.Scalars[keySeedHi])<<32 | uint64(s.Scalars[keySeedLo])
		c.gen.SetState(backend.RNG{Seed: seed, Offset: uint64(s.Scalars[keyOffset])})
	}
	for i, sl := range c.slots {
		if sl.lo != nil {
			if err := read(stateKey(i, keyMasterLow), sl.lo); err != nil {
				return err
			}
		}
	}
	return nil
}

// mastersShort are the short names the commands accept (ampbench's -opt-level
// suffixes, fashion's -masters).
var mastersShort = map[string]Masters{"fp32": FP32Masters, "16+16": SplitMasters, "sr": StochasticRounding, "rn": NoMasters}

// ParseMasters parses "fp32", "16+16", "sr" or "rn", or a name String returns; ""
// is the default, FP32Masters.
func ParseMasters(s string) (Masters, error) {
	if strings.TrimSpace(s) == "" {
		return FP32Masters, nil
	}
	if m, ok := mastersShort[strings.ToLower(strings.TrimSpace(s))]; ok {
		return m, nil
	}
	for i, n := range mastersNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Masters(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown masters %q (want fp32, 16+16, sr or rn)", ErrConfig, s)
}
