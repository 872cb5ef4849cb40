package tensor

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gamp-ml/gamp/backend"
)

// Tensor is an n-dimensional array on a device, with autograd. Views (Reshape, Permute,
// Slice, …) share storage with the tensor they come from.
type Tensor struct {
	ref     *storageRef
	shape   Shape
	strides []int
	offset  int
	dtype   DType
	device  Device
	ctx     *Context

	requiresGrad bool
	grad         *Tensor
	// gradLow, when set, is the leaf's gradient still in the half dtype a cast's
	// backward received it in: grad is nil and the float32 gradient is gradLow widened,
	// made by Grad on first use (see deferWiden). gradMu serialises that widening.
	gradLow atomic.Pointer[Tensor]
	gradMu  sync.Mutex
	node    *node
	hooks   []func(*Tensor) *Tensor
	name    string
	origin  string // creating source line, when debug tracking is on

	// released is set once the tensor gave up its storage. It lives in its own
	// allocation so the GC cleanup can watch it without keeping the tensor alive.
	released *atomic.Bool
}

// storageRef counts the tensors that share a storage, so the storage is freed exactly
// when the last of them is released.
type storageRef struct {
	s    backend.Storage
	b    backend.Backend
	refs atomic.Int32
}

func (r *storageRef) retain() { r.refs.Add(1) }

func (r *storageRef) release() {
	if n := r.refs.Add(-1); n == 0 {
		r.b.Free(r.s)
	} else if n < 0 {
		panic("tensor: storage released more times than retained")
	}
}

var defaultDevice atomic.Value // Device

// DefaultDevice is the device new tensors land on when no WithDevice option is given
// (initially CPU).
func DefaultDevice() Device {
	if d, ok := defaultDevice.Load().(Device); ok {
		return d
	}
	return CPU
}

// SetDefaultDevice changes the device new tensors are created on. It returns an error
// if the device cannot be opened.
func SetDefaultDevice(d Device) error {
	if _, err := backend.Get(d); err != nil {
		return err
	}
	defaultDevice.Store(d)
	return nil
}

// allocTensor allocates a contiguous tensor in c (nil: untracked). It panics with an
// *backend.OOMError when the device is out of memory (see CatchOOM).
func allocTensor(c *Context, dt DType, dev Device, shape Shape) *Tensor {
	return allocWith(c, dt, dev, shape, false)
}

// uninitAllocator is implemented by backends that can hand out storage without zeroing
// it (cpu.Backend.AllocUninit).
type uninitAllocator interface {
	AllocUninit(dt backend.DType, n int) (backend.Storage, error)
}

// allocOut is allocTensor for an op's output that the kernel called next writes in
// full: where the backend can, the storage is not zeroed first, which saves a pass over
// memory per op. Use allocTensor whenever a kernel might leave an element unwritten.
func allocOut(c *Context, dt DType, dev Device, shape Shape) *Tensor {
	return allocWith(c, dt, dev, shape, true)
}

func allocWith(c *Context, dt DType, dev Device, shape Shape, uninit bool) *Tensor {
	b, err := backend.Get(dev)
	if err != nil {
		panic(fmt.Errorf("tensor: %w", err))
	}
	for _, d := range shape {
		if d < 0 {
			panic(&OpError{Op: "alloc", Msg: fmt.Sprintf("negative dimension in shape %v", shape)})
		}
	}
	var s backend.Storage
	if u, ok := b.(uninitAllocator); ok && uninit {
		s, err = u.AllocUninit(dt, shape.Numel())
	} else {
		s, err = b.Alloc(dt, shape.Numel())
	}
	if err != nil {
		panic(err)
	}
	ref := &storageRef{s: s, b: b}
	ref.refs.Store(1)
	t := &Tensor{ref: ref, shape: shape.Clone(), strides: contiguousStrides(shape), dtype: dt, device: dev, released: new(atomic.Bool)}
	adopt(c, t)
	return t
}

// adopt puts t under c's memory scope, or, with no scope, under a GC cleanup as a last
// resort (tensors outside any Context should be Released explicitly).
func adopt(c *Context, t *Tensor) {
	t.ctx = c
	if debugTracking.Load() {
		t.origin = callerLine()
		trackLive(t)
	}
	if c != nil {
		c.track(t)
		return
	}
	runtime.AddCleanup(t, func(r *releaseToken) { r.run() }, &releaseToken{ref: t.ref, done: t.released})
}

