package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/cuda/internal/cu"
	"github.com/gamp-ml/gamp/half"
)

// Backend is one CUDA device as a backend.Backend. Every method is safe for concurrent
// use: the work is handed to the device's worker goroutine and queued, in call order,
// on the device's compute stream. Kernels run asynchronously; Download, the methods that
// return a value (UnscaleCheck, CountNonFinite) and Synchronize wait for the stream.
type Backend struct {
	d *device
}

var _ backend.Backend = (*Backend)(nil)

// Storage is device memory holding Len elements of one dtype. It implements
// backend.Storage and dist.DeviceBuffer (DevicePtr, Stream), so NCCL reads it in place.
type Storage struct {
	d   *device
	dt  backend.DType
	n   int
	blk *block
}

// Device implements backend.Storage.
func (s *Storage) Device() backend.Device { return s.d.bdev }

// DType implements backend.Storage.
func (s *Storage) DType() backend.DType { return s.dt }

// Len implements backend.Storage.
func (s *Storage) Len() int { return s.n }

// DevicePtr is the device address of element 0.
func (s *Storage) DevicePtr() uint64 { return s.blk.addr }

// Stream is the CUstream the backend queues this storage's work on.
func (s *Storage) Stream() uintptr { return uintptr(s.d.compute) }

// at is the device address of element off.
func (s *Storage) at(off int) cu.DevicePtr {
	return cu.DevicePtr(s.blk.addr + uint64(off*s.dt.Size()))
}

// st converts a storage of this backend, panicking on a foreign one.
func (b *Backend) st(s backend.Storage) *Storage {
	c, ok := s.(*Storage)
	if !ok || c.d != b.d {
		if s == nil {
			panic(fmt.Sprintf("cuda:%d: nil storage", b.d.index))
		}
		panic(fmt.Sprintf("cuda:%d: storage of %s passed to the cuda:%d backend (tensors on different devices: move one with To)", b.d.index, s.Device(), b.d.index))
	}
	if c.blk == nil {
		panic(fmt.Sprintf("cuda:%d: use of freed storage", b.d.index))
	}
	return c
}

// Device implements backend.Backend.
func (b *Backend) Device() backend.Device { return b.d.bdev }

// Name implements backend.Backend.
func (b *Backend) Name() string {
	return fmt.Sprintf("cuda:%d (%s, sm_%d%d, %d SMs, %s)", b.d.index, b.d.name, b.d.major, b.d.minor, b.d.sms, backend.FormatBytes(int64(b.d.total)))
}

// Properties describes a device, like torch.cuda.get_device_properties.
type Properties struct {
	Name                 string
	Major, Minor         int
	MultiProcessorCount  int
	TotalMemory          int64
	PCIBusID             string
	DriverVersion        int
	NVRTCMajor, NVRTCMin int
}

// Properties returns the device's properties.
func (b *Backend) Properties() Properties {
	p := Properties{Name: b.d.name, Major: b.d.major, Minor: b.d.minor, MultiProcessorCount: b.d.sms, TotalMemory: int64(b.d.total)}
	p.PCIBusID, _ = b.d.cud.PCIBusID()
	p.DriverVersion, _ = cu.DriverVersion()
	p.NVRTCMajor, p.NVRTCMin, _ = cu.NVRTCVersion()
	return p
}

// Alloc implements backend.Backend: memory comes from the caching allocator and is
// zeroed on the compute stream.
func (b *Backend) Alloc(dt backend.DType, n int) (backend.Storage, error) {
	return b.alloc(dt, n, true)
}

// AllocUninit is Alloc without the zeroing, for outputs the next kernel writes in full
// (the tensor package uses it for those): one memset kernel less per op.
func (b *Backend) AllocUninit(dt backend.DType, n int) (backend.Storage, error) {
	return b.alloc(dt, n, false)
}

func (b *Backend) alloc(dt backend.DType, n int, zero bool) (backend.Storage, error) {
	if dt == backend.Invalid || dt.Size() == 0 {
		panic(fmt.Sprintf("cuda:%d: Alloc with invalid dtype", b.d.index))
	}
	if n < 0 {
		panic(fmt.Sprintf("cuda:%d: Alloc of %d elements", b.d.index, n))
	}
	s := &Storage{d: b.d, dt: dt, n: n}
	bytes := int64(n) * int64(dt.Size())
	b.d.checkFailed()
	if s.blk = b.d.alloc.allocCached(bytes, dt, uintptr(b.d.compute)); s.blk != nil {
		// From the cache, on this goroutine: no wait for the device worker. The zeroing
		// is queued like a kernel.
		if zero && bytes > 0 {
			addr := s.at(0)
			b.d.post(func() {
				b.d.must("zeroing new memory", cu.MemsetD8Async(addr, 0, uint64(bytes), b.d.compute))
			})
		}
		return s, nil
	}
	var err error
	b.d.do(func() {
		s.blk, err = b.d.alloc.alloc(bytes, dt, uintptr(b.d.compute))
		if err == nil && bytes > 0 && zero {
			b.d.must("zeroing new memory", cu.MemsetD8Async(s.at(0), 0, uint64(bytes), b.d.compute))
		}
	})
	if err != nil {
		var oom *backend.OOMError
		if errors.As(err, &oom) && oom.Limit == 0 {
			oom.Limit = int64(b.d.total)
		}
		return nil, err
	}
	return s, nil
}

