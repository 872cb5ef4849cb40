package backend

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DType is the element type of a tensor's storage.
type DType uint8

// The element types. Float16 and BFloat16 are storage types: kernels compute
// in float32 and round once when they store.
const (
	Invalid DType = iota
	Float32
	Float16
	BFloat16
	Float64
	Int32
	Int64
	Bool
	numDTypes
)

// NumDTypes is the number of element types, for tables indexed by DType.
const NumDTypes = int(numDTypes)

var dtypeNames = [...]string{"invalid", "float32", "float16", "bfloat16", "float64", "int32", "int64", "bool"}
var dtypeSizes = [...]int{0, 4, 2, 2, 8, 4, 8, 1}

// String returns the PyTorch-style name ("float32", "float16", …).
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return "dtype(" + strconv.Itoa(int(d)) + ")"
}

// Size is the number of bytes one element occupies.
func (d DType) Size() int {
	if int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d == Float32 || d == Float16 || d == BFloat16 || d == Float64 }

// IsHalf reports whether d is one of the 16-bit floating-point types.
func (d DType) IsHalf() bool { return d == Float16 || d == BFloat16 }

// IsInt reports whether d is an integer type.
func (d DType) IsInt() bool { return d == Int32 || d == Int64 }

// ComputeDType is the type elementwise kernels compute a mix of dtypes in: Float64 when
// any of them is Float64, Int32 or Int64, else Float32 (half data is computed in float32
// and rounded once on store). Every backend uses this rule, so mixed-dtype results agree
// across devices.
func ComputeDType(dts ...DType) DType {
	for _, d := range dts {
		if d == Float64 || d == Int32 || d == Int64 {
			return Float64
		}
	}
	return Float32
}

// ParseDType parses a dtype name: float32/fp32/f32, float16/fp16/half, bfloat16/bf16,
// float64/fp64/double, int32, int64/long, bool.
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "float32", "fp32", "f32", "float":
		return Float32, nil
	case "float16", "fp16", "f16", "half":
		return Float16, nil
	case "bfloat16", "bf16":
		return BFloat16, nil
	case "float64", "fp64", "f64", "double":
		return Float64, nil
	case "int32", "int":
		return Int32, nil
	case "int64", "long":
		return Int64, nil
	case "bool":
		return Bool, nil
	}
	return Invalid, fmt.Errorf("backend: unknown dtype %q (want float32, float16, bfloat16, float64, int32, int64 or bool)", s)
}

// Kind is the family of a device.
type Kind uint8

// Device kinds.
const (
	KindCPU Kind = iota
	KindCUDA
)

func (k Kind) String() string {
	if k == KindCUDA {
		return "cuda"
	}
	return "cpu"
}

// Device names one device: a kind and an index. The zero value is the CPU.
type Device struct {
	Kind  Kind
	Index int
}

// CPU is the default CPU device (cpu:0).
var CPU = Device{KindCPU, 0}

// CUDA returns the n-th CUDA device.
func CUDA(n int) Device { return Device{KindCUDA, n} }

// String returns "cpu", "cpu:1", "cuda:0".
func (d Device) String() string {
	if d.Kind == KindCPU && d.Index == 0 {
		return "cpu"
	}
	return d.Kind.String() + ":" + strconv.Itoa(d.Index)
}

// ParseDevice parses "cpu", "cpu:N", "cuda", "cuda:N", "gpu".
func ParseDevice(s string) (Device, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	name, idx, hasIdx := strings.Cut(s, ":")
	var kind Kind
	switch name {
	case "cpu":
		kind = KindCPU
	case "cuda", "gpu":
		kind = KindCUDA
	default:
		return Device{}, fmt.Errorf("backend: unknown device %q (want cpu, cpu:N or cuda:N)", s)
	}
	n := 0
	if hasIdx {
		// The message names the device kind asked for: a bad "cpu:x" must not suggest cuda:0.
		v, err := strconv.Atoi(idx)
		if err != nil || v < 0 {
			return Device{}, fmt.Errorf("backend: bad %s device index %q in %q (want a number ≥ 0, e.g. %s:0)", name, idx, s, name)
		}
		n = v
	}
	return Device{kind, n}, nil
}

// ErrOutOfMemory is returned (wrapped in *OOMError) when a device cannot satisfy an
// allocation. Check it with errors.Is; a training loop can retry with a smaller batch.
var ErrOutOfMemory = errors.New("out of memory")

// ErrNoDevice is returned when a device is asked for that is not present.
var ErrNoDevice = errors.New("no such device")

// OOMError describes a failed allocation. Free is memory the allocator holds but could
// not use for this request (fragmentation): PyTorch users ask for that figure.
type OOMError struct {
	Device    Device
	Requested int64 // bytes asked for
	Allocated int64 // bytes in use by tensors
	Reserved  int64 // bytes held by the allocator (in use + cached)
	Limit     int64 // the cap, or total device memory; 0 if unknown
	FreeCache int64 // cached but unusable for this request
}

func (e *OOMError) Error() string {
	return fmt.Sprintf("%s: out of memory: tried to allocate %s; %s allocated, %s reserved, limit %s, %s cached but unusable for this request (fragmentation); release tensors or use a smaller batch",
		e.Device, FormatBytes(e.Requested), FormatBytes(e.Allocated), FormatBytes(e.Reserved), FormatBytes(e.Limit), FormatBytes(e.FreeCache))
}

// Unwrap makes errors.Is(err, ErrOutOfMemory) true.
func (e *OOMError) Unwrap() error { return ErrOutOfMemory }

// FormatBytes prints a byte count with a binary unit ("1.50 MiB").
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	f := float64(n)
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	i := -1
	for (f >= unit || f <= -unit) && i < len(units)-1 {
		f /= unit
		i++
	}
	return strconv.FormatFloat(f, 'f', 2, 64) + " " + units[i]
}
