package checkpoint_test

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/autocast"
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/checkpoint"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// A model is a flat list of layers; building it twice gives two identical copies.
type model struct {
	name  string
	build func() []nn.Module
	input tensor.Shape
}

func mlp(dropout float64) model {
	return model{
		name:  fmt.Sprintf("mlp dropout %g", dropout),
		input: tensor.Shape{5, 6},
		build: func() []nn.Module {
			return []nn.Module{
				nn.NewLinear(6, 12, nn.Seeded(1)), nn.NewReLU(),
				nn.NewLinear(12, 12, nn.Seeded(2)), nn.NewTanh(), nn.NewDropout(dropout),
				nn.NewLinear(12, 12, nn.Seeded(3)), nn.NewReLU(), nn.NewDropout(dropout),
				nn.NewLinear(12, 4, nn.Seeded(4)),
			}
		},
	}
}

func cnn() model {
	conv := func(in, out int, seed uint64) nn.Module {
		return nn.NewConv2d(in, out, nn.Pair(3), tensor.ConvOptions{Padding: nn.Pair(1)}, nn.Seeded(seed))
	}
	return model{
		name:  "cnn with batchnorm",
		input: tensor.Shape{4, 2, 6, 6},
		build: func() []nn.Module {
			return []nn.Module{
				conv(2, 4, 1), nn.NewBatchNorm2d(4), nn.NewReLU(),
				conv(4, 4, 2), nn.NewBatchNorm2d(4), nn.NewReLU(),
				nn.NewFlatten(), nn.NewLinear(4*6*6, 3, nn.Seeded(3)),
			}
		},
	}
}

// forwardFn runs a model's layers on x.
type forwardFn func(layers []nn.Module, x *tensor.Tensor) *tensor.Tensor

func plain(layers []nn.Module, x *tensor.Tensor) *tensor.Tensor {
	for _, l := range layers {
		x = l.Forward(x)
	}
	return x
}

func sequential(segments int) forwardFn {
	return func(layers []nn.Module, x *tensor.Tensor) *tensor.Tensor {
		return checkpoint.Sequential(layers, segments, x)
	}
}

// setup is what a step does around the forward.
type setup struct {
	policy *autocast.Policy // forward under this autocast policy
	xGrad  bool             // the input requires grad
	// between runs after the forward and before backward (changing the caller's
	// state, which the recompute must not see).
	between func(ctx *tensor.Context, gen *tensor.Generator)
}

// result is everything a step produces that checkpointing must not change.
type result struct {
	loss    float64
	grads   map[string][]float32
	buffers map[string][]float64
	xGrad   []float32
	gen     backend.RNG // the generator's state after the step
}

// values of a deterministic input, exactly representable in float32.
func values(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.Sin(0.7*float64(i)+0.3) * math.Cos(0.13*float64(i)))
	}
	return v
}

// train runs one step of m (freshly built) with fwd and returns what it produced.
func train(t *testing.T, m model, fwd forwardFn, s setup) result {
	t.Helper()
	layers := m.build()
	net := nn.NewSequential(layers...) // for the parameter names only
	x := tensor.FromSlice(values(m.input.Numel()), m.input)
	defer x.Release()
	x.SetRequiresGrad(s.xGrad)

	gen := tensor.NewGenerator(42)
	ctx := tensor.NewContext(tensor.UseGenerator(gen))
	h := ctx.Bind(x)
	var out *tensor.Tensor
	if s.policy != nil {
		ac := autocast.Enter(ctx, *s.policy)
		out = ctx.Bind(fwd(layers, ac.Bind(h)))
		ac.Close()
	} else {
		out = fwd(layers, h)
	}
	if s.between != nil {
		s.between(ctx, gen)
	}
	loss := out.Cast(tensor.Float32).Square().Mean()
	loss.Backward()
	r := result{loss: loss.Item(), grads: map[string][]float32{}, buffers: map[string][]float64{}, gen: gen.State()}
	ctx.Close()
	for _, p := range net.Params() {
		require.NotNil(t, p.Grad(), "%s: %s has no gradient", m.name, p.Name)
		r.grads[p.Name] = p.Grad().Float32s()
	}
	for _, b := range net.Buffers() {
		r.buffers[b.Name] = b.T.Float64s()
	}
	if s.xGrad {
		require.NotNil(t, x.Grad())
		r.xGrad = x.Grad().Float32s()
		x.ZeroGrad()
	}
	nn.ZeroGrad(net)
	return r
}