// Free implements backend.Backend. The block is reused by later work on the compute
// stream, which runs after every kernel already queued on it, so no sync is needed; the
// free itself is queued behind the work already handed to the worker.
func (b *Backend) Free(s backend.Storage) {
	c := b.st(s)
	blk := c.blk
	c.blk = nil
	// Bookkeeping only, on this goroutine, unless another stream used the block (then
	// the free records events on the device's thread). Reuse stays safe: every kernel
	// that touched the block was queued before any that will reuse it.
	if !b.d.alloc.freeUnrecorded(blk) {
		b.d.post(func() { b.d.alloc.free(blk) })
	}
}

// MemoryStats implements backend.Backend. Limit is the cap when one is set, else the
// device's total memory.
func (b *Backend) MemoryStats() backend.MemoryStats {
	b.d.drain() // frees still queued count as freed
	s := b.d.alloc.stats()
	if s.Limit == 0 {
		s.Limit = int64(b.d.total)
	}
	return s
}

// ResetPeak implements backend.Backend.
func (b *Backend) ResetPeak() {
	b.d.drain()
	b.d.alloc.resetPeak()
}

// EmptyCache implements backend.Backend: cached segments go back to the driver.
func (b *Backend) EmptyCache() { b.d.do(func() { b.d.alloc.emptyCache() }) }

// SetMemoryLimit implements backend.Backend.
func (b *Backend) SetMemoryLimit(bytes int64) {
	b.d.drain()
	b.d.alloc.setLimit(bytes)
}

// Synchronize implements backend.Backend: it waits for the compute stream.
func (b *Backend) Synchronize() error {
	return b.d.doErr(func() error { return cu.StreamSynchronize(b.d.compute) })
}

// hostSlice returns the address, element count and dtype of a host slice Upload and
// Download take; dtype Invalid for []uint16, raw bits of either half dtype.
func hostSlice(x any) (unsafe.Pointer, int, backend.DType) {
	switch v := x.(type) {
	case []float32:
		return unsafe.Pointer(unsafe.SliceData(v)), len(v), backend.Float32
	case []float64:
		return unsafe.Pointer(unsafe.SliceData(v)), len(v), backend.Float64
	case []uint16:
		return unsafe.Pointer(unsafe.SliceData(v)), len(v), backend.Invalid
	case []half.Float16:
		return unsafe.Pointer(unsafe.SliceData(v)), len(v), backend.Float16
	case []half.BFloat16:
		return unsafe.Pointer(unsafe.SliceData(v)), len(v), backend.BFloat16
	case []int32:
		return unsafe.Pointer(unsafe.SliceData(v)), len(v), backend.Int32
	case []int64:
		return unsafe.Pointer(unsafe.SliceData(v)), len(v), backend.Int64
	case []bool:
		return unsafe.Pointer(unsafe.SliceData(v)), len(v), backend.Bool
	}
	panic(fmt.Sprintf("cuda: host data of type %T (want []float32, []float64, []uint16, []half.Float16, []half.BFloat16, []int32, []int64 or []bool)", x))
}

func (b *Backend) checkHost(op string, s *Storage, off int, x any) (unsafe.Pointer, int) {
	p, n, dt := hostSlice(x)
	if dt != s.dt && (dt != backend.Invalid || !s.dt.IsHalf()) {
		panic(fmt.Sprintf("cuda:%d: %s: host %T does not match %s storage", b.d.index, op, x, s.dt))
	}
	if off < 0 || off+n > s.n {
		panic(fmt.Sprintf("cuda:%d: %s of %d elements at %d into storage of %d", b.d.index, op, n, off, s.n))
	}
	return p, n
}

// Upload implements backend.Backend. The copy is queued on the compute stream; the
// driver stages pageable Go memory before the call returns, so src may be reused.
func (b *Backend) Upload(dst backend.Storage, off int, src any) {
	s := b.st(dst)
	p, n := b.checkHost("Upload", s, off, src)
	if n == 0 {
		return
	}
	var pin runtime.Pinner
	pin.Pin(p)
	defer pin.Unpin()
	b.d.do(func() {
		b.d.must("Upload", cu.MemcpyHtoDAsync(s.at(off), p, uint64(n*s.dt.Size()), b.d.compute))
	})
}

// Download implements backend.Backend: it waits for the work queued before it.
func (b *Backend) Download(dst any, src backend.Storage, off int) {
	s := b.st(src)
	p, n := b.checkHost("Download", s, off, dst)
	if n == 0 {
		return
	}
	var pin runtime.Pinner
	pin.Pin(p)
	defer pin.Unpin()
	b.d.do(func() {
		b.d.must("Download", cu.MemcpyDtoHAsync(p, s.at(off), uint64(n*s.dt.Size()), b.d.compute))
		b.d.must("Download", cu.StreamSynchronize(b.d.compute))
	})
}

// Run runs f on the device's worker thread, where the device's primary context is
// current, and returns its error: for libraries whose state belongs to the OS thread
// (NCCL communicators and group calls, a user's own CUDA calls). Work f queues should go
// on ComputeStream to stay ordered with the backend's kernels. f must not call back
// into this backend (the worker is busy running f).
func (b *Backend) Run(f func() error) error { return b.d.doErr(f) }
