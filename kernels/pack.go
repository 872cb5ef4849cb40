package kernels

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Args is a kernel's packed parameter buffer: every value at the offset CUDA's ABI gives
// it (Kernel.ArgOffsets), so Bytes is the buffer a CU_LAUNCH_PARAM_BUFFER_POINTER launch
// takes and Pointers the kernelParams array of cuLaunchKernel. Both point into memory
// the Args owns: keep it alive, and pinned (Pin), until the launch call returns.
type Args struct {
	words []uint64 // the buffer, 8-aligned
	size  int
	ptrs  []unsafe.Pointer
}

// Bytes returns the packed buffer.
func (a *Args) Bytes() []byte {
	if a.size == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&a.words[0])), a.size)
}

// Pointers returns one pointer per parameter, to its value in the buffer.
func (a *Args) Pointers() []unsafe.Pointer { return a.ptrs }

// Pin pins the buffer and the pointer array with p, so that C code may read them until
// p.Unpin.
func (a *Args) Pin(p *runtime.Pinner) {
	if len(a.words) > 0 {
		p.Pin(&a.words[0])
	}
	if len(a.ptrs) > 0 {
		p.Pin(&a.ptrs[0])
	}
}

// Pack packs args, one Go value per parameter of k, in order. It rejects a value whose
// Go type does not have the declared kind and size (the driver takes sizes from the
// kernel image, so an int32 where long long is declared would read garbage):
//
//	Ptr    uint64 (a CUdeviceptr) or uintptr
//	I32    int32 or uint32
//	I64    int64 or uint64
//	F32    float32
//	F64    float64
//	Struct Layout, Conv2d or Pool2d, as CType names
func (k Kernel) Pack(args ...any) (*Args, error) {
	a := new(Args)
	if err := k.PackInto(a, args...); err != nil {
		return nil, err
	}
	return a, nil
}

// PackInto is Pack into a, reusing its memory: a launcher can keep one pinned Args per
// kernel and repack it for every launch without allocating.
func (k Kernel) PackInto(a *Args, args ...any) error {
	if len(args) != len(k.Params) {
		return fmt.Errorf("kernels: %s takes %d arguments, got %d", k.Name, len(k.Params), len(args))
	}
	offs, size := k.ArgOffsets()
	nw := (size + 7) / 8
	if cap(a.words) < nw {
		a.words = make([]uint64, nw)
	}
	a.words = a.words[:nw]
	clear(a.words)
	a.size = size
	if cap(a.ptrs) < len(args) {
		a.ptrs = make([]unsafe.Pointer, len(args))
	}
	a.ptrs = a.ptrs[:len(args)]
	var base unsafe.Pointer
	if nw > 0 {
		base = unsafe.Pointer(&a.words[0])
	}
	for i, p := range k.Params {
		dst := unsafe.Add(base, offs[i])
		if !put(dst, p, args[i]) {
			return fmt.Errorf("kernels: %s: argument %d (%s %s) is %T; want %s", k.Name, i, p.CType, p.Name, args[i], want(p))
		}
		a.ptrs[i] = dst
	}
	return nil
}

// want says which Go types a parameter accepts.
func want(p Param) string {
	switch p.Kind {
	case Ptr:
		return "uint64 or uintptr (a device pointer)"
	case I32:
		return "int32 or uint32"
	case I64:
		return "int64 or uint64"
	case F32:
		return "float32"
	case F64:
		return "float64"
	}
	return "kernels." + p.CType
}

// put stores v at dst if its Go type matches p.
func put(dst unsafe.Pointer, p Param, v any) bool {
	switch p.Kind {
	case Ptr:
		switch x := v.(type) {
		case uint64:
			*(*uint64)(dst) = x
		case uintptr:
			*(*uint64)(dst) = uint64(x)
		default:
			return false
		}
	case I32:
		switch x := v.(type) {
		case int32:
			*(*int32)(dst) = x
		case uint32:
			*(*uint32)(dst) = x
		default:
			return false
		}
	case I64:
		switch x := v.(type) {
		case int64:
			*(*int64)(dst) = x
		case uint64:
			*(*uint64)(dst) = x
		default:
			return false
		}
	case F32:
		x, ok := v.(float32)
		if !ok {
			return false
		}
		*(*float32)(dst) = x
	case F64:
		x, ok := v.(float64)
		if !ok {
			return false
		}
		*(*float64)(dst) = x
	case Struct:
		switch x := v.(type) {
		case Layout:
			return putStruct(dst, p, "Layout", &x)
		case Conv2d:
			return putStruct(dst, p, "Conv2d", &x)
		case Pool2d:
			return putStruct(dst, p, "Pool2d", &x)
		default:
			return false
		}
	default:
		return false
	}
	return true
}

func putStruct[T any](dst unsafe.Pointer, p Param, name string, x *T) bool {
	if p.CType != name || int(unsafe.Sizeof(*x)) != p.Size {
		return false
	}
	copy(unsafe.Slice((*byte)(dst), p.Size), unsafe.Slice((*byte)(unsafe.Pointer(x)), p.Size))
	return true
}
