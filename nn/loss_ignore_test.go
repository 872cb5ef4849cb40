package nn

import (
	"math"
	"testing"

	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// CrossEntropyLoss passes Ignore and IgnoreIndex through (PyTorch's ignore_index), and a
// masked (-Inf) logit gives a finite loss (issue 16: logits [0, -Inf, 1], label 0).
func TestCrossEntropyLossIgnoreAndMask(t *testing.T) {
	c := tensor.NewContext()
	defer c.Close()
	x := tensor.FromSlice([]float32{0, float32(math.Inf(-1)), 1, 5, 5, 5}, tensor.Shape{2, 3}, tensor.WithContext(c))
	y := tensor.FromSlice([]int64{0, tensor.DefaultIgnoreIndex}, nil, tensor.WithContext(c))
	l := CrossEntropyLoss{Ignore: true, IgnoreIndex: tensor.DefaultIgnoreIndex}.Loss(x, y)
	require.InDelta(t, 1.31326162815094, l.Item(), 1e-6)
	require.Panics(t, func() { CrossEntropyLoss{}.Loss(x, y) }, "without Ignore, -100 is a bad label")
}
