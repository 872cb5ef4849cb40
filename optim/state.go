package optim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gamp-ml/gamp/tensor"
)

// stateKey names a per-parameter entry: "state.<index>.<name>".
func stateKey(i int, name string) string { return "state." + strconv.Itoa(i) + "." + name }

// parseStateKey splits "state.<index>.<name>".
func parseStateKey(k string) (i int, name string, ok bool) {
	rest, ok := strings.CutPrefix(k, "state.")
	if !ok {
		return 0, "", false
	}
	idx, name, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, "", false
	}
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 {
		return 0, "", false
	}
	return i, name, true
}

// snapshot returns a copy of t outside any Context, owned by the caller.
func snapshot(t *tensor.Tensor) *tensor.Tensor {
	return newState(t, t.DType()).CopyFrom(t)
}

// copyInto copies src into dst (converting the dtype), bringing src to dst's device
// first when it lives elsewhere (a state loaded from disk onto a GPU optimizer).
func copyInto(dst, src *tensor.Tensor) {
	if src.Device() != dst.Device() {
		moved := src.To(dst.Device())
		defer moved.Release()
		src = moved
	}
	dst.CopyFrom(src)
}

// bool01 encodes a flag as a scalar.
func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// stateSpec says what an optimizer's State holds besides lr, step, num_params and
// masters.
type stateSpec struct {
	hyper   []string // required hyper-parameter scalars
	tensors []string // optional per-parameter tensors
	scalars []string // optional per-parameter scalars
}

// baseState returns the scalars every optimizer saves and snapshots of the masters.
func (c *core) baseState() State {
	s := State{
		Scalars: map[string]float64{"lr": c.lr, "step": float64(c.steps), "num_params": float64(len(c.slots))},
		Tensors: map[string]*tensor.Tensor{},
	}
	for i, sl := range c.slots {
		if sl.master != nil {
			s.Tensors[stateKey(i, "master")] = snapshot(sl.master)
		}
	}
	c.halfState(s)
	return s
}

// TensorSpec describes a state tensor by shape and dtype: what a file's header says
// before its data is read.
type TensorSpec struct {
	Shape tensor.Shape
	DType tensor.DType
}

// StateSpec is a State described, not held: its scalars, and its tensors' shapes and
// dtypes. StreamLoader checks one before any data is read.
type StateSpec struct {
	Scalars map[string]float64
	Tensors map[string]TensorSpec
}

// StreamLoader is implemented by gamp's optimizers (SGD, Adam, AdamW): a loader checks
// a state from its description, then reads each tensor straight into the optimizer's
// own buffer, so restoring a state needs no second copy of it in memory (amp.Load uses
// it).
type StreamLoader interface {
	// CheckState reports, changing nothing, why a state described by spec would not
	// load (an error wrapping ErrStateMismatch or ErrConfig), or nil.
	CheckState(spec StateSpec) error
	// LoadStateFrom checks spec as CheckState does, makes every buffer the state
	// needs (an out-of-memory error, with nothing changed, when they do not fit), then
	// adopts the state and calls read once for each of spec's tensors with the
	// optimizer's tensor to fill (shaped as the state says, in the optimizer's dtype).
	// An error from read is returned as is and leaves the optimizer partly loaded: a
	// caller checks its source (checksums) before.
	LoadStateFrom(spec StateSpec, read func(key string, dst *tensor.Tensor) error) error
}

// spec describes s; a nil or released tensor is an error.
func (s State) spec(kind string) (StateSpec, error) {
	sp := StateSpec{Scalars: s.Scalars, Tensors: make(map[string]TensorSpec, len(s.Tensors))}
	for k, t := range s.Tensors {
		if t == nil || t.Released() {
			return sp, fmt.Errorf("%w: %s: tensor %q is nil or released", ErrStateMismatch, kind, k)
		}
		sp.Tensors[k] = TensorSpec{Shape: t.Shape(), DType: t.DType()}
	}
	return sp, nil
}

