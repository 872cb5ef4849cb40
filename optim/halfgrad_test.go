package optim

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/internal/tensorx"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// TestSGDDeferredHalfGrads gives float32 parameters their gradients through a cast to
// bfloat16 (as autocast's weight casts do), which tensor keeps unwidened, and checks
// that SGD's fused update reading those half gradients (backend.HalfGradSGD) leaves
// parameters and state bit for bit as the update from the widened gradients (Grad
// called before Step) and as the composed tensor ops do.
func TestSGDDeferredHalfGrads(t *testing.T) {
	shapes := []tensor.Shape{{37, 129}, {4}, {3000}, {70000}}
	mk := func() []*nn.Param { return cosParams(tensor.Float32, shapes) }
	backward := func(ps []*nn.Param, k int) {
		ctx := tensor.NewContext()
		defer ctx.Close()
		for i, p := range ps {
			v := make([]float64, p.T.Numel())
			for j := range v {
				v[j] = 0.9 * math.Sin(1.1*float64(k)+0.3*float64(j)+float64(i))
				if j%97 == 5 {
					v[j] *= 1e-6
				}
			}
			coef := tensor.FromSlice(v, p.T.Shape(), tensor.WithDType(tensor.BFloat16), tensor.WithContext(ctx))
			p.T.Cast(tensor.BFloat16).Mul(coef).Cast(tensor.Float32).Sum().Backward()
		}
	}
	cfgs := []SGDConfig{
		{LR: 0.1},
		{LR: 0.05, Momentum: 0.9},
		{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-2},
		{LR: 0.05, Momentum: 0.8, Dampening: 0.3, Maximize: true},
		{LR: 0.05, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-3},
	}
	for _, cfg := range cfgs {
		t.Run(fmt.Sprintf("%+v", cfg), func(t *testing.T) {
			run := func(mode string) ([]*nn.Param, Optimizer) {
				old := fused
				fused = mode != "composed"
				defer func() { fused = old }()
				ps := mk()
				o, err := NewSGD(ps, cfg)
				require.NoError(t, err)
				for k := 1; k <= 4; k++ {
					backward(ps, k)
					for _, p := range ps {
						require.NotNil(t, tensorx.LowGrad(p.T), "the cast's gradient was widened at once")
						if mode == "widened" {
							require.Equal(t, tensor.Float32, p.T.Grad().DType())
							require.Nil(t, tensorx.LowGrad(p.T))
						}
					}
					before := fusedSteps.Load()
					o.Step()
					if mode != "composed" {
						require.Equal(t, int64(len(ps)), fusedSteps.Load()-before, "updates that took the fused path")
					}
					if mode == "deferred" {
						for _, p := range ps {
							require.NotNil(t, tensorx.LowGrad(p.T), "Step widened the gradient")
						}
					}
					o.ZeroGrad()
					for _, p := range ps {
						require.Nil(t, tensorx.LowGrad(p.T))
						require.Nil(t, p.T.Grad())
					}
				}
				return ps, o
			}
			requireRunsAgree(t, run, "deferred", "widened", "composed")
		})
	}
}

// TestSGDMasterHalfGrads runs SGD on half parameters with FP32 masters (O2) and checks
// that the step reading their half gradients as they are (no MasterGrads call before
// it: no float32 gradient made) leaves masters, half parameters and momentum bit for
// bit as the step from the float32 master gradients (MasterGrads called first) and as
// the composed tensor ops do, in bfloat16 and float16, over gradients holding
// subnormals, zeros and values that round the master into the half parameter's ties.
func TestSGDMasterHalfGrads(t *testing.T) {
	shapes := []tensor.Shape{{37, 129}, {4}, {3000}, {70000}}
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		grads := func(ps []*nn.Param, k int) {
			for i, p := range ps {
				v := sinGrad(k, i, p.T.Numel())
				for j := 11; j < len(v); j += 97 {
					v[j] = 0
				}
				p.T.SetGrad(tensor.FromSlice(v, p.T.Shape(), tensor.WithDType(dt)))
			}
		}
		for _, cfg := range []SGDConfig{
			{LR: 0.1},
			{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-2},
			{LR: 0.05, Momentum: 0.8, Dampening: 0.3, Maximize: true},
			{LR: 0.05, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-3},
		} {
			t.Run(fmt.Sprintf("%s/%+v", dt, cfg), func(t *testing.T) {
				run := func(mode string) ([]*nn.Param, Optimizer) {
					old := fused
					fused = mode != "composed"
					defer func() { fused = old }()
					ps := cosParams(dt, shapes)
					o, err := NewSGD(ps, cfg)
					require.NoError(t, err)
					for k := 1; k <= 4; k++ {
						grads(ps, k)
						if mode == "master" {
							for _, g := range o.MasterGrads() {
								require.Equal(t, tensor.Float32, g.DType())
							}
						}
						before, lowBefore := fusedSteps.Load(), halfGradSteps.Load()
						o.Step()
						if mode != "composed" {
							require.Equal(t, int64(len(ps)), fusedSteps.Load()-before, "updates that took the fused path")
						}
						low := int64(0)
						if mode == "half" {
							low = int64(len(ps))
						}
						require.Equal(t, low, halfGradSteps.Load()-lowBefore, "updates that read the half gradient")
						o.ZeroGrad()
					}
					return ps, o
				}
				requireRunsAgree(t, run, "half", "master", "composed")
			})
		}
	}
}
