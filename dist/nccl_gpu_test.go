package dist

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/cuda"
	"github.com/gamp-ml/gamp/internal/testenv"
	"github.com/gamp-ml/gamp/tensor"
)

// ncclWorldOfOne returns the NCCL group of one process on cuda:0, closed at the end of
// the test, or skips for want of a GPU or of libnccl (GAMP_REQUIRE_GPU=1: fails).
func ncclWorldOfOne(t *testing.T) ProcessGroup {
	t.Helper()
	if _, err := cuda.Open(0); err != nil {
		testenv.Skip(t, testenv.GPU, "no CUDA device: %v", err)
	}
	pg, err := newNCCL(Env{Rank: 0, Size: 1, MasterAddr: "127.0.0.1", MasterPort: freePort(t)})
	if errors.Is(err, ErrNoNCCL) {
		testenv.Skip(t, testenv.GPU, "no NCCL: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pg.Close()) })
	require.Equal(t, "nccl", pg.Backend())
	require.Equal(t, 0, pg.Rank())
	require.Equal(t, 1, pg.Size())
	return pg
}

// TestNCCLCollectivesOnGPU runs every collective of the NCCL backend on device tensors
// of each dtype it reduces, in a world of one: the values come back as they went in,
// the calls reach NCCL with the right addresses, counts and dtypes (a wrong one faults
// or errors), and what NCCL cannot take is refused with a reason.
func TestNCCLCollectivesOnGPU(t *testing.T) {
	pg := ncclWorldOfOne(t)
	dev := tensor.CUDA(0)
	vals := []float32{1.5, -2.25, 3, 0.125, -7, 1024, 0.5, -0.75, 9}
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16, tensor.Float64} {
		host := tensor.FromSlice(vals, tensor.Shape{3, 3}).Cast(dt)
		want := host.Float64s()
		for _, op := range []ReduceOp{Sum, Avg, Max, Min} {
			x := host.To(dev)
			require.NoError(t, pg.AllReduce(x, op), "%s %v", dt, op)
			require.Equal(t, want, x.Float64s(), "%s %v", dt, op)
			x.Release()
		}
		x := host.To(dev)
		require.NoError(t, pg.AllReduceAsync(x, Sum).Wait())
		require.NoError(t, pg.Broadcast(x, 0))
		require.Equal(t, want, x.Float64s(), "%s async all-reduce, broadcast", dt)
		// A row of a matrix: a view at an offset into the storage.
		row := x.Narrow(0, 1, 1)
		require.True(t, row.IsContiguous())
		require.NoError(t, pg.AllReduce(row, Sum))
		require.Equal(t, want[3:6], row.Float64s())
		row.Release()
		x.Release()
		host.Release()
	}
	require.NoError(t, pg.Barrier())
	cpu := tensor.FromSlice(vals, nil)
	require.ErrorContains(t, pg.AllReduce(cpu, Sum), "GPU memory")
	require.ErrorContains(t, pg.AllReduce(cpu.To(dev).Reshape(3, 3).Transpose(0, 1), Sum), "contiguous")
	require.Error(t, pg.Broadcast(cpu.To(dev), 1), "root 1 in a world of one")
}

// TestDDPNCCLMatchesSingleDevice trains the DDP test model on cuda:0 through the NCCL
// backend (a world of one) and without DDP: the same parameters, bit for bit, in FP32
// and FP16 autocast, with gradient accumulation by the trainer.
func TestDDPNCCLMatchesSingleDevice(t *testing.T) {
	pg := ncclWorldOfOne(t)
	for _, cfg := range []runCfg{
		{Mode: "fp32", Steps: 4, InjectStep: -1, GPU: true},
		{Mode: "fp16", Steps: 4, InjectStep: -1, GPU: true, Accum: "trainer"},
		{Mode: "bf16", Steps: 4, InjectStep: -1, GPU: true, SGD: true},
	} {
		got := trainRun(t, pg, cfg)
		ref := trainRun(t, nil, cfg)
		require.Equal(t, ref.Weights, got.Weights, "%+v", cfg)
		require.Equal(t, ref.Skipped, got.Skipped, "%+v", cfg)
	}
}
