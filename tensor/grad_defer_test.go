package tensor

import (
	"math"
	"sync"
	"testing"
	"time"

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

// deferObserver is an Observer recording the backward reports of cast nodes; with
// deferring set it is a WidenDeferrer saying yes.
type deferObserver struct {
	deferring bool
	casts     [][]*Tensor // gradIn of each cast backward
}

func (o *deferObserver) Begin(*Context, *Op)                           {}
func (o *deferObserver) Forward(*Context, *Op, []*Tensor, *Tensor) any { return nil }
func (o *deferObserver) Backward(op *Op, _ any, _ *Tensor, gin []*Tensor, _ time.Duration) {
	if op.Name() == "cast" {
		o.casts = append(o.casts, append([]*Tensor(nil), gin...))
	}
}

type deferringObserver struct{ *deferObserver }

func (o deferringObserver) DeferWiden() bool { return o.deferring }

// TestDeferredCastGradObserved checks that an Observer that is a WidenDeferrer saying
// yes leaves the weight cast's gradient deferred and hears of the cast with a nil
// gradient, while any other Observer gets it widened at once and hears of the float32
// gradient; the final gradients agree bit for bit.
func TestDeferredCastGradObserved(t *testing.T) {
	x := Randn(Shape{5, 7})
	w0 := Randn(Shape{7, 3})
	var bits [][]uint32
	for _, tc := range []struct {
		name     string
		obs      Observer
		deferred bool
	}{
		{"none", nil, true},
		{"plain observer", &deferObserver{}, false},
		{"WidenDeferrer no", deferringObserver{&deferObserver{deferring: false}}, false},
		{"WidenDeferrer yes", deferringObserver{&deferObserver{deferring: true}}, true},
	} {
		w := w0.Detach().SetRequiresGrad(true)
		c := NewContext(UseObserver(tc.obs))
		ac := c.WithAutocast(castAllPolicy{low: BFloat16})
		ac.Bind(x).MatMul(w).Cast(Float32).Sum().Backward()
		ac.Close()
		c.Close()
		require.Equal(t, tc.deferred, w.lowGrad() != nil, tc.name)
		var rec *deferObserver
		switch o := tc.obs.(type) {
		case *deferObserver:
			rec = o
		case deferringObserver:
			rec = o.deferObserver
		}
		if rec != nil {
			// The weight's cast; x's cast has no gradient to send (x needs none).
			require.NotEmpty(t, rec.casts, tc.name)
			found := false
			for _, gin := range rec.casts {
				if len(gin) == 1 && (gin[0] == nil) == tc.deferred {
					found = true
				}
			}
			require.True(t, found, "%s: cast backward reports %v", tc.name, rec.casts)
		}
		bits = append(bits, w.Grad().f32bitsForTest())
		w.ZeroGrad()
	}
	for i := 1; i < len(bits); i++ {
		require.Equal(t, bits[0], bits[i])
	}
}
