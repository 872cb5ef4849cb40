package tensor

import (
	"errors"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gamp-ml/gamp/backend"
	"github.com/stretchr/testify/require"
)

// opError runs f and returns the *OpError it panics with (nil if none).
func opError(f func()) (e *OpError) {
	defer func() {
		if r := recover(); r != nil {
			if oe, ok := r.(*OpError); ok {
				e = oe
				return
			}
			panic(r)
		}
	}()
	f()
	return nil
}

func cpuAllocated(t *testing.T, dev Device) int64 {
	t.Helper()
	b, err := backend.Get(dev)
	require.NoError(t, err)
	return b.MemoryStats().Allocated
}

func TestCreation(t *testing.T) {
	c := NewContext()
	defer c.Close()
	z := Zeros(Shape{2, 3}, WithContext(c))
	require.Equal(t, []float64{0, 0, 0, 0, 0, 0}, z.Float64s())
	require.Equal(t, Float32, z.DType())
	o := Ones(Shape{2}, WithDType(Float16), WithContext(c))
	require.Equal(t, []float64{1, 1}, o.Float64s())
	f := Full(Shape{3}, 0.1, WithDType(BFloat16), WithContext(c))
	// 0.1 rounds to the nearest bfloat16, 0.10009765625.
	require.Equal(t, 0.10009765625, f.Float64s()[0])
	a := Arange(0, 5, 1, WithContext(c))
	require.Equal(t, []float64{0, 1, 2, 3, 4}, a.Float64s())
	a2 := Arange(1, 2, 0.25, WithContext(c))
	require.Equal(t, []float64{1, 1.25, 1.5, 1.75}, a2.Float64s())
	s := FromSlice([]float32{1, 2, 3, 4, 5, 6}, Shape{2, 3}, WithContext(c))
	require.Equal(t, Shape{2, 3}, s.Shape())
	require.Equal(t, []float32{1, 2, 3, 4, 5, 6}, s.Float32s())
	h := FromSlice([]float64{1, 65504, 65520, 1e-8}, nil, WithDType(Float16), WithContext(c))
	v := h.Float64s()
	require.Equal(t, 65504.0, v[1])
	require.True(t, math.IsInf(v[2], 1), "65520 overflows fp16")
	require.Equal(t, 0.0, v[3], "1e-8 underflows fp16")
	i := FromSlice([]int64{3, 1, 2}, nil, WithContext(c))
	require.Equal(t, Int64, i.DType())
	require.Equal(t, []int64{3, 1, 2}, i.Int64s())
	require.Equal(t, 42.0, Scalar(42, WithContext(c)).Item())
	require.NotNil(t, opError(func() { FromSlice([]float32{1, 2, 3}, Shape{2, 2}) }))
}

func TestLikeConstructorsFollowDTypeDeviceAndContext(t *testing.T) {
	c := NewContext()
	defer c.Close()
	x := Zeros(Shape{4, 5}, WithDType(BFloat16), WithDevice(CPUDevice(1)), WithContext(c))
	for _, y := range []*Tensor{ZerosLike(x), OnesLike(x), FullLike(x, 3), RandLike(x), RandnLike(x)} {
		require.Equal(t, x.Shape(), y.Shape())
		require.Equal(t, BFloat16, y.DType())
		require.Equal(t, CPUDevice(1), y.Device())
		require.Same(t, c, y.Context())
	}
	y := OnesLike(x, WithDType(Float32))
	require.Equal(t, Float32, y.DType())
}

func TestRandReproducible(t *testing.T) {
	g := NewGenerator(7)
	c := NewContext(UseGenerator(g))
	defer c.Close()
	st := g.State()
	a := Randn(Shape{1000}, WithContext(c)).Float64s()
	g.SetState(st)
	b := Randn(Shape{1000}, WithContext(c)).Float64s()
	require.Equal(t, a, b)
	var mean, sq float64
	for _, v := range a {
		mean += v
		sq += v * v
	}
	mean /= 1000
	require.InDelta(t, 0, mean, 0.1)
	require.InDelta(t, 1, sq/1000-mean*mean, 0.15)
	u := Rand(Shape{1000}, WithContext(c)).Float64s()
	for _, v := range u {
		require.True(t, v >= 0 && v < 1)
	}
}

