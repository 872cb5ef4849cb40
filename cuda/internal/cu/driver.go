package cu

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Driver handles. They are the driver's opaque values, held as integers: a Go
// pointer type would let the garbage collector inspect them.
type (
	// Device is a CUdevice, an ordinal in the driver's numbering (CUDA_VISIBLE_DEVICES
	// applies).
	Device int32
	// Context is a CUcontext. gamp uses each device's primary context.
	Context uintptr
	// Stream is a CUstream; 0 is the legacy default stream.
	Stream uintptr
	// Event is a CUevent.
	Event uintptr
	// Module is a CUmodule: one loaded CUBIN or PTX image.
	Module uintptr
	// Function is a CUfunction, a kernel in a Module.
	Function uintptr
	// DevicePtr is a CUdeviceptr: a device address, never an unsafe.Pointer.
	DevicePtr uint64
)

// Device attributes (CUdevice_attribute, cuda.h) for Device.Attribute.
const (
	AttrMaxThreadsPerBlock           = 1
	AttrMaxSharedMemoryPerBlock      = 8
	AttrWarpSize                     = 10
	AttrMultiprocessorCount          = 16
	AttrL2CacheSize                  = 38
	AttrMaxThreadsPerMultiprocessor  = 39
	AttrUnifiedAddressing            = 41
	AttrComputeCapabilityMajor       = 75
	AttrComputeCapabilityMinor       = 76
	AttrMaxSharedMemoryPerBlockOptin = 97
)

// Flags for StreamCreate, EventCreate and MemHostAlloc (cuda.h).
const (
	StreamDefault     = 0x0 // CU_STREAM_DEFAULT: synchronizes with the legacy default stream
	StreamNonBlocking = 0x1 // CU_STREAM_NON_BLOCKING

	EventDefault       = 0x0 // CU_EVENT_DEFAULT
	EventBlockingSync  = 0x1 // CU_EVENT_BLOCKING_SYNC
	EventDisableTiming = 0x2 // CU_EVENT_DISABLE_TIMING: cheaper, no EventElapsedTime

	MemHostAllocPortable      = 0x1 // CU_MEMHOSTALLOC_PORTABLE: pinned for every context
	MemHostAllocDeviceMap     = 0x2 // CU_MEMHOSTALLOC_DEVICEMAP
	MemHostAllocWriteCombined = 0x4 // CU_MEMHOSTALLOC_WRITECOMBINED
)

var cudaLib = library{spec: specCUDA}

// drv holds libcuda's entry points, bound by their exact exported names (the _v2 names
// where cuda.h maps the API to them; never a newer _v2 guessed for a plain name, since
// e.g. cuCtxSynchronize_v2 takes an extra argument). Calls that queue work on a stream
// (and the synchronizations) are raw addresses called with purego.SyscallN, ~0.1 µs;
// the rest are typed funcs registered with purego.RegisterFunc (~0.3–0.8 µs, checked
// signatures).
var drv struct {
	init               func(flags uint32) int32
	driverGetVersion   func(v *int32) int32
	deviceGetCount     func(n *int32) int32
	deviceGet          func(d *Device, ordinal int32) int32
	deviceGetAttribute func(v *int32, attr int32, d Device) int32
	deviceGetName      func(name *byte, n int32, d Device) int32
	deviceTotalMem     func(bytes *uint64, d Device) int32
	deviceGetPCIBusID  func(id *byte, n int32, d Device) int32
	primaryCtxRetain   func(c *Context, d Device) int32
	primaryCtxRelease  func(d Device) int32
	ctxSetCurrent      func(c Context) int32
	ctxGetCurrent      func(c *Context) int32
	ctxSynchronize     func() int32
	memAlloc           func(p *DevicePtr, bytes uint64) int32
	memFree            func(p DevicePtr) int32
	memGetInfo         func(free, total *uint64) int32
	memHostAlloc       func(p *unsafe.Pointer, bytes uint64, flags uint32) int32
	memFreeHost        func(p unsafe.Pointer) int32
	memcpyHtoD         func(dst DevicePtr, src unsafe.Pointer, n uint64) int32
	memcpyDtoH         func(dst unsafe.Pointer, src DevicePtr, n uint64) int32
	memcpyDtoD         func(dst, src DevicePtr, n uint64) int32
	canAccessPeer      func(can *int32, d, peer Device) int32
	ctxEnablePeer      func(peer Context, flags uint32) int32
	moduleLoadData     func(m *Module, image unsafe.Pointer) int32
	moduleUnload       func(m Module) int32
	moduleGetFunction  func(f *Function, m Module, name string) int32
	funcGetParamInfo   func(f Function, i uint64, off, size *uint64) int32 // CUDA 12.4+
	streamCreate       func(s *Stream, flags uint32) int32
	streamDestroy      func(s Stream) int32
	eventCreate        func(e *Event, flags uint32) int32
	eventDestroy       func(e Event) int32
	eventElapsedV2     func(ms *float32, start, end Event) int32 // CUDA 12.8+
	eventElapsed       func(ms *float32, start, end Event) int32
	getErrorName       func(code int32, s **byte) int32
	getErrorString     func(code int32, s **byte) int32

	launchKernel, memcpyHtoDAsync, memcpyDtoHAsync, memcpyDtoDAsync, memcpyPeerAsync uintptr
	memsetD8Async, memsetD32Async, streamSynchronize, streamQuery, streamWaitEvent   uintptr
	eventRecord, eventSynchronize, eventQuery                                        uintptr
}

