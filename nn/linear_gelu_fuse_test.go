package nn

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/tensor"
)

// geluOps keeps the names of the linear and GELU ops.
func geluOps(names []string) []string {
	var out []string
	for _, n := range names {
		if n == "linear" || n == "gelu" || n == "linear_gelu" || n == "gelu_tanh" {
			out = append(out, n)
		}
	}
	return out
}

// TestCallPairLinearGELU runs Linear, GELU, Linear with CallPair for the first two
// (one linear_gelu op), inside a Sequential, and layer by layer, in float32 and under
// bf16 and fp16 autocast, and compares the output and the gradients of the input,
// weights and biases bit for bit, with NaN, ±Inf and -0 in the input; the tanh GELU
// is not fused.
func TestCallPairLinearGELU(t *testing.T) {
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)}
	for _, low := range []tensor.DType{0, tensor.BFloat16, tensor.Float16} {
		for _, sh := range [][3]int{{7, 60, 45}, {25, 37, 70}, {300, 53, 1100}} {
			rows, in, hid := sh[0], sh[1], sh[2]
			xv := wave(rows*in, 1.5)
			for r := range min(rows, 4) {
				xv[r*in+(7*r+5)%in] = specials[r]
			}
			run := func(mode string, approx bool) (out [][]float64, ops []string) {
				l1, gelu, l2 := NewLinear(in, hid), NewGELU(), NewLinear(hid, 3)
				gelu.Approximate = approx
				set(l1.Weight, wave(hid*in, 0.2))
				set(l1.Bias, wave(hid, 0.3))
				set(l2.Weight, wave(3*hid, 0.5))
				set(l2.Bias, wave(3, 0.1))
				fs := newFuseSetting(low, xv, tensor.Shape{rows, in})
				defer fs.close()
				ctx, region, rec, x32, x := fs.ctx, fs.region, fs.rec, fs.x32, fs.x
				var y *tensor.Tensor
				switch mode {
				case "pair":
					y = Call(l2, CallPair(l1, gelu, x))
				case "seq":
					y = NewSequential(l1, gelu, l2).Forward(x)
				default:
					y = Call(l2, Call(gelu, Call(l1, x)))
				}
				y.Cast(tensor.Float32).Mul(region.Bind(tensor.FromSlice(wave(y.Numel(), 1), y.Shape(), tensor.WithContext(ctx)))).Sum().Backward()
				f := func(t *tensor.Tensor) []float64 { return t.Cast(tensor.Float64).Float64s() }
				return [][]float64{f(y), f(x32.Grad()), f(l1.Weight.T.Grad()), f(l1.Bias.T.Grad()), f(l2.Weight.T.Grad())}, rec.names
			}
			for _, approx := range []bool{false, true} {
				want, ops0 := run("apart", approx)
				gname, fused := "gelu", []string{"linear_gelu", "linear"}
				if approx {
					gname, fused = "gelu_tanh", []string{"linear", "gelu_tanh", "linear"}
				}
				require.Equal(t, []string{"linear", gname, "linear"}, geluOps(ops0))
				for _, mode := range []string{"pair", "seq"} {
					got, ops1 := run(mode, approx)
					name := fmt.Sprintf("%v %v %s approx=%v", low, sh, mode, approx)
					require.Equal(t, fused, geluOps(ops1), name)
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
	}
}

// TestCallPairHooksTurnFusionOff checks that a forward hook on the Linear or on the
// GELU makes CallPair run the two layers apart, the hook seeing the layer's own output.
func TestCallPairHooksTurnFusionOff(t *testing.T) {
	for _, which := range []string{"linear", "gelu"} {
		l, gelu := NewLinear(4, 5), NewGELU()
		target := Module(l)
		if which == "gelu" {
			target = gelu
		}
		var seen []string
		remove := RegisterForwardHook(target, func(m Module, in, out *tensor.Tensor) *tensor.Tensor {
			seen = append(seen, "hook")
			return nil
		})
		for _, hooked := range []bool{true, false} {
			rec := &opNames{}
			ctx := tensor.NewContext(tensor.UseObserver(rec))
			CallPair(l, gelu, ctx.Bind(tensor.FromSlice(wave(8, 1), tensor.Shape{2, 4}, tensor.WithDType(tensor.Float32))))
			ctx.Close()
			want := []string{"linear_gelu"}
			if hooked {
				want = []string{"linear", "gelu"}
				require.Len(t, seen, 1, which)
				remove()
			}
			require.True(t, slices.Equal(want, geluOps(rec.names)), "%s hooked=%v: %v", which, hooked, rec.names)
		}
	}
}