func TestGradientsBitIdentical(t *testing.T) {
	fp16 := autocast.Half(tensor.Float16)
	for _, m := range []model{mlp(0), mlp(0.3), cnn()} {
		n := len(m.build())
		for _, pol := range []*autocast.Policy{nil, &fp16} {
			for _, xGrad := range []bool{false, true} {
				s := setup{policy: pol, xGrad: xGrad}
				want := train(t, m, plain, s)
				for _, segments := range []int{1, 2, 0, n} {
					name := fmt.Sprintf("%s/autocast %v/x grad %v/segments %d", m.name, pol != nil, xGrad, segments)
					t.Run(name, func(t *testing.T) {
						got := train(t, m, sequential(segments), s)
						require.Equal(t, want, got)
					})
				}
			}
		}
	}
}

// Checkpointing a hand-written function (not a Sequential): the whole model at once,
// and every other layer.
func TestCheckpointFuncBitIdentical(t *testing.T) {
	whole := func(layers []nn.Module, x *tensor.Tensor) *tensor.Tensor {
		return checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor { return plain(layers, xs[0]) }, x)
	}
	each := func(layers []nn.Module, x *tensor.Tensor) *tensor.Tensor {
		for i, l := range layers {
			if i%2 == 0 {
				x = checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor { return l.Forward(xs[0]) }, x)
			} else {
				x = l.Forward(x)
			}
		}
		return x
	}
	fp16, bf16 := autocast.Half(tensor.Float16), autocast.Default(tensor.CPU)
	for _, m := range []model{mlp(0.3), cnn()} {
		for _, pol := range []*autocast.Policy{nil, &fp16, &bf16} {
			s := setup{policy: pol, xGrad: true}
			want := train(t, m, plain, s)
			for name, fwd := range map[string]forwardFn{"whole": whole, "every other layer": each} {
				got := train(t, m, fwd, s)
				if m.name == "cnn with batchnorm" {
					// Without Options.Buffers the recompute updates BatchNorm's
					// statistics a second time, as in PyTorch: compare the rest.
					require.NotEqual(t, want.buffers, got.buffers)
					got.buffers = want.buffers
				}
				require.Equal(t, want, got, "%s, %s, autocast %v", m.name, name, pol != nil)
			}
		}
	}
}

func TestNestedCheckpoints(t *testing.T) {
	// layers 0-2 in one checkpoint holding a checkpoint of 1-2 holding one of 2;
	// then a Sequential inside a checkpoint, holding checkpoints of its own.
	nested := func(layers []nn.Module, x *tensor.Tensor) *tensor.Tensor {
		x = checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor {
			h := layers[0].Forward(xs[0])
			return checkpoint.Checkpoint(func(ys []*tensor.Tensor) *tensor.Tensor {
				h := layers[1].Forward(ys[0])
				return checkpoint.Checkpoint(func(zs []*tensor.Tensor) *tensor.Tensor { return layers[2].Forward(zs[0]) }, h)
			}, h)
		}, x)
		return checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor {
			return checkpoint.Sequential(layers[3:], 3, xs[0])
		}, x)
	}
	fp16 := autocast.Half(tensor.Float16)
	for _, pol := range []*autocast.Policy{nil, &fp16} {
		s := setup{policy: pol, xGrad: true}
		m := mlp(0.3)
		require.Equal(t, train(t, m, plain, s), train(t, m, nested, s), "autocast %v", pol != nil)
	}
}

// The caller changes its generator (draws, reseeds) and leaves the autocast region
// between forward and backward; the recompute still replays the forward's state, and
// the caller's generator is left where the caller put it.
func TestReplayIgnoresLaterCallerState(t *testing.T) {
	between := func(ctx *tensor.Context, gen *tensor.Generator) {
		tensor.Rand(tensor.Shape{100}, tensor.WithContext(ctx))
		gen.Seed(7)
		tensor.Rand(tensor.Shape{3}, tensor.WithContext(ctx))
	}
	fp16 := autocast.Half(tensor.Float16)
	for _, pol := range []*autocast.Policy{nil, &fp16} {
		s := setup{policy: pol, between: between}
		want := train(t, mlp(0.5), plain, s)
		got := train(t, mlp(0.5), sequential(3), s)
		require.Equal(t, want, got)
		require.Equal(t, backend.RNG{Seed: 7, Offset: 3}, got.gen)
	}

	// Forward in FP32, then the caller runs its head under FP16 autocast before
	// backward: the recompute stays FP32.
	head := func(fwd forwardFn) forwardFn {
		return func(layers []nn.Module, x *tensor.Tensor) *tensor.Tensor {
			h := fwd(layers[:len(layers)-1], x)
			return autocast.Run(x.Context(), fp16, func(ac *tensor.Context) *tensor.Tensor {
				return layers[len(layers)-1].Forward(ac.Bind(h))
			})
		}
	}
	want := train(t, mlp(0.5), head(plain), setup{xGrad: true})
	require.Equal(t, want, train(t, mlp(0.5), head(sequential(0)), setup{xGrad: true}))
}

