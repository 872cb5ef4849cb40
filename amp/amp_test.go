package amp

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/scaler"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

func ce(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }

// newMLP builds a small classifier with dropout and BatchNorm, so the saved state has
// random-generator use, buffers and FP32-kept parameters.
func newMLP(seed uint64) nn.Module {
	init := nn.Seeded(seed)
	return nn.NewSequential(
		nn.NewLinear(12, 32, init), nn.NewBatchNorm1d(32), nn.NewReLU(), nn.NewDropout(0.2),
		nn.NewLinear(32, 5, init),
	)
}

// batch returns the deterministic micro-batch for a step: the data depends only on the
// step number, so a resumed run sees the same data as an uninterrupted one.
func batch(step, n int) (*tensor.Tensor, *tensor.Tensor) {
	g := tensor.NewGenerator(uint64(1000 + step))
	c := tensor.NewContext(tensor.UseGenerator(g))
	x := tensor.Randn(tensor.Shape{n, 12}, tensor.WithContext(c))
	labels := make([]int64, n)
	xs := x.Float32s()
	for i := range labels {
		// A learnable rule: the class is the index of the largest of the first 5 features.
		best := 0
		for j := 1; j < 5; j++ {
			if xs[i*12+j] > xs[i*12+best] {
				best = j
			}
		}
		labels[i] = int64(best)
	}
	y := tensor.FromSlice(labels, nil, tensor.WithContext(c))
	c.Keep(x, y)
	c.Close()
	return x, y
}

func newTrainer(t testing.TB, level OptLevel, low tensor.DType, accum int) *Trainer {
	m := newMLP(7)
	Prepare(m, level, low)
	opt, err := optim.NewAdamW(m.Params(), optim.AdamWConfig{LR: 0.01, WeightDecay: 0.01})
	require.NoError(t, err)
	tr, err := NewTrainer(m, opt, ce, tensor.CPU, Config{Level: level, Low: low, Accum: accum})
	require.NoError(t, err)
	tr.Gen.Seed(3)
	return tr
}

func trainSteps(t testing.TB, tr *Trainer, from, to int) {
	for s := from; s < to; s++ {
		x, y := batch(s, 16)
		_, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
		require.NoError(t, err)
		x.Release()
		y.Release()
	}
}

func paramBits(m nn.Module) map[string][]float64 {
	out := map[string][]float64{}
	for name, p := range nn.State(m) {
		out[name] = p.T.Float64s()
	}
	return out
}

const resumeEnv = "GAMP_AMP_RESUME_STATE"

// The second half of TestResumeInFreshProcessIsBitExact, run in a child process.
func TestResumeHelperProcess(t *testing.T) {
	path := os.Getenv(resumeEnv)
	if path == "" {
		t.Skip("helper process for TestResumeInFreshProcessIsBitExact")
	}
	tr := newTrainer(t, O1, tensor.Float16, 1)
	info, err := Load(path, tr)
	require.NoError(t, err)
	require.Equal(t, 10, info.Epoch)
	require.Equal(t, int64(10), tr.Steps())
	trainSteps(t, tr, 10, 20)
	require.NoError(t, Save(path+".final", tr, SaveInfo{Epoch: 20}))
}

// Training 20 steps equals training 10, saving, loading in a fresh process and training
// 10 more, bit for bit (FP16 autocast with a dynamic scaler, AdamW, dropout, BatchNorm).
func TestResumeInFreshProcessIsBitExact(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "state.safetensors")

	full := newTrainer(t, O1, tensor.Float16, 1)
	trainSteps(t, full, 0, 20)

	half := newTrainer(t, O1, tensor.Float16, 1)
	trainSteps(t, half, 0, 10)
	require.NoError(t, Save(path, half, SaveInfo{Epoch: 10}))

	cmd := exec.Command(os.Args[0], "-test.run=^TestResumeHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), resumeEnv+"="+path)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))

	resumed := newTrainer(t, O1, tensor.Float16, 1)
	_, err = Load(path+".final", resumed)
	require.NoError(t, err)
	require.Equal(t, paramBits(full.Model), paramBits(resumed.Model), "parameters and buffers bit-identical")
	require.Equal(t, full.Scaler.StateDict(), resumed.Scaler.StateDict())
	require.Equal(t, full.Gen.State(), resumed.Gen.State())
	require.Equal(t, full.Opt.StepCount(), resumed.Opt.StepCount())
}