func bindDriver(l *library) error {
	d := &drv
	err := l.bindAll([]symbol{
		{fptr: &d.init, name: "cuInit"},
		{fptr: &d.driverGetVersion, name: "cuDriverGetVersion"},
		{fptr: &d.getErrorName, name: "cuGetErrorName"},
		{fptr: &d.getErrorString, name: "cuGetErrorString"},
		{fptr: &d.deviceGetCount, name: "cuDeviceGetCount"},
		{fptr: &d.deviceGet, name: "cuDeviceGet"},
		{fptr: &d.deviceGetAttribute, name: "cuDeviceGetAttribute"},
		{fptr: &d.deviceGetName, name: "cuDeviceGetName"},
		{fptr: &d.deviceTotalMem, name: "cuDeviceTotalMem_v2"},
		{fptr: &d.deviceGetPCIBusID, name: "cuDeviceGetPCIBusId"},
		{fptr: &d.primaryCtxRetain, name: "cuDevicePrimaryCtxRetain"},
		{fptr: &d.primaryCtxRelease, name: "cuDevicePrimaryCtxRelease_v2"},
		{fptr: &d.ctxSetCurrent, name: "cuCtxSetCurrent"},
		{fptr: &d.ctxGetCurrent, name: "cuCtxGetCurrent"},
		{fptr: &d.ctxSynchronize, name: "cuCtxSynchronize"},
		{fptr: &d.memAlloc, name: "cuMemAlloc_v2"},
		{fptr: &d.memFree, name: "cuMemFree_v2"},
		{fptr: &d.memGetInfo, name: "cuMemGetInfo_v2"},
		{fptr: &d.memHostAlloc, name: "cuMemHostAlloc"},
		{fptr: &d.memFreeHost, name: "cuMemFreeHost"},
		{fptr: &d.memcpyHtoD, name: "cuMemcpyHtoD_v2"},
		{fptr: &d.memcpyDtoH, name: "cuMemcpyDtoH_v2"},
		{fptr: &d.memcpyDtoD, name: "cuMemcpyDtoD_v2"},
		{fptr: &d.memcpyHtoDAsync, name: "cuMemcpyHtoDAsync_v2"},
		{fptr: &d.memcpyDtoHAsync, name: "cuMemcpyDtoHAsync_v2"},
		{fptr: &d.memcpyDtoDAsync, name: "cuMemcpyDtoDAsync_v2"},
		{fptr: &d.memcpyPeerAsync, name: "cuMemcpyPeerAsync"},
		{fptr: &d.memsetD8Async, name: "cuMemsetD8Async"},
		{fptr: &d.memsetD32Async, name: "cuMemsetD32Async"},
		{fptr: &d.canAccessPeer, name: "cuDeviceCanAccessPeer"},
		{fptr: &d.ctxEnablePeer, name: "cuCtxEnablePeerAccess"},
		{fptr: &d.moduleLoadData, name: "cuModuleLoadData"},
		{fptr: &d.moduleUnload, name: "cuModuleUnload"},
		{fptr: &d.moduleGetFunction, name: "cuModuleGetFunction"},
		{fptr: &d.funcGetParamInfo, name: "cuFuncGetParamInfo", optional: true},
		{fptr: &d.launchKernel, name: "cuLaunchKernel"},
		{fptr: &d.streamCreate, name: "cuStreamCreate"},
		{fptr: &d.streamDestroy, name: "cuStreamDestroy_v2"},
		{fptr: &d.streamSynchronize, name: "cuStreamSynchronize"},
		{fptr: &d.streamQuery, name: "cuStreamQuery"},
		{fptr: &d.streamWaitEvent, name: "cuStreamWaitEvent"},
		{fptr: &d.eventCreate, name: "cuEventCreate"},
		{fptr: &d.eventRecord, name: "cuEventRecord"},
		{fptr: &d.eventSynchronize, name: "cuEventSynchronize"},
		{fptr: &d.eventQuery, name: "cuEventQuery"},
		{fptr: &d.eventElapsedV2, name: "cuEventElapsedTime_v2", optional: true},
		{fptr: &d.eventElapsed, name: "cuEventElapsedTime", optional: true},
		{fptr: &d.eventDestroy, name: "cuEventDestroy_v2"},
	})
	if err == nil && d.eventElapsed == nil && d.eventElapsedV2 == nil {
		err = fmt.Errorf("%w: %s has neither cuEventElapsedTime_v2 nor cuEventElapsedTime", ErrUnavailable, l.path)
	}
	return err
}

