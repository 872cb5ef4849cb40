package optim

import (
	"fmt"
	"testing"

	"github.com/gamp-ml/gamp/internal/tensorx"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// halfGradShapes are the parameters of the half-gradient tests: a matrix, a tiny
// vector, and vectors across the backend's widening blocks and worker grains.
var halfGradShapes = []tensor.Shape{{37, 129}, {4}, {3000}, {70000}}

// builder makes the optimizer a half-gradient test runs over ps.
type builder func(ps []*nn.Param) (Optimizer, error)

// sgdBuilders are the SGD variants of the half-gradient tests.
func sgdBuilders() map[string]builder {
	out := map[string]builder{}
	for _, cfg := range []SGDConfig{
		{LR: 0.1},
		{LR: 0.05, Momentum: 0.9},
		{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-2},
		{LR: 0.05, Momentum: 0.8, Dampening: 0.3, Maximize: true},
		{LR: 0.05, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-3},
	} {
		out[fmt.Sprintf("%+v", cfg)] = func(ps []*nn.Param) (Optimizer, error) { return NewSGD(ps, cfg) }
	}
	return out
}

// adamBuilders are the Adam and AdamW variants of the half-gradient tests: coupled and
// decoupled weight decay, AMSGrad, Maximize, and a β1 that takes lerp's other form.
func adamBuilders() map[string]builder {
	out := map[string]builder{}
	for _, c := range []struct {
		decoupled bool
		cfg       AdamConfig
	}{
		{false, AdamConfig{LR: 1e-2}},
		{false, AdamConfig{LR: 1e-2, WeightDecay: 1e-2, AMSGrad: true}},
		{true, AdamConfig{LR: 1e-2, WeightDecay: 0.1}},
		{true, AdamConfig{LR: 5e-3, Beta1: 0.3, Beta2: 0.99, WeightDecay: 0.05, AMSGrad: true, Maximize: true}},
		{false, AdamConfig{LR: 5e-3, Beta1: 0.8, Eps: 1e-6, Maximize: true}},
	} {
		name, mk := "Adam", NewAdam
		if c.decoupled {
			name, mk = "AdamW", NewAdamW
		}
		out[fmt.Sprintf("%s%+v", name, c.cfg)] = func(ps []*nn.Param) (Optimizer, error) { return mk(ps, c.cfg) }
	}
	return out
}

// checkDeferredHalfGrads gives float32 parameters their gradients through a cast to
// bfloat16 (as autocast's weight casts do), which tensor keeps unwidened, and checks
// that the optimizer's fused update reading those half gradients (backend.HalfGradSGD,
// backend.HalfGradAdam) leaves parameters and state bit for bit as the update from the
// widened gradients (Grad called before Step) and as the composed tensor ops do, and
// that it read every one of them as it is.
func checkDeferredHalfGrads(t *testing.T, build builder) {
	backward := func(ps []*nn.Param, k int) {
		ctx := tensor.NewContext()
		defer ctx.Close()
		for i, p := range ps {
			coef := tensor.FromSlice(sinGrad(k, i, p.T.Numel()), p.T.Shape(), tensor.WithDType(tensor.BFloat16), tensor.WithContext(ctx))
			p.T.Cast(tensor.BFloat16).Mul(coef).Cast(tensor.Float32).Sum().Backward()
		}
	}
	run := func(mode string) ([]*nn.Param, Optimizer) {
		old := fused
		fused = mode != "composed"
		defer func() { fused = old }()
		ps := cosParams(tensor.Float32, halfGradShapes)
		o, err := build(ps)
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
			before, lowBefore := fusedSteps.Load(), halfGradSteps.Load()
			o.Step()
			if mode != "composed" {
				require.Equal(t, int64(len(ps)), fusedSteps.Load()-before, "updates that took the fused path")
			}
			low := int64(0)
			if mode == "deferred" {
				low = int64(len(ps))
				for _, p := range ps {
					require.NotNil(t, tensorx.LowGrad(p.T), "Step widened the gradient")
				}
			}
			require.Equal(t, low, halfGradSteps.Load()-lowBefore, "updates that read the half gradient")
			o.ZeroGrad()
			for _, p := range ps {
				require.Nil(t, tensorx.LowGrad(p.T))
				require.Nil(t, p.T.Grad())
			}
		}
		return ps, o
	}
	requireRunsAgree(t, run, "deferred", "widened", "composed")
}

// checkMasterHalfGrads runs the optimizer on half parameters of dtype dt with FP32
// masters (O2) and checks that the step reading their half gradients as they are (no
// MasterGrads call before it: no float32 gradient made) leaves masters, half
// parameters and state bit for bit as the step from the float32 master gradients
// (MasterGrads called first) and as the composed tensor ops do, over gradients holding
// subnormals, zeros and values that round the master into the half parameter's ties,
// and that only the first read the half gradients.
func checkMasterHalfGrads(t *testing.T, dt tensor.DType, build builder) {
	grads := func(ps []*nn.Param, k int) {
		for i, p := range ps {
			v := sinGrad(k, i, p.T.Numel())
			for j := 11; j < len(v); j += 97 {
				v[j] = 0
			}
			p.T.SetGrad(tensor.FromSlice(v, p.T.Shape(), tensor.WithDType(dt)))
		}
	}
	run := func(mode string) ([]*nn.Param, Optimizer) {
		old := fused
		fused = mode != "composed"
		defer func() { fused = old }()
		ps := cosParams(dt, halfGradShapes)
		o, err := build(ps)
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
}

// TestSGDDeferredHalfGrads is checkDeferredHalfGrads for SGD (O1).
func TestSGDDeferredHalfGrads(t *testing.T) {
	for name, build := range sgdBuilders() {
		t.Run(name, func(t *testing.T) { checkDeferredHalfGrads(t, build) })
	}
}

// TestAdamDeferredHalfGrads is checkDeferredHalfGrads for Adam and AdamW (O1).
func TestAdamDeferredHalfGrads(t *testing.T) {
	for name, build := range adamBuilders() {
		t.Run(name, func(t *testing.T) { checkDeferredHalfGrads(t, build) })
	}
}

// TestSGDMasterHalfGrads is checkMasterHalfGrads for SGD (O2), in bfloat16 and
// float16.
func TestSGDMasterHalfGrads(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		for name, build := range sgdBuilders() {
			t.Run(fmt.Sprintf("%s/%s", dt, name), func(t *testing.T) { checkMasterHalfGrads(t, dt, build) })
		}
	}
}

// TestAdamMasterHalfGrads is checkMasterHalfGrads for Adam and AdamW (O2), in
// bfloat16 and float16.
func TestAdamMasterHalfGrads(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		for name, build := range adamBuilders() {
			t.Run(fmt.Sprintf("%s/%s", dt, name), func(t *testing.T) { checkMasterHalfGrads(t, dt, build) })
		}
	}
}