func TestViewsShareStorage(t *testing.T) {
	c := NewContext()
	defer c.Close()
	x := FromSlice([]float32{1, 2, 3, 4, 5, 6}, Shape{2, 3}, WithContext(c))
	xt := x.T()
	require.Equal(t, Shape{3, 2}, xt.Shape())
	require.False(t, xt.IsContiguous())
	require.Equal(t, []float32{1, 4, 2, 5, 3, 6}, xt.Float32s())
	r := xt.Reshape(6)
	require.Equal(t, []float32{1, 4, 2, 5, 3, 6}, r.Float32s())
	require.Equal(t, Shape{1, 2, 3}, x.Unsqueeze(0).Shape())
	require.Equal(t, Shape{2, 3}, x.Unsqueeze(0).Squeeze(0).Shape())
	require.Equal(t, Shape{3, 2}, x.Reshape(-1, 2).Shape())
	e := FromSlice([]float32{1, 2}, Shape{2, 1}, WithContext(c)).Expand(2, 3)
	require.Equal(t, []float32{1, 1, 1, 2, 2, 2}, e.Float32s())
	require.NotNil(t, opError(func() { x.Reshape(4) }))
}

func TestCastRoundsAndGradientCastsBack(t *testing.T) {
	c := NewContext()
	defer c.Close()
	x := FromSlice([]float32{1.0009765625, 3.14159}, nil, WithGrad())
	defer x.Release()
	h := c.Bind(x).Cast(Float16)
	require.Equal(t, Float16, h.DType())
	require.Equal(t, []uint16{0x3c01, 0x4248}, h.Uint16s())
	h.Cast(Float32).Sum().Backward()
	require.Equal(t, Float32, x.Grad().DType(), "the gradient of an FP32 leaf lands in FP32")
	require.Equal(t, []float32{1, 1}, x.Grad().Float32s())
}

func TestBroadcastAdd(t *testing.T) {
	c := NewContext()
	defer c.Close()
	a := FromSlice([]float32{1, 2, 3}, Shape{3, 1}, WithContext(c))
	b := FromSlice([]float32{10, 20}, Shape{2}, WithContext(c))
	require.Equal(t, []float32{11, 21, 12, 22, 13, 23}, Add(a, b).Float32s())
	require.NotNil(t, opError(func() { Add(a, FromSlice([]float32{1, 2}, Shape{1, 2, 2})) }))
	// Mixed dtypes promote to the widest.
	h := FromSlice([]float32{1, 2}, nil, WithDType(Float16), WithContext(c))
	f := FromSlice([]float32{0.5, 0.25}, nil, WithContext(c))
	s := Add(h, f)
	require.Equal(t, Float32, s.DType())
	require.Equal(t, []float32{1.5, 2.25}, s.Float32s())
}

func TestGradientsAccumulateAcrossBackwardCalls(t *testing.T) {
	w := FromSlice([]float64{1, 2, 3}, nil, WithGrad())
	defer w.Release()
	for i := 0; i < 3; i++ {
		c := NewContext()
		x := FromSlice([]float64{1, 1, 1}, nil, WithContext(c))
		c.Bind(w).Mul(x).Sum().Backward()
		c.Close()
	}
	require.Equal(t, []float64{3, 3, 3}, w.Grad().Float64s())
	w.ZeroGrad()
	require.Nil(t, w.Grad())
}

func TestRetainGraph(t *testing.T) {
	c := NewContext()
	defer c.Close()
	w := FromSlice([]float64{2}, nil, WithGrad(), WithContext(c))
	y := w.Mul(w).Sum()
	y.Backward(RetainGraph())
	y.Backward()
	require.Equal(t, []float64{8}, w.Grad().Float64s())
	require.NotNil(t, opError(func() { y.Backward() }), "a third backward through a freed graph is an error")
}

func TestHooksAndDetachAndNoGrad(t *testing.T) {
	c := NewContext()
	defer c.Close()
	w := FromSlice([]float64{1, 2}, nil, WithGrad(), WithContext(c))
	var seen []float64
	w.RegisterHook(func(g *Tensor) *Tensor {
		seen = g.Float64s()
		return g.MulScalar(10)
	})
	w.MulScalar(3).Sum().Backward()
	require.Equal(t, []float64{3, 3}, seen)
	require.Equal(t, []float64{30, 30}, w.Grad().Float64s())

	d := w.Detach()
	require.False(t, d.RequiresGrad())
	ng := c.NoGrad()
	y := ng.Bind(w).MulScalar(2)
	require.False(t, y.RequiresGrad(), "no graph is recorded under NoGrad")
	require.True(t, c.EnableGrad().Bind(w).MulScalar(2).RequiresGrad())
}

