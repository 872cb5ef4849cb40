package dist

import (
	"fmt"

	"github.com/gamp-ml/gamp/tensor"
)

// Host staging: the MPI backend moves a tensor's elements into a Go slice, runs the
// collective on that slice and writes the result back. For CPU tensors that is one
// copy each way; for device tensors it is the host round trip a CUDA-aware MPI would
// avoid (NCCL works on device memory directly).

// checkReduce reports a tensor an all-reduce cannot take.
func checkReduce(t *tensor.Tensor, op ReduceOp) error {
	if t == nil {
		return fmt.Errorf("dist: all-reduce of a nil tensor")
	}
	if t.Released() {
		return fmt.Errorf("dist: all-reduce of a released tensor %v %s", t.Shape(), t.DType())
	}
	switch op {
	case Sum, Max, Min:
	case Avg:
		if !t.DType().IsFloat() {
			return fmt.Errorf("dist: Avg needs a floating-point tensor, got %s (use Sum and divide)", t.DType())
		}
	default:
		return fmt.Errorf("dist: unknown reduce op %v", op)
	}
	if t.DType() == tensor.Bool {
		return fmt.Errorf("dist: all-reduce of a bool tensor; convert it to int32 first")
	}
	return nil
}

// readReduce copies t to the host in the type the reduction runs in: float32 for
// float32 and half tensors, float64, int32 or int64 otherwise.
func readReduce(t *tensor.Tensor) any {
	switch t.DType() {
	case tensor.Float64:
		return t.Float64s()
	case tensor.Int32:
		return t.Int32s()
	case tensor.Int64:
		return t.Int64s()
	}
	return t.Float32s()
}

// readExact copies t to the host bit for bit (half tensors as raw 16-bit words).
func readExact(t *tensor.Tensor) any {
	switch t.DType() {
	case tensor.Float16, tensor.BFloat16:
		if t.IsContiguous() {
			return t.Uint16s()
		}
	case tensor.Bool:
		return t.Bools()
	}
	return readReduce(t)
}

// writeHost stores buf (from readReduce or readExact) into t, converting to t's dtype.
func writeHost(t *tensor.Tensor, buf any) {
	direct := t.IsContiguous()
	if direct {
		switch buf.(type) {
		case []float32:
			direct = t.DType() == tensor.Float32
		case []float64:
			direct = t.DType() == tensor.Float64
		case []int32:
			direct = t.DType() == tensor.Int32
		case []int64:
			direct = t.DType() == tensor.Int64
		case []bool:
			direct = t.DType() == tensor.Bool
		case []uint16:
			direct = t.DType().IsHalf()
		}
	}
	if direct {
		s, off := t.Storage()
		t.Backend().Upload(s, off, buf)
		return
	}
	var tmp *tensor.Tensor
	dev := tensor.WithDevice(t.Device())
	shape := shapeOf(t)
	switch b := buf.(type) {
	case []float32:
		tmp = tensor.FromSlice(b, shape, dev)
	case []float64:
		tmp = tensor.FromSlice(b, shape, dev)
	case []int32:
		tmp = tensor.FromSlice(b, shape, dev)
	case []int64:
		tmp = tensor.FromSlice(b, shape, dev)
	case []bool:
		tmp = tensor.FromSlice(b, shape, dev)
	default:
		panic(fmt.Sprintf("dist: internal error: cannot write %T into a %s tensor", buf, t.DType()))
	}
	t.CopyFrom(tmp)
	tmp.Release()
}

// divide turns a sum into an average over n processes.
func divide(buf any, n int) {
	switch b := buf.(type) {
	case []float32:
		d := float32(n)
		for i := range b {
			b[i] /= d
		}
	case []float64:
		d := float64(n)
		for i := range b {
			b[i] /= d
		}
	}
}

// shapeOf is t's shape, never nil (FromSlice reads a nil shape as 1-d).
func shapeOf(t *tensor.Tensor) tensor.Shape {
	if s := t.Shape(); s != nil {
		return s
	}
	return tensor.Shape{}
}
