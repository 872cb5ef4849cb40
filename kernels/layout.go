package kernels

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/gamp-ml/gamp/backend"
)

// MaxDims is the most dimensions a Layout holds after NewLayouts has merged what it can.
const MaxDims = 8

// Layout mirrors the kernels' struct Layout (144 bytes, 8-aligned): a strided view whose
// element i0, …, i_{NDim-1} of a row-major walk over Shape lives at
// Offset + Σ i_k·Stride[k] elements from the storage pointer. Offsets and strides count
// elements, not bytes.
type Layout struct {
	NDim   int32 `c:"ndim"`
	_      int32
	Offset int64          `c:"offset"`
	Shape  [MaxDims]int64 `c:"shape"`
	Stride [MaxDims]int64 `c:"stride"`
}

// NewLayouts returns the Layouts of views that share one shape (a kernel's operands: dst
// first, then its sources, broadcast ones with zero strides) and the number of elements
// they cover. Dimensions of size 1 are dropped and adjacent dimensions merged where
// every view is contiguous across them, so most calls end up with NDim = 1; it fails
// when the views' shapes differ or more than MaxDims dimensions remain.
func NewLayouts(views ...backend.View) ([]Layout, int64, error) {
	if len(views) == 0 {
		return nil, 0, fmt.Errorf("kernels: NewLayouts needs at least one view")
	}
	shape := views[0].Shape
	for i, v := range views {
		if !slices.Equal(v.Shape, shape) {
			return nil, 0, fmt.Errorf("kernels: view %d has shape %v, view 0 %v; expand or broadcast them to one shape first", i, v.Shape, shape)
		}
		if len(v.Strides) != len(v.Shape) {
			return nil, 0, fmt.Errorf("kernels: view %d has %d strides for %d dimensions", i, len(v.Strides), len(v.Shape))
		}
	}
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	out := make([]Layout, len(views))
	if n == 0 {
		for i, v := range views {
			out[i] = Layout{NDim: 1, Offset: int64(v.Offset)}
		}
		return out, 0, nil
	}
	var cs []int64                     // collapsed shape
	cst := make([][]int64, len(views)) // collapsed strides per view
	for d, sz := range shape {
		if sz == 1 {
			continue
		}
		if k := len(cs) - 1; k >= 0 {
			merge := true
			for i, v := range views {
				if cst[i][k] != int64(v.Strides[d])*int64(sz) {
					merge = false
					break
				}
			}
			if merge {
				cs[k] *= int64(sz)
				for i, v := range views {
					cst[i][k] = int64(v.Strides[d])
				}
				continue
			}
		}
		cs = append(cs, int64(sz))
		for i, v := range views {
			cst[i] = append(cst[i], int64(v.Strides[d]))
		}
	}
	if len(cs) == 0 { // a single element
		cs = []int64{1}
		for i := range cst {
			cst[i] = []int64{0}
		}
	}
	if len(cs) > MaxDims {
		return nil, 0, fmt.Errorf("kernels: %d dimensions remain after merging shape %v; kernels take at most %d (copy to a contiguous tensor first)", len(cs), shape, MaxDims)
	}
	for i, v := range views {
		l := Layout{NDim: int32(len(cs)), Offset: int64(v.Offset)}
		copy(l.Shape[:], cs)
		copy(l.Stride[:], cst[i])
		out[i] = l
	}
	return out, n, nil
}

// Contiguous returns the Layout of n dense elements starting at offset.
func Contiguous(offset, n int64) Layout {
	l := Layout{NDim: 1, Offset: offset}
	l.Shape[0], l.Stride[0] = n, 1
	return l
}

// Conv2d mirrors the kernels' struct Conv2d: backend.ConvArgs as 64-bit integers.
type Conv2d struct {
	N         int64 `c:"n"`
	C         int64 `c:"c"`
	H         int64 `c:"h"`
	W         int64 `c:"w"`
	KH        int64 `c:"kh"`
	KW        int64 `c:"kw"`
	StrideH   int64 `c:"sh"`
	StrideW   int64 `c:"sw"`
	PadH      int64 `c:"ph"`
	PadW      int64 `c:"pw"`
	DilationH int64 `c:"dh"`
	DilationW int64 `c:"dw"`
	OH        int64 `c:"oh"`
	OW        int64 `c:"ow"`
}

