package overflow

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/scaler"
	"github.com/gamp-ml/gamp/tensor"
)

// Values are a tensor's contents as raw bits (float32 and float64 bit patterns, half
// bit patterns, integers), so comparing them is bit-exact: -0 differs from 0 and a NaN
// equals only the same NaN.
type Values struct {
	DType tensor.DType
	Shape tensor.Shape
	Bits  []uint64
}

// valuesOf copies t's contents.
func valuesOf(t *tensor.Tensor) Values {
	v := Values{DType: t.DType(), Shape: t.Shape().Clone()}
	switch t.DType() {
	case tensor.Float32:
		for _, x := range t.Float32s() {
			v.Bits = append(v.Bits, uint64(math.Float32bits(x)))
		}
	case tensor.Float16, tensor.BFloat16:
		for _, x := range t.Uint16s() {
			v.Bits = append(v.Bits, uint64(x))
		}
	case tensor.Float64:
		for _, x := range t.Float64s() {
			v.Bits = append(v.Bits, math.Float64bits(x))
		}
	case tensor.Int32:
		for _, x := range t.Int32s() {
			v.Bits = append(v.Bits, uint64(uint32(x)))
		}
	case tensor.Bool:
		for _, x := range t.Bools() {
			if x {
				v.Bits = append(v.Bits, 1)
			} else {
				v.Bits = append(v.Bits, 0)
			}
		}
	default:
		for _, x := range t.Int64s() {
			v.Bits = append(v.Bits, uint64(x))
		}
	}
	return v
}

// Snapshot is the training state a skipped step must leave alone, captured bit for bit
// by SnapshotTraining.
type Snapshot struct {
	Params  map[string]Values // by parameter name
	Buffers map[string]Values
	// Optimizer holds the tensors of the optimizer's StateDict (moments, masters);
	// OptimizerScalars its scalars (lr, step counters).
	Optimizer        map[string]Values
	OptimizerScalars map[string]float64
	OptimizerSteps   int64
	// Scaler is the scaler's state (zero when SnapshotTraining got no scaler). A
	// skipped step changes it (the scale backs off); compare scales with
	// AssertScaleBackedOff.
	Scaler scaler.State
}

// SnapshotTraining captures model's parameters and buffers, opt's state (through
// StateDict) and the scaler's state; opt and sc may be nil.
func SnapshotTraining(model nn.Module, opt optim.Optimizer, sc *scaler.GradScaler) *Snapshot {
	s := &Snapshot{Params: map[string]Values{}, Buffers: map[string]Values{}}
	for _, p := range model.Params() {
		s.Params[p.Name] = valuesOf(p.T)
	}
	for _, p := range model.Buffers() {
		s.Buffers[p.Name] = valuesOf(p.T)
	}
	if opt != nil {
		st := opt.StateDict()
		s.Optimizer = map[string]Values{}
		for k, t := range st.Tensors {
			s.Optimizer[k] = valuesOf(t)
		}
		s.OptimizerScalars = maps.Clone(st.Scalars)
		st.Release()
		s.OptimizerSteps = opt.StepCount()
	}
	if sc != nil {
		s.Scaler = sc.StateDict()
	}
	return s
}

// CompareOption adjusts AssertUnchanged.
type CompareOption func(*compareConfig)

type compareConfig struct{ runningStats bool }

// ExceptRunningStats lets buffers change as long as they stay finite (with the same
// shape and dtype). BatchNorm updates its running statistics in the forward pass, so
// they move on a skipped step too, as in PyTorch; what must not happen is an Inf or NaN
// from an overflowing forward reaching them.
func ExceptRunningStats() CompareOption { return func(c *compareConfig) { c.runningStats = true } }

// AssertUnchanged fails t unless every parameter, buffer, optimizer tensor (moments,
// masters), optimizer scalar (step counters included) and the optimizer step count are
// bit-identical in before and after: what a skipped step must guarantee. It reports
// every difference and returns whether there was none.
func AssertUnchanged(t testing.TB, before, after *Snapshot, opts ...CompareOption) bool {
	t.Helper()
	var cfg compareConfig
	for _, o := range opts {
		o(&cfg)
	}
	var diffs []string
	diffs = append(diffs, diffValues("parameter", before.Params, after.Params, false)...)
	diffs = append(diffs, diffValues("buffer", before.Buffers, after.Buffers, cfg.runningStats)...)
	diffs = append(diffs, diffValues("optimizer state", before.Optimizer, after.Optimizer, false)...)
	for _, k := range unionKeys(before.OptimizerScalars, after.OptimizerScalars) {
		a, okA := before.OptimizerScalars[k]
		b, okB := after.OptimizerScalars[k]
		if okA != okB || math.Float64bits(a) != math.Float64bits(b) {
			diffs = append(diffs, fmt.Sprintf("optimizer scalar %q: %s → %s", k, scalarText(a, okA), scalarText(b, okB)))
		}
	}
	if before.OptimizerSteps != after.OptimizerSteps {
		diffs = append(diffs, fmt.Sprintf("optimizer step count: %d → %d", before.OptimizerSteps, after.OptimizerSteps))
	}
	if len(diffs) == 0 {
		return true
	}
	const show = 20
	msg := strings.Join(diffs[:min(len(diffs), show)], "\n  ")
	if len(diffs) > show {
		msg += fmt.Sprintf("\n  … and %d more", len(diffs)-show)
	}
	t.Errorf("overflow: the training state changed (%d differences):\n  %s", len(diffs), msg)
	return false
}

