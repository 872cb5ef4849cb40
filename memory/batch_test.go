package memory_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/memory"
	"github.com/gamp-ml/gamp/tensor"
)

// mlp is a 256-512-10 perceptron on one device: its parameters live outside every
// step; a step's activations and gradients scale with the batch.
type mlp struct {
	dev            tensor.Device
	w1, b1, w2, b2 *tensor.Tensor
	calls          []int
	attempts       []attempt
}

// attempt is what one step left behind, measured right after it, before any GC.
type attempt struct {
	batch     int
	phase     string // "forward", "backward" or "done": how far the step got
	allocated int64
}

func newMLP(dev tensor.Device) *mlp {
	g := tensor.NewGenerator(7)
	ctx := tensor.NewContext(tensor.UseGenerator(g), tensor.NoGradMode())
	defer ctx.Close()
	param := func(shape ...int) *tensor.Tensor {
		p := tensor.Randn(tensor.Shape(shape), tensor.WithDevice(dev), tensor.WithContext(ctx)).MulScalar(0.05)
		ctx.Keep(p)
		return p.SetRequiresGrad(true)
	}
	return &mlp{dev: dev, w1: param(512, 256), b1: param(512), w2: param(10, 512), b2: param(10)}
}

func (m *mlp) params() []*tensor.Tensor { return []*tensor.Tensor{m.w1, m.b1, m.w2, m.b2} }

func (m *mlp) release() {
	for _, p := range m.params() {
		p.ZeroGrad()
		p.Release()
	}
}

// step runs forward and backward on a batch in a Context of its own, then drops the
// gradients, so a finished or failed step leaves only the parameters behind.
func (m *mlp) step(batch int) error {
	m.calls = append(m.calls, batch)
	phase := "forward"
	defer func() { // runs last, also while an OOM panic unwinds
		a, err := memory.Allocated(m.dev)
		if err != nil {
			panic(err)
		}
		m.attempts = append(m.attempts, attempt{batch, phase, a})
	}()
	ctx := tensor.NewContext()
	defer ctx.Close()
	defer func() {
		for _, p := range m.params() {
			p.ZeroGrad()
		}
	}()
	x := tensor.Randn(tensor.Shape{batch, 256}, tensor.WithDevice(m.dev), tensor.WithContext(ctx))
	labels := make([]int64, batch)
	for i := range labels {
		labels[i] = int64(i % 10)
	}
	y := tensor.FromSlice(labels, nil, tensor.WithDevice(m.dev), tensor.WithContext(ctx))
	h := tensor.Linear(x, m.w1, m.b1).Relu()
	loss := tensor.CrossEntropy(tensor.Linear(h, m.w2, m.b2), y, 0)
	phase = "backward"
	loss.Backward()
	phase = "done"
	return nil
}

