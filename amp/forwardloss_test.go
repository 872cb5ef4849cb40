package amp

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// ForwardLoss replaces "model, then Loss" in the training step: it is called once per
// micro-batch with the input already in the step's autocast region (half at O2), Loss
// is not called, and a ForwardLoss that does what the default does trains identically.
func TestForwardLossSeam(t *testing.T) {
	for _, c := range []struct {
		level OptLevel
		want  tensor.DType // the input's dtype as ForwardLoss sees it
	}{{O0, tensor.Float32}, {O1, tensor.Float32}, {O2, tensor.BFloat16}} {
		plain := newTrainer(t, c.level, tensor.BFloat16, 2)
		seam := newTrainer(t, c.level, tensor.BFloat16, 2)
		calls := 0
		seam.Loss = func(out, y *tensor.Tensor) *tensor.Tensor {
			t.Fatal("Loss called although ForwardLoss is set")
			return nil
		}
		seam.ForwardLoss = func(x, y *tensor.Tensor) *tensor.Tensor {
			calls++
			require.Equal(t, c.want, x.DType(), "%v input", c.level)
			out := nn.Call(seam.Model, x)
			if c.level == O2 {
				out = out.Cast(tensor.Float32)
			}
			return ce(out, y)
		}
		for s := range 3 {
			x1, y1 := batch(s, 8)
			x2, y2 := batch(100+s, 8)
			xs, ys := []*tensor.Tensor{x1, x2}, []*tensor.Tensor{y1, y2}
			rp, err := plain.Step(xs, ys)
			require.NoError(t, err)
			rs, err := seam.Step(xs, ys)
			require.NoError(t, err)
			require.Equal(t, rp.Loss, rs.Loss, "%v step %d", c.level, s)
		}
		require.Equal(t, 6, calls, "once per micro-batch")
		require.Equal(t, paramBits(plain.Model), paramBits(seam.Model), "%v", c.level)
	}
}
