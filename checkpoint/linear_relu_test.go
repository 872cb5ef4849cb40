package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/autocast"
	"github.com/gamp-ml/gamp/checkpoint"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// TestCheckpointFusedLinearReLU checkpoints an nn.Sequential whose Linear+ReLU pairs
// run as linear_relu ops, and checks the step against the layers run one by one
// without checkpointing (unfused), bit for bit, in float32 and under fp16 and bf16
// autocast; and that the recomputation runs the fused op again.
func TestCheckpointFusedLinearReLU(t *testing.T) {
	fused := func(layers []nn.Module, x *tensor.Tensor) *tensor.Tensor {
		seq := nn.NewSequential(layers...)
		return checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor { return seq.Forward(xs[0]) }, x)
	}
	fp16, bf16 := autocast.Half(tensor.Float16), autocast.Default(tensor.CPU)
	for _, pol := range []*autocast.Policy{nil, &fp16, &bf16} {
		s := setup{policy: pol, xGrad: true}
		want := train(t, mlp(0), plain, s)
		got := train(t, mlp(0), fused, s)
		require.Equal(t, want, got, "autocast %v", pol != nil)
	}

	obs := &opCounter{n: map[string]int{}}
	layers := mlp(0).build()
	x := tensor.FromSlice(values(30), tensor.Shape{5, 6})
	defer x.Release()
	ctx := tensor.NewContext(tensor.UseObserver(obs))
	fused(layers, ctx.Bind(x)).Sum().Backward()
	ctx.Close()
	// Two Linear+ReLU pairs, run forward and again in the recomputation; the other
	// two Linear layers likewise.
	require.Equal(t, 4, obs.n["linear_relu"])
	require.Equal(t, 4, obs.n["linear"])
	require.Equal(t, 0, obs.n["relu"])
}
