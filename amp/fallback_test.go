package amp

import (
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// fallbackTrainer is the out-of-memory tests' perceptron (BatchNorm, dropout) with
// AdamW and a schedule, on dev.
func fallbackTrainer(t *testing.T, dev tensor.Device, fallback bool) *Trainer {
	init := nn.Seeded(5)
	m := nn.NewSequential(
		nn.NewLinear(64, 512, init), nn.NewBatchNorm1d(512), nn.NewReLU(), nn.NewDropout(0.1),
		nn.NewLinear(512, 512, init), nn.NewReLU(), nn.NewLinear(512, 10, init),
	)
	nn.To(m, dev)
	Prepare(m, O2, tensor.BFloat16)
	opt, err := optim.NewAdamW(m.Params(), optim.AdamWConfig{LR: 1e-3, WeightDecay: 0.01})
	require.NoError(t, err)
	tr, err := NewTrainer(m, opt, ce, dev, Config{Level: O2, Low: tensor.BFloat16, Accum: 2, OOMFallback: fallback})
	require.NoError(t, err)
	tr.Gen.Seed(11)
	tr.Sched, err = optim.NewScheduler(opt, optim.CosineAnnealing{TMax: 10})
	require.NoError(t, err)
	return tr
}

// fallbackStep runs step s: two micro-batches of n examples on dev.
func fallbackStep(t *testing.T, tr *Trainer, dev tensor.Device, s, n int) (Result, error) {
	var xs, ys []*tensor.Tensor
	for k := range 2 {
		x, y := oomBatch(uint64(100*s+k), n)
		xd, yd := x.To(dev), y.To(dev)
		x.Release()
		y.Release()
		xs, ys = append(xs, xd), append(ys, yd)
	}
	defer func() {
		for i := range xs {
			xs[i].Release()
			ys[i].Release()
		}
	}()
	return tr.Step(xs, ys)
}

// stepPeak is the rise of dev's allocated memory during one step of tr.
func stepPeak(t *testing.T, tr *Trainer, dev tensor.Device, s, n int) int64 {
	b := backend.MustGet(dev)
	b.ResetPeak()
	before := b.MemoryStats().Allocated
	_, err := fallbackStep(t, tr, dev, s, n)
	require.NoError(t, err)
	return b.MemoryStats().PeakAllocated - before
}

// TestOOMFallbackKeepsTheResult lowers the memory cap during training so that step 3's
// micro-batches no longer fit: with the fallback on, the step is redone as pieces of
// half the micro-batch, says so once, and the run goes on with that plan. Its
// parameters match, bit for bit, a run that split its micro-batches from step 3 on
// by choice (same examples, same effective batch, same generator draws).
func TestOOMFallbackKeepsTheResult(t *testing.T) {
	const n, steps, failAt = 256, 6, 3
	// Calibrate the cap on a device of its own: the rise of one step whole and split.
	calDev := tensor.CPUDevice(47)
	cal := fallbackTrainer(t, calDev, false)
	whole := stepPeak(t, cal, calDev, 0, n)
	require.NoError(t, cal.SplitMicroBatches(2))
	halved := stepPeak(t, cal, calDev, 1, n)
	t.Logf("step peak rise: %d bytes whole, %d split in two", whole, halved)
	require.Less(t, halved, whole*9/10, "halving the micro-batch must save memory for the test to mean anything")

	dev, refDev := tensor.CPUDevice(48), tensor.CPUDevice(49)
	tr := fallbackTrainer(t, dev, true)
	ref := fallbackTrainer(t, refDev, false)
	defer backend.MustGet(dev).SetMemoryLimit(0)
	replans := 0
	for s := range steps {
		if s == failAt {
			b := backend.MustGet(dev)
			b.EmptyCache()
			b.SetMemoryLimit(b.MemoryStats().Reserved + (whole+halved)/2)
			require.NoError(t, ref.SplitMicroBatches(2))
		}
		res, err := fallbackStep(t, tr, dev, s, n)
		require.NoError(t, err, "step %d", s)
		if res.Replanned != "" {
			replans++
			require.Equal(t, failAt, s, "the plan changes at the step that ran out of memory")
			t.Log(res.Replanned)
		}
		rres, err := fallbackStep(t, ref, refDev, s, n)
		require.NoError(t, err)
		require.Equal(t, rres.Loss, res.Loss, "step %d loss", s)
	}
	require.Equal(t, 1, replans, "the fallback says so once")
	require.Equal(t, 2, tr.Split())
	require.Positive(t, backend.MustGet(dev).MemoryStats().NumOOMs)
	require.Equal(t, paramBits(ref.Model), paramBits(tr.Model))
	require.Equal(t, ref.Opt.StepCount(), tr.Opt.StepCount())
}

// TestSplitMicroBatchesMatchesWhole: splitting the micro-batches changes only the
// summation order of the gradient (no BatchNorm, no dropout here).
func TestSplitMicroBatchesMatchesWhole(t *testing.T) {
	build := func() *Trainer {
		init := nn.Seeded(3)
		m := nn.NewSequential(nn.NewLinear(64, 128, init), nn.NewReLU(), nn.NewLinear(128, 10, init))
		opt, err := optim.NewSGD(m.Params(), optim.SGDConfig{LR: 0.1, Momentum: 0.9})
		require.NoError(t, err)
		tr, err := NewTrainer(m, opt, ce, tensor.CPU, Config{Level: O0})
		require.NoError(t, err)
		return tr
	}
	a, b := build(), build()
	require.NoError(t, b.SplitMicroBatches(4))
	require.Error(t, b.SplitMicroBatches(0))
	for s := range 5 {
		x, y := oomBatch(uint64(s), 100)
		xc, yc := x.To(tensor.CPU), y.To(tensor.CPU)
		ra, err := a.Step([]*tensor.Tensor{xc}, []*tensor.Tensor{yc})
		require.NoError(t, err)
		rb, err := b.Step([]*tensor.Tensor{xc}, []*tensor.Tensor{yc})
		require.NoError(t, err)
		require.InDelta(t, ra.Loss, rb.Loss, 1e-5)
		for _, v := range []*tensor.Tensor{x, y, xc, yc} {
			v.Release()
		}
	}
	pa, pb := paramBits(a.Model), paramBits(b.Model)
	for k := range pa {
		for i := range pa[k] {
			require.InDelta(t, pa[k][i], pb[k][i], 1e-5*math.Max(1, math.Abs(pa[k][i])), "%s[%d]", k, i)
		}
	}
}