// adoptInto moves an untracked tensor (made by allocTensor(nil, …)) under c.
func adoptInto(c *Context, t *Tensor) {
	if c != nil {
		t.ctx = c
		c.track(t)
	}
}

// releaseToken lets a GC cleanup release a tensor's storage without referencing the
// tensor itself.
type releaseToken struct {
	ref  *storageRef
	done *atomic.Bool
}

func (r *releaseToken) run() {
	if r.done.CompareAndSwap(false, true) {
		r.ref.release()
	}
}

// view makes a tensor that shares t's storage with another shape/strides/offset.
func (t *Tensor) view(c *Context, shape Shape, strides []int, offset int) *Tensor {
	t.mustLive("view")
	t.ref.retain()
	v := &Tensor{ref: t.ref, shape: shape, strides: strides, offset: offset, dtype: t.dtype, device: t.device, released: new(atomic.Bool)}
	adopt(c, v)
	return v
}

// Release frees this tensor's hold on its storage now. Using it afterwards panics.
// Tensors created inside a Context are released when the Context closes; Release is
// for the rest, and is safe to call more than once.
func (t *Tensor) Release() {
	if t == nil {
		return
	}
	if t.released.CompareAndSwap(false, true) {
		t.ref.release()
		untrackLive(t)
	}
}

// Released reports whether the tensor's storage was released.
func (t *Tensor) Released() bool { return t.released.Load() }

func (t *Tensor) mustLive(op string) {
	if t.released.Load() {
		panic(&OpError{Op: op, Msg: fmt.Sprintf("use of released tensor %v %s (it was released by Release or by closing its Context; Keep it to use it afterwards)", t.shape, t.dtype)})
	}
}

// Shape returns the tensor's shape (do not modify it).
func (t *Tensor) Shape() Shape { return t.shape }

// Dim returns the number of dimensions.
func (t *Tensor) Dim() int { return len(t.shape) }

// Size returns the size of dimension d (negative counts from the end).
func (t *Tensor) Size(d int) int { return t.shape[t.axis("Size", d)] }

// Numel returns the number of elements.
func (t *Tensor) Numel() int { return t.shape.Numel() }

// DType returns the element type.
func (t *Tensor) DType() DType { return t.dtype }

// Device returns the device holding the tensor.
func (t *Tensor) Device() Device { return t.device }

// Context returns the context the tensor flows in (nil: none).
func (t *Tensor) Context() *Context { return t.ctx }

// Strides returns the element strides (do not modify them).
func (t *Tensor) Strides() []int { return t.strides }

// IsContiguous reports whether the tensor is dense and row-major.
func (t *Tensor) IsContiguous() bool { return t.bview().Contiguous() }

// Name returns the name set by SetName (parameters carry their module path).
func (t *Tensor) Name() string { return t.name }

// SetName names the tensor (used in reports and errors).
func (t *Tensor) SetName(n string) *Tensor { t.name = n; return t }

// Storage exposes the backing storage and the element offset of the first element,
// for backends and optimizers that work on raw buffers.
func (t *Tensor) Storage() (backend.Storage, int) { t.mustLive("Storage"); return t.ref.s, t.offset }

// Backend returns the backend holding the tensor.
func (t *Tensor) Backend() backend.Backend { return t.ref.b }

func (t *Tensor) bview() backend.View {
	return backend.View{S: t.ref.s, Offset: t.offset, Shape: t.shape, Strides: t.strides}
}

// axis normalises a possibly negative dimension index.
func (t *Tensor) axis(op string, d int) int {
	n := len(t.shape)
	if d < 0 {
		d += n
	}
	if d < 0 || d >= n {
		fail(op, []*Tensor{t}, "dimension %d out of range for a %d-d tensor", d, n)
	}
	return d
}

func (t *Tensor) String() string {
	if t.released.Load() {
		return fmt.Sprintf("Tensor(%v, %s, %s, released)", t.shape, t.dtype, t.device)
	}
	if t.Numel() <= 16 {
		return fmt.Sprintf("Tensor(%v, %s, %s, %v)", t.shape, t.dtype, t.device, t.Float64s())
	}
	return fmt.Sprintf("Tensor(%v, %s, %s)", t.shape, t.dtype, t.device)
}