var (
	initOnce sync.Once
	initErr  error
)

// Init loads libcuda (see the package documentation for where it is looked for),
// binds its symbols and calls cuInit(0), once per process; later calls return the
// first result. No library, a stub library (cuInit 34) and no device (cuInit 100) give
// an error wrapping ErrUnavailable that says what was tried. Every other function of
// the driver API calls Init first.
func Init() error {
	initOnce.Do(func() { initErr = initDriver() })
	return initErr
}

func initDriver() error {
	if err := cudaLib.open(bindDriver); err != nil {
		return err
	}
	if rc := drv.init(0); rc != cudaSuccess {
		e := driverError("cuInit", rc)
		switch rc {
		case cudaErrorNoDevice:
			return fmt.Errorf("%w: no CUDA device (driver %s): %w", ErrUnavailable, cudaLib.path, e)
		case cudaErrorStubLibrary:
			return fmt.Errorf("%w: %s is the toolkit's stub, not a driver: take the stubs directory out of LD_LIBRARY_PATH, or install the NVIDIA driver: %w", ErrUnavailable, cudaLib.path, e)
		}
		return fmt.Errorf("%w: cuInit failed (driver %s): %w", ErrUnavailable, cudaLib.path, e)
	}
	var v int32
	if drv.driverGetVersion(&v) == cudaSuccess {
		cudaLib.version = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	return nil
}

// driverError builds the *Error for a failed driver call.
func driverError(fn string, rc int32) *Error {
	e := &Error{Lib: libDriver, Func: fn, Code: int(rc), Name: fmt.Sprintf("CUDA_ERROR_%d", rc)}
	var p *byte
	if drv.getErrorName(rc, &p) == cudaSuccess && p != nil {
		e.Name = goString(p)
	}
	p = nil
	if drv.getErrorString(rc, &p) == cudaSuccess && p != nil {
		e.Text = goString(p)
	}
	return e
}

// check turns a CUresult into nil or an *Error.
func check(fn string, rc int32) error {
	if rc == cudaSuccess {
		return nil
	}
	return driverError(fn, rc)
}

// checkRaw is check for a purego.SyscallN result: CUresult is a C int, the upper half
// of the register is undefined.
func checkRaw(fn string, r1 uintptr) error { return check(fn, int32(r1)) }

// DriverVersion returns the CUDA version the driver supports, e.g. 13000 for 13.0.
func DriverVersion() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var v int32
	err := check("cuDriverGetVersion", drv.driverGetVersion(&v))
	return int(v), err
}

// DeviceCount returns the number of devices the driver shows this process.
func DeviceCount() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var n int32
	err := check("cuDeviceGetCount", drv.deviceGetCount(&n))
	return int(n), err
}

// DeviceGet returns the device with the given ordinal.
func DeviceGet(ordinal int) (Device, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var d Device
	err := check("cuDeviceGet", drv.deviceGet(&d, int32(ordinal)))
	return d, err
}

// Attribute returns a device attribute (the Attr constants).
func (d Device) Attribute(attr int) (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var v int32
	err := check("cuDeviceGetAttribute", drv.deviceGetAttribute(&v, int32(attr), d))
	return int(v), err
}

