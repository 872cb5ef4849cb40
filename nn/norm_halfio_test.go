package nn

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/tensor"
)

// halfIOInput returns n float32-exact values for a BatchNorm over C channels: channel 0
// is a wave of unit scale, channel 1 one of scale 1000 (its variance, 10⁶ or so, is
// past float16's range), channel 2 values near 0.1 with a tiny spread, so that some
// normalised outputs land just above and below zero and round to ±0 in float16.
func halfIOInput(n, ch, s int) []float64 {
	v := wave(n*ch*s, 1)
	for i := range v {
		switch (i / s) % ch {
		case 1:
			v[i] *= 1000
		case 2:
			v[i] = 0.1 + v[i]*1e-6
		}
	}
	return v
}

// TestBatchNormHalfIOMatchesCasts checks that BatchNorm and the fused BatchNorm+ReLU
// on a half input, which the op reads and writes in half, give the outputs, input,
// weight and bias gradients and running statistics of the former path — cast the
// input to float32, normalise in float32, cast back (then ReLU) — bit for bit, in
// training and eval, for bfloat16 and float16.
func TestBatchNormHalfIOMatchesCasts(t *testing.T) {
	const n, ch, h, w = 4, 3, 5, 3
	xv := halfIOInput(n, ch, h*w)
	gv := wave(n*ch*h*w, 3)
	for _, low := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		for _, training := range []bool{true, false} {
			for _, relu := range []bool{false, true} {
				run := func(old bool) (out, gx, gw, gb, rm, rv []float64) {
					bn := NewBatchNorm2d(ch)
					set(bn.Weight, []float64{0.5, 1.25, -0.75})
					set(bn.Bias, []float64{0.1, -0.2, 0})
					set(bn.RunningMean, []float64{0.05, 20, 0.1})
					set(bn.RunningVar, []float64{0.8, 3e5, 1e-10})
					bn.SetTraining(training)
					ctx := tensor.NewContext()
					defer ctx.Close()
					x32 := input(ctx, xv, n, ch, h, w)
					x := x32.Cast(low).Detach().SetRequiresGrad(true)
					var y *tensor.Tensor
					switch {
					case old:
						y = tensor.BatchNorm(x.Cast(tensor.Float32), bn.Weight.T, bn.Bias.T, bn.RunningMean.T, bn.RunningVar.T,
							training, bn.Momentum, bn.Eps).Cast(low)
						if relu {
							y = y.Relu()
						}
					case relu:
						var ok bool
						y, ok = bn.forwardReLU(x)
						require.True(t, ok, "%v: BatchNorm+ReLU fuses on a half input", low)
					default:
						y = bn.Forward(x)
					}
					require.Equal(t, low, y.DType())
					g := tensor.FromSlice(gv, y.Shape(), tensor.WithDType(low), tensor.WithContext(ctx))
					y.Backward(tensor.GradOutput(g))
					f := func(t *tensor.Tensor) []float64 { return t.Cast(tensor.Float64).Float64s() }
					return f(y), f(x.Grad()), f(bn.Weight.T.Grad()), f(bn.Bias.T.Grad()), f(bn.RunningMean.T), f(bn.RunningVar.T)
				}
				var zeros int
				o := [2][6][]float64{}
				o[0][0], o[0][1], o[0][2], o[0][3], o[0][4], o[0][5] = run(true)
				o[1][0], o[1][1], o[1][2], o[1][3], o[1][4], o[1][5] = run(false)
				for k, what := range []string{"output", "input gradient", "weight gradient", "bias gradient", "running mean", "running var"} {
					want, got := o[0][k], o[1][k]
					require.Len(t, got, len(want))
					for i := range want {
						require.Equal(t, math.Float64bits(want[i]), math.Float64bits(got[i]),
							"%v training=%v relu=%v: %s element %d: cast path %v, half I/O %v", low, training, relu, what, i, want[i], got[i])
						if k == 0 && want[i] == 0 {
							zeros++
						}
					}
				}
				if relu {
					require.Positive(t, zeros, "the ReLU cut something")
				}
			}
		}
	}
}

// TestBatchNormHalfIOKeepsHalfInput checks that a training BatchNorm on a half input
// keeps no float32 copy of it for backward: what the forward leaves allocated is the
// half output and per-channel statistics, less than twice the output.
func TestBatchNormHalfIOKeepsHalfInput(t *testing.T) {
	const n, ch, s = 8, 4, 256
	for i, low := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		// A device of its own: nothing else allocates there.
		dev := tensor.CPUDevice(40 + i)
		b := backend.MustGet(dev)
		bn := NewBatchNorm1d(ch)
		To(bn, dev)
		ctx := tensor.NewContext()
		x := tensor.FromSlice(wave(n*ch*s, 2), tensor.Shape{n, ch, s}, tensor.WithDType(low), tensor.WithDevice(dev),
			tensor.WithContext(ctx), tensor.WithGrad())
		used0 := b.MemoryStats().Allocated
		y := bn.Forward(x)
		grew := b.MemoryStats().Allocated - used0
		half := int64(n * ch * s * low.Size())
		require.GreaterOrEqual(t, grew, half, "%v", low)
		require.Less(t, grew, 2*half, "%v: the forward left %d bytes allocated for a %d-byte output", low, grew, half)
		y.Backward(tensor.GradOutput(tensor.OnesLike(y)))
		require.Equal(t, low, x.Grad().DType())
		ctx.Close()
	}
}

// TestBatchNormReLUFusesUnlessNarrowing checks which input and layer dtypes fuse
// BatchNorm+ReLU: all but those whose output cast narrows (and could round a positive
// value to zero, where the ReLU's mask would differ from the composed ops').
func TestBatchNormReLUFusesUnlessNarrowing(t *testing.T) {
	f32, f64, f16, bf16 := tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16
	for _, c := range []struct {
		x, dt tensor.DType
		fuse  bool
	}{
		{f32, f32, true}, {bf16, f32, true}, {f16, f32, true}, {f16, f16, true}, {bf16, bf16, true},
		{f64, f32, true}, {f32, f16, true}, {bf16, f16, true},
		{f32, f64, false}, {f16, bf16, false}, {f16, f64, false}, {bf16, f64, false},
	} {
		require.Equal(t, c.fuse, reluFuses(c.x, c.dt), "input %v, layer %v", c.x, c.dt)
	}
}