func TestLoadRejectsMismatchedModelAndLeavesItUntouched(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.safetensors")
	tr := newTrainer(t, O0, tensor.Float16, 1)
	trainSteps(t, tr, 0, 2)
	require.NoError(t, Save(path, tr, SaveInfo{}))

	m := nn.NewSequential(nn.NewLinear(12, 8, nn.Seeded(1)), nn.NewReLU(), nn.NewLinear(8, 5, nn.Seeded(1)))
	opt, err := optim.NewAdamW(m.Params(), optim.AdamWConfig{LR: 0.01})
	require.NoError(t, err)
	other, err := NewTrainer(m, opt, ce, tensor.CPU, Config{Level: O0})
	require.NoError(t, err)
	before := paramBits(m)
	_, err = Load(path, other)
	require.Error(t, err)
	require.Contains(t, err.Error(), "does not match")
	require.Equal(t, before, paramBits(m))

	require.NoError(t, os.WriteFile(path+".bad", []byte("not a state file"), 0o644))
	_, err = Load(path+".bad", tr)
	require.Error(t, err)
	_, err = Load(filepath.Join(dir, "missing"), tr)
	require.Error(t, err)
}

// Gradient accumulation over 4 micro-batches equals one step on the whole batch (FP32,
// no dropout: same data, same update up to summation order).
func TestAccumulationMatchesFullBatch(t *testing.T) {
	mk := func() (nn.Module, optim.Optimizer) {
		m := nn.NewSequential(nn.NewLinear(12, 16, nn.Seeded(2)), nn.NewTanh(), nn.NewLinear(16, 5, nn.Seeded(3)))
		opt, err := optim.NewSGD(m.Params(), optim.SGDConfig{LR: 0.1, Momentum: 0.9})
		require.NoError(t, err)
		return m, opt
	}
	m1, o1 := mk()
	full, err := NewTrainer(m1, o1, ce, tensor.CPU, Config{Level: O0, ReportGradNorm: true})
	require.NoError(t, err)
	m4, o4 := mk()
	acc, err := NewTrainer(m4, o4, ce, tensor.CPU, Config{Level: O0, Accum: 4, ReportGradNorm: true})
	require.NoError(t, err)
	for s := 0; s < 3; s++ {
		x, y := batch(s, 32)
		r1, err := full.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
		require.NoError(t, err)
		var xs, ys []*tensor.Tensor
		for i := 0; i < 4; i++ {
			xs = append(xs, x.Slice(0, i*8, (i+1)*8, 1))
			ys = append(ys, y.Slice(0, i*8, (i+1)*8, 1))
		}
		r4, err := acc.Step(xs, ys)
		require.NoError(t, err)
		require.InDelta(t, r1.Loss, r4.Loss, 1e-5)
		require.InDelta(t, r1.GradNorm, r4.GradNorm, 1e-5)
	}
	a, b := paramBits(m1), paramBits(m4)
	for k := range a {
		for i := range a[k] {
			require.InDelta(t, a[k][i], b[k][i], 1e-5, k)
		}
	}
	_, err = acc.Step(nil, nil)
	require.Error(t, err, "the wrong number of micro-batches is an error")
}

