package nn

import (
	"strconv"

	"github.com/gamp-ml/gamp/tensor"
)

// Sequential runs its layers one after the other (torch.nn.Sequential). The layers are
// its children, named "0", "1", …, so their parameters are "0.weight", "1.bias", ….
type Sequential struct {
	Base
	layers []Module
}

// NewSequential returns a Sequential of the given layers.
func NewSequential(layers ...Module) *Sequential {
	s := &Sequential{}
	s.init()
	for _, m := range layers {
		s.Append(m)
	}
	return s
}

// Append adds a layer at the end, named by its position, and returns s.
func (s *Sequential) Append(m Module) *Sequential {
	s.AddModule(strconv.Itoa(len(s.layers)), m)
	s.layers = append(s.layers, m)
	return s
}

// Len returns the number of layers.
func (s *Sequential) Len() int { return len(s.layers) }

// At returns layer i.
func (s *Sequential) At(i int) Module { return s.layers[i] }

// Forward feeds x through every layer in order (through Call, so the layers' hooks
// run).
func (s *Sequential) Forward(x *tensor.Tensor) *tensor.Tensor {
	for _, m := range s.layers {
		x = Call(m, x)
	}
	return x
}