// A function that depends on state outside its inputs, changed between forward and
// backward, is caught by the recompute.
func TestRecomputeMismatchPanics(t *testing.T) {
	w := tensor.FromSlice(values(6), tensor.Shape{6}, tensor.WithGrad())
	defer w.Release()
	for _, c := range []struct {
		name string
		fn   func(flag bool) checkpoint.Func
		want string
	}{
		{"shape", func(flag bool) checkpoint.Func {
			return func(xs []*tensor.Tensor) *tensor.Tensor {
				y := xs[0].Mul(w)
				if flag {
					return y.Reshape(2, 3)
				}
				return y
			}
		}, "returned a [2 3] float32 on cpu tensor where the forward returned a [6] float32 on cpu tensor"},
		{"dtype", func(flag bool) checkpoint.Func {
			return func(xs []*tensor.Tensor) *tensor.Tensor {
				y := xs[0].Mul(w)
				if flag {
					return y.Cast(tensor.Float64)
				}
				return y
			}
		}, "float64"},
		{"device", func(flag bool) checkpoint.Func {
			return func(xs []*tensor.Tensor) *tensor.Tensor {
				y := xs[0].Mul(w)
				if flag {
					return y.To(tensor.CPUDevice(3))
				}
				return y
			}
		}, "cpu:3"},
		{"nil", func(flag bool) checkpoint.Func {
			return func(xs []*tensor.Tensor) *tensor.Tensor {
				if flag {
					return nil
				}
				return xs[0].Mul(w)
			}
		}, "returned nil"},
	} {
		t.Run(c.name, func(t *testing.T) {
			gen := tensor.NewGenerator(1)
			ctx := tensor.NewContext(tensor.UseGenerator(gen))
			defer ctx.Close()
			flag := false
			x := tensor.FromSlice(values(6), tensor.Shape{6}, tensor.WithContext(ctx))
			y := checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor { return c.fn(flag)(xs) }, x)
			loss := y.Sum()
			flag = true
			before := gen.State()
			var got any
			func() {
				defer func() { got = recover() }()
				loss.Backward()
			}()
			err, ok := got.(error)
			require.True(t, ok, "want a panic with an error, got %v", got)
			var re *checkpoint.RecomputeError
			require.True(t, errors.As(err, &re), "%v", err)
			require.Equal(t, tensor.Shape{6}, re.Forward.Shape)
			require.Contains(t, err.Error(), c.want)
			require.Contains(t, err.Error(), "pass that state as an input")
			require.Equal(t, before, gen.State(), "the generator is restored after a failed recompute")
		})
	}
}

// No input requires grad but parameters inside fn do: their gradients must arrive
// (PyTorch's reentrant checkpoint drops them).
func TestParamsGetGradientsWhenNoInputRequiresGrad(t *testing.T) {
	lin := nn.NewLinear(4, 3, nn.Seeded(1))
	x := tensor.FromSlice(values(8), tensor.Shape{2, 4})
	defer x.Release()
	step := func(ck bool) []float32 {
		ctx := tensor.NewContext()
		defer ctx.Close()
		h := ctx.Bind(x)
		var y *tensor.Tensor
		if ck {
			y = checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor { return lin.Forward(xs[0]).Tanh() }, h)
			require.True(t, y.RequiresGrad())
		} else {
			y = lin.Forward(h).Tanh()
		}
		y.Square().Sum().Backward()
		g := lin.Weight.Grad().Float32s()
		require.NotNil(t, lin.Bias.Grad())
		nn.ZeroGrad(lin)
		return g
	}
	require.Equal(t, step(false), step(true))

	// Without parameters and with no input requiring grad, the output needs none.
	ctx := tensor.NewContext()
	defer ctx.Close()
	y := checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor { return xs[0].Tanh() }, ctx.Bind(x))
	require.False(t, y.RequiresGrad())

	// An input that requires grad but that fn ignores gets no gradient, as without
	// checkpointing.
	a := tensor.FromSlice(values(8), tensor.Shape{2, 4}, tensor.WithGrad())
	defer a.Release()
	y = checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor { return lin.Forward(xs[1]) }, ctx.Bind(a), ctx.Bind(x))
	y.Sum().Backward()
	require.Nil(t, a.Grad())
	require.NotNil(t, lin.Weight.Grad())
	nn.ZeroGrad(lin)
}

