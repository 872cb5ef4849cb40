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

// mlp16 is a 16-block MLP of Linear+GELU blocks on dev, and its input. Release them
// with release, so that the GC does not free them while another test measures. Each
// block keeps two activations (the GELU's input and output; on float32 CPU data, where
// the Sequential runs the pair as one linear_gelu op, its output and its backward's
// factor); Linear+ReLU would keep one, the Sequential fusing it into a linear_relu op.
func mlp16(dev tensor.Device) ([]nn.Module, *tensor.Tensor) {
	blocks := make([]nn.Module, mlpBlocks)
	for i := range blocks {
		blocks[i] = nn.NewSequential(nn.NewLinear(mlpWidth, mlpWidth, nn.Seeded(uint64(i+1))), nn.NewGELU())
		nn.To(blocks[i], dev)
	}
	x := tensor.Randn(tensor.Shape{mlpBatch, mlpWidth}, tensor.WithDevice(dev))
	return blocks, x
}

func release(blocks []nn.Module, x *tensor.Tensor) {
	for _, m := range blocks {
		for _, p := range m.Params() {
			p.T.ZeroGrad()
			p.T.Release()
		}
	}
	x.Release()
}

// mlpStep runs forward and backward on x, checkpointed in segments (-1: not at all).
func mlpStep(blocks []nn.Module, x *tensor.Tensor, segments int) {
	ctx := tensor.NewContext()
	defer ctx.Close()
	h := ctx.Bind(x)
	if segments < 0 {
		h = plain(blocks, h)
	} else {
		h = checkpoint.Sequential(blocks, segments, h)
	}
	h.Square().Mean().Backward()
}

// activationPeak measures one step's peak activation memory: the peak during forward
// and backward minus what the parameters, their gradients and the input hold.
//
// With accumulate, the gradients exist before the step (a previous micro-batch made
// them) and backward adds into them, so the peak above the starting point is exactly
// the activations plus backward's temporaries — among them each weight gradient,
// computed apart before it is added in. Otherwise the gradients are released before
// the step (nn.ZeroGrad, as zero_grad(set_to_none=True)) and backward creates them;
// their final size is subtracted from the peak.
func activationPeak(t testing.TB, blocks []nn.Module, x *tensor.Tensor, segments int, accumulate bool) int64 {
	b := backend.MustGet(memDev)
	mlpStep(blocks, x, segments) // warm-up: the gradients exist from here on
	if !accumulate {
		for _, m := range blocks {
			nn.ZeroGrad(m)
		}
	}
	base := b.MemoryStats().Allocated
	b.ResetPeak()
	mlpStep(blocks, x, segments)
	after := b.MemoryStats().Allocated
	if accumulate {
		require.Equal(t, base, after, "a step leaked memory")
	}
	return b.MemoryStats().PeakAllocated - after // after = base + gradients
}

func TestCheckpointHalvesActivationMemory(t *testing.T) {
	blocks, x := mlp16(memDev)
	defer release(blocks, x)
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	for _, accumulate := range []bool{true, false} {
		plainPeak := activationPeak(t, blocks, x, -1, accumulate)
		for _, segments := range []int{0, 1, 2, mlpBlocks} {
			peak := activationPeak(t, blocks, x, segments, accumulate)
			ratio := float64(peak) / float64(plainPeak)
			t.Logf("gradients accumulated %v, segments %2d: peak activations %5.1f MiB, without checkpointing %5.1f MiB: ratio %.3f",
				accumulate, segments, mib(peak), mib(plainPeak), ratio)
			switch segments {
			case 0: // √16 = 4 segments
				require.LessOrEqual(t, ratio, 0.5, "√n segments must cut peak activation memory by half")
			case 1: // nothing recomputed: the memory of a plain step (and a scalar)
				require.InDelta(t, plainPeak, peak, 64)
			default:
				require.Less(t, ratio, 0.7)
			}
		}
	}
}

// A checkpointed forward that never runs backward — with grad on, or off — releases
// everything with its Context.
func TestForwardWithoutBackwardReleases(t *testing.T) {
	blocks, x := mlp16(memDev)
	defer release(blocks, x)
	b := backend.MustGet(memDev)
	base := b.MemoryStats().Allocated
	for _, opts := range [][]tensor.ContextOption{nil, {tensor.NoGradMode()}} {
		ctx := tensor.NewContext(opts...)
		y := checkpoint.Sequential(blocks, 0, ctx.Bind(x))
		require.Equal(t, ctx.GradEnabled(), y.RequiresGrad())
		require.Greater(t, b.MemoryStats().Allocated, base)
		ctx.Close()
		require.Equal(t, base, b.MemoryStats().Allocated)
	}
}

// BenchmarkCheckpointMLP16 times a forward+backward step of the 16-block MLP with and
// without √n checkpointing.
func BenchmarkCheckpointMLP16(b *testing.B) {
	blocks, x := mlp16(memDev)
	defer release(blocks, x)
	for _, c := range []struct {
		name     string
		segments int
	}{{"plain", -1}, {"sqrt", 0}} {
		b.Run(c.name, func(b *testing.B) {
			mlpStep(blocks, x, c.segments)
			for b.Loop() {
				mlpStep(blocks, x, c.segments)
			}
		})
	}
}