func TestDeviceMismatchPanicsNamingBothDevices(t *testing.T) {
	c := NewContext()
	defer c.Close()
	a := Ones(Shape{2}, WithContext(c))
	b := Ones(Shape{2}, WithDevice(CPUDevice(1)), WithContext(c))
	e := opError(func() { Add(a, b) })
	require.NotNil(t, e)
	require.Contains(t, e.Error(), "cpu:1")
	require.Contains(t, e.Error(), "different devices")
	// To moves the tensor; gradients flow back across devices.
	w := FromSlice([]float32{1, 2}, nil, WithGrad(), WithContext(c))
	s := Add(w.To(CPUDevice(1)), b).Sum()
	require.Equal(t, CPUDevice(1), s.Device())
	s.Backward()
	require.Equal(t, CPU, w.Grad().Device())
	require.Equal(t, []float32{1, 1}, w.Grad().Float32s())
}

func TestContextCloseReleasesEverything(t *testing.T) {
	dev := CPUDevice(2)
	before := cpuAllocated(t, dev)
	c := NewContext()
	x := Randn(Shape{64, 32}, WithDevice(dev), WithContext(c))
	y := x.Relu().MulScalar(2).T().Reshape(-1)
	_ = y.Sum()
	require.Greater(t, cpuAllocated(t, dev), before)
	kept := x.Exp()
	c.Keep(kept)
	c.Close()
	require.Equal(t, before+int64(64*32*4), cpuAllocated(t, dev), "only the kept tensor survives")
	require.Equal(t, 64*32, len(kept.Float32s()))
	kept.Release()
	require.Equal(t, before, cpuAllocated(t, dev))
	require.NotNil(t, opError(func() { x.Float32s() }), "a released tensor cannot be used")
}

// A small MLP trained for 1,000 steps: allocated bytes after step 1,000 equal those
// after step 1 (memory is released deterministically, not by the GC).
func TestThousandStepsLeakNothing(t *testing.T) {
	dev := CPUDevice(3)
	g := NewGenerator(1)
	init := NewContext(UseGenerator(g))
	w1 := Randn(Shape{16, 8}, WithDevice(dev), WithContext(init)).MulScalar(0.3)
	w2 := Randn(Shape{1, 16}, WithDevice(dev), WithContext(init)).MulScalar(0.3)
	init.Keep(w1, w2)
	init.Close()
	w1.SetRequiresGrad(true)
	w2.SetRequiresGrad(true)
	b1 := Zeros(Shape{16}, WithDevice(dev), WithGrad())
	params := []*Tensor{w1, w2, b1}
	var after1 int64
	var firstLoss, lastLoss float64
	for step := 1; step <= 1000; step++ {
		c := NewContext(UseGenerator(g))
		x := Randn(Shape{32, 8}, WithDevice(dev), WithContext(c))
		target := x.Sum(1).Unsqueeze(1).Tanh()
		h := Linear(x, w1, b1).Relu()
		out := Linear(h, w2, nil)
		loss := out.Sub(target).Square().Mean()
		loss.Backward()
		if step == 1 {
			firstLoss = loss.Item()
		}
		lastLoss = loss.Item()
		nc := c.NoGrad()
		for _, p := range params {
			upd := nc.Bind(p.Grad()).MulScalar(-0.05)
			p.ref.b.Binary(backend.Add, p.bview(), p.bview(), upd.bview())
			p.ZeroGrad()
		}
		c.Close()
		if step == 1 {
			after1 = cpuAllocated(t, dev)
		}
	}
	require.Equal(t, after1, cpuAllocated(t, dev))
	require.Less(t, lastLoss, firstLoss/2, "the model learned something")
	for _, p := range params {
		p.Release()
	}
}

// trivialPolicy casts every LowerPrecision op to Float16 and FP32 ops to Float32.
type trivialPolicy struct{ low DType }

func (p trivialPolicy) Category(op *Op, dev Device) CastCategory { return op.Category() }
func (p trivialPolicy) LowDType() DType                          { return p.low }

func TestAutocastHookCastsInputsAndCachesWeights(t *testing.T) {
	c := NewContext()
	defer c.Close()
	w := Randn(Shape{4, 3}).SetRequiresGrad(true)
	defer w.Release()
	ac := c.WithAutocast(trivialPolicy{Float16})
	x := ac.Bind(Randn(Shape{2, 3}, WithContext(c)))
	y := Linear(x, w, nil)
	require.Equal(t, Float16, y.DType(), "linear runs in the low dtype")
	require.Equal(t, 1, ac.CastCacheLen())
	y2 := Linear(x, w, nil)
	require.Equal(t, 1, ac.CastCacheLen(), "the weight is cast once per region")
	s := y2.Exp().Sum()
	require.Equal(t, Float32, s.DType(), "exp runs in float32")
	s.Add(y.Sum()).Backward()
	require.Equal(t, Float32, w.Grad().DType(), "the leaf gradient lands in FP32")
	// Float64 is never cast.
	d := ac.Bind(Randn(Shape{2, 3}, WithDType(Float64), WithContext(c)))
	require.Equal(t, Float64, MatMul(d, Randn(Shape{3, 2}, WithDType(Float64))).DType())
	ac.Close()
	require.Equal(t, 0, ac.CastCacheLen(), "the cache is dropped at region exit")
}

