package nn

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/autocast"
	"github.com/gamp-ml/gamp/tensor"
)

// projIn is a module whose input goes to one Linear alone (an InputLinear).
type projIn struct {
	Base
	lin *Linear
}

func (p *projIn) Forward(x *tensor.Tensor) *tensor.Tensor { return Call(p.lin, x).Relu() }
func (p *projIn) InputLinear() *Linear                    { return p.lin }

func countOps(names []string, op string) int {
	n := 0
	for _, s := range names {
		if s == op {
			n++
		}
	}
	return n
}

// TestCallIntoLayerNormLinear runs LayerNorm then a Linear (and a module reading its
// input through one, an InputLinear) with CallInto for the norm and with Call, in
// float32 and under bf16 and fp16 autocast, and compares the output and the
// gradients of the input and of every parameter bit for bit, with NaN and ±Inf in the
// input. Under autocast CallInto's output is the Linear's dtype and one cast op fewer
// runs; without autocast nothing changes.
func TestCallIntoLayerNormLinear(t *testing.T) {
	const rows, in, out = 45, 70, 33
	xv := wave(rows*in, 1.5)
	xv[3*in+4], xv[9*in], xv[20*in+69] = math.NaN(), math.Inf(1), math.Inf(-1)
	for _, low := range []tensor.DType{0, tensor.BFloat16, tensor.Float16} {
		for _, wrapped := range []bool{false, true} {
			run := func(mode string) (res [][]float64, mid tensor.DType, casts int) {
				ln, lin := NewLayerNorm(tensor.Shape{in}), NewLinear(in, out)
				set(ln.Weight, wave(in, 3))
				set(ln.Bias, wave(in, 0.5))
				set(lin.Weight, wave(out*in, 0.2))
				set(lin.Bias, wave(out, 0.3))
				var next Module = lin
				if wrapped {
					next = &projIn{lin: lin}
				}
				fs := newFuseSetting(low, xv, tensor.Shape{rows, in})
				defer fs.close()
				ctx, region, rec, x32, x := fs.ctx, fs.region, fs.rec, fs.x32, fs.x
				var h, y *tensor.Tensor
				switch mode {
				case "into":
					h = CallInto(ln, next, x)
					y = Call(next, h)
				case "seq":
					y = NewSequential(ln, next).Forward(x)
				default:
					h = Call(ln, x)
					y = Call(next, h)
				}
				y.Cast(tensor.Float32).Mul(region.Bind(tensor.FromSlice(wave(y.Numel(), 1), y.Shape(), tensor.WithContext(ctx)))).Sum().Backward()
				f := func(t *tensor.Tensor) []float64 { return t.Cast(tensor.Float64).Float64s() }
				mid = tensor.DType(0) // a Sequential's inner tensors are not seen
				if h != nil {
					mid = h.DType()
				}
				return [][]float64{f(y), f(x32.Grad()), f(ln.Weight.T.Grad()), f(ln.Bias.T.Grad()), f(lin.Weight.T.Grad()), f(lin.Bias.T.Grad())},
					mid, countOps(rec.names, "cast")
			}
			want, mid0, casts0 := run("apart")
			require.Equal(t, tensor.Float32, mid0)
			for _, mode := range []string{"into", "seq"} {
				name := fmt.Sprintf("autocast %v wrapped %v %s", low, wrapped, mode)
				got, mid1, casts1 := run(mode)
				wantMid, wantCasts := low, casts0-1
				if low == 0 {
					wantMid, wantCasts = tensor.Float32, casts0
				}
				if mode == "seq" {
					wantMid = tensor.DType(0)
				}
				require.Equal(t, wantMid, mid1, name)
				require.Equal(t, wantCasts, casts1, "%s: cast ops", name)
				for k, what := range []string{"output", "grad x", "grad ln w", "grad ln b", "grad w", "grad b"} {
					require.Equal(t, len(want[k]), len(got[k]), what)
					for i := range want[k] {
						if math.Float64bits(want[k][i]) != math.Float64bits(got[k][i]) {
							t.Fatalf("%s %s element %d: apart %v, fused %v", name, what, i, want[k][i], got[k][i])
						}
					}
				}
			}
		}
	}
}

// TestCallIntoHooksTurnFusionOff checks that a forward hook on the norm, on the Linear
// or on the module around it makes CallInto a plain Call, the hooks seeing float32
// tensors; and that a float64 input or a next module that is not a Linear is never
// fused.
func TestCallIntoHooksTurnFusionOff(t *testing.T) {
	for _, which := range []string{"ln", "linear", "wrapper", "none"} {
		ln, lin := NewLayerNorm(tensor.Shape{4}), NewLinear(4, 3)
		wrap := &projIn{lin: lin}
		var seen []tensor.DType
		hook := func(m Module, in, out *tensor.Tensor) *tensor.Tensor {
			seen = append(seen, in.DType())
			return nil
		}
		switch which {
		case "ln":
			defer RegisterForwardHook(ln, hook)()
		case "linear":
			defer RegisterForwardHook(lin, hook)()
		case "wrapper":
			defer RegisterForwardHook(wrap, hook)()
		}
		ctx := tensor.NewContext()
		region := autocast.Enter(ctx, autocast.Half(tensor.BFloat16))
		x := region.Bind(tensor.FromSlice(wave(8, 1), tensor.Shape{2, 4}, tensor.WithDType(tensor.Float32)))
		h := CallInto(ln, wrap, x)
		Call(wrap, h)
		want := tensor.Float32
		if which == "none" {
			want = tensor.BFloat16
		} else {
			require.NotEmpty(t, seen, which)
			require.Equal(t, tensor.Float32, seen[0], which)
		}
		require.Equal(t, want, h.DType(), which)
		region.Close()
		ctx.Close()
	}
	ctx := tensor.NewContext()
	defer ctx.Close()
	region := autocast.Enter(ctx, autocast.Half(tensor.BFloat16))
	defer region.Close()
	ln := NewLayerNorm(tensor.Shape{4})
	x64 := region.Bind(tensor.FromSlice(wave(8, 1), tensor.Shape{2, 4}, tensor.WithDType(tensor.Float64)))
	require.Equal(t, tensor.Float64, CallInto(ln, NewLinear(4, 3), x64).DType(), "float64 input")
	x := region.Bind(tensor.FromSlice(wave(8, 1), tensor.Shape{2, 4}, tensor.WithDType(tensor.Float32)))
	require.Equal(t, tensor.Float32, CallInto(ln, NewReLU(), x).DType(), "next not a Linear")
	require.Equal(t, tensor.Float32, CallInto(NewReLU(), NewLinear(4, 3), x).DType(), "m not a LayerNorm")
}