// NewConv2d converts a (which the caller has validated as the CPU backend does).
func NewConv2d(a backend.ConvArgs) Conv2d {
	return Conv2d{int64(a.N), int64(a.C), int64(a.H), int64(a.W), int64(a.KH), int64(a.KW),
		int64(a.StrideH), int64(a.StrideW), int64(a.PadH), int64(a.PadW), int64(a.DilationH), int64(a.DilationW),
		int64(a.OH), int64(a.OW)}
}

// Pool2d mirrors the kernels' struct Pool2d: backend.PoolArgs as 64-bit integers, Kind
// the backend.PoolKind and CountIncludePad 0 or 1.
type Pool2d struct {
	N               int64 `c:"n"`
	C               int64 `c:"c"`
	H               int64 `c:"h"`
	W               int64 `c:"w"`
	KH              int64 `c:"kh"`
	KW              int64 `c:"kw"`
	StrideH         int64 `c:"sh"`
	StrideW         int64 `c:"sw"`
	PadH            int64 `c:"ph"`
	PadW            int64 `c:"pw"`
	OH              int64 `c:"oh"`
	OW              int64 `c:"ow"`
	Kind            int32 `c:"kind"`
	CountIncludePad int32 `c:"count_include_pad"`
}

// NewPool2d converts a (which the caller has validated as the CPU backend does).
func NewPool2d(a backend.PoolArgs) Pool2d {
	p := Pool2d{int64(a.N), int64(a.C), int64(a.H), int64(a.W), int64(a.KH), int64(a.KW),
		int64(a.StrideH), int64(a.StrideW), int64(a.PadH), int64(a.PadW), int64(a.OH), int64(a.OW),
		int32(a.Kind), 0}
	if a.CountIncludePad {
		p.CountIncludePad = 1
	}
	return p
}

// Flags of the sgd and adam kernels (their flags parameter).
const (
	FlagDecoupled int32 = 1  // AdamW: decay the weights instead of adding to the gradient
	FlagAMSGrad   int32 = 2  // Adam: use the running maximum of the second moment (vmax)
	FlagMaximize  int32 = 4  // ascend instead of descending
	FlagNesterov  int32 = 8  // SGD: Nesterov momentum
	FlagFirst     int32 = 16 // SGD: the momentum buffer is new (set it to the gradient)
)

// AdamScalars returns the adam kernel's step_size = lr/(1−β1^t) and bc2_sqrt = √(1−β2^t)
// for step t (1 for the first step), computed as optim.Adam computes them.
func AdamScalars(lr, beta1, beta2 float64, step int64) (stepSize, bc2Sqrt float64) {
	t := float64(step)
	bc1 := 1 - math.Pow(beta1, t)
	bc2 := 1 - math.Pow(beta2, t)
	return lr / bc1, math.Sqrt(bc2)
}

// UnaryGradUses says which tensor unary_backward's parameter a must hold for op: the
// input x (Log, Abs, Relu, Gelu, GeluTanh, Square, PowScalar, Clamp), the output y (Exp,
// Sqrt, Rsqrt, Tanh, Sigmoid, Recip; pass x with recompute = 1 when y was not kept), or
// neither (a may be 0).
func UnaryGradUses(op backend.UnaryOp) (x, y bool) {
	switch op {
	case backend.Exp, backend.Sqrt, backend.Rsqrt, backend.Tanh, backend.Sigmoid, backend.Recip:
		return false, true
	case backend.Log, backend.Abs, backend.Relu, backend.Gelu, backend.GeluTanh,
		backend.Square, backend.PowScalar, backend.Clamp:
		return true, false
	}
	return false, false
}

// GroupIndex prepares index_add_sorted's order and starts for idx: the positions of idx
// sorted stably by value, and where each run of one value starts (plus a final
// len(idx)); the kernel's groups is len(starts)-1. It fails at the first index outside
// [0, n).
func GroupIndex[I int32 | int64](idx []I, n int) (order, starts []int64, err error) {
	for j, v := range idx {
		if v < 0 || int64(v) >= int64(n) {
			return nil, nil, fmt.Errorf("kernels: index %d at position %d is out of range for size %d", v, j, n)
		}
	}
	order = make([]int64, len(idx))
	for j := range order {
		order[j] = int64(j)
	}
	if !slices.IsSorted(idx) {
		slices.SortStableFunc(order, func(a, b int64) int { return cmp.Compare(idx[a], idx[b]) })
	}
	starts = []int64{0}
	for k := 1; k < len(order); k++ {
		if idx[order[k]] != idx[order[k-1]] {
			starts = append(starts, int64(k))
		}
	}
	if len(idx) == 0 {
		return order, starts, nil
	}
	return order, append(starts, int64(len(idx))), nil
}