func scalarText(v float64, ok bool) string {
	if !ok {
		return "absent"
	}
	return fmt.Sprintf("%v (bits %#x)", v, math.Float64bits(v))
}

func unionKeys[V any](a, b map[string]V) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// diffValues describes how the tensors in a and b differ; with finiteOnly, values may
// change but must stay finite.
func diffValues(kind string, a, b map[string]Values, finiteOnly bool) []string {
	var out []string
	for _, k := range unionKeys(a, b) {
		x, okX := a[k]
		y, okY := b[k]
		switch {
		case !okX:
			out = append(out, fmt.Sprintf("%s %q appeared", kind, k))
		case !okY:
			out = append(out, fmt.Sprintf("%s %q disappeared", kind, k))
		case x.DType != y.DType || !x.Shape.Equal(y.Shape):
			out = append(out, fmt.Sprintf("%s %q: %s %v → %s %v", kind, k, x.DType, x.Shape, y.DType, y.Shape))
		case finiteOnly:
			if i := firstNonFinite(y); i >= 0 {
				out = append(out, fmt.Sprintf("%s %q: element %d became %v", kind, k, i, y.float(i)))
			}
		default:
			n, first := 0, -1
			for i := range x.Bits {
				if x.Bits[i] != y.Bits[i] {
					if first < 0 {
						first = i
					}
					n++
				}
			}
			if n > 0 {
				out = append(out, fmt.Sprintf("%s %q: %d of %d elements differ, first at %d: %v → %v (bits %#x → %#x)",
					kind, k, n, len(x.Bits), first, x.float(first), y.float(first), x.Bits[first], y.Bits[first]))
			}
		}
	}
	return out
}

// float returns element i as a number.
func (v Values) float(i int) float64 {
	b := v.Bits[i]
	switch v.DType {
	case tensor.Float32:
		return float64(math.Float32frombits(uint32(b)))
	case tensor.Float16:
		a := uint16(b)
		x := float64(math.Float32frombits(half16ToFloat32Bits(a & 0x7fff)))
		switch {
		case a&0x7fff == 0x7c00:
			x = math.Inf(1)
		case a&0x7fff > 0x7c00:
			x = math.NaN()
		}
		if a&0x8000 != 0 {
			x = -x
		}
		return x
	case tensor.BFloat16:
		return float64(math.Float32frombits(uint32(b) << 16))
	case tensor.Float64:
		return math.Float64frombits(b)
	case tensor.Int32:
		return float64(int32(uint32(b)))
	}
	return float64(int64(b))
}

func firstNonFinite(v Values) int {
	if !v.DType.IsFloat() {
		return -1
	}
	for i := range v.Bits {
		if x := v.float(i); math.IsNaN(x) || math.IsInf(x, 0) {
			return i
		}
	}
	return -1
}

// AssertScaleBackedOff fails t unless the loss scale went down from before to after
// and is still a positive finite number (a collapsed scale is a failure too).
func AssertScaleBackedOff(t testing.TB, before, after float64) bool {
	t.Helper()
	if !(after < before) || !(after > 0) || math.IsInf(after, 0) {
		t.Errorf("overflow: the loss scale did not back off: %g → %g", before, after)
		return false
	}
	return true
}

// AssertRecovers fails t if a step later than faultStep+k was skipped (results[i] is
// the result of step i), or if the run ended before showing a clean step after
// faultStep+k.
func AssertRecovers(t testing.TB, results []amp.Result, faultStep, k int) bool {
	t.Helper()
	if len(results) <= faultStep+k+1 {
		t.Errorf("overflow: %d steps cannot show recovery within %d steps of the fault at step %d", len(results), k, faultStep)
		return false
	}
	var late []int
	for i := faultStep + k + 1; i < len(results); i++ {
		if results[i].Skipped {
			late = append(late, i)
		}
	}
	if len(late) > 0 {
		t.Errorf("overflow: training did not recover within %d steps of the fault at step %d: steps %v were skipped", k, faultStep, late)
		return false
	}
	return true
}
