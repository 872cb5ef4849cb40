package amp

import (
	"fmt"
	"strings"

	"github.com/gamp-ml/gamp/autocast"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/scaler"
	"github.com/gamp-ml/gamp/tensor"
)

// OptLevel is one of Apex's optimisation levels.
type OptLevel int

// The opt levels.
const (
	// O0 trains in FP32: no autocast, no loss scaling. The baseline.
	O0 OptLevel = iota
	// O1 autocasts ops (matmul, conv in half; softmax, losses, norms in FP32) with FP32
	// weights and a dynamic loss scale for float16. What torch.amp does.
	O1
	// O2 casts the model to half except BatchNorm, keeps FP32 master weights in the
	// optimizer, and scales the loss dynamically (Apex O2, keep_batchnorm_fp32).
	O2
	// O3 runs everything in half with no loss scaling: a speed-of-light comparison that
	// usually diverges in float16.
	O3
)

func (l OptLevel) String() string { return fmt.Sprintf("O%d", int(l)) }

// ParseOptLevel parses "O0" … "O3" (case-insensitive, "0" … "3" too).
func ParseOptLevel(s string) (OptLevel, error) {
	t := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "O")
	switch t {
	case "0", "1", "2", "3":
		return OptLevel(t[0] - '0'), nil
	}
	return 0, fmt.Errorf("amp: unknown opt level %q (want O0, O1, O2 or O3)", s)
}

// Config says how a Trainer mixes precision.
type Config struct {
	Level OptLevel
	// Low is the half dtype (Float16 or BFloat16). Zero picks the device default:
	// float16 on CUDA, bfloat16 on the CPU.
	Low tensor.DType
	// Policy overrides the autocast policy O1 uses (nil: autocast.Half(Low)).
	Policy *autocast.Policy
	// Scaler configures the loss scaler (the zero Config: PyTorch's defaults). It is
	// disabled at O0 and O3, and for bfloat16, which needs none (scaler.NewFor and
	// scaler.Needed); to scale bfloat16 anyway, set Trainer.Scaler to a scaler.New one
	// after NewTrainer.
	Scaler scaler.Config
	// Accum is the number of micro-batches per optimizer step (default 1).
	Accum int
	// ClipNorm clips the global gradient 2-norm when > 0 (after unscaling).
	ClipNorm float64
	// ReportGradNorm computes the gradient norm for Result.GradNorm even when not
	// clipping (it costs a pass over every gradient).
	ReportGradNorm bool
	// Divergence configures the check that makes Step return a *DivergenceError when
	// the run diverges (NaN or exploding losses, or steps skipped with the loss scale
	// at its floor). The zero value turns it on with the defaults; Off turns it off.
	Divergence DivergenceConfig
	// OOMFallback makes a step that runs out of memory retry at half the micro-batch and
	// twice the accumulation — the same examples and effective batch — until it fits or
	// the micro-batches are single examples; the failed attempts leave no trace (see
	// Step) and later steps keep the smaller plan. Result.Replanned says so once.
	OOMFallback bool
	// Observer, where set, sees every op of the Trainer's forward and backward passes
	// and of Evaluate (tensor.UseObserver on the Contexts they run in): a
	// profiler.Profiler (per-op times of whole training steps, as torch.profiler around
	// a training loop) or the overflow harness. The optimizer update, unscaling and
	// clipping run outside any Context and are not reported.
	Observer tensor.Observer
}

// Prepare casts model for the opt level: O2 to Low except KeepFP32 parameters
// (BatchNorm), O3 everything to Low; O0 and O1 leave it in FP32. Call it before
// creating the optimizer, so the optimizer sees the half parameters and keeps FP32
// masters for them.
func Prepare(model nn.Module, level OptLevel, low tensor.DType) {
	switch level {
	case O2:
		nn.Cast(model, low)
	case O3:
		nn.CastAll(model, low)
	}
}

// resolveLow fills in the device default half dtype.
func resolveLow(low tensor.DType, dev tensor.Device) tensor.DType {
	if low.IsHalf() {
		return low
	}
	return autocast.Default(dev).Low
}

// policy returns the autocast policy the level uses (nil: none).
func (c Config) policy(low tensor.DType) *autocast.Policy {
	if c.Level != O1 {
		return nil
	}
	if c.Policy != nil {
		p := *c.Policy
		return &p
	}
	p := autocast.Half(low)
	return &p
}
