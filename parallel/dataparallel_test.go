package parallel_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/autocast"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/parallel"
	"github.com/gamp-ml/gamp/scaler"
	"github.com/gamp-ml/gamp/tensor"
)

const steps = 5

// precisions are the training set-ups every data-parallel mode must reproduce, each
// with the tolerance on the weights after five steps relative to each tensor's
// largest weight. FP32 differs from single-device training only by the order of the
// batch sums; in half precision each replica's weight gradient is rounded to the half
// type before the replicas' are added, where the single device rounds the full sum
// once.
var precisions = []struct {
	name string
	cfg  amp.Config
	tol  float64
}{
	{"fp32", amp.Config{Level: amp.O0}, 1e-6},
	{"O1-bf16", amp.Config{Level: amp.O1, Low: tensor.BFloat16}, 1e-2},
	{"O1-fp16", amp.Config{Level: amp.O1, Low: tensor.Float16, Scaler: fp16Scaler()}, 2e-3},
	{"O2-bf16", amp.Config{Level: amp.O2, Low: tensor.BFloat16}, 1e-2},
}

// fp16Scaler starts low enough that no step of this small problem overflows, so
// single-device and data-parallel runs skip the same (no) steps.
func fp16Scaler() scaler.Config {
	c := scaler.DefaultConfig()
	c.InitScale = 1024
	return c
}

func sgd(t *testing.T, m nn.Module) optim.Optimizer {
	t.Helper()
	opt, err := optim.NewSGD(m.Params(), optim.SGDConfig{LR: 0.1, Momentum: 0.9})
	require.NoError(t, err)
	return opt
}

// trainSingle trains the test MLP on dev for steps steps and returns its weights.
func trainSingle(t *testing.T, dev tensor.Device, cfg amp.Config) [][]float64 {
	t.Helper()
	model := mlp(1, dev)
	amp.Prepare(model, cfg.Level, cfg.Low)
	tr, err := amp.NewTrainer(model, sgd(t, model), crossEntropy, dev, cfg)
	require.NoError(t, err)
	for step := range steps {
		x, y := batchOn(dev, step)
		_, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
		require.NoError(t, err)
		x.Release()
		y.Release()
	}
	return weights(model)
}

// trainer is the part of amp.Trainer and parallel.Trainer the tests drive.
type trainer interface {
	Step(xs, ys []*tensor.Tensor) (amp.Result, error)
}

// trainParallel trains the test MLP with a DataParallel over devs, the loss computed
// on the gathered outputs (amp.Trainer) or inside the replicas (parallel.Trainer).
func trainParallel(t *testing.T, devs []tensor.Device, cfg amp.Config, lossInside bool) [][]float64 {
	t.Helper()
	model := mlp(1, devs[0])
	amp.Prepare(model, cfg.Level, cfg.Low)
	dp, err := parallel.NewDataParallel(model, devs, parallel.Options{})
	require.NoError(t, err)
	var tr trainer
	if lossInside {
		tr, err = parallel.NewTrainer(dp, sgd(t, dp), crossEntropy, cfg)
	} else {
		tr, err = amp.NewTrainer(dp, sgd(t, dp), crossEntropy, devs[0], cfg)
	}
	require.NoError(t, err)
	for step := range steps {
		x, y := batchOn(devs[0], step)
		res, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
		require.NoError(t, err)
		require.False(t, res.Skipped)
		x.Release()
		y.Release()
	}
	return weights(model)
}

func TestDataParallelMatchesSingleDevice(t *testing.T) {
	for _, pr := range precisions {
		want := trainSingle(t, cpu(30), pr.cfg)
		for _, devs := range [][]tensor.Device{cpus(31, 32), cpus(33, 34, 35)} {
			for _, inside := range []bool{false, true} {
				mode := "gathered"
				if inside {
					mode = "loss-in-replicas"
				}
				t.Run(fmt.Sprintf("%s/%d-devices/%s", pr.name, len(devs), mode), func(t *testing.T) {
					got := trainParallel(t, devs, pr.cfg, inside)
					t.Logf("max relative difference %.3g", maxRelDiff(want, got))
					requireClose(t, want, got, pr.tol, pr.name)
				})
			}
		}
	}
}

