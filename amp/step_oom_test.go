package amp

import (
	"errors"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/memory"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// oomDev is the CPU device the out-of-memory tests cap; no other test of the package
// uses it, so the cap never reaches them.
var oomDev = tensor.CPUDevice(42)

// triggerOpt is an optimizer that can run a function just before MasterGrads or Step,
// to cap the memory at a chosen point of a training step.
type triggerOpt struct {
	optim.Optimizer
	beforeGrads func(call int)
	beforeStep  func()
	gradCalls   int
}

func (o *triggerOpt) MasterGrads() []*tensor.Tensor {
	o.gradCalls++
	if o.beforeGrads != nil {
		o.beforeGrads(o.gradCalls)
	}
	return o.Optimizer.MasterGrads()
}

func (o *triggerOpt) Step() {
	if o.beforeStep != nil {
		o.beforeStep()
	}
	o.Optimizer.Step()
}

// oomMLP is the 64-512-512-10 perceptron, with BatchNorm and dropout so a
// failed step also has running statistics and a generator to restore.
func oomMLP(seed uint64) *nn.Sequential {
	init := nn.Seeded(seed)
	m := nn.NewSequential(
		nn.NewLinear(64, 512, init), nn.NewBatchNorm1d(512), nn.NewReLU(), nn.NewDropout(0.1),
		nn.NewLinear(512, 512, init), nn.NewReLU(), nn.NewLinear(512, 10, init),
	)
	nn.To(m, oomDev)
	return m
}

func newOOMTrainer(t *testing.T, level OptLevel, clip float64) (*Trainer, *triggerOpt) {
	m := oomMLP(5)
	Prepare(m, level, tensor.Float16)
	adam, err := optim.NewAdamW(m.Params(), optim.AdamWConfig{LR: 1e-3, WeightDecay: 0.01})
	require.NoError(t, err)
	opt := &triggerOpt{Optimizer: adam}
	tr, err := NewTrainer(m, opt, ce, oomDev, Config{Level: level, Low: tensor.Float16, ClipNorm: clip})
	require.NoError(t, err)
	tr.Gen.Seed(11)
	tr.Sched, err = optim.NewScheduler(opt, optim.CosineAnnealing{TMax: 10})
	require.NoError(t, err)
	return tr, opt
}

// oomBatch returns n examples of 64 features and their labels on oomDev, outside any
// Context (the caller releases them).
func oomBatch(seed uint64, n int) (*tensor.Tensor, *tensor.Tensor) {
	ctx := tensor.NewContext(tensor.UseGenerator(tensor.NewGenerator(seed)))
	defer ctx.Close()
	x := tensor.Randn(tensor.Shape{n, 64}, tensor.WithDevice(oomDev), tensor.WithContext(ctx))
	ctx.Keep(x)
	labels := make([]int64, n)
	for i := range labels {
		labels[i] = int64((i * 7) % 10)
	}
	return x, tensor.FromSlice(labels, nil, tensor.WithDevice(oomDev))
}

func oomStep(t *testing.T, tr *Trainer, seed uint64, n int) (Result, error) {
	x, y := oomBatch(seed, n)
	defer x.Release()
	defer y.Release()
	return tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
}

// capNow limits oomDev to what it holds now plus room bytes.
func capNow(room int64) {
	b := backend.MustGet(oomDev)
	b.EmptyCache()
	b.SetMemoryLimit(b.MemoryStats().Reserved + room)
}

func uncap() { backend.MustGet(oomDev).SetMemoryLimit(0) }

// trainerState is everything a step may change, in comparable form.
type trainerState struct {
	Params, Grads map[string][]uint64
	OptScalars    map[string]float64
	OptTensors    map[string][]uint64
	Scaler        any
	Gen           backend.RNG
	Steps         int64
	SchedStep     int64
	LR            float64
}

func bitsOf(t *tensor.Tensor) []uint64 {
	var out []uint64
	for _, v := range t.Float64s() {
		out = append(out, math.Float64bits(v))
	}
	return out
}

func stateOf(tr *Trainer) trainerState {
	s := trainerState{Params: map[string][]uint64{}, Grads: map[string][]uint64{}, OptTensors: map[string][]uint64{}}
	for name, p := range nn.State(tr.Model) {
		s.Params[name] = bitsOf(p.T)
		if g := p.T.Grad(); g != nil {
			s.Grads[name] = bitsOf(g)
		}
	}
	os := tr.Opt.StateDict()
	defer os.Release()
	s.OptScalars = os.Scalars
	for k, v := range os.Tensors {
		s.OptTensors[k] = bitsOf(v)
	}
	s.Scaler = tr.Scaler.StateDict()
	s.Gen = tr.Gen.State()
	s.Steps = tr.Steps()
	if tr.Sched != nil {
		s.SchedStep = tr.Sched.StepCount()
	}
	s.LR = tr.Opt.LR()
	return s
}

// A step that runs out of memory in forward, backward, unscaling, clipping or the
// optimizer update returns an error wrapping tensor.ErrOutOfMemory and leaves the trainer bit for
// bit as it was; the steps after it equal those of a trainer that never failed.
func TestFailedStepLeavesTrainerUnchanged(t *testing.T) {
	defer uncap()
	points := []struct {
		name   string
		level  OptLevel
		warmup int // clean steps before the failing one (the optimizer step needs 0: only the first allocates state)
		arm    func(tr *Trainer, o *triggerOpt) (disarm func())
	}{
		{"forward", O1, 2, func(tr *Trainer, o *triggerOpt) func() {
			// After BatchNorm updated its statistics and dropout drew from the generator.
			_, mods := tr.Model.(*nn.Sequential).Children()
			return nn.RegisterForwardHook(mods[4], func(_ nn.Module, _, out *tensor.Tensor) *tensor.Tensor { capNow(0); return nil })
		}},
		{"backward", O1, 2, func(tr *Trainer, o *triggerOpt) func() {
			on := true
			last := tr.Model.Params()[len(tr.Model.Params())-2] // the last Linear's weight: reached early in backward
			last.T.RegisterHook(func(g *tensor.Tensor) *tensor.Tensor {
				if on {
					capNow(0)
				}
				return nil
			})
			return func() { on = false }
		}},
		{"unscale", O2, 2, func(tr *Trainer, o *triggerOpt) func() {
			calls := o.gradCalls
			o.beforeGrads = func(call int) {
				if call == calls+1 { // the FP32 master gradients of the half parameters are made now
					capNow(0)
				}
			}
			return func() { o.beforeGrads = nil }
		}},
		{"clip", O2, 2, func(tr *Trainer, o *triggerOpt) func() {
			calls := o.gradCalls
			o.beforeGrads = func(call int) {
				if call == calls+2 { // Unscale gathered the master gradients; clipping measures them
					capNow(0)
				}
			}
			return func() { o.beforeGrads = nil }
		}},
		{"optimizer step", O1, 0, func(tr *Trainer, o *triggerOpt) func() {
			o.beforeStep = func() { capNow(200 << 10) } // some of Adam's moments fit, not all
			return func() { o.beforeStep = nil }
		}},
	}
	for _, pt := range points {
		t.Run(pt.name, func(t *testing.T) {
			clip := 0.0
			if pt.name == "clip" || pt.name == "unscale" {
				clip = 1
			}
			failed, fo := newOOMTrainer(t, pt.level, clip)
			clean, _ := newOOMTrainer(t, pt.level, clip)
			for s := range pt.warmup {
				_, err := oomStep(t, failed, uint64(s), 32)
				require.NoError(t, err)
				_, err = oomStep(t, clean, uint64(s), 32)
				require.NoError(t, err)
			}
			require.Equal(t, stateOf(clean), stateOf(failed))

			disarm := pt.arm(failed, fo)
			before := stateOf(failed)
			_, err := oomStep(t, failed, 100, 4096)
			uncap()
			disarm()
			require.Error(t, err)
			require.True(t, errors.Is(err, tensor.ErrOutOfMemory), "%v", err)
			require.Equal(t, before, stateOf(failed), "the failed step changed the trainer")
			for _, p := range failed.Model.Params() {
				require.Nil(t, p.T.Grad(), "%s keeps a gradient", p.Name)
			}
			for s := pt.warmup; s < pt.warmup+2; s++ {
				_, err := oomStep(t, failed, uint64(s), 32)
				require.NoError(t, err)
				_, err = oomStep(t, clean, uint64(s), 32)
				require.NoError(t, err)
			}
			require.Equal(t, stateOf(clean), stateOf(failed), "steps after the failure differ from a clean run")
		})
	}
}

// The reproduction: a 4096-example step of the 64-512-512-10 perceptron under
// a 26 MiB cap runs out of memory; afterwards no parameter holds a gradient, and a
// 32-example step gives the parameters a trainer that never failed gets.
func TestOutOfMemoryStepThenSmallStepMatchesCleanTrainer(t *testing.T) {
	defer uncap()
	failed, _ := newOOMTrainer(t, O0, 0)
	clean, _ := newOOMTrainer(t, O0, 0)
	b := backend.MustGet(oomDev)
	b.EmptyCache()
	b.SetMemoryLimit(26 << 20)
	_, err := oomStep(t, failed, 100, 4096)
	require.True(t, errors.Is(err, tensor.ErrOutOfMemory), "%v", err)
	_, err = oomStep(t, failed, 1, 32)
	require.NoError(t, err)
	uncap()
	_, err = oomStep(t, clean, 1, 32)
	require.NoError(t, err)
	require.Equal(t, stateOf(clean), stateOf(failed))
}

// memory.FindExecutableBatchSize retries Trainer.Step with halved batches; each failed
// attempt is undone, so the step that fits equals the same step on a fresh trainer.
func TestFindExecutableBatchSizeRetriesStartClean(t *testing.T) {
	defer uncap()
	failed, _ := newOOMTrainer(t, O1, 0)
	b := backend.MustGet(oomDev)
	b.EmptyCache()
	b.SetMemoryLimit(b.MemoryStats().Reserved + 12<<20)
	var tried []int
	bs, err := memory.FindExecutableBatchSize(4096, func(n int) error {
		tried = append(tried, n)
		_, err := oomStep(t, failed, 5, n)
		return err
	})
	uncap()
	require.NoError(t, err)
	require.Greater(t, len(tried), 1, "the cap must make at least one attempt fail (tried %v)", tried)
	clean, _ := newOOMTrainer(t, O1, 0)
	_, err = oomStep(t, clean, 5, bs)
	require.NoError(t, err)
	require.Equal(t, stateOf(clean), stateOf(failed), "batch %d after %v", bs, tried)
}

// Any other panic in a step (here the loss function's) is re-raised, after the same
// undoing: a caller that recovers it holds the trainer as it was.
func TestPanickingStepIsUndoneAndRepanics(t *testing.T) {
	tr, _ := newOOMTrainer(t, O1, 0)
	_, err := oomStep(t, tr, 1, 32)
	require.NoError(t, err)
	before := stateOf(tr)
	loss := tr.Loss
	boom := errors.New("loss: labels out of range")
	tr.Loss = func(out, y *tensor.Tensor) *tensor.Tensor {
		l := loss(out, y)
		l.Backward() // gradients accumulate before the failure
		panic(boom)
	}
	require.PanicsWithError(t, boom.Error(), func() { _, _ = oomStep(t, tr, 2, 32) })
	tr.Loss = loss
	require.Equal(t, before, stateOf(tr))
}
