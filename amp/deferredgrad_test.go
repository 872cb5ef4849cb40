package amp

import (
	"math"
	"testing"

	"github.com/gamp-ml/gamp/internal/tensorx"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// TestO1DeferredGradsTrajectory trains the same O1 bfloat16 model twice: once as is,
// where tensor keeps the weight casts' gradients in bfloat16 and SGD widens them as it
// reads them, and once with a no-op gradient hook on every parameter, which makes
// backward widen them into float32 gradients first (the path before deferral). The
// weights must agree bit for bit after every step.
func TestO1DeferredGradsTrajectory(t *testing.T) {
	dev := tensor.CPU
	mk := func(hooks bool) *Trainer {
		tr := halfTrainer(t, O1, optim.FP32Masters, true, dev)
		if hooks {
			for _, p := range tr.Model.Params() {
				p.T.RegisterHook(func(g *tensor.Tensor) *tensor.Tensor { return nil })
			}
		}
		return tr
	}
	a, b := mk(false), mk(true)
	for s := range 6 {
		trainOn(t, a, dev, s, s+1)
		trainOn(t, b, dev, s, s+1)
		pa, pb := a.Model.Params(), b.Model.Params()
		for i := range pa {
			require.Equal(t, tensor.Float32, pa[i].T.DType())
			require.Equal(t, f32bits(pb[i].T), f32bits(pa[i].T), "step %d: parameter %s", s, pa[i].Name)
		}
	}
	// The weights' gradients were deferred in a, not in b.
	x, y := batch(9, 16)
	defer x.Release()
	defer y.Release()
	for _, tr := range []*Trainer{a, b} {
		tr.microSteps(x, y)
		for _, p := range tr.Model.Params() {
			if p.T.Dim() == 2 { // a Linear's weight: cast for the matmul
				require.Equal(t, tr == a, tensorx.LowGrad(p.T) != nil, "parameter %s", p.Name)
			}
		}
		tr.Opt.ZeroGrad()
	}
}

func f32bits(t *tensor.Tensor) []uint32 {
	v := t.Float32s()
	out := make([]uint32, len(v))
	for i, f := range v {
		out[i] = math.Float32bits(f)
	}
	return out
}
