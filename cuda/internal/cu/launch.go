package cu

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// launchPinners reuses Pinners across LaunchKernel calls: a Pinner that has pinned once
// keeps its bookkeeping, so later Pins allocate nothing.
var launchPinners = sync.Pool{New: func() any { return new(runtime.Pinner) }}

// LaunchKernel queues f on s with the given grid and block dimensions and dynamic
// shared memory. params[i] points at the value of the kernel's i-th argument, which
// must have the size the kernel declares (the driver takes sizes from the image: an
// int32 where the kernel expects an int64 reads garbage). The slice and every value are
// pinned until cuLaunchKernel returns, by which time the driver has copied them.
//
// Each call pins len(params)+1 objects (~75 ns each); a launch from a long-lived
// KernelArgs block costs only the call.
func LaunchKernel(f Function, grid, block [3]uint32, sharedMem uint32, s Stream, params []unsafe.Pointer) error {
	if err := Init(); err != nil {
		return err
	}
	var kp unsafe.Pointer
	if len(params) > 0 {
		pin := launchPinners.Get().(*runtime.Pinner)
		pin.Pin(&params[0])
		for i, p := range params {
			if p == nil {
				pin.Unpin()
				launchPinners.Put(pin)
				return fmt.Errorf("cu: LaunchKernel: params[%d] is nil; every argument needs a pointer to its value", i)
			}
			pin.Pin(p)
		}
		defer func() {
			pin.Unpin()
			launchPinners.Put(pin)
		}()
		kp = unsafe.Pointer(&params[0])
	}
	return launch(f, grid, block, sharedMem, s, kp)
}

func launch(f Function, grid, block [3]uint32, sharedMem uint32, s Stream, kp unsafe.Pointer) error {
	r, _, _ := purego.SyscallN(drv.launchKernel, uintptr(f),
		uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]),
		uintptr(block[0]), uintptr(block[1]), uintptr(block[2]),
		uintptr(sharedMem), uintptr(s), uintptr(kp), 0)
	return checkRaw("cuLaunchKernel", r)
}

// KernelArgs is a long-lived, pinned block of kernel arguments: one 8-byte slot per
// argument (every scalar and pointer a header-free kernel takes fits) and the pointer
// array cuLaunchKernel reads, both pinned from NewKernelArgs to Free. Fill the slots
// with the Set methods and launch with LaunchKernelArgs: no allocation, no pinning per
// launch. The driver copies the values during the launch, so the block can be refilled
// as soon as LaunchKernelArgs returns. Not safe for concurrent use: keep one per
// device worker.
type KernelArgs struct {
	slots []uint64
	ptrs  []unsafe.Pointer // ptrs[i] = &slots[i]
	pin   runtime.Pinner
}

// NewKernelArgs returns a block for kernels of n arguments. Call Free when done; a
// block that is dropped without Free is unpinned by a finalizer.
func NewKernelArgs(n int) *KernelArgs {
	if n < 0 {
		panic(fmt.Sprintf("cu: NewKernelArgs(%d)", n))
	}
	a := &KernelArgs{slots: make([]uint64, max(n, 1)), ptrs: make([]unsafe.Pointer, max(n, 1))}
	for i := range a.slots {
		a.ptrs[i] = unsafe.Pointer(&a.slots[i])
	}
	a.slots, a.ptrs = a.slots[:n], a.ptrs[:n]
	a.pin.Pin(unsafe.Pointer(unsafe.SliceData(a.slots)))
	a.pin.Pin(unsafe.Pointer(unsafe.SliceData(a.ptrs)))
	runtime.SetFinalizer(a, (*KernelArgs).Free)
	return a
}

// Free unpins the block; it must not be used afterwards.
func (a *KernelArgs) Free() {
	a.pin.Unpin()
	runtime.SetFinalizer(a, nil)
}

// Len returns the number of arguments.
func (a *KernelArgs) Len() int { return len(a.slots) }

// SetPtr sets argument i to a device pointer (a T* parameter).
func (a *KernelArgs) SetPtr(i int, p DevicePtr) { a.slots[i] = uint64(p) }

// SetU64 sets argument i to an unsigned long long / size_t.
func (a *KernelArgs) SetU64(i int, v uint64) { a.slots[i] = v }

// SetI64 sets argument i to a long long.
func (a *KernelArgs) SetI64(i int, v int64) { a.slots[i] = uint64(v) }

// SetU32 sets argument i to an unsigned int.
func (a *KernelArgs) SetU32(i int, v uint32) { a.slots[i] = uint64(v) }

// SetI32 sets argument i to an int.
func (a *KernelArgs) SetI32(i int, v int32) { a.slots[i] = uint64(uint32(v)) }

// SetF32 sets argument i to a float.
func (a *KernelArgs) SetF32(i int, v float32) { a.slots[i] = uint64(math.Float32bits(v)) }

// SetF64 sets argument i to a double.
func (a *KernelArgs) SetF64(i int, v float64) { a.slots[i] = math.Float64bits(v) }

// SetU16 sets argument i to an unsigned short (e.g. a half or bfloat16 by its bits).
func (a *KernelArgs) SetU16(i int, v uint16) { a.slots[i] = uint64(v) }

// LaunchKernelArgs is LaunchKernel with the arguments in a KernelArgs block: the hot
// path, one purego.SyscallN.
func LaunchKernelArgs(f Function, grid, block [3]uint32, sharedMem uint32, s Stream, a *KernelArgs) error {
	if err := Init(); err != nil {
		return err
	}
	var kp unsafe.Pointer
	if len(a.ptrs) > 0 {
		kp = unsafe.Pointer(&a.ptrs[0])
	}
	err := launch(f, grid, block, sharedMem, s, kp)
	runtime.KeepAlive(a)
	return err
}