// dtypeLog records the device and dtype of every output a hooked layer produces, from
// whichever goroutine runs it.
type dtypeLog struct {
	mu   sync.Mutex
	seen map[tensor.Device]map[tensor.DType]int
}

// watch registers a forward hook on m logging its outputs; replicas carry the hook.
func watch(m nn.Module) *dtypeLog {
	l := &dtypeLog{seen: map[tensor.Device]map[tensor.DType]int{}}
	nn.RegisterForwardHook(m, func(_ nn.Module, _, out *tensor.Tensor) *tensor.Tensor {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.seen[out.Device()] == nil {
			l.seen[out.Device()] = map[tensor.DType]int{}
		}
		l.seen[out.Device()][out.DType()]++
		return nil
	})
	return l
}

// only reports whether every logged output was dt, and returns the devices seen.
func (l *dtypeLog) only(dt tensor.DType) (bool, []tensor.Device) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := true
	var devs []tensor.Device
	for d, dts := range l.seen {
		devs = append(devs, d)
		for got := range dts {
			ok = ok && got == dt
		}
	}
	return ok, devs
}

func TestAutocastAppliesInEveryReplica(t *testing.T) {
	devs := cpus(39, 40)
	model := mlp(1, devs[0])
	log := watch(model.At(1)) // the first Linear
	dp, err := parallel.NewDataParallel(model, devs, parallel.Options{})
	require.NoError(t, err)
	x, y := batchOn(devs[0], 0)
	defer x.Release()
	defer y.Release()

	for _, low := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		t.Run(low.String(), func(t *testing.T) {
			log.seen = map[tensor.Device]map[tensor.DType]int{}
			ctx := tensor.NewContext()
			defer ctx.Close()
			ac := autocast.Enter(ctx, autocast.Half(low))
			defer ac.Close()
			out := dp.Forward(ac.Bind(x))
			require.Equal(t, low, out.DType(), "the last Linear ran in %s", low)
			require.Equal(t, devs[0], out.Device())
			require.Equal(t, tensor.Shape{batch, classes}, out.Shape())
			ok, seen := log.only(low)
			require.True(t, ok, "every replica's Linear ran in %s: %v", low, log.seen)
			require.ElementsMatch(t, devs, seen, "one replica per device")

			loss := dp.ForwardLoss(ac.Bind(x), ac.Bind(y), crossEntropy)
			require.Equal(t, tensor.Float32, loss.DType(), "losses run in FP32 under autocast")
			ok, _ = log.only(low)
			require.True(t, ok)
		})
	}
	t.Run("no-autocast", func(t *testing.T) {
		log.seen = map[tensor.Device]map[tensor.DType]int{}
		ctx := tensor.NewContext()
		defer ctx.Close()
		out := dp.Forward(ctx.Bind(x))
		require.Equal(t, tensor.Float32, out.DType())
		ok, seen := log.only(tensor.Float32)
		require.True(t, ok, "%v", log.seen)
		require.Len(t, seen, 2)
	})
	t.Run("no-grad", func(t *testing.T) {
		ctx := tensor.NewContext(tensor.NoGradMode())
		defer ctx.Close()
		out := dp.Forward(ctx.Bind(x))
		require.False(t, out.RequiresGrad(), "grad mode flows into the replicas")
	})
}

