package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/cuda/internal/cu"
	"github.com/gamp-ml/gamp/kernels"
)

// streamNonBlocking is CU_STREAM_NON_BLOCKING: the stream does not synchronise with the
// legacy default stream.
const streamNonBlocking = 1

// blasWorkspace is the cuBLAS workspace per device (PyTorch uses 4 MiB + 8 MiB on Hopper).
const blasWorkspace = 32 << 20

// device is one CUDA device: a worker goroutine locked to an OS thread on which the
// device's primary context is current runs every driver call for the device (the
// context belongs to the thread; goroutines move between threads).
type device struct {
	index        int
	bdev         backend.Device
	cud          cu.Device
	ctx          cu.Context
	name         string
	major, minor int
	sms          int
	total        uint64

	work   chan func()
	failed atomic.Pointer[failure] // the first panic of posted work

	compute cu.Stream // where every kernel, copy and GEMM of the backend is queued
	blas    cu.BlasHandle
	blasWS  cu.DevicePtr
	alloc   *cachingAllocator
	scratch cu.DevicePtr // 256 bytes for flags the worker reads back within one call
	args    kernels.Args // the launch parameter buffer, reused (worker only)

	modMu sync.Mutex
	mods  map[string]cu.Module   // kernel source file → loaded module
	funcs map[string]cu.Function // kernel name → function
	peers map[int]bool           // peer access enabled (true) or impossible (false)

	tuneMu sync.Mutex
	tuned  map[cu.LtMatmulSpec]tuned // autotuning result per GEMM shape
	lt     cu.LtHandle               // cuBLASLt handle, created when autotuning first runs
}

