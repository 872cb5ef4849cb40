package tensor

import (
	"fmt"
	"strings"

	"github.com/gamp-ml/gamp/backend"
)

// DType is the element type of a tensor.
type DType = backend.DType

// The element types.
const (
	Float32  = backend.Float32
	Float16  = backend.Float16
	BFloat16 = backend.BFloat16
	Float64  = backend.Float64
	Int32    = backend.Int32
	Int64    = backend.Int64
	Bool     = backend.Bool
)

// Device names a device.
type Device = backend.Device

// CPU is the default CPU device.
var CPU = backend.CPU

// CUDA returns the n-th CUDA device.
func CUDA(n int) Device { return backend.CUDA(n) }

// CPUDevice returns the n-th logical CPU device (cpu:n); each has its own allocator.
func CPUDevice(n int) Device { return Device{Kind: backend.KindCPU, Index: n} }

// ParseDevice parses "cpu", "cpu:1", "cuda:0".
func ParseDevice(s string) (Device, error) { return backend.ParseDevice(s) }

// ParseDType parses "float32", "fp16", "bf16", ….
func ParseDType(s string) (DType, error) { return backend.ParseDType(s) }

// ErrOutOfMemory is the sentinel every out-of-memory error wraps: check it with
// errors.Is (see CatchOOM).
var ErrOutOfMemory = backend.ErrOutOfMemory

// Shape is a list of dimension sizes.
type Shape []int

// Numel is the number of elements (1 for a scalar shape).
func (s Shape) Numel() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Equal reports whether two shapes are identical.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// Clone returns a copy of s.
func (s Shape) Clone() Shape { return append(Shape(nil), s...) }

func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func contiguousStrides(s Shape) []int {
	st := make([]int, len(s))
	acc := 1
	for i := len(s) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= s[i]
	}
	return st
}

// OpError is the panic value for programmer misuse of an op: wrong shapes, dtypes or
// devices. It names the op and its inputs and says what to do.
type OpError struct {
	Op      string
	Msg     string
	Shapes  []Shape
	DTypes  []DType
	Devices []Device
}

func (e *OpError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "tensor: %s: %s", e.Op, e.Msg)
	if len(e.Shapes) > 0 {
		sb.WriteString(" (inputs:")
		for i := range e.Shapes {
			fmt.Fprintf(&sb, " %v %s", e.Shapes[i], e.DTypes[i])
			if i < len(e.Devices) {
				fmt.Fprintf(&sb, " on %s", e.Devices[i])
			}
			if i < len(e.Shapes)-1 {
				sb.WriteString(",")
			}
		}
		sb.WriteString(")")
	}
	return sb.String()
}

// fail panics with an OpError describing ts.
func fail(op string, ts []*Tensor, format string, args ...any) {
	e := &OpError{Op: op, Msg: fmt.Sprintf(format, args...)}
	for _, t := range ts {
		if t == nil {
			continue
		}
		e.Shapes = append(e.Shapes, t.shape)
		e.DTypes = append(e.DTypes, t.dtype)
		e.Devices = append(e.Devices, t.device)
	}
	panic(e)
}

// Option adjusts how a tensor is created.
type Option func(*options)

type options struct {
	dtype        DType
	device       Device
	deviceSet    bool
	requiresGrad bool
	ctx          *Context
}

// WithDType sets the element type (default Float32).
func WithDType(dt DType) Option { return func(o *options) { o.dtype = dt } }

// WithDevice sets the device (default: DefaultDevice()).
func WithDevice(d Device) Option { return func(o *options) { o.device, o.deviceSet = d, true } }

// WithGrad marks the new tensor as a leaf that requires a gradient.
func WithGrad() Option { return func(o *options) { o.requiresGrad = true } }

// WithContext creates the tensor inside c: it is released when c closes, and ops on it
// run under c's autocast and grad state.
func WithContext(c *Context) Option { return func(o *options) { o.ctx = c } }

func buildOptions(def DType, opts []Option) options {
	o := options{dtype: def}
	for _, f := range opts {
		f(&o)
	}
	if !o.deviceSet {
		o.device = DefaultDevice()
	}
	return o
}
