package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/checkpoint"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// memDev is a logical CPU device of this package's own, so that no other test
// disturbs its allocator counters.
var memDev = tensor.CPUDevice(7)

const (
	mlpBlocks = 16
	mlpWidth  = 1024
	mlpBatch  = 256
)

// mlp16 is a 16-block MLP (Linear+ReLU blocks) on dev.
func mlp16(dev tensor.Device) []nn.Module {
	blocks := make([]nn.Module, mlpBlocks)
	for i := range blocks {
		blocks[i] = nn.NewSequential(nn.NewLinear(mlpWidth, mlpWidth, nn.Seeded(uint64(i+1))), nn.NewReLU())
		nn.To(blocks[i], dev)
	}
	return blocks
}

// step runs forward and backward of the MLP on x with the given number of segments
// (-1: no checkpointing).
func step(blocks []nn.Module, x *tensor.Tensor, segments int) {
	ctx := tensor.NewContext()
	defer ctx.Close()
	h := ctx.Bind(x)
	if segments < 0 {
		for _, b := range blocks {
			h = b.Forward(h)
		}
	} else {
		h = checkpoint.Sequential(blocks, segments, h)
	}
	h.Square().Mean().Backward()
}

// peakActivations returns the peak memory of one step above what the parameters,
// their gradients and the input hold.
func peakActivations(t testing.TB, blocks []nn.Module, x *tensor.Tensor, segments int) int64 {
	b := backend.MustGet(memDev)
	step(blocks, x, segments) // warm-up: the gradients exist from here on
	base := b.MemoryStats().Allocated
	b.ResetPeak()
	step(blocks, x, segments)
	require.Equal(t, base, b.MemoryStats().Allocated, "a step leaked memory")
	return b.MemoryStats().PeakAllocated - base
}

func TestCheckpointHalvesActivationMemory(t *testing.T) {
	blocks := mlp16(memDev)
	x := tensor.Randn(tensor.Shape{mlpBatch, mlpWidth}, tensor.WithDevice(memDev), tensor.WithContext(nil))
	defer x.Release()
	plain := peakActivations(t, blocks, x, -1)
	for _, s := range []int{0, 1, 2, 16} {
		ck := peakActivations(t, blocks, x, s)
		t.Logf("segments %d: peak activations %.1f MiB, plain %.1f MiB, ratio %.3f", s, float64(ck)/(1<<20), float64(plain)/(1<<20), float64(ck)/float64(plain))
	}
}
