package nn

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/tensor"
)

// misuse panics with a tensor.OpError naming the layer and its input, the typed value
// every programmer error in gamp panics with.
func misuse(layer string, x *tensor.Tensor, format string, args ...any) {
	e := &tensor.OpError{Op: layer, Msg: fmt.Sprintf(format, args...)}
	if x != nil {
		e.Shapes = []tensor.Shape{x.Shape()}
		e.DTypes = []tensor.DType{x.DType()}
		e.Devices = []tensor.Device{x.Device()}
	}
	panic(e)
}

// zerosParam is a new float32 leaf of the given shape on the default device.
func zerosParam(shape ...int) *tensor.Tensor { return tensor.Zeros(tensor.Shape(shape)) }

// Linear applies y = x·Wᵀ + b to the last dimension of x (torch.nn.Linear). Under
// autocast it runs in the low-precision dtype.
type Linear struct {
	Base
	In, Out int
	Weight  *Param // [Out, In]
	Bias    *Param // [Out]; nil without bias
}

// NewLinear returns a Linear layer initialised as PyTorch does: Kaiming-uniform
// weights with a = √5 (U(±1/√In)) and a U(±1/√In) bias.
func NewLinear(in, out int, init ...Init) *Linear {
	if in <= 0 || out <= 0 {
		panic(fmt.Sprintf("nn: NewLinear(%d, %d): sizes must be positive", in, out))
	}
	o := initOf("NewLinear", init)
	l := &Linear{In: in, Out: out}
	l.Weight = l.AddParam("weight", zerosParam(out, in))
	KaimingUniform(l.Weight, math.Sqrt(5), FanIn, o.Gen)
	if !o.NoBias {
		l.Bias = l.AddParam("bias", zerosParam(out))
		initBias(l.Bias, l.Weight, o.Gen)
	}
	return l
}

// initBias draws a bias from U(±1/√fanIn) of its weight, PyTorch's default for Linear
// and Conv.
func initBias(b, w *Param, g *tensor.Generator) {
	fanIn, _ := Fans(w.T.Shape())
	bound := 0.0
	if fanIn > 0 {
		bound = 1 / math.Sqrt(float64(fanIn))
	}
	Uniform(b, -bound, bound, g)
}

// Forward maps x [..., In] to [..., Out].
func (l *Linear) Forward(x *tensor.Tensor) *tensor.Tensor {
	if x.Dim() < 1 || x.Size(-1) != l.In {
		misuse("nn.Linear", x, "want input [..., %d]", l.In)
	}
	return tensor.Linear(x, l.Weight.T, optional(l.Bias))
}

// forwardReLU is Forward followed by a ReLU, as one tensor.LinearReLU op (same
// results, bit for bit).
func (l *Linear) forwardReLU(x *tensor.Tensor) (*tensor.Tensor, bool) {
	if x.Dim() < 1 || x.Size(-1) != l.In {
		misuse("nn.Linear", x, "want input [..., %d]", l.In)
	}
	return tensor.LinearReLU(x, l.Weight.T, optional(l.Bias)), true
}

// forwardGELU is Forward followed by an exact GELU, as one tensor.LinearGELU op (same
// results, bit for bit).
func (l *Linear) forwardGELU(x *tensor.Tensor) *tensor.Tensor {
	if x.Dim() < 1 || x.Size(-1) != l.In {
		misuse("nn.Linear", x, "want input [..., %d]", l.In)
	}
	return tensor.LinearGELU(x, l.Weight.T, optional(l.Bias))
}

// optional returns p's tensor, or nil for a missing parameter.
func optional(p *Param) *tensor.Tensor {
	if p == nil {
		return nil
	}
	return p.T
}

// Embedding is a lookup table of Num vectors of size Dim (torch.nn.Embedding): Forward
// takes Int32 or Int64 indices of any shape and returns [indices..., Dim].
type Embedding struct {
	Base
	Num, Dim int
	Weight   *Param // [Num, Dim]
}

// NewEmbedding returns an Embedding with N(0, 1) weights, as PyTorch.
func NewEmbedding(num, dim int, init ...Init) *Embedding {
	if num <= 0 || dim <= 0 {
		panic(fmt.Sprintf("nn: NewEmbedding(%d, %d): sizes must be positive", num, dim))
	}
	o := initOf("NewEmbedding", init)
	e := &Embedding{Num: num, Dim: dim}
	e.Weight = e.AddParam("weight", zerosParam(num, dim))
	Normal(e.Weight, 0, 1, o.Gen)
	return e
}

// Forward looks up the rows idx picks.
func (e *Embedding) Forward(idx *tensor.Tensor) *tensor.Tensor {
	if !idx.DType().IsInt() {
		misuse("nn.Embedding", idx, "indices must be Int32 or Int64")
	}
	return tensor.Embedding(idx, e.Weight.T)
}