// Two goroutines, one under FP16 autocast and one in FP32, do not see each other's
// state: autocast lives in the Context, not in a global.
func TestAutocastStateIsPerContextAcrossGoroutines(t *testing.T) {
	var wg sync.WaitGroup
	dts := make([][]DType, 2)
	for gi := 0; gi < 2; gi++ {
		wg.Add(1)
		go func(gi int) {
			defer wg.Done()
			c := NewContext()
			defer c.Close()
			if gi == 0 {
				c = c.WithAutocast(trivialPolicy{Float16})
			}
			w := Randn(Shape{8, 8}, WithContext(c)).SetRequiresGrad(true)
			for i := 0; i < 200; i++ {
				x := c.Bind(Randn(Shape{4, 8}, WithContext(c)))
				y := Linear(x, w, nil)
				dts[gi] = append(dts[gi], y.DType())
				y.Cast(Float32).Sum().Backward()
			}
		}(gi)
	}
	wg.Wait()
	for _, d := range dts[0] {
		require.Equal(t, Float16, d)
	}
	for _, d := range dts[1] {
		require.Equal(t, Float32, d)
	}
}

func TestUnrelatedContextsPanic(t *testing.T) {
	a, b := NewContext(), NewContext()
	defer a.Close()
	defer b.Close()
	x := Ones(Shape{2}, WithContext(a))
	y := Ones(Shape{2}, WithContext(b))
	require.NotNil(t, opError(func() { Add(x, y) }))
	require.Equal(t, []float32{2, 2}, Add(x, a.Bind(y)).Float32s())
}

func TestCatchOOMWithMemoryCap(t *testing.T) {
	dev := CPUDevice(4)
	b, err := backend.Get(dev)
	require.NoError(t, err)
	b.SetMemoryLimit(1 << 20)
	defer b.SetMemoryLimit(0)
	c := NewContext()
	defer c.Close()
	err = CatchOOM(func() { Zeros(Shape{1 << 20}, WithDevice(dev), WithContext(c)) })
	require.Error(t, err)
	require.True(t, errors.Is(err, ErrOutOfMemory))
	var oom *backend.OOMError
	require.True(t, errors.As(err, &oom))
	require.Equal(t, int64(4<<20), oom.Requested)
	require.NoError(t, CatchOOM(func() { Zeros(Shape{1000}, WithDevice(dev), WithContext(c)) }))
}

func TestOpRegistryRowsHaveCategories(t *testing.T) {
	ops := Ops()
	require.NotEmpty(t, ops)
	m, ok := LookupOp("matmul")
	require.True(t, ok)
	require.Equal(t, LowerPrecision, m.Category())
	s, _ := LookupOp("sum")
	require.Equal(t, FP32, s.Category())
	a, _ := LookupOp("add")
	require.Equal(t, Promote, a.Category())
}

// A tensor outside every Context that nobody references is freed by the GC cleanup
// (the last resort: the token must not keep the tensor itself alive).
func TestUntrackedTensorFreedByGC(t *testing.T) {
	dev := CPUDevice(6)
	before := cpuAllocated(t, dev)
	func() { Zeros(Shape{1 << 16}, WithDevice(dev)) }()
	for i := 0; i < 50 && cpuAllocated(t, dev) != before; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, before, cpuAllocated(t, dev))
}

func TestOpenDevice(t *testing.T) {
	d, err := OpenDevice("")
	require.NoError(t, err)
	require.Equal(t, BestDevice(), d)
	d, err = OpenDevice("cpu:2")
	require.NoError(t, err)
	require.Equal(t, CPUDevice(2), d)
	_, err = OpenDevice("tpu:0")
	require.Error(t, err)
	_, err = OpenDevice("cpu:99")
	require.ErrorIs(t, err, backend.ErrNoDevice)
	// tensor does not link the CUDA backend (its tests do not import it either):
	// opening a GPU is an error that says which import registers it.
	_, err = OpenDevice("cuda:0")
	require.ErrorIs(t, err, backend.ErrNoDevice)
	require.Contains(t, err.Error(), `import _ "github.com/gamp-ml/gamp/cuda"`)
	require.Equal(t, CPU, BestDevice())
}
