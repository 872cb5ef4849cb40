package nn

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/autocast"
	"github.com/gamp-ml/gamp/tensor"
)

// TestSequentialFusesBatchNormReLU runs BatchNorm2d then ReLU inside a Sequential (one
// batch_norm_relu op) and layer by layer, in float32 and under bf16 and fp16
// autocast, and compares the outputs, running statistics and gradients bit for bit;
// it checks which ops ran, and that a hook on the ReLU turns the fusion off.
func TestSequentialFusesBatchNormReLU(t *testing.T) {
	for _, low := range []tensor.DType{0, tensor.BFloat16, tensor.Float16} {
		run := func(fused, hook bool) (out, gx, gw, rm []float64, ops []string) {
			bn, relu := NewBatchNorm2d(3), NewReLU()
			set(bn.Weight, []float64{0.5, 1.25, -0.75})
			set(bn.Bias, []float64{0.1, -0.2, 0})
			seq := NewSequential(bn, relu)
			if hook {
				defer RegisterForwardHook(relu, func(m Module, in, out *tensor.Tensor) *tensor.Tensor {
					ops = append(ops, "hook")
					return nil
				})()
			}
			rec := &opNames{}
			ctx := tensor.NewContext(tensor.UseObserver(rec))
			defer ctx.Close()
			defer func() {
				for _, n := range rec.names {
					if n == "batch_norm" || n == "batch_norm_relu" || n == "relu" {
						ops = append(ops, n)
					}
				}
			}()
			region := ctx
			if low != 0 {
				region = autocast.Enter(ctx, autocast.Half(low))
				defer region.Close()
			}
			x32 := tensor.FromSlice(wave(2*3*4*5, 1.5), tensor.Shape{2, 3, 4, 5}, tensor.WithContext(ctx), tensor.WithGrad())
			x := region.Bind(x32)
			if low != 0 {
				x = x.Cast(low) // as a convolution's output under autocast
			}
			var y *tensor.Tensor
			if fused {
				y = seq.Forward(x)
			} else {
				y = Call(relu, Call(bn, x))
			}
			y.Cast(tensor.Float32).Mul(region.Bind(tensor.FromSlice(wave(y.Numel(), 1), y.Shape(), tensor.WithContext(ctx)))).Sum().Backward()
			f := func(t *tensor.Tensor) []float64 { return t.Cast(tensor.Float64).Float64s() }
			return f(y), f(x32.Grad()), f(bn.Weight.T.Grad()), f(bn.RunningMean.T), ops
		}
		o1, gx1, gw1, rm1, _ := run(false, false)
		o2, gx2, gw2, rm2, _ := run(true, false)
		for _, p := range [][2][]float64{{o1, o2}, {gx1, gx2}, {gw1, gw2}, {rm1, rm2}} {
			require.Equal(t, len(p[0]), len(p[1]))
			for i := range p[0] {
				require.Equal(t, math.Float64bits(p[0][i]), math.Float64bits(p[1][i]), "%v element %d: layer by layer %v, fused %v", low, i, p[0][i], p[1][i])
			}
		}
		_, _, _, _, ops := run(true, false)
		require.Contains(t, ops, "batch_norm_relu")
		_, _, _, _, ops = run(true, true)
		require.Equal(t, []string{"hook", "batch_norm", "relu"}, ops, "the ReLU's hook ran (no fusion)")
	}
}

// opNames is a tensor.Observer that records the names of the ops run forward.
// fuseSetting is a fusion test's run: a context observed by rec and, for low ≠ 0, an
// autocast region to low inside it (the context itself otherwise), with x32, a float32
// input requiring grad, as the region sees it (x). close ends both.
type fuseSetting struct {
	ctx, region *tensor.Context
	rec         *opNames
	x32, x      *tensor.Tensor
}

func newFuseSetting(low tensor.DType, xv []float64, shape tensor.Shape) *fuseSetting {
	f := &fuseSetting{rec: &opNames{}}
	f.ctx = tensor.NewContext(tensor.UseObserver(f.rec))
	f.region = f.ctx
	if low != 0 {
		f.region = autocast.Enter(f.ctx, autocast.Half(low))
	}
	f.x32 = tensor.FromSlice(xv, shape, tensor.WithDType(tensor.Float32), tensor.WithContext(f.ctx), tensor.WithGrad())
	f.x = f.region.Bind(f.x32)
	return f
}

func (f *fuseSetting) close() {
	if f.region != f.ctx {
		f.region.Close()
	}
	f.ctx.Close()
}

type opNames struct{ names []string }

func (o *opNames) Begin(*tensor.Context, *tensor.Op) {}
func (o *opNames) Forward(_ *tensor.Context, op *tensor.Op, _ []*tensor.Tensor, _ *tensor.Tensor) any {
	o.names = append(o.names, op.Name())
	return nil
}
func (o *opNames) Backward(*tensor.Op, any, *tensor.Tensor, []*tensor.Tensor, time.Duration) {}
