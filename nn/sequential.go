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
// run). A BatchNorm or Linear directly followed by a ReLU, or a Linear directly
// followed by an exact GELU, neither with hooks, runs as one tensor.BatchNormReLU,
// tensor.LinearReLU or tensor.LinearGELU op, whose results are those of the two
// layers (see CallPair); a LayerNorm directly followed by a Linear that autocast runs
// in a half dtype writes that dtype itself (see CallInto).
func (s *Sequential) Forward(x *tensor.Tensor) *tensor.Tensor {
	for i := 0; i < len(s.layers); i++ {
		if i+1 < len(s.layers) {
			if y, ok := forwardFused(s.layers[i], s.layers[i+1], x); ok {
				x = y
				i++
				continue
			}
			x = CallInto(s.layers[i], s.layers[i+1], x)
			continue
		}
		x = Call(s.layers[i], x)
	}
	return x
}

// reluFuser is a layer that can apply the ReLU layer that follows it in its own op.
type reluFuser interface {
	forwardReLU(x *tensor.Tensor) (*tensor.Tensor, bool)
}

// CallPair is Call(next, Call(m, x)), run as one op where forwardFused has one for
// the pair (a Linear or BatchNorm then a ReLU, a Linear then an exact GELU) and
// neither layer has hooks, with the same results and gradients, bit for bit. For a
// Linear then a GELU the one op is also smaller: with float32 data on a backend that
// writes GELU's backward factor in its forward, it keeps two tensors of the hidden
// size for the backward where the two calls keep three (tensor.LinearGELU).
func CallPair(m, next Module, x *tensor.Tensor) *tensor.Tensor {
	if y, ok := forwardFused(m, next, x); ok {
		return y
	}
	return Call(next, Call(m, x))
}

// InputLinear is implemented by modules whose input goes to one Linear and nowhere
// else, such as an attention block's query-key-value projection: CallInto may then
// hand them a LayerNorm's output already in the dtype autocast runs that Linear in.
type InputLinear interface {
	InputLinear() *Linear
}

// CallInto is Call(m, x) for an output that next alone reads, with the same values
// and gradients as Call(next, Call(m, x)) gets, bit for bit. Where m is a LayerNorm
// and next a Linear (or an InputLinear) that autocast runs in a half dtype, and none of
// them has hooks, the norm's output comes out in that dtype (tensor.LayerNormAs): the
// Linear's cast of it becomes the norm's own rounding as it stores, so neither a
// float32 output nor the cast's passes over memory (forward and backward) remain.
// Otherwise it is Call(m, x). Hooks see what they would without it: nothing is fused
// where one is set.
func CallInto(m, next Module, x *tensor.Tensor) *tensor.Tensor {
	if h, ok := m.(hooked); ok {
		m = h.Module
	}
	ln, ok := m.(*LayerNorm)
	if !ok || m.base().hooks.set.Load() != nil {
		return Call(m, x)
	}
	if h, ok := next.(hooked); ok {
		next = h.Module
	}
	var lin *Linear
	switch n := next.(type) {
	case *Linear:
		lin = n
	case InputLinear:
		lin = n.InputLinear()
	}
	if lin == nil || next.base().hooks.set.Load() != nil || lin.base().hooks.set.Load() != nil {
		return Call(m, x)
	}
	p := x.Context().Autocast()
	if p == nil || x.DType() == tensor.Float64 || p.Category(linearOp, x.Device()) != tensor.LowerPrecision {
		return Call(m, x)
	}
	return ln.forwardAs(x, p.LowDType())
}

// linearOp is the registry row autocast decides a Linear's dtype by.
var linearOp = func() *tensor.Op {
	op, ok := tensor.LookupOp("linear")
	if !ok {
		panic("nn: no linear op in the tensor registry")
	}
	return op
}()

// forwardFused runs m then next as one op when m is a Linear and next an exact GELU
// (tensor.LinearGELU), or as forwardFusedReLU does, and neither has hooks; ok is
// false, and nothing ran, otherwise.
func forwardFused(m, next Module, x *tensor.Tensor) (y *tensor.Tensor, ok bool) {
	l, lin := m.(*Linear)
	g, gelu := next.(*GELU)
	if !lin || !gelu || g.Approximate {
		return forwardFusedReLU(m, next, x)
	}
	if m.base().hooks.set.Load() != nil || next.base().hooks.set.Load() != nil {
		return nil, false
	}
	return l.forwardGELU(x), true
}

// forwardFusedReLU runs m then next as one op when m is one of this package's
// BatchNorm layers or a Linear, next a ReLU, and neither has hooks; ok is false, and nothing ran,
// otherwise. The concrete types are listed rather than any reluFuser: a type of
// another package that embeds a BatchNorm (dist.SyncBatchNorm) has forwardReLU
// promoted but a Forward of its own, which fusing would skip.
func forwardFusedReLU(m, next Module, x *tensor.Tensor) (y *tensor.Tensor, ok bool) {
	var f reluFuser
	switch l := m.(type) {
	case *BatchNorm:
		f = l
	case *BatchNorm1d:
		f = l
	case *BatchNorm2d:
		f = l
	case *Linear:
		f = l
	}
	if _, relu := next.(*ReLU); f == nil || !relu {
		return nil, false
	}
	if m.base().hooks.set.Load() != nil || next.base().hooks.set.Load() != nil {
		return nil, false
	}
	return f.forwardReLU(x)
}
