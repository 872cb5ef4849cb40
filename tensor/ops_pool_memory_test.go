package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/backend"
)

// TestMaxPoolKeepsNoIndexOnCPU checks that a max-pool forward on the CPU backend
// (backend.MaxPoolRecomputer) leaves only its output allocated — no Int64 index — and
// that its gradient still routes to the window maxima.
func TestMaxPoolKeepsNoIndexOnCPU(t *testing.T) {
	dev := CPUDevice(43)
	b := backend.MustGet(dev)
	_, ok := b.(backend.MaxPoolRecomputer)
	require.True(t, ok)
	for _, dt := range []DType{BFloat16, Float32} {
		ctx := NewContext()
		vals := make([]float64, 2*3*8*8)
		for i := range vals {
			vals[i] = float64((i * 7) % 11)
		}
		x := FromSlice(vals, Shape{2, 3, 8, 8}, WithDType(dt), WithDevice(dev), WithContext(ctx), WithGrad())
		used0 := b.MemoryStats().Allocated
		y := MaxPool2d(x, [2]int{2, 2}, [2]int{}, [2]int{})
		require.Equal(t, int64(y.Numel()*dt.Size()), b.MemoryStats().Allocated-used0, "%v: max-pool left more than its output", dt)
		y.Sum().Backward()
		g := x.Grad().Float64s()
		var sum float64
		for i, v := range g {
			require.True(t, v == 0 || v == 1, "%v: gradient %v at %d", dt, v, i)
			sum += v
		}
		require.Equal(t, float64(y.Numel()), sum, "%v: one unit of gradient per window", dt)
		ctx.Close()
	}
}