func startDevice(index int) (*device, error) {
	d := &device{
		index: index,
		bdev:  backend.CUDA(index),
		work:  make(chan func(), 1024),
		mods:  map[string]cu.Module{},
		funcs: map[string]cu.Function{},
		tuned: map[cu.LtMatmulSpec]tuned{},
	}
	errc := make(chan error)
	go d.run(errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	return d, nil
}

// run is the device worker: it never unlocks its thread.
func (d *device) run(errc chan<- error) {
	runtime.LockOSThread()
	err := d.setup()
	errc <- err
	if err != nil {
		return
	}
	for f := range d.work {
		f()
	}
}

func (d *device) setup() (err error) {
	wrap := func(what string, e error) error {
		return fmt.Errorf("cuda:%d: %s: %w", d.index, what, e)
	}
	if d.cud, err = cu.DeviceGet(d.index); err != nil {
		return wrap("cuDeviceGet", err)
	}
	if d.ctx, err = cu.PrimaryCtxRetain(d.cud); err != nil {
		return wrap("retaining the primary context", err)
	}
	if err = cu.CtxSetCurrent(d.ctx); err != nil {
		return wrap("making the primary context current", err)
	}
	if d.name, err = d.cud.Name(); err != nil {
		return wrap("device name", err)
	}
	if d.major, err = d.cud.Attribute(cu.AttrComputeCapabilityMajor); err != nil {
		return wrap("compute capability", err)
	}
	if d.minor, err = d.cud.Attribute(cu.AttrComputeCapabilityMinor); err != nil {
		return wrap("compute capability", err)
	}
	if d.sms, err = d.cud.Attribute(cu.AttrMultiprocessorCount); err != nil {
		return wrap("multiprocessor count", err)
	}
	if d.total, err = d.cud.TotalMem(); err != nil {
		return wrap("total memory", err)
	}
	if d.compute, err = cu.StreamCreate(streamNonBlocking); err != nil {
		return wrap("creating the compute stream", err)
	}
	d.alloc = newCachingAllocator(d.bdev, rawDeviceMemory{}, &eventPool{})
	if d.scratch, err = cu.MemAlloc(256); err != nil {
		return wrap("allocating scratch memory", err)
	}
	if d.blas, err = cu.BlasCreate(); err != nil {
		return wrap("cublasCreate (is libcublas installed? set GAMP_LIBCUBLAS)", err)
	}
	if err = cu.BlasSetStream(d.blas, d.compute); err != nil {
		return wrap("cublasSetStream", err)
	}
	if d.blasWS, err = cu.MemAlloc(blasWorkspace); err != nil {
		return wrap("allocating the cuBLAS workspace", err)
	}
	if err = cu.BlasSetWorkspace(d.blas, d.blasWS, blasWorkspace); err != nil {
		return wrap("cublasSetWorkspace", err)
	}
	return nil
}

// do runs f on the device worker and waits for it. A panic in f is re-raised on the
// caller's goroutine, so misuse and driver errors surface where the op was called. It
// first re-raises the failure of any work posted earlier (see post).
func (d *device) do(f func()) {
	d.checkFailed()
	var p any
	done := make(chan struct{})
	d.work <- func() {
		defer func() {
			p = recover()
			close(done)
		}()
		f()
	}
	<-done
	if p != nil {
		panic(p)
	}
	d.checkFailed()
}

// post queues f on the worker and returns without waiting: kernel launches, copies
// between device buffers and frees, which return nothing, so the caller goes on to the
// next op while the worker talks to the driver. Work runs in the order it was queued
// (one queue for do and post). A panic in posted work — a driver error, which CUDA keeps
// sticky anyway — is kept and re-raised by every later call on the device.
func (d *device) post(f func()) {
	d.checkFailed()
	d.work <- func() {
		defer func() {
			if p := recover(); p != nil {
				d.failed.CompareAndSwap(nil, &failure{p})
			}
		}()
		f()
	}
}

// failure is a panic raised by posted work.
type failure struct{ v any }

// checkFailed re-raises the first failure of posted work.
func (d *device) checkFailed() {
	if f := d.failed.Load(); f != nil {
		panic(fmt.Errorf("cuda:%d: earlier queued work failed (the device is unusable until the program restarts): %v", d.index, f.v))
	}
}

// drain waits until every queued piece of work has run.
func (d *device) drain() { d.do(func() {}) }

// doErr runs f on the worker and returns its error.
func (d *device) doErr(f func() error) error {
	var err error
	d.do(func() { err = f() })
	return err
}

// must panics with err, naming the device: driver failures inside kernels have no error
// return in backend.Backend (as a CUDA error is sticky, the program cannot go on).
func (d *device) must(what string, err error) {
	if err != nil {
		panic(fmt.Errorf("cuda:%d: %s: %w", d.index, what, err))
	}
}

// arch is the device's real architecture, "sm_90" for an H100.
func (d *device) arch() string { return fmt.Sprintf("sm_%d%d", d.major, d.minor) }

// rawDeviceMemory is what the caching allocator gets segments from. It runs on the
// worker thread (the allocator is only called there).
type rawDeviceMemory struct{}

func (rawDeviceMemory) Malloc(bytes uint64) (uint64, error) {
	p, err := cu.MemAlloc(bytes)
	var ce *cu.Error
	if errors.As(err, &ce) && ce.OutOfMemory() {
		return 0, fmt.Errorf("%w: %w", backend.ErrOutOfMemory, err)
	}
	return uint64(p), err
}

// eventPool gives the allocator events to order frees after side-stream work; it reuses
// destroyed-on-release events through a free list. It runs on the worker thread.
type eventPool struct {
	free []cu.Event
}

func (p *eventPool) Record(stream uintptr) (uintptr, error) {
	var e cu.Event
	if n := len(p.free); n > 0 {
		e, p.free = p.free[n-1], p.free[:n-1]
	} else {
		var err error
		if e, err = cu.EventCreate(eventDisableTiming); err != nil {
			return 0, err
		}
	}
	if err := cu.EventRecord(e, cu.Stream(stream)); err != nil {
		_ = cu.EventDestroy(e)
		return 0, err
	}
	return uintptr(e), nil
}

func (p *eventPool) Query(ev uintptr) (bool, error) { return cu.EventQuery(cu.Event(ev)) }

func (p *eventPool) Synchronize(ev uintptr) error { return cu.EventSynchronize(cu.Event(ev)) }

func (p *eventPool) Release(ev uintptr) {
	if len(p.free) < 64 {
		p.free = append(p.free, cu.Event(ev))
		return
	}
	_ = cu.EventDestroy(cu.Event(ev))
}

func (rawDeviceMemory) Free(addr uint64) error { return cu.MemFree(cu.DevicePtr(addr)) }