// Checkpoint takes several inputs, nil ones included, and fn may return an input.
func TestSeveralInputs(t *testing.T) {
	a := tensor.FromSlice([]float32{1, 2, 3}, nil, tensor.WithGrad())
	b := tensor.FromSlice([]float32{4, 5, 6}, nil, tensor.WithGrad())
	defer a.Release()
	defer b.Release()
	ctx := tensor.NewContext()
	defer ctx.Close()
	y := checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor {
		require.Nil(t, xs[1])
		return xs[0].Mul(xs[2]).Mul(xs[2])
	}, ctx.Bind(a), nil, ctx.Bind(b))
	id := checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor { return xs[0] }, ctx.Bind(a))
	y.Sum().Add(id.Sum()).Backward()
	require.Equal(t, []float32{17, 26, 37}, a.Grad().Float32s()) // b² + 1
	require.Equal(t, []float32{8, 20, 36}, b.Grad().Float32s())  // 2ab

	require.Panics(t, func() { checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor { return nil }) })
	var oe *tensor.OpError
	func() {
		defer func() { oe, _ = recover().(*tensor.OpError) }()
		checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor { return nil }, ctx.Bind(a))
	}()
	require.NotNil(t, oe)
	require.Contains(t, oe.Error(), "fn returned nil")
}

// BatchNorm inside a checkpoint: PyTorch's behaviour (statistics updated by the
// forward and again by the recompute) unless the buffers are listed in Options.
func TestBatchNormBuffers(t *testing.T) {
	stepBN := func(opts *checkpoint.Options, ck bool) (*nn.BatchNorm1d, []float32) {
		bn := nn.NewBatchNorm1d(3)
		x := tensor.FromSlice(values(12), tensor.Shape{4, 3}, tensor.WithGrad())
		defer x.Release()
		ctx := tensor.NewContext()
		defer ctx.Close()
		fn := func(xs []*tensor.Tensor) *tensor.Tensor { return bn.Forward(xs[0]) }
		var y *tensor.Tensor
		switch {
		case !ck:
			y = fn([]*tensor.Tensor{ctx.Bind(x)})
		case opts == nil:
			y = checkpoint.Checkpoint(fn, ctx.Bind(x))
		default:
			o := *opts
			for _, b := range bn.Buffers() {
				o.Buffers = append(o.Buffers, b.T)
			}
			y = o.Checkpoint(fn, ctx.Bind(x))
		}
		y.Square().Mul(ctx.Bind(tensor.FromSlice(values(12), tensor.Shape{4, 3}, tensor.WithContext(ctx)))).Sum().Backward()
		return bn, x.Grad().Float32s()
	}
	ref, refGrad := stepBN(nil, false)
	twice, twiceGrad := stepBN(nil, true)
	once, onceGrad := stepBN(&checkpoint.Options{}, true)
	require.Equal(t, refGrad, twiceGrad)
	require.Equal(t, refGrad, onceGrad)
	require.Equal(t, []int64{1}, ref.NumBatchesTracked.T.Int64s())
	require.Equal(t, []int64{2}, twice.NumBatchesTracked.T.Int64s(), "the recompute updates the statistics again, as in PyTorch")
	require.NotEqual(t, ref.RunningMean.T.Float32s(), twice.RunningMean.T.Float32s())
	require.Equal(t, []int64{1}, once.NumBatchesTracked.T.Int64s())
	require.Equal(t, ref.RunningMean.T.Float32s(), once.RunningMean.T.Float32s())
	require.Equal(t, ref.RunningVar.T.Float32s(), once.RunningVar.T.Float32s())
}

// opCounter counts the forwards of each op (recomputations included).
type opCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *opCounter) Begin(*tensor.Context, *tensor.Op) {}
func (o *opCounter) Forward(_ *tensor.Context, op *tensor.Op, _ []*tensor.Tensor, _ *tensor.Tensor) any {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[op.Name()]++
	return nil
}
func (o *opCounter) Backward(*tensor.Op, any, *tensor.Tensor, []*tensor.Tensor, time.Duration) {}