// O2: the model is half except BatchNorm, the optimizer keeps FP32 masters, and the
// loss still falls.
func TestO2HalfModelWithFP32MastersAndBatchNorm(t *testing.T) {
	tr := newTrainer(t, O2, tensor.Float16, 1)
	for _, p := range tr.Model.Params() {
		if p.KeepFP32 {
			require.Equal(t, tensor.Float32, p.T.DType(), p.Name)
		} else {
			require.Equal(t, tensor.Float16, p.T.DType(), p.Name)
		}
	}
	for _, b := range tr.Model.Buffers() {
		if b.T.DType().IsFloat() {
			require.Equal(t, tensor.Float32, b.T.DType(), "BatchNorm statistics stay FP32: %s", b.Name)
		}
	}
	for _, g := range tr.Opt.(interface{ MasterParams() []*tensor.Tensor }).MasterParams() {
		if g != nil {
			require.Equal(t, tensor.Float32, g.DType())
		}
	}
	var first, last float64
	for s := 0; s < 40; s++ {
		x, y := batch(s%4, 32)
		r, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
		require.NoError(t, err)
		if s == 0 {
			first = r.Loss
		}
		last = r.Loss
		x.Release()
		y.Release()
	}
	require.Less(t, last, first)
}

// An Inf injected into a gradient makes the trainer skip the step: parameters and
// optimizer state unchanged, the scale halved, training continues afterwards.
func TestInjectedInfSkipsStep(t *testing.T) {
	tr := newTrainer(t, O1, tensor.Float16, 1)
	trainSteps(t, tr, 0, 3)
	w := tr.Model.Params()[0]
	inject := true
	w.T.RegisterHook(func(g *tensor.Tensor) *tensor.Tensor {
		if inject {
			g.FillInPlace(math.Inf(1))
		}
		return nil
	})
	before := paramBits(tr.Model)
	scale := tr.Scaler.ScaleValue()
	steps := tr.Opt.StepCount()
	x, y := batch(3, 16)
	r, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
	require.NoError(t, err)
	require.True(t, r.Skipped)
	require.Equal(t, scale/2, r.Scale)
	after := paramBits(tr.Model)
	for name, v := range before {
		if tr.Model.Params()[0].Name == name || !isBuffer(tr.Model, name) {
			require.Equal(t, v, after[name], "%s changed on a skipped step", name)
		}
	}
	require.Equal(t, steps, tr.Opt.StepCount())
	inject = false
	r, err = tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
	require.NoError(t, err)
	require.False(t, r.Skipped)
}

func isBuffer(m nn.Module, name string) bool {
	for _, b := range m.Buffers() {
		if b.Name == name {
			return true
		}
	}
	return false
}

// BF16 needs no loss scaling: the scaler is off and the scale stays 1.
func TestBF16DisablesScaler(t *testing.T) {
	tr := newTrainer(t, O1, tensor.BFloat16, 1)
	x, y := batch(0, 16)
	r, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
	require.NoError(t, err)
	require.Equal(t, 1.0, r.Scale)
	require.False(t, tr.Scaler.Enabled())
}

// To scale bfloat16 training anyway, the Trainer takes a scaler.New one.
func TestBF16ScalerByHand(t *testing.T) {
	tr := newTrainer(t, O1, tensor.BFloat16, 1)
	sc, err := scaler.New(scaler.Config{})
	require.NoError(t, err)
	tr.Scaler = sc
	x, y := batch(0, 16)
	r, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
	require.NoError(t, err)
	require.True(t, tr.Scaler.Enabled())
	require.Equal(t, 65536.0, r.Scale)
}

func TestConfigErrors(t *testing.T) {
	m := newMLP(1)
	opt, err := optim.NewSGD(m.Params(), optim.SGDConfig{LR: 0.1})
	require.NoError(t, err)
	for _, c := range []Config{{Level: 7}, {Accum: -1}, {ClipNorm: -1}, {Level: O1, Low: tensor.Float64}} {
		_, err := NewTrainer(m, opt, ce, tensor.CPU, c)
		require.Error(t, err, "%+v", c)
	}
	for s, want := range map[string]OptLevel{"O0": O0, "o1": O1, "2": O2, "O3": O3} {
		l, err := ParseOptLevel(s)
		require.NoError(t, err)
		require.Equal(t, want, l)
	}
	_, err = ParseOptLevel("O4")
	require.Error(t, err)
}
