package optim

import (
	"testing"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// TestFusedMatchesComposed runs every optimizer configuration twice, with the fused
// backend kernels and with the composed tensor ops, and requires bit-identical
// parameters and state after several steps, for float32, float64 and half parameters
// (float32 masters), on tensors large enough to be split across workers.
func TestFusedMatchesComposed(t *testing.T) {
	shapes := []tensor.Shape{{37, 129}, {4}, {3000}}
	mk := func(dt tensor.DType) []*nn.Param { return cosParams(dt, shapes) }
	grads := func(ps []*nn.Param, k int) {
		for i, p := range ps {
			p.T.SetGrad(tensor.FromSlice(sinGrad(k, i, p.T.Numel()), p.T.Shape(), tensor.WithDType(p.T.DType())))
		}
	}
	type cfg struct {
		name string
		mk   func([]*nn.Param) (Optimizer, error)
	}
	cfgs := []cfg{
		{"sgd", func(ps []*nn.Param) (Optimizer, error) { return NewSGD(ps, SGDConfig{LR: 0.1}) }},
		{"sgd-momentum", func(ps []*nn.Param) (Optimizer, error) {
			return NewSGD(ps, SGDConfig{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-2})
		}},
		{"sgd-dampening", func(ps []*nn.Param) (Optimizer, error) {
			return NewSGD(ps, SGDConfig{LR: 0.05, Momentum: 0.8, Dampening: 0.3, Maximize: true})
		}},
		{"sgd-nesterov", func(ps []*nn.Param) (Optimizer, error) {
			return NewSGD(ps, SGDConfig{LR: 0.05, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-3})
		}},
		{"adam", func(ps []*nn.Param) (Optimizer, error) { return NewAdam(ps, AdamConfig{LR: 1e-2, WeightDecay: 1e-2}) }},
		{"adam-amsgrad", func(ps []*nn.Param) (Optimizer, error) {
			return NewAdam(ps, AdamConfig{LR: 1e-2, AMSGrad: true, Maximize: true})
		}},
		{"adam-beta1-small", func(ps []*nn.Param) (Optimizer, error) { return NewAdam(ps, AdamConfig{LR: 1e-2, Beta1: 0.3}) }},
		{"adamw", func(ps []*nn.Param) (Optimizer, error) { return NewAdamW(ps, AdamWConfig{LR: 1e-2, WeightDecay: 0.1}) }},
	}
	for _, c := range cfgs {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16} {
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				run := func(useFused bool) ([]*nn.Param, Optimizer) {
					old := fused
					fused = useFused
					defer func() { fused = old }()
					ps := mk(dt)
					o, err := c.mk(ps)
					require.NoError(t, err)
					for k := 1; k <= 4; k++ {
						grads(ps, k)
						o.Step()
					}
					return ps, o
				}
				before := fusedSteps.Load()
				pf, of := run(true)
				require.Equal(t, int64(4*len(shapes)), fusedSteps.Load()-before, "updates that took the fused path")
				pc, oc := run(false)
				require.Equal(t, int64(4*len(shapes)), fusedSteps.Load()-before, "the composed run must not fuse")
				for i := range pf {
					require.Equal(t, bits(pc[i].T), bits(pf[i].T), "parameter %d", i)
				}
				requireStateEqual(t, oc.StateDict(), of.StateDict())
			})
		}
	}
}