// Under a memory cap on a dedicated device, batch 1024 does not fit; the helper halves
// down to the largest power of two that does, and every failed attempt gives back all
// it took (the Context releases it) before the next one starts.
func TestFindExecutableBatchSize(t *testing.T) {
	dev := tensor.CPUDevice(9)
	require.NoError(t, memory.SetLimit(dev, 0))
	m := newMLP(dev)
	defer m.release()
	t.Cleanup(func() { _ = memory.SetLimit(dev, 0); _ = memory.EmptyCache(dev) })
	base, err := memory.Allocated(dev)
	require.NoError(t, err)

	// Measure each batch size without a cap. A batch fits under a cap at least its
	// peak reserved and cannot fit under one below its peak allocated.
	peakRes, peakAlloc := map[int]int64{}, map[int]int64{}
	for b := 1; b <= 1024; b *= 2 {
		require.NoError(t, memory.EmptyCache(dev))
		require.NoError(t, memory.ResetPeak(dev))
		require.NoError(t, m.step(b))
		peakRes[b], _ = memory.MaxReserved(dev)
		peakAlloc[b], _ = memory.MaxAllocated(dev)
	}
	const want = 128
	require.Less(t, peakRes[want], peakAlloc[2*want], "the cap must separate %d from %d", want, 2*want)
	limit := (peakRes[want] + peakAlloc[2*want]) / 2

	require.NoError(t, memory.EmptyCache(dev))
	require.NoError(t, memory.SetLimit(dev, limit))
	before, _ := memory.Stats(dev)
	m.calls, m.attempts = nil, nil

	got, err := memory.FindExecutableBatchSize(1024, m.step)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, []int{1024, 512, 256, 128}, m.calls)
	require.Equal(t, "done", m.attempts[len(m.attempts)-1].phase)
	t.Logf("cap %s, baseline %d B; attempts: %+v", backend.FormatBytes(limit), base, m.attempts)
	for _, a := range m.attempts {
		require.Equal(t, base, a.allocated, "attempt with batch %d (OOM in %s) left memory behind", a.batch, a.phase)
	}
	require.Equal(t, "forward", m.attempts[0].phase, "batch 1024 fails in the forward pass")
	after, _ := memory.Stats(dev)
	require.Equal(t, before.NumOOMs+3, after.NumOOMs)
	require.Equal(t, base, after.Allocated)
}

// An out-of-memory panic inside Backward must leave nothing behind either: the
// pending gradients and the failing node's scope belong to no user Context.
func TestOOMInsideBackwardLeaksNothing(t *testing.T) {
	dev := tensor.CPUDevice(15)
	m := newMLP(dev)
	defer m.release()
	t.Cleanup(func() { _ = memory.SetLimit(dev, 0); _ = memory.EmptyCache(dev) })
	base, _ := memory.Allocated(dev)
	require.NoError(t, memory.ResetPeak(dev))
	require.NoError(t, m.step(256))
	peak, _ := memory.MaxReserved(dev)
	// Walk the cap down from the step's peak until the step fails inside Backward.
	for limit := peak - 4096; limit > base; limit -= 16 << 10 {
		require.NoError(t, memory.EmptyCache(dev))
		require.NoError(t, memory.SetLimit(dev, limit))
		m.attempts = nil
		err := tensor.CatchOOM(func() { _ = m.step(256) })
		a := m.attempts[0]
		if a.phase != "backward" {
			require.Equal(t, base, a.allocated, "OOM in %s", a.phase)
			continue
		}
		require.ErrorIs(t, err, tensor.ErrOutOfMemory)
		require.Equal(t, base, a.allocated, "an OOM inside Backward leaked %d bytes", a.allocated-base)
		return
	}
	t.Fatal("no cap made the step fail inside Backward")
}

func TestFindExecutableBatchSizeGivesUpAtOne(t *testing.T) {
	dev := tensor.CPUDevice(14)
	require.NoError(t, memory.SetLimit(dev, 1<<20))
	t.Cleanup(func() { _ = memory.SetLimit(dev, 0) })
	var calls []int
	_, err := memory.FindExecutableBatchSize(5, func(b int) error {
		calls = append(calls, b)
		return tensor.CatchOOM(func() {
			tensor.Zeros(tensor.Shape{b << 20}, tensor.WithDevice(dev)) // never fits the 1 MiB cap
		})
	})
	require.Equal(t, []int{5, 2, 1}, calls)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	require.Contains(t, err.Error(), "no batch size from 5 down to 1 fits")
}

func TestFindExecutableBatchSizePassesOtherFailuresOn(t *testing.T) {
	boom := errors.New("bad data")
	n := 0
	_, err := memory.FindExecutableBatchSize(8, func(int) error { n++; return boom })
	require.ErrorIs(t, err, boom)
	require.Equal(t, 1, n, "no retry on errors other than out of memory")

	require.PanicsWithValue(t, "not memory", func() {
		_, _ = memory.FindExecutableBatchSize(8, func(int) error { panic("not memory") })
	})
	_, err = memory.FindExecutableBatchSize(0, func(int) error { return nil })
	require.Error(t, err)
}
