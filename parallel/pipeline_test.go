package parallel_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/parallel"
	"github.com/gamp-ml/gamp/tensor"
)

// stages returns the test MLP cut in two — [Flatten, Linear, ReLU] and [Linear] —
// with the weights mlp(seed, …) draws, placed on a and b.
func stages(seed uint64, a, b tensor.Device) []nn.Module {
	init := nn.Seeded(seed)
	s0 := nn.NewSequential(nn.NewFlatten(), nn.NewLinear(inDim, hidden, init), nn.NewReLU())
	s1 := nn.NewSequential(nn.NewLinear(hidden, classes, init))
	parallel.Place(s0, a)
	parallel.Place(s1, b)
	return []nn.Module{s0, s1}
}

// trainPlain trains m for steps steps with SGD in a plain loop, the batch on in and
// the targets on out, and returns its weights.
func trainPlain(t *testing.T, m nn.Module, in, out tensor.Device) [][]float64 {
	t.Helper()
	opt := sgd(t, m)
	for step := range steps {
		x := inputOn(in, step)
		y := targetsOn(out, step)
		ctx := tensor.NewContext()
		crossEntropy(m.Forward(ctx.Bind(x)), ctx.Bind(y)).Backward()
		ctx.Close()
		opt.Step()
		opt.ZeroGrad()
		x.Release()
		y.Release()
	}
	return weights(m)
}

func TestPipelineMatchesSingleDevice(t *testing.T) {
	ref := cpu(49)
	a, b := cpu(50), cpu(51)
	want := trainPlain(t, mlp(2, ref), ref, ref)
	for _, micro := range []int{0, 4} {
		t.Run(fmt.Sprintf("micro-batches=%d", micro), func(t *testing.T) {
			st := stages(2, a, b)
			p, err := parallel.NewPipeline(st, []tensor.Device{a, b}, parallel.PipelineOptions{MicroBatches: micro})
			require.NoError(t, err)
			require.Equal(t, weights(mlp(2, ref)), weights(p), "the stages start from the single-device weights")
			require.Equal(t, b, p.OutputDevice())
			got := trainPlain(t, p, a, b)
			t.Logf("max relative difference %.3g", maxRelDiff(want, got))
			requireClose(t, want, got, 1e-6, "pipeline")
			require.Equal(t, a, st[0].Params()[0].T.Device(), "each stage stays on its device")
			require.Equal(t, b, st[1].Params()[0].T.Device())

			stats := p.Stats()
			m := max(micro, 1)
			require.Equal(t, 2, stats.Stages)
			require.Equal(t, m, stats.MicroBatches)
			require.Equal(t, float64(2-1)/float64(m+2-1), stats.Bubble, "(S-1)/(M+S-1)")
			require.Equal(t, parallel.Bubble(2, m), stats.Bubble)
			if micro > 1 {
				require.Len(t, stats.Idle, 2)
				require.Positive(t, stats.Wall)
				for s, idle := range stats.Idle {
					require.True(t, idle >= 0 && idle <= 1, "stage %d idle fraction %g", s, idle)
					require.Positive(t, stats.Busy[s])
				}
			}
		})
	}
}

func TestBubble(t *testing.T) {
	for _, c := range []struct {
		s, m int
		want float64
	}{{1, 1, 0}, {2, 1, 0.5}, {2, 4, 0.2}, {4, 4, 3.0 / 7}, {4, 16, 3.0 / 19}} {
		require.Equal(t, c.want, parallel.Bubble(c.s, c.m), "S=%d M=%d", c.s, c.m)
	}
}