// Name returns the device's marketing name, e.g. "NVIDIA H100 80GB HBM3".
func (d Device) Name() (string, error) {
	if err := Init(); err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	if err := check("cuDeviceGetName", drv.deviceGetName(&buf[0], int32(len(buf)), d)); err != nil {
		return "", err
	}
	return cBuf(buf), nil
}

// TotalMem returns the device's memory in bytes.
func (d Device) TotalMem() (uint64, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var n uint64
	err := check("cuDeviceTotalMem_v2", drv.deviceTotalMem(&n, d))
	return n, err
}

// PCIBusID returns the device's PCI address, "domain:bus:device.function" (e.g.
// "0000:3B:00.0"): the key that maps a driver ordinal to an NVML device.
func (d Device) PCIBusID() (string, error) {
	if err := Init(); err != nil {
		return "", err
	}
	buf := make([]byte, 64)
	if err := check("cuDeviceGetPCIBusId", drv.deviceGetPCIBusID(&buf[0], int32(len(buf)), d)); err != nil {
		return "", err
	}
	return cBuf(buf), nil
}

// PrimaryCtxRetain retains d's primary context (creating it on first use).
func PrimaryCtxRetain(d Device) (Context, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var c Context
	err := check("cuDevicePrimaryCtxRetain", drv.primaryCtxRetain(&c, d))
	return c, err
}

// PrimaryCtxRelease releases one retain of d's primary context.
func PrimaryCtxRelease(d Device) error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuDevicePrimaryCtxRelease_v2", drv.primaryCtxRelease(d))
}

// CtxSetCurrent makes c the calling OS thread's current context. The goroutine must
// stay on that thread (runtime.LockOSThread) for the binding to mean anything.
func CtxSetCurrent(c Context) error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuCtxSetCurrent", drv.ctxSetCurrent(c))
}

// CtxGetCurrent returns the calling OS thread's current context (0 if none).
func CtxGetCurrent() (Context, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var c Context
	err := check("cuCtxGetCurrent", drv.ctxGetCurrent(&c))
	return c, err
}

// CtxSynchronize waits for all work in the current context.
func CtxSynchronize() error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuCtxSynchronize", drv.ctxSynchronize())
}

// MemAlloc allocates device memory in the current context. An exhausted device gives
// an *Error with OutOfMemory() true (errors.Is(err, ErrOutOfMemory)).
func MemAlloc(bytes uint64) (DevicePtr, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var p DevicePtr
	err := check("cuMemAlloc_v2", drv.memAlloc(&p, bytes))
	return p, err
}

// MemFree frees memory from MemAlloc.
func MemFree(p DevicePtr) error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuMemFree_v2", drv.memFree(p))
}

// MemGetInfo returns the current context's device's free and total memory.
func MemGetInfo() (free, total uint64, err error) {
	if err := Init(); err != nil {
		return 0, 0, err
	}
	err = check("cuMemGetInfo_v2", drv.memGetInfo(&free, &total))
	return free, total, err
}

// MemHostAlloc allocates page-locked host memory (flags: the MemHostAlloc constants):
// the only host memory async copies overlap with. It is C memory: free it with
// MemFreeHost, after the streams that use it have synchronized.
func MemHostAlloc(bytes uint64, flags uint32) (unsafe.Pointer, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	var p unsafe.Pointer
	err := check("cuMemHostAlloc", drv.memHostAlloc(&p, bytes, flags))
	return p, err
}

// MemFreeHost frees memory from MemHostAlloc.
func MemFreeHost(p unsafe.Pointer) error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuMemFreeHost", drv.memFreeHost(p))
}

// MemcpyHtoD copies bytes from host memory (Go or C) to the device and waits.
func MemcpyHtoD(dst DevicePtr, src unsafe.Pointer, bytes uint64) error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuMemcpyHtoD_v2", drv.memcpyHtoD(dst, src, bytes))
}

// MemcpyDtoH copies bytes from the device to host memory and waits.
func MemcpyDtoH(dst unsafe.Pointer, src DevicePtr, bytes uint64) error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuMemcpyDtoH_v2", drv.memcpyDtoH(dst, src, bytes))
}

// MemcpyDtoD copies bytes between device buffers.
func MemcpyDtoD(dst, src DevicePtr, bytes uint64) error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuMemcpyDtoD_v2", drv.memcpyDtoD(dst, src, bytes))
}

