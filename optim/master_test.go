package optim

import (
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// TestMasterWeightsKeepProgressing trains a float16 weight with updates of 1e-4, far
// below half a float16 ULP at 1 (2^-11 ≈ 4.9e-4): updated in float16 the weight never
// moves, while the FP32 master accumulates every update and the half parameter follows
// it.
func TestMasterWeightsKeepProgressing(t *testing.T) {
	const steps, lr = 1000, 1e-4
	p := &nn.Param{Name: "w", T: tensor.FromSlice([]float32{1, 1}, nil, tensor.WithDType(tensor.Float16), tensor.WithGrad())}
	opt, err := NewSGD([]*nn.Param{p}, SGDConfig{LR: lr})
	require.NoError(t, err)

	pure := tensor.FromSlice([]float32{1, 1}, nil, tensor.WithDType(tensor.Float16))
	x := tensor.FromSlice([]float32{1, 1}, nil, tensor.WithDType(tensor.Float16))
	for range steps {
		// d(w·x)/dw = x = 1, by a real forward and backward in float16.
		ctx := tensor.NewContext()
		ctx.Bind(p.T).Mul(x).Sum().Backward()
		ctx.Close()
		require.Equal(t, tensor.Float16, p.T.Grad().DType())
		opt.Step()
		opt.ZeroGrad()
		// Pure float16: w -= lr·g computed and stored in float16.
		upd := tensor.Ones(tensor.Shape{2}, tensor.WithDType(tensor.Float16)).MulScalar(lr)
		pure.SubInPlace(upd)
		upd.Release()
	}
	require.Equal(t, []float64{1, 1}, pure.Float64s(), "pure float16 updates stall")
	master := opt.MasterParams()[0].Float64s()
	require.InDelta(t, 1-steps*lr, master[0], 5e-5, "the FP32 master accumulates every update (float32 rounding aside)")
	// The half parameter is the master rounded: 0.9 in float16 is 0.89990234375.
	require.Equal(t, []float64{0.89990234375, 0.89990234375}, p.T.Float64s())
}

func TestMasterGrads(t *testing.T) {
	half := &nn.Param{Name: "h", T: tensor.FromSlice([]float32{1, 2, 3}, nil, tensor.WithDType(tensor.Float16), tensor.WithGrad())}
	full := &nn.Param{Name: "f", T: tensor.FromSlice([]float32{1, 2}, nil, tensor.WithGrad())}
	none := &nn.Param{Name: "n", T: tensor.FromSlice([]float32{1}, nil, tensor.WithGrad())}
	opt, err := NewAdam([]*nn.Param{half, full, none}, DefaultAdam())
	require.NoError(t, err)

	back := func() {
		ctx := tensor.NewContext()
		defer ctx.Close()
		h := ctx.Bind(half.T)
		h.Mul(h).Sum().Backward()
		ctx.Bind(full.T).MulScalar(3).Sum().Backward()
	}
	back()
	gs := opt.MasterGrads()
	require.Len(t, gs, 3)
	require.Equal(t, tensor.Float32, gs[0].DType())
	require.Equal(t, []float64{2, 4, 6}, gs[0].Float64s())
	require.Same(t, full.T.Grad(), gs[1], "an FP32 parameter's master gradient is its own gradient")
	require.Nil(t, gs[2])
	require.Same(t, gs[0], opt.MasterGrads()[0], "cached until the next backward")

	// Unscaling in place (as the scaler does) is what the next call returns.
	gs[0].MulScalarInPlace(0.5)
	require.Equal(t, []float64{1, 2, 3}, opt.MasterGrads()[0].Float64s())

	// Another backward accumulates into the half gradient: the copy is redone.
	back()
	require.Equal(t, []float64{4, 8, 12}, opt.MasterGrads()[0].Float64s())

	// Inf and NaN survive the copy.
	half.T.Grad().CopyFrom(tensor.FromSlice([]float64{math.Inf(1), math.NaN(), 1e-7}, nil))
	back()
	half.T.Grad().CopyFrom(tensor.FromSlice([]float64{math.Inf(1), math.NaN(), 1e-7}, nil))
	g := opt.MasterGrads()[0].Float64s()
	require.True(t, math.IsInf(g[0], 1))
	require.True(t, math.IsNaN(g[1]))
	require.Equal(t, 0x1p-23, g[2], "1e-7 is the fp16 subnormal 2^-23, kept exactly")

	old := opt.MasterGrads()[0]
	opt.ZeroGrad()
	require.Nil(t, half.T.Grad())
	require.Nil(t, full.T.Grad())
	require.True(t, old.Released(), "ZeroGrad releases the master gradient")
	require.Equal(t, []*tensor.Tensor{nil, nil, nil}, opt.MasterGrads())
}

func TestReplacedParameterPanics(t *testing.T) {
	p := &nn.Param{Name: "w", T: tensor.FromSlice([]float32{1}, nil, tensor.WithGrad())}
	opt, err := NewSGD([]*nn.Param{p}, SGDConfig{LR: 1})
	require.NoError(t, err)
	p.T = tensor.FromSlice([]float32{1}, nil, tensor.WithDType(tensor.Float16), tensor.WithGrad())
	require.PanicsWithError(t, `optim: parameter "w" was replaced (cast or moved) after the optimizer was built; build the optimizer after amp.Prepare, nn.Cast or moving the model`, opt.Step)
}

// TestStepReleasesTemporaries checks that steps allocate nothing that outlives them
// once the state exists.
func TestStepReleasesTemporaries(t *testing.T) {
	defer tensor.SetDefaultDevice(tensor.CPU)
	for i, build := range []func([]*nn.Param) (Optimizer, error){
		func(ps []*nn.Param) (Optimizer, error) {
			return NewSGD(ps, SGDConfig{LR: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 0.1})
		},
		func(ps []*nn.Param) (Optimizer, error) {
			c := DefaultAdamW()
			c.AMSGrad = true
			return NewAdamW(ps, c)
		},
	} {
		// A device of its own: GC cleanups of other tensors must not move the counter.
		dev := tensor.CPUDevice(20 + i)
		require.NoError(t, tensor.SetDefaultDevice(dev))
		b := backend.MustGet(dev)
		ps := makeParams(tensor.Float16)
		opt, err := build(ps)
		require.NoError(t, err)
		setGrads(ps, 1)
		opt.Step()
		// The float32 master gradients MasterGrads makes (kept until ZeroGrad) are
		// not a step's temporaries: the first call makes them (the steps read the
		// half gradients without them).
		ClipGradNorm(opt.MasterGrads(), 0.1, 2)
		settle(b)
		before := b.MemoryStats().Allocated
		for k := 0; k < 5; k++ {
			opt.Step()
			ClipGradNorm(opt.MasterGrads(), 0.1, 2)
		}
		settle(b)
		require.Equal(t, before, b.MemoryStats().Allocated)
		runtime.KeepAlive(ps)
		runtime.KeepAlive(opt)
	}
}

// settle runs the GC until the cleanups of unreachable untracked tensors (test
// scaffolding such as the host-built gradients) have released their storage.
func settle(b backend.Backend) {
	prev := int64(-1)
	for i := 0; i < 20; i++ {
		runtime.GC()
		time.Sleep(2 * time.Millisecond)
		cur := b.MemoryStats().Allocated
		if cur == prev {
			return
		}
		prev = cur
	}
}
