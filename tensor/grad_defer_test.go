package tensor

import (
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// castGradStep runs, in an autocast region casting to low, a matmul of x with the
// float32 leaf w (so w reaches it through a weight cast) and backward from its sum.
func castGradStep(t *testing.T, w, x *Tensor, low DType) {
	t.Helper()
	c := NewContext()
	defer c.Close()
	ac := c.WithAutocast(castAllPolicy{low: low})
	defer ac.Close()
	ac.Bind(x).MatMul(w).Cast(Float32).Sum().Backward()
}

// TestDeferredCastGrad checks the deferred widening of a weight cast's gradient: the
// float32 leaf keeps the half gradient until Grad, which returns bit for bit the
// gradient the immediate widening gives (a no-op hook keeps a twin leaf on that path),
// also when a second backward accumulates into it.
func TestDeferredCastGrad(t *testing.T) {
	for _, low := range []DType{BFloat16, Float16} {
		x := Randn(Shape{5, 7})
		w0 := Randn(Shape{7, 3})
		w := w0.Detach().SetRequiresGrad(true)
		ref := w0.Contiguous().MulScalar(1).SetRequiresGrad(true)
		ref.RegisterHook(func(g *Tensor) *Tensor { return nil })

		castGradStep(t, w, x, low)
		castGradStep(t, ref, x, low)
		lg := w.lowGrad()
		require.NotNil(t, lg, "%s: the gradient was widened at once", low)
		require.Equal(t, low, lg.DType())
		require.Nil(t, w.grad)
		require.Nil(t, ref.lowGrad(), "a leaf with hooks deferred its gradient")
		g := w.Grad()
		require.Nil(t, w.lowGrad())
		require.True(t, lg.Released(), "the half gradient outlived its widening")
		require.Equal(t, Float32, g.DType())
		require.Equal(t, ref.Grad().f32bitsForTest(), g.f32bitsForTest())
		require.Same(t, g, w.Grad())

		// Accumulation: a deferred gradient is widened before the next one is added.
		w.ZeroGrad()
		ref.ZeroGrad()
		for range 2 {
			castGradStep(t, w, x, low)
			castGradStep(t, ref, x, low)
		}
		require.Nil(t, w.lowGrad())
		require.Equal(t, ref.Grad().f32bitsForTest(), w.Grad().f32bitsForTest())
		w.ZeroGrad()
		ref.ZeroGrad()
	}
}

// TestDeferredCastGradDropped checks that SetGrad and ZeroGrad release a deferred
// gradient, and that the memory is back afterwards.
func TestDeferredCastGradDropped(t *testing.T) {
	x := Randn(Shape{64, 32})
	w := Randn(Shape{32, 48}).SetRequiresGrad(true)
	before := cpuAllocated(t, CPU)
	castGradStep(t, w, x, BFloat16)
	lg := w.lowGrad()
	require.NotNil(t, lg)
	w.ZeroGrad()
	require.True(t, lg.Released())
	require.Nil(t, w.Grad())
	require.Equal(t, before, cpuAllocated(t, CPU))

	castGradStep(t, w, x, BFloat16)
	lg = w.lowGrad()
	require.NotNil(t, lg)
	g := Ones(Shape{32, 48})
	w.SetGrad(g)
	require.True(t, lg.Released())
	require.Nil(t, w.lowGrad())
	require.Same(t, g, w.Grad())
	w.ZeroGrad()
}

// TestDeferredCastGradConcurrentGrad has several goroutines ask for a deferred
// gradient at once (run with -race): one widening, one tensor for all.
func TestDeferredCastGradConcurrentGrad(t *testing.T) {
	x := Randn(Shape{16, 16})
	w := Randn(Shape{16, 16}).SetRequiresGrad(true)
	castGradStep(t, w, x, BFloat16)
	require.NotNil(t, w.lowGrad())
	var wg sync.WaitGroup
	got := make([]*Tensor, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = w.Grad()
		}()
	}
	wg.Wait()
	for _, g := range got {
		require.Same(t, got[0], g)
	}
	w.ZeroGrad()
}

func (t *Tensor) f32bitsForTest() []uint32 {
	v := t.Float32s()
	out := make([]uint32, len(v))
	for i, f := range v {
		out[i] = math.Float32bits(f)
	}
	return out
}

// TestFromSliceOverwritesRecycledMemory checks FromSlice, which no longer zeroes the
// storage before uploading, on a block the allocator hands back dirty: the values are
// data's, also with a dtype conversion.
func TestFromSliceOverwritesRecycledMemory(t *testing.T) {
	const n = 4096
	data := make([]float32, n)
	for i := range data {
		data[i] = float32(i%17) - 8
	}
	for _, dt := range []DType{Float32, BFloat16} {
		for range 3 {
			junk := Full(Shape{n}, math.NaN())
			junk16 := Full(Shape{n}, math.Inf(1), WithDType(dt))
			junk.Release()
			junk16.Release()
			x := FromSlice(data, Shape{64, 64}, WithDType(dt))
			got := x.Float32s()
			for i := range data {
				require.Equal(t, data[i], got[i], "%s element %d", dt, i)
			}
			x.Release()
		}
	}
}