// Two DataParallel models trained at once from two goroutines, one under bf16
// autocast and one in FP32, each reach the weights of its single-device run: the
// policy of one never leaks into the other's replicas (pytorch#50170).
func TestConcurrentDataParallelPoliciesDoNotInterfere(t *testing.T) {
	bf16 := amp.Config{Level: amp.O1, Low: tensor.BFloat16}
	fp32 := amp.Config{Level: amp.O0}
	wantBF16 := trainSingle(t, cpu(45), bf16)
	wantFP32 := trainSingle(t, cpu(46), fp32)

	type run struct {
		devs   []tensor.Device
		cfg    amp.Config
		inside bool
		low    tensor.DType
		got    [][]float64
		log    *dtypeLog
	}
	runs := []*run{
		{devs: cpus(41, 42), cfg: bf16, inside: false, low: tensor.BFloat16},
		{devs: cpus(43, 44), cfg: fp32, inside: true, low: tensor.Float32},
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		model := mlp(1, r.devs[0])
		r.log = watch(model.At(1))
		dp, err := parallel.NewDataParallel(model, r.devs, parallel.Options{})
		require.NoError(t, err)
		var tr trainer
		if r.inside {
			tr, err = parallel.NewTrainer(dp, sgd(t, dp), crossEntropy, r.cfg)
		} else {
			tr, err = amp.NewTrainer(dp, sgd(t, dp), crossEntropy, r.devs[0], r.cfg)
		}
		require.NoError(t, err)
		wg.Go(func() {
			for step := range steps {
				x, y := batchOn(r.devs[0], step)
				if _, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y}); err != nil {
					panic(err)
				}
				x.Release()
				y.Release()
			}
			r.got = weights(model)
		})
	}
	wg.Wait()
	requireClose(t, wantBF16, runs[0].got, 1e-2, "bf16 run")
	requireClose(t, wantFP32, runs[1].got, 1e-6, "fp32 run")
	for _, r := range runs {
		ok, seen := r.log.only(r.low)
		require.True(t, ok, "%s run: %v", r.low, r.log.seen)
		require.ElementsMatch(t, r.devs, seen)
	}
}

// offset adds a tensor it holds without registering it: replicas share it, so on any
// device but its own it is a device mismatch.
type offset struct {
	nn.Base
	c *tensor.Tensor
}

func (o *offset) Forward(x *tensor.Tensor) *tensor.Tensor { return x.Add(x.Context().Bind(o.c)) }

// requireDevicePanic runs fn and checks that it panics with an *tensor.OpError naming
// both devices.
func requireDevicePanic(t *testing.T, fn func(), a, b tensor.Device) {
	t.Helper()
	var got any
	func() {
		defer func() { got = recover() }()
		fn()
	}()
	require.NotNil(t, got, "no panic")
	e, ok := got.(*tensor.OpError)
	require.True(t, ok, "panic value %T: %v", got, got)
	require.Contains(t, e.Error(), a.String())
	require.Contains(t, e.Error(), b.String())
}

func TestDeviceMisuse(t *testing.T) {
	main, other := cpu(47), cpu(48)
	devs := []tensor.Device{main, other}

	t.Run("targets-on-another-device", func(t *testing.T) {
		dp, err := parallel.NewDataParallel(mlp(1, main), devs, parallel.Options{})
		require.NoError(t, err)
		x := inputOn(main, 0)
		y := targetsOn(other, 0)
		defer x.Release()
		defer y.Release()
		ctx := tensor.NewContext()
		defer ctx.Close()
		out := dp.Forward(ctx.Bind(x))
		requireDevicePanic(t, func() { crossEntropy(out, ctx.Bind(y)) }, main, other)
	})
	t.Run("unregistered-tensor-in-a-replica", func(t *testing.T) {
		m := &offset{c: tensor.Ones(tensor.Shape{inDim}, tensor.WithDevice(main))}
		defer m.c.Release()
		dp, err := parallel.NewDataParallel(m, devs, parallel.Options{})
		require.NoError(t, err)
		x := inputOn(main, 0)
		defer x.Release()
		ctx := tensor.NewContext()
		defer ctx.Close()
		// The replica on `other` panics in its goroutine; the panic reaches the caller.
		requireDevicePanic(t, func() { dp.Forward(ctx.Bind(x)) }, main, other)
	})
	t.Run("model-moved-off-the-main-device", func(t *testing.T) {
		model := mlp(1, main)
		dp, err := parallel.NewDataParallel(model, devs, parallel.Options{})
		require.NoError(t, err)
		parallel.Place(model, other)
		x := inputOn(main, 0)
		defer x.Release()
		ctx := tensor.NewContext()
		defer ctx.Close()
		requireDevicePanic(t, func() { dp.Forward(ctx.Bind(x)) }, main, other)
	})
	t.Run("construction", func(t *testing.T) {
		_, err := parallel.NewDataParallel(mlp(1, other), devs, parallel.Options{})
		require.ErrorIs(t, err, parallel.ErrDevices)
		require.ErrorContains(t, err, main.String())
		require.ErrorContains(t, err, other.String())
		_, err = parallel.NewDataParallel(mlp(1, main), []tensor.Device{main, main}, parallel.Options{})
		require.ErrorIs(t, err, parallel.ErrDevices)
		_, err = parallel.NewDataParallel(mlp(1, main), nil, parallel.Options{})
		require.ErrorIs(t, err, parallel.ErrDevices)
		_, err = parallel.NewDataParallel(mlp(1, main), []tensor.Device{main, tensor.CPUDevice(1000)}, parallel.Options{})
		require.ErrorIs(t, err, parallel.ErrDevices)
	})
	t.Run("input-outside-a-context", func(t *testing.T) {
		dp, err := parallel.NewDataParallel(mlp(1, main), devs, parallel.Options{})
		require.NoError(t, err)
		x := inputOn(main, 0)
		defer x.Release()
		require.PanicsWithError(t, "tensor: data_parallel: the input must belong to a Context (tensor.NewContext, then ctx.Bind(x)): the replicas' parameter copies and activations are released when it closes",
			func() { dp.Forward(x) })
	})
}