// --- creation

// Empty returns an uninitialised-looking (in fact zeroed) tensor of the given shape.
func Empty(shape Shape, opts ...Option) *Tensor {
	o := buildOptions(Float32, opts)
	t := allocTensor(o.ctx, o.dtype, o.device, shape)
	t.requiresGrad = o.requiresGrad
	return t
}

// Zeros returns a tensor of zeros.
func Zeros(shape Shape, opts ...Option) *Tensor { return Empty(shape, opts...) }

// Ones returns a tensor of ones.
func Ones(shape Shape, opts ...Option) *Tensor { return Full(shape, 1, opts...) }

// Full returns a tensor filled with v.
func Full(shape Shape, v float64, opts ...Option) *Tensor {
	t := Empty(shape, opts...)
	t.ref.b.Fill(t.bview(), v)
	return t
}

// Scalar returns a 0-d tensor holding v.
func Scalar(v float64, opts ...Option) *Tensor { return Full(Shape{}, v, opts...) }

// Arange returns [start, start+step, …) with n = ceil((end-start)/step) elements.
func Arange(start, end, step float64, opts ...Option) *Tensor {
	if step == 0 || (end-start)/step < 0 {
		panic(&OpError{Op: "arange", Msg: fmt.Sprintf("bad range start=%g end=%g step=%g", start, end, step)})
	}
	n := int(math.Ceil((end - start) / step))
	t := Empty(Shape{n}, opts...)
	t.ref.b.Arange(t.ref.s, n, start, step)
	return t
}

// Rand returns uniform draws in [0, 1) from the context's (or the device's default)
// generator.
func Rand(shape Shape, opts ...Option) *Tensor {
	t := Empty(shape, opts...)
	rng := t.ctx.generator(t.device).Next(uint64(t.Numel()))
	t.ref.b.RandUniform(t.ref.s, t.Numel(), rng, 0, 1)
	return t
}

// Randn returns standard normal draws.
func Randn(shape Shape, opts ...Option) *Tensor {
	t := Empty(shape, opts...)
	rng := t.ctx.generator(t.device).Next(2 * uint64(t.Numel()))
	t.ref.b.RandNormal(t.ref.s, t.Numel(), rng, 0, 1)
	return t
}

// Element is a Go type a tensor can be built from or copied to.
type Element interface {
	float32 | float64 | int32 | int64 | bool
}

func dtypeOf[T Element]() DType {
	var z T
	switch any(z).(type) {
	case float32:
		return Float32
	case float64:
		return Float64
	case int32:
		return Int32
	case int64:
		return Int64
	}
	return Bool
}

// FromSlice builds a tensor from data with the given shape (nil shape: 1-d). The dtype
// defaults to data's type; WithDType converts (to Float16 with round to nearest even).
func FromSlice[T Element](data []T, shape Shape, opts ...Option) *Tensor {
	if shape == nil {
		shape = Shape{len(data)}
	}
	if shape.Numel() != len(data) {
		panic(&OpError{Op: "FromSlice", Msg: fmt.Sprintf("%d values do not fill shape %v (%d elements)", len(data), shape, shape.Numel())})
	}
	o := buildOptions(dtypeOf[T](), opts)
	// Upload and Copy below write every element: no zeroing first (allocOut).
	src := allocOut(nil, dtypeOf[T](), o.device, shape)
	src.ref.b.Upload(src.ref.s, 0, data)
	if o.dtype == src.dtype {
		src.ctx = nil
		if o.ctx != nil {
			// Move under the context: it owns the storage from now on.
			src.released.Store(true)
			t := &Tensor{ref: src.ref, shape: src.shape, strides: src.strides, dtype: src.dtype, device: src.device, released: new(atomic.Bool)}
			adopt(o.ctx, t)
			t.requiresGrad = o.requiresGrad
			return t
		}
		src.requiresGrad = o.requiresGrad
		return src
	}
	t := allocOut(o.ctx, o.dtype, o.device, shape)
	t.ref.b.Copy(t.bview(), src.bview())
	src.Release()
	t.requiresGrad = o.requiresGrad
	return t
}