// The stages inherit the caller's autocast policy: amp.Trainer drives a micro-batched
// Pipeline at O1 and every stage's Linear runs in bf16, on its own device.
func TestPipelineUnderAMP(t *testing.T) {
	ref, a, b := cpu(59), cpu(60), cpu(61)
	cfg := amp.Config{Level: amp.O1, Low: tensor.BFloat16}
	train := func(m nn.Module, in, out tensor.Device) [][]float64 {
		tr, err := amp.NewTrainer(m, sgd(t, m), crossEntropy, in, cfg)
		require.NoError(t, err)
		for step := range steps {
			x := inputOn(in, step)
			y := targetsOn(out, step)
			_, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
			require.NoError(t, err)
			x.Release()
			y.Release()
		}
		return weights(m)
	}
	want := train(mlp(2, ref), ref, ref)
	st := stages(2, a, b)
	logs := []*dtypeLog{watch(st[0].(*nn.Sequential).At(1)), watch(st[1].(*nn.Sequential).At(0))}
	p, err := parallel.NewPipeline(st, []tensor.Device{a, b}, parallel.PipelineOptions{MicroBatches: 3})
	require.NoError(t, err)
	got := train(p, a, b)
	requireClose(t, want, got, 1e-2, "bf16 pipeline")
	for s, l := range logs {
		ok, devs := l.only(tensor.BFloat16)
		require.True(t, ok, "stage %d: %v", s, l.seen)
		require.Equal(t, []tensor.Device{st[s].Params()[0].T.Device()}, devs)
	}
}

func TestPipelineInputGradientAndMemory(t *testing.T) {
	ref, a, b := cpu(62), cpu(63), cpu(55)
	grad := func(m nn.Module, in, out tensor.Device) []float64 {
		x := inputOn(in, 1)
		y := targetsOn(out, 1)
		defer x.Release()
		defer y.Release()
		x.SetRequiresGrad(true)
		ctx := tensor.NewContext()
		crossEntropy(m.Forward(ctx.Bind(x)), ctx.Bind(y)).Backward()
		ctx.Close()
		nn.ZeroGrad(m)
		g := x.Grad().Float64s()
		x.ZeroGrad()
		return g
	}
	want := grad(mlp(2, ref), ref, ref)
	st := stages(2, a, b)
	p, err := parallel.NewPipeline(st, []tensor.Device{a, b}, parallel.PipelineOptions{MicroBatches: 4})
	require.NoError(t, err)
	base := []int64{allocated(t, a), allocated(t, b)}
	got := grad(p, a, b)
	requireClose(t, [][]float64{want}, [][]float64{got}, 1e-6, "input gradient")
	require.Equal(t, base, []int64{allocated(t, a), allocated(t, b)}, "memory back to the baseline on both devices")
}

func TestPipelineConstruction(t *testing.T) {
	a, b := cpu(50), cpu(51)
	st := stages(2, a, b)
	_, err := parallel.NewPipeline(st, []tensor.Device{b, a}, parallel.PipelineOptions{})
	require.ErrorIs(t, err, parallel.ErrDevices)
	require.ErrorContains(t, err, a.String())
	require.ErrorContains(t, err, b.String())
	_, err = parallel.NewPipeline(st, []tensor.Device{a}, parallel.PipelineOptions{})
	require.ErrorIs(t, err, parallel.ErrDevices)
	_, err = parallel.NewPipeline(st, []tensor.Device{a, b}, parallel.PipelineOptions{MicroBatches: -1})
	require.Error(t, err)
}

// A device mismatch inside a stage's goroutine reaches the caller, naming both devices,
// and the other stages do not hang.
func TestPipelineDeviceMisuse(t *testing.T) {
	a, b := cpu(50), cpu(51)
	bad := &offset{c: tensor.Ones(tensor.Shape{hidden}, tensor.WithDevice(a))}
	defer bad.c.Release()
	st := stages(2, a, b)
	p, err := parallel.NewPipeline([]nn.Module{st[0], bad, st[1]}, []tensor.Device{a, b, b}, parallel.PipelineOptions{MicroBatches: 4})
	require.NoError(t, err)
	x := inputOn(a, 0)
	defer x.Release()
	ctx := tensor.NewContext()
	defer ctx.Close()
	requireDevicePanic(t, func() { p.Forward(ctx.Bind(x)) }, a, b)
}