// After a step — forward, backward, Context closed, optimizer step, gradients zeroed —
// every device holds exactly what it held before: the replicas' parameter copies,
// activations and gradients are released when the step ends, not when the GC runs.
func TestMemoryReturnsToBaseline(t *testing.T) {
	devs := cpus(36, 37, 38)
	model := mlp(1, devs[0])
	dp, err := parallel.NewDataParallel(model, devs, parallel.Options{})
	require.NoError(t, err)
	opt := sgd(t, dp)
	x, y := batchOn(devs[0], 0)
	defer x.Release()
	defer y.Release()
	step := func(inside bool) {
		ctx := tensor.NewContext()
		var loss *tensor.Tensor
		if inside {
			loss = dp.ForwardLoss(ctx.Bind(x), ctx.Bind(y), crossEntropy)
		} else {
			loss = crossEntropy(dp.Forward(ctx.Bind(x)), ctx.Bind(y))
		}
		loss.Backward()
		for _, d := range devs[1:] {
			require.Positive(t, allocated(t, d), "replica on %s holds activations until the Context closes", d)
		}
		ctx.Close()
		for _, d := range devs[1:] {
			require.Zero(t, allocated(t, d), "nothing left on %s once the step's Context closed", d)
		}
		opt.Step()
		opt.ZeroGrad()
	}
	step(false) // the optimizer allocates its momentum buffers on the first step
	base := make([]int64, len(devs))
	for i, d := range devs {
		base[i] = allocated(t, d)
	}
	for _, inside := range []bool{false, true, false} {
		step(inside)
		for i, d := range devs {
			require.Equal(t, base[i], allocated(t, d), "device %s after a step (loss inside replicas: %v)", d, inside)
		}
	}

	// The same through the trainers, under autocast.
	for _, inside := range []bool{false, true} {
		cfg := amp.Config{Level: amp.O1, Low: tensor.BFloat16}
		var tr trainer
		if inside {
			tr, err = parallel.NewTrainer(dp, opt, crossEntropy, cfg)
		} else {
			tr, err = amp.NewTrainer(dp, opt, crossEntropy, devs[0], cfg)
		}
		require.NoError(t, err)
		_, err = tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
		require.NoError(t, err)
		for i, d := range devs {
			require.Equal(t, base[i], allocated(t, d), "device %s after an amp step (loss inside replicas: %v)", d, inside)
		}
	}
}