// ZerosLike returns zeros with t's shape, dtype and device (options override).
func ZerosLike(t *Tensor, opts ...Option) *Tensor { return Empty(t.shape, likeOpts(t, opts)...) }

// OnesLike returns ones with t's shape, dtype and device.
func OnesLike(t *Tensor, opts ...Option) *Tensor { return Full(t.shape, 1, likeOpts(t, opts)...) }

// FullLike returns v everywhere with t's shape, dtype and device.
func FullLike(t *Tensor, v float64, opts ...Option) *Tensor {
	return Full(t.shape, v, likeOpts(t, opts)...)
}

// RandLike returns uniform draws with t's shape, dtype and device.
func RandLike(t *Tensor, opts ...Option) *Tensor { return Rand(t.shape, likeOpts(t, opts)...) }

// RandnLike returns normal draws with t's shape, dtype and device.
func RandnLike(t *Tensor, opts ...Option) *Tensor { return Randn(t.shape, likeOpts(t, opts)...) }

func likeOpts(t *Tensor, opts []Option) []Option {
	base := []Option{WithDType(t.dtype), WithDevice(t.device), WithContext(t.ctx)}
	return append(base, opts...)
}

// --- reading out

// Item returns the value of a one-element tensor as float64.
func (t *Tensor) Item() float64 {
	if t.Numel() != 1 {
		fail("Item", []*Tensor{t}, "Item needs exactly one element, the tensor has %d", t.Numel())
	}
	return t.Float64s()[0]
}

// Float64s copies the elements (row-major) into a new []float64.
func (t *Tensor) Float64s() []float64 { return readAs[float64](t) }

// Float32s copies the elements (row-major) into a new []float32.
func (t *Tensor) Float32s() []float32 { return readAs[float32](t) }

// Int64s copies the elements into a new []int64 (floats truncate toward zero).
func (t *Tensor) Int64s() []int64 { return readAs[int64](t) }

// Int32s copies the elements into a new []int32.
func (t *Tensor) Int32s() []int32 { return readAs[int32](t) }

// Bools copies the elements into a new []bool (non-zero is true).
func (t *Tensor) Bools() []bool { return readAs[bool](t) }

// Uint16s returns the raw bits of a Float16 or BFloat16 tensor.
func (t *Tensor) Uint16s() []uint16 {
	if !t.dtype.IsHalf() {
		fail("Uint16s", []*Tensor{t}, "raw 16-bit access needs a float16 or bfloat16 tensor")
	}
	c := t.contiguousCopy()
	defer c.Release()
	out := make([]uint16, c.Numel())
	c.ref.b.Download(out, c.ref.s, c.offset)
	return out
}

func readAs[T Element](t *Tensor) []T {
	t.mustLive("read")
	want := dtypeOf[T]()
	src := t
	if t.dtype != want || !t.IsContiguous() {
		src = allocOut(nil, want, t.device, t.shape)
		src.ref.b.Copy(src.bview(), t.bview())
		defer src.Release()
	}
	out := make([]T, t.Numel())
	if err := src.ref.b.Synchronize(); err != nil {
		panic(err)
	}
	src.ref.b.Download(out, src.ref.s, src.offset)
	return out
}

// contiguousCopy returns an untracked contiguous copy of t (the caller releases it).
func (t *Tensor) contiguousCopy() *Tensor {
	c := allocOut(nil, t.dtype, t.device, t.shape)
	c.ref.b.Copy(c.bview(), t.bview())
	return c
}

// BestDevice returns the best device present: the first CUDA device when its backend
// opens, else the CPU.
func BestDevice() Device {
	if _, err := backend.Get(CUDA(0)); err == nil {
		return CUDA(0)
	}
	return CPU
}

// OpenDevice parses a device name ("cpu", "cpu:1", "cuda:0"; "" for BestDevice) and
// checks that its backend opens, so a command can reject a missing device up front.
func OpenDevice(name string) (Device, error) {
	if name == "" {
		return BestDevice(), nil
	}
	d, err := ParseDevice(name)
	if err != nil {
		return d, err
	}
	if _, err := backend.Get(d); err != nil {
		return d, fmt.Errorf("device %s is not available: %w", d, err)
	}
	return d, nil
}