// MemcpyHtoDAsync queues a host-to-device copy on s. From pageable (Go) memory the
// driver stages the data before returning, so src may be reused at once but nothing
// overlaps; from MemHostAlloc memory the copy is truly asynchronous and src must stay
// untouched until s has passed it.
func MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, bytes uint64, s Stream) error {
	if err := Init(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(drv.memcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(bytes), uintptr(s))
	return checkRaw("cuMemcpyHtoDAsync_v2", r)
}

// MemcpyDtoHAsync queues a device-to-host copy on s. Into pageable (Go) memory the
// driver returns only when the copy is done; into MemHostAlloc memory it returns at
// once and dst is valid after s synchronizes.
func MemcpyDtoHAsync(dst unsafe.Pointer, src DevicePtr, bytes uint64, s Stream) error {
	if err := Init(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(drv.memcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(bytes), uintptr(s))
	return checkRaw("cuMemcpyDtoHAsync_v2", r)
}

// MemcpyDtoDAsync queues a device-to-device copy on s.
func MemcpyDtoDAsync(dst, src DevicePtr, bytes uint64, s Stream) error {
	if err := Init(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(drv.memcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(bytes), uintptr(s))
	return checkRaw("cuMemcpyDtoDAsync_v2", r)
}

// MemcpyPeerAsync queues a copy from src in srcCtx's device to dst in dstCtx's device.
func MemcpyPeerAsync(dst DevicePtr, dstCtx Context, src DevicePtr, srcCtx Context, bytes uint64, s Stream) error {
	if err := Init(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(drv.memcpyPeerAsync, uintptr(dst), uintptr(dstCtx), uintptr(src), uintptr(srcCtx), uintptr(bytes), uintptr(s))
	return checkRaw("cuMemcpyPeerAsync", r)
}

// MemsetD8Async queues setting n bytes at dst to v.
func MemsetD8Async(dst DevicePtr, v uint8, n uint64, s Stream) error {
	if err := Init(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(drv.memsetD8Async, uintptr(dst), uintptr(v), uintptr(n), uintptr(s))
	return checkRaw("cuMemsetD8Async", r)
}

// MemsetD32Async queues setting n 32-bit words at dst (4-byte aligned) to v.
func MemsetD32Async(dst DevicePtr, v uint32, n uint64, s Stream) error {
	if err := Init(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(drv.memsetD32Async, uintptr(dst), uintptr(v), uintptr(n), uintptr(s))
	return checkRaw("cuMemsetD32Async", r)
}

// DeviceCanAccessPeer reports whether d can access peer's memory directly.
func DeviceCanAccessPeer(d, peer Device) (bool, error) {
	if err := Init(); err != nil {
		return false, err
	}
	var can int32
	err := check("cuDeviceCanAccessPeer", drv.canAccessPeer(&can, d, peer))
	return can != 0, err
}

// CtxEnablePeerAccess lets the current context access peer's memory. Enabling it a
// second time (CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, 704) is not an error.
func CtxEnablePeerAccess(peer Context) error {
	if err := Init(); err != nil {
		return err
	}
	rc := drv.ctxEnablePeer(peer, 0)
	if rc == cudaErrorPeerAccessAlreadyEnabled {
		return nil
	}
	return check("cuCtxEnablePeerAccess", rc)
}

// ModuleLoadData loads a CUBIN, fatbin or PTX image into the current context. PTX
// text gets the terminating NUL the driver needs if it lacks one.
func ModuleLoadData(image []byte) (Module, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if len(image) == 0 {
		return 0, fmt.Errorf("cu: ModuleLoadData: empty image")
	}
	if !isBinaryImage(image) && image[len(image)-1] != 0 {
		image = append(image[:len(image):len(image)], 0)
	}
	var m Module
	err := check("cuModuleLoadData", drv.moduleLoadData(&m, unsafe.Pointer(&image[0])))
	return m, err
}

// isBinaryImage reports whether image is an ELF (CUBIN) or a fatbin rather than PTX text.
func isBinaryImage(image []byte) bool {
	elf := len(image) >= 4 && string(image[:4]) == "\x7fELF"
	fatbin := len(image) >= 4 && image[0] == 0x50 && image[1] == 0xed && image[2] == 0x55 && image[3] == 0xba
	return elf || fatbin
}

// ModuleUnload unloads m from the current context.
func ModuleUnload(m Module) error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuModuleUnload", drv.moduleUnload(m))
}

// ModuleGetFunction returns the kernel called name (its extern "C" name) in m.
func ModuleGetFunction(m Module, name string) (Function, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var f Function
	if err := check("cuModuleGetFunction", drv.moduleGetFunction(&f, m, name)); err != nil {
		return 0, fmt.Errorf("kernel %q: %w", name, err)
	}
	return f, nil
}

// FuncGetParamInfo returns the byte offset and size of f's i-th parameter, as the
// image declares them: the check that a Go signature table matches the kernel. With
// a driver older than CUDA 12.4 it returns an error wrapping ErrNotSupported.
func FuncGetParamInfo(f Function, i int) (offset, size uint64, err error) {
	if err := Init(); err != nil {
		return 0, 0, err
	}
	if drv.funcGetParamInfo == nil {
		return 0, 0, fmt.Errorf("cu: cuFuncGetParamInfo: %w (needs a CUDA 12.4 driver, have %s)", ErrNotSupported, cudaLib.version)
	}
	err = check("cuFuncGetParamInfo", drv.funcGetParamInfo(f, uint64(i), &offset, &size))
	return offset, size, err
}

// StreamCreate creates a stream (flags: StreamDefault or StreamNonBlocking).
func StreamCreate(flags uint32) (Stream, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var s Stream
	err := check("cuStreamCreate", drv.streamCreate(&s, flags))
	return s, err
}

// StreamDestroy destroys s once its queued work is done.
func StreamDestroy(s Stream) error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuStreamDestroy_v2", drv.streamDestroy(s))
}

// StreamSynchronize waits until all work queued on s is done.
func StreamSynchronize(s Stream) error {
	if err := Init(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(drv.streamSynchronize, uintptr(s))
	return checkRaw("cuStreamSynchronize", r)
}

// StreamQuery reports whether all work queued on s is done, without waiting.
func StreamQuery(s Stream) (done bool, err error) {
	if err := Init(); err != nil {
		return false, err
	}
	r, _, _ := purego.SyscallN(drv.streamQuery, uintptr(s))
	return queryResult("cuStreamQuery", int32(r))
}

// StreamWaitEvent makes work queued on s after this call wait for e's last record.
func StreamWaitEvent(s Stream, e Event) error {
	if err := Init(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(drv.streamWaitEvent, uintptr(s), uintptr(e), 0)
	return checkRaw("cuStreamWaitEvent", r)
}

// EventCreate creates an event (flags: the Event constants).
func EventCreate(flags uint32) (Event, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var e Event
	err := check("cuEventCreate", drv.eventCreate(&e, flags))
	return e, err
}

// EventRecord records e at the current end of s.
func EventRecord(e Event, s Stream) error {
	if err := Init(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(drv.eventRecord, uintptr(e), uintptr(s))
	return checkRaw("cuEventRecord", r)
}

// EventSynchronize waits until e's last record has passed.
func EventSynchronize(e Event) error {
	if err := Init(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(drv.eventSynchronize, uintptr(e))
	return checkRaw("cuEventSynchronize", r)
}

// EventQuery reports whether e's last record has passed (true for an event never
// recorded), without waiting.
func EventQuery(e Event) (done bool, err error) {
	if err := Init(); err != nil {
		return false, err
	}
	r, _, _ := purego.SyscallN(drv.eventQuery, uintptr(e))
	return queryResult("cuEventQuery", int32(r))
}

// queryResult maps CUDA_SUCCESS to done, CUDA_ERROR_NOT_READY to not done.
func queryResult(fn string, rc int32) (bool, error) {
	switch rc {
	case cudaSuccess:
		return true, nil
	case cudaErrorNotReady:
		return false, nil
	}
	return false, driverError(fn, rc)
}

// EventElapsedTime returns the milliseconds between two recorded events
// (cuEventElapsedTime_v2 where the driver has it, CUDA 12.8+, else cuEventElapsedTime).
func EventElapsedTime(start, end Event) (ms float32, err error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if drv.eventElapsedV2 != nil {
		err = check("cuEventElapsedTime_v2", drv.eventElapsedV2(&ms, start, end))
	} else {
		err = check("cuEventElapsedTime", drv.eventElapsed(&ms, start, end))
	}
	return ms, err
}

// EventDestroy destroys e.
func EventDestroy(e Event) error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuEventDestroy_v2", drv.eventDestroy(e))
}
