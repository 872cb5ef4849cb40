package nn

import (
	"fmt"

	"github.com/gamp-ml/gamp/tensor"
)

// ReLU applies max(x, 0) (torch.nn.ReLU). The zero value is ready to use.
type ReLU struct{ Base }

// NewReLU returns a ReLU layer.
func NewReLU() *ReLU { return &ReLU{} }

// Forward applies the activation.
func (*ReLU) Forward(x *tensor.Tensor) *tensor.Tensor { return x.Relu() }

// GELU applies x·Φ(x) (torch.nn.GELU); Approximate selects the tanh approximation
// (approximate="tanh"). The zero value is the exact form.
type GELU struct {
	Base
	Approximate bool
}

// NewGELU returns an exact (erf) GELU layer.
func NewGELU() *GELU { return &GELU{} }

// Forward applies the activation.
func (g *GELU) Forward(x *tensor.Tensor) *tensor.Tensor {
	if g.Approximate {
		return x.GeluTanh()
	}
	return x.Gelu()
}

// Tanh applies tanh x (torch.nn.Tanh). The zero value is ready to use.
type Tanh struct{ Base }

// NewTanh returns a Tanh layer.
func NewTanh() *Tanh { return &Tanh{} }

// Forward applies the activation.
func (*Tanh) Forward(x *tensor.Tensor) *tensor.Tensor { return x.Tanh() }

// Sigmoid applies 1/(1+e^-x) (torch.nn.Sigmoid). The zero value is ready to use.
type Sigmoid struct{ Base }

// NewSigmoid returns a Sigmoid layer.
func NewSigmoid() *Sigmoid { return &Sigmoid{} }

// Forward applies the activation.
func (*Sigmoid) Forward(x *tensor.Tensor) *tensor.Tensor { return x.Sigmoid() }

// Dropout zeroes each element with probability P and scales the others by 1/(1-P) in
// training mode, and is the identity in evaluation mode (torch.nn.Dropout). The mask
// is drawn from the generator of the input's Context (Context.WithGenerator), so a
// step replayed with the same generator state draws the same mask.
type Dropout struct {
	Base
	P float64
}

// NewDropout returns a Dropout layer with drop probability p in [0, 1].
func NewDropout(p float64) *Dropout {
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("nn: NewDropout(%g): the probability must lie in [0, 1]", p))
	}
	return &Dropout{P: p}
}

// Forward applies dropout when the layer is training.
func (d *Dropout) Forward(x *tensor.Tensor) *tensor.Tensor {
	return tensor.Dropout(x, d.P, d.Training())
}

// Flatten merges dimensions Start..End (inclusive; negative counts from the end) into
// one (torch.nn.Flatten). NewFlatten gives PyTorch's default, 1..-1.
type Flatten struct {
	Base
	Start, End int
}

// NewFlatten returns a Flatten of dimensions 1..-1: [N, ...] becomes [N, rest].
func NewFlatten() *Flatten { return &Flatten{Start: 1, End: -1} }

// Forward flattens x.
func (f *Flatten) Forward(x *tensor.Tensor) *tensor.Tensor { return x.Flatten(f.Start, f.End) }
