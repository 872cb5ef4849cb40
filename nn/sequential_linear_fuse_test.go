package nn

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/tensor"
)

// TestSequentialFusesLinearReLU runs Linear, ReLU, Linear inside a Sequential (the
// first two as one linear_relu op) and layer by layer, in float32 and under bf16 and
// fp16 autocast, and compares the output and the gradients of the input, weights and
// biases bit for bit, for shapes with rows not a multiple of 12, hidden features not a
// multiple of 32, in features over 512 (two k slices), rows ≤ 288 and > 288 (the
// GEMM's two schedules) and NaN, ±Inf and -0 in the input.
func TestSequentialFusesLinearReLU(t *testing.T) {
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)}
	for _, low := range []tensor.DType{0, tensor.BFloat16, tensor.Float16} {
		for _, sh := range [][3]int{{7, 600, 45}, {25, 37, 70}, {300, 530, 40}, {256, 784, 96}} {
			rows, in, hid := sh[0], sh[1], sh[2]
			xv := wave(rows*in, 1.5)
			for r := range min(rows, 4) {
				xv[r*in+(7*r+5)%in] = specials[r] // the other rows stay finite
			}
			run := func(fused bool) (out [][]float64, ops []string) {
				l1, relu, l2 := NewLinear(in, hid), NewReLU(), NewLinear(hid, 3)
				set(l1.Weight, wave(hid*in, 0.2))
				set(l1.Bias, wave(hid, 0.3))
				set(l2.Weight, wave(3*hid, 0.5))
				set(l2.Bias, wave(3, 0.1))
				seq := NewSequential(l1, relu, l2)
				fs := newFuseSetting(low, xv, tensor.Shape{rows, in})
				defer fs.close()
				ctx, region, rec, x32, x := fs.ctx, fs.region, fs.rec, fs.x32, fs.x
				var y *tensor.Tensor
				if fused {
					y = seq.Forward(x)
				} else {
					y = Call(l2, Call(relu, Call(l1, x)))
				}
				y.Cast(tensor.Float32).Mul(region.Bind(tensor.FromSlice(wave(y.Numel(), 1), y.Shape(), tensor.WithContext(ctx)))).Sum().Backward()
				f := func(t *tensor.Tensor) []float64 { return t.Cast(tensor.Float64).Float64s() }
				return [][]float64{f(y), f(x32.Grad()), f(l1.Weight.T.Grad()), f(l1.Bias.T.Grad()), f(l2.Weight.T.Grad())}, rec.names
			}
			want, ops0 := run(false)
			got, ops1 := run(true)
			name := fmt.Sprintf("%v %v", low, sh)
			require.Equal(t, []string{"linear", "relu", "linear"}, filterOps(ops0), name)
			require.Equal(t, []string{"linear_relu", "linear"}, filterOps(ops1), name)
			for k, what := range []string{"output", "grad x", "grad w1", "grad b1", "grad w2"} {
				require.Equal(t, len(want[k]), len(got[k]), what)
				for i := range want[k] {
					if math.Float64bits(want[k][i]) != math.Float64bits(got[k][i]) {
						t.Fatalf("%s %s element %d: layer by layer %v, fused %v", name, what, i, want[k][i], got[k][i])
					}
				}
			}
		}
	}
}

// filterOps keeps the names of the linear and ReLU ops.
func filterOps(names []string) []string {
	var out []string
	for _, n := range names {
		if n == "linear" || n == "relu" || n == "linear_relu" {
			out = append(out, n)
		}
	}
	return out
}

// TestLinearReLUHooksTurnFusionOff checks that a hook on the Linear or on the ReLU (a
// forward hook or a pre-hook) makes Sequential run the two layers apart, the hook
// seeing the layer's own output.
func TestLinearReLUHooksTurnFusionOff(t *testing.T) {
	for _, which := range []string{"linear", "relu", "linear pre", "relu pre"} {
		l, relu := NewLinear(4, 5), NewReLU()
		seq := NewSequential(l, relu)
		var seen []string
		target := Module(l)
		if which == "relu" || which == "relu pre" {
			target = relu
		}
		var remove func()
		if which == "linear pre" || which == "relu pre" {
			remove = RegisterForwardPreHook(target, func(m Module, in *tensor.Tensor) *tensor.Tensor {
				seen = append(seen, "pre")
				return nil
			})
		} else {
			remove = RegisterForwardHook(target, func(m Module, in, out *tensor.Tensor) *tensor.Tensor {
				seen = append(seen, "hook")
				return nil
			})
		}
		rec := &opNames{}
		ctx := tensor.NewContext(tensor.UseObserver(rec))
		seq.Forward(ctx.Bind(tensor.FromSlice(wave(8, 1), tensor.Shape{2, 4}, tensor.WithDType(tensor.Float32))))
		ctx.Close()
		require.Len(t, seen, 1, which)
		require.Equal(t, []string{"linear", "relu"}, filterOps(rec.names), which)
		remove()

		rec = &opNames{}
		ctx = tensor.NewContext(tensor.UseObserver(rec))
		seq.Forward(ctx.Bind(tensor.FromSlice(wave(8, 1), tensor.Shape{2, 4}, tensor.WithDType(tensor.Float32))))
		ctx.Close()
		require.Equal(t, []string{"linear_relu"}, filterOps(rec.names), "%s hook removed", which)
	}
}