// Gradients flow back to an input that requires them, as through the model itself.
func TestInputGradient(t *testing.T) {
	devs := cpus(56, 57, 58)
	grad := func(forward func(x, y *tensor.Tensor) *tensor.Tensor) []float64 {
		x, y := batchOn(devs[0], 3)
		defer y.Release()
		defer x.Release()
		x.SetRequiresGrad(true)
		ctx := tensor.NewContext()
		forward(ctx.Bind(x), ctx.Bind(y)).Backward()
		ctx.Close()
		g := x.Grad().Float64s()
		x.ZeroGrad()
		return g
	}
	model := mlp(1, devs[0])
	want := grad(func(x, y *tensor.Tensor) *tensor.Tensor { return crossEntropy(model.Forward(x), y) })
	dp, err := parallel.NewDataParallel(model, devs, parallel.Options{})
	require.NoError(t, err)
	gathered := grad(func(x, y *tensor.Tensor) *tensor.Tensor { return crossEntropy(dp.Forward(x), y) })
	inside := grad(func(x, y *tensor.Tensor) *tensor.Tensor { return dp.ForwardLoss(x, y, crossEntropy) })
	requireClose(t, [][]float64{want}, [][]float64{gathered}, 1e-6, "gathered")
	requireClose(t, [][]float64{want}, [][]float64{inside}, 1e-6, "loss inside replicas")
	nn.ZeroGrad(model)
}

// BatchNorm: the main replica runs on the model's own running statistics, so they
// record the main device's chunk; the other replicas update copies that are dropped
// (torch.nn.DataParallel's semantics).
func TestBatchNormKeepsMainReplicaStatistics(t *testing.T) {
	devs := cpus(52, 53)
	build := func(dev tensor.Device) *nn.Sequential {
		init := nn.Seeded(3)
		m := nn.NewSequential(nn.NewLinear(inDim, hidden, init), nn.NewBatchNorm1d(hidden), nn.NewReLU(), nn.NewLinear(hidden, classes, init))
		nn.To(m, dev)
		return m
	}
	x := inputOn(devs[0], 0)
	defer x.Release()

	ref := build(devs[0])
	ctx := tensor.NewContext()
	ref.Forward(ctx.Bind(x).Narrow(0, 0, 6)) // the main replica's chunk of 11 over 2 devices
	ctx.Close()

	model := build(devs[0])
	dp, err := parallel.NewDataParallel(model, devs, parallel.Options{})
	require.NoError(t, err)
	ctx = tensor.NewContext()
	dp.Forward(ctx.Bind(x))
	ctx.Close()

	bn, refBN := model.At(1).(*nn.BatchNorm1d), ref.At(1).(*nn.BatchNorm1d)
	requireClose(t, [][]float64{refBN.RunningMean.T.Float64s(), refBN.RunningVar.T.Float64s()},
		[][]float64{bn.RunningMean.T.Float64s(), bn.RunningVar.T.Float64s()}, 1e-6, "running statistics")
	require.Equal(t, []int64{1}, bn.NumBatchesTracked.T.Int64s(), "one update kept per step")
	require.Zero(t, allocated(t, devs[1]), "the other replica's statistics were dropped with the step")
}

// Serial runs the replicas one after the other and gives the same results.
func TestSerialMatchesConcurrent(t *testing.T) {
	devs := cpus(56, 57, 58)
	x, y := batchOn(devs[0], 2)
	defer x.Release()
	defer y.Release()
	run := func(opts parallel.Options) [][]float64 {
		model := mlp(5, devs[0])
		dp, err := parallel.NewDataParallel(model, devs, opts)
		require.NoError(t, err)
		ctx := tensor.NewContext()
		out := dp.Forward(ctx.Bind(x))
		crossEntropy(out, ctx.Bind(y)).Backward()
		res := [][]float64{out.Float64s()}
		ctx.Close()
		for _, p := range model.Params() {
			res = append(res, p.Grad().Float64s())
		}
		nn.ZeroGrad(model)
		return res
	}
	require.Equal(t, run(parallel.Options{}), run(parallel.Options{Serial: true}))
}
