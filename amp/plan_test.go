package amp

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/checkpoint"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// planBuild builds the perceptron of the out-of-memory tests, wider so activations
// dominate, on dev, with its chain checkpointed in segments pieces when segments > 0.
func planBuild(dev tensor.Device) func(segments int) (*Trainer, error) {
	return func(segments int) (*Trainer, error) {
		init := nn.Seeded(5)
		seq := nn.NewSequential(
			nn.NewLinear(64, 256, init), nn.NewReLU(), nn.NewLinear(256, 256, init), nn.NewReLU(),
			nn.NewLinear(256, 256, init), nn.NewReLU(), nn.NewLinear(256, 10, init),
		)
		nn.To(seq, dev)
		var m nn.Module = seq
		if segments > 0 {
			m = checkpoint.NewSequentialModule(seq, segments)
		}
		opt, err := optim.NewSGD(m.Params(), optim.SGDConfig{LR: 0.01, Momentum: 0.9})
		if err != nil {
			return nil, err
		}
		return NewTrainer(m, opt, ce, dev, Config{Level: O0})
	}
}

// TestPlanFitsTheBudget caps a device below what a whole batch of 2048 needs, plans,
// and checks that the chosen configuration trains within the cap and that its
// measured peak is within 10 % of the prediction.
func TestPlanFitsTheBudget(t *testing.T) {
	const batch = 2048
	dev := tensor.CPUDevice(50)
	b := backend.MustGet(dev)
	defer b.SetMemoryLimit(0)
	x, y := oomBatch(9, batch)
	xd, yd := x.To(dev), y.To(dev)
	x.Release()
	y.Release()
	defer xd.Release()
	defer yd.Release()

	// What a plain step of the whole batch needs.
	build := planBuild(dev)
	b.EmptyCache()
	base := b.MemoryStats().Active
	b.ResetPeak()
	plain, err := build(0)
	require.NoError(t, err)
	for range 2 {
		_, err = plain.Step([]*tensor.Tensor{xd}, []*tensor.Tensor{yd})
		require.NoError(t, err)
	}
	need := b.MemoryStats().PeakActive - base
	freeTrainer(plain)

	// Cap at 60 % of it: the plain run no longer fits.
	b.EmptyCache()
	b.SetMemoryLimit(b.MemoryStats().Reserved + need*6/10)
	failing, err := build(0)
	require.NoError(t, err)
	_, err = failing.Step([]*tensor.Tensor{xd}, []*tensor.Tensor{yd})
	_, err2 := failing.Step([]*tensor.Tensor{xd}, []*tensor.Tensor{yd})
	require.True(t, errors.Is(err, tensor.ErrOutOfMemory) || errors.Is(err2, tensor.ErrOutOfMemory), "the whole batch must not fit under the cap")
	freeTrainer(failing)

	res, err := Plan(xd, yd, PlanConfig{Build: build, Batch: batch, Segments: []int{2}})
	var rep bytes.Buffer
	if res != nil {
		res.Report(&rep)
		t.Logf("whole batch needs %d bytes\n%s", need, rep.String())
	}
	require.NoError(t, err)
	require.Contains(t, rep.String(), "→")
	best := res.Best
	require.True(t, best.Fits)
	require.Greater(t, best.Accum, 1)
	require.Equal(t, batch, best.Micro*best.Accum)

	// Train with the plan and compare the measured peak with the prediction.
	b.EmptyCache()
	base = b.MemoryStats().Active
	b.ResetPeak()
	tr, err := build(best.Segments)
	require.NoError(t, err)
	tr.cfg.Accum = best.Accum
	for s := range 3 {
		var xs, ys []*tensor.Tensor
		for k := range best.Accum {
			xs = append(xs, xd.Narrow(0, k*best.Micro, best.Micro))
			ys = append(ys, yd.Narrow(0, k*best.Micro, best.Micro))
		}
		_, err := tr.Step(xs, ys)
		require.NoError(t, err, "step %d of the plan", s)
		for i := range xs {
			xs[i].Release()
			ys[i].Release()
		}
	}
	got := b.MemoryStats().PeakActive - base // the blocks in use, as Plan measures
	t.Logf("plan %+v: predicted peak %d, measured %d (%.1f%%)", best, best.PredictedPeak, got, 100*(float64(best.PredictedPeak)/float64(got)-1))
	require.Less(t, math.Abs(float64(best.PredictedPeak)/float64(got)-1), 0.10)
	freeTrainer(tr)
}

func TestPlanErrors(t *testing.T) {
	x, y := oomBatch(1, 8)
	defer x.Release()
	defer y.Release()
	_, err := Plan(x, y, PlanConfig{Batch: 8})
	require.ErrorContains(t, err, "Build")
	_, err = Plan(x, y, PlanConfig{Build: planBuild(x.Device()), Batch: 0})
	require.Error(t, err)
	_, err = Plan(x, y, PlanConfig{Build: planBuild(x.Device()), Batch: 8, Budget: 1000})
	require.ErrorIs(t, err, ErrNoPlan)
}