// Sequential splits as checkpoint_sequential: n/segments modules per segment, the
// remainder in the last, which is not recomputed.
func TestSequentialSegments(t *testing.T) {
	for _, c := range []struct {
		segments, recomputed, checkpoints int
	}{
		{1, 0, 0}, // 9 layers, 4 of them Linear (0, 2, 5, 8)
		{2, 2, 1}, // [0-3] recomputed, [4-8] not
		{0, 3, 2}, // √9 = 3: [0-2], [3-5], last [6-8]
		{4, 3, 3}, // size 2: [0-1], [2-3], [4-5], last [6-8]
		{9, 3, 8}, // every layer but the last
	} {
		obs := &opCounter{n: map[string]int{}}
		layers := mlp(0.2).build()
		x := tensor.FromSlice(values(30), tensor.Shape{5, 6})
		ctx := tensor.NewContext(tensor.UseObserver(obs))
		checkpoint.Sequential(layers, c.segments, ctx.Bind(x)).Sum().Backward()
		ctx.Close()
		x.Release()
		require.Equal(t, 4+c.recomputed, obs.n["linear"], "segments %d", c.segments)
		require.Equal(t, c.checkpoints, obs.n["checkpoint"], "segments %d", c.segments)
		require.Equal(t, 1, obs.n["checkpoint_tail"], "segments %d", c.segments)
	}
	layers := mlp(0).build()
	for _, bad := range []int{-1, len(layers) + 1} {
		require.Panics(t, func() { checkpoint.Sequential(layers, bad, nil) }, "segments %d", bad)
	}
	x := tensor.Ones(tensor.Shape{1})
	require.Same(t, x, checkpoint.Sequential(nil, 0, x))
	x.Release()
}

// Backward twice through a retained graph: checkpointed segments recompute again, and
// so does the last segment, whose activations went with the first backward.
func TestRetainGraph(t *testing.T) {
	twice := func(fwd forwardFn) map[string][]float32 {
		layers := mlp(0.4).build()
		net := nn.NewSequential(layers...)
		x := tensor.FromSlice(values(30), tensor.Shape{5, 6})
		defer x.Release()
		ctx := tensor.NewContext(tensor.UseGenerator(tensor.NewGenerator(3)))
		defer ctx.Close()
		loss := fwd(layers, ctx.Bind(x)).Square().Mean()
		loss.Backward(tensor.RetainGraph())
		loss.Backward()
		g := map[string][]float32{}
		for _, p := range net.Params() {
			g[p.Name] = p.Grad().Float32s()
		}
		return g
	}
	want := twice(plain)
	for _, segments := range []int{1, 3} {
		require.Equal(t, want, twice(sequential(segments)), "segments %d", segments)
	}
}

// NewSequentialModule is a drop-in nn.Module for an nn.Sequential.
func TestSequentialModule(t *testing.T) {
	ref := nn.NewSequential(mlp(0.3).build()...)
	ck := checkpoint.NewSequentialModule(nn.NewSequential(mlp(0.3).build()...), 0)
	require.Equal(t, names(ref.Params()), names(ck.Params()))
	require.Equal(t, ref.Len(), ck.Len())
	require.IsType(t, &nn.Linear{}, ck.At(0))
	require.True(t, ck.Training())

	x := tensor.FromSlice(values(30), tensor.Shape{5, 6})
	defer x.Release()
	run := func(m nn.Module) []float32 {
		ctx := tensor.NewContext(tensor.UseGenerator(tensor.NewGenerator(9)))
		defer ctx.Close()
		m.Forward(ctx.Bind(x)).Square().Mean().Backward()
		return m.Params()[0].Grad().Float32s()
	}
	require.Equal(t, run(ref), run(ck))
	nn.Eval(ck)
	require.False(t, ck.At(4).Training())
	require.Panics(t, func() { checkpoint.NewSequentialModule(ref, 99) })
}

func names(ps []*nn.Param) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// Two goroutines train two models with checkpointing, one under FP16 autocast and
// one in FP32, each with its own generator: each gets what it gets alone.
func TestTwoGoroutines(t *testing.T) {
	fp16 := autocast.Half(tensor.Float16)
	setups := []setup{{policy: &fp16, xGrad: true}, {xGrad: true}}
	want := make([]result, len(setups))
	for i, s := range setups {
		want[i] = train(t, mlp(0.3), plain, s)
	}
	got := make([]result, len(setups))
	var wg sync.WaitGroup
	for i, s := range setups {
		wg.Go(func() {
			for range 3 {
				got[i] = train(t, mlp(0.3), sequential(0), s)
			}
		})
	}
	wg.Wait()
	require.Equal(t, want, got)
}