// loadState restores s (held in memory) through a StreamLoader's LoadStateFrom.
func loadState(l StreamLoader, kind string, s State) error {
	sp, err := s.spec(kind)
	if err != nil {
		return err
	}
	return l.LoadStateFrom(sp, func(key string, dst *tensor.Tensor) error {
		copyInto(dst, s.Tensors[key])
		return nil
	})
}

// checkState validates s against the optimizer before anything is loaded, so a bad
// state leaves the optimizer as it was.
func (c *core) checkState(s StateSpec, spec stateSpec) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrStateMismatch, c.kind, fmt.Sprintf(format, args...))
	}
	for _, k := range append([]string{"lr", "step", "num_params"}, spec.hyper...) {
		v, ok := s.Scalars[k]
		if !ok {
			return bad("no %q scalar (was the state saved by another kind of optimizer?)", k)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return bad("scalar %q is %g", k, v)
		}
	}
	if n := s.Scalars["num_params"]; n != float64(len(c.slots)) {
		return bad("the state is for %g parameters, the optimizer has %d", n, len(c.slots))
	}
	if err := checkCount("step", s.Scalars["step"]); err != nil {
		return bad("%v", err)
	}
	if err := checkLR(c.kind, s.Scalars["lr"]); err != nil {
		return err
	}
	for k, v := range s.Scalars {
		if k == "lr" || k == "step" || k == "num_params" || slices.Contains(spec.hyper, k) || isHalfKey(k) {
			continue
		}
		i, name, ok := parseStateKey(k)
		if !ok || i >= len(c.slots) || !slices.Contains(spec.scalars, name) {
			return bad("unknown scalar %q", k)
		}
		if err := checkCount(k, v); err != nil {
			return bad("%v", err)
		}
	}
	for k, t := range s.Tensors {
		i, name, ok := parseStateKey(k)
		if !ok || i >= len(c.slots) || (name != "master" && name != keyMasterLow && !slices.Contains(spec.tensors, name)) {
			return bad("unknown tensor %q", k)
		}
		sl := c.slots[i]
		switch {
		case !t.DType.IsFloat():
			return bad("tensor %q is %s, want a floating-point tensor", k, t.DType)
		case !t.Shape.Equal(sl.p.T.Shape()):
			return bad("tensor %q has shape %v, parameter %d (%q) has shape %v", k, t.Shape, i, sl.p.Name, sl.p.T.Shape())
		case name == "master" && sl.master == nil:
			return bad("%q is an FP32 master, but parameter %d (%q) is %s (the state was saved from a half-precision model, or with FP32 masters into an optimizer without them)", k, i, sl.p.Name, sl.p.T.DType())
		}
	}
	return c.checkHalfState(s)
}

func checkCount(name string, v float64) error {
	if v < 0 || v != math.Trunc(v) || v > 1<<53 {
		return fmt.Errorf("%s must be a non-negative integer, got %g", name, v)
	}
	return nil
}

// allocStates calls make, which creates the buffers a load needs, and releases what
// it made (returned by make through keep) if it runs out of memory.
func allocStates(kind string, make func(keep func(*tensor.Tensor) *tensor.Tensor)) error {
	var made []*tensor.Tensor
	keep := func(t *tensor.Tensor) *tensor.Tensor {
		made = append(made, t)
		return t
	}
	if err := tensor.CatchOOM(func() { make(keep) }); err != nil {
		for _, t := range made {
			t.Release()
		}
		return fmt.Errorf("optim: %s: loading the state: %w", kind, err)
	}
	return nil
}

// loadBase restores lr and the step count, then reads the masters (writing each back,
// rounded, into its half parameter so parameter and master agree). Call it after
// checkState.
func (c *core) loadBase(s StateSpec, read func(key string, dst *tensor.Tensor) error) error {
	c.lr = s.Scalars["lr"]
	c.steps = int64(s.Scalars["step"])
	for i, sl := range c.slots {
		sl.dropMasterGrad()
		key := stateKey(i, "master")
		if _, ok := s.Tensors[key]; ok {
			if err := read(key, sl.master); err != nil {
				return err
			}
			sl.writeBack()
		}
	}
	return c.loadHalfState(s, read)
}
