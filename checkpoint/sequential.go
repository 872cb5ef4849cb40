package checkpoint

import (
	"fmt"
	"math"
	"strconv"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// Sequential runs modules one after the other on x, checkpointing them in segments
// (torch.utils.checkpoint.checkpoint_sequential): the modules are split into segments
// runs of len(modules)/segments modules, the remainder going to the last. Every
// segment but the last is a Checkpoint; the last is not recomputed, since backward
// needs its activations first. segments 0 means √n (rounded), which minimises memory
// for n similar modules; 1 recomputes nothing.
//
// The last segment's activations are released as soon as backward has run through it
// (rather than when the caller's Context closes), so the recomputation of the other
// segments never coexists with them: peak memory is that of PyTorch. (A graph
// backpropagated a second time with RetainGraph recomputes it too.) The modules'
// buffers are restored after each recomputation, so BatchNorm's running statistics
// and batch counters come out as without checkpointing.
func Sequential(modules []nn.Module, segments int, x *tensor.Tensor) *tensor.Tensor {
	n := len(modules)
	segments = segmentsFor(n, segments)
	if n == 0 {
		return x
	}
	size := n / segments
	for s := 0; s < segments-1; s++ {
		x = segment(modules[s*size:(s+1)*size], x, false)
	}
	tail := modules[(segments-1)*size:]
	if c := x.Context(); c == nil || !c.GradEnabled() {
		return run(tail, x) // no backward to keep the activations for
	}
	return segment(tail, x, true)
}

// segmentsFor checks segments against n modules and resolves 0 to √n.
func segmentsFor(n, segments int) int {
	if segments == 0 {
		return max(1, int(math.Round(math.Sqrt(float64(n)))))
	}
	if segments < 0 || segments > max(n, 1) {
		panic(&tensor.OpError{Op: "checkpoint.Sequential", Msg: fmt.Sprintf("segments %d must lie in [1, %d] (the number of modules), or be 0 for √n", segments, n)})
	}
	return segments
}

// segment runs modules on x as one checkpointed unit (keep: the last, kept one),
// restoring their buffers after a recomputation.
func segment(modules []nn.Module, x *tensor.Tensor, keep bool) *tensor.Tensor {
	var bufs []*tensor.Tensor
	for _, m := range modules {
		for _, b := range m.Buffers() {
			bufs = append(bufs, b.T)
		}
	}
	name := "checkpoint"
	if keep {
		name = "checkpoint_tail"
	}
	fn := func(xs []*tensor.Tensor) *tensor.Tensor { return run(modules, xs[0]) }
	return Options{Buffers: bufs}.run(name, fn, []*tensor.Tensor{x}, keep)
}

// run feeds x through modules through nn.Call, so their hooks run — in the forward and
// again in a recomputation, as in PyTorch.
func run(modules []nn.Module, x *tensor.Tensor) *tensor.Tensor {
	for _, m := range modules {
		x = nn.Call(m, x)
	}
	return x
}

// SequentialModule is an nn.Module that runs layers as Sequential does: a drop-in
// replacement for an nn.Sequential whose activations should be checkpointed, built by
// NewSequentialModule.
type SequentialModule struct {
	nn.Base
	// Segments is the number of segments (0: √n); it may be changed between steps.
	Segments int
	layers   []nn.Module
}

// NewSequentialModule returns a module running seq's layers in segments checkpointed
// segments. It takes the layers over, registered under the same names ("0", "1", …),
// so parameter names and state dicts are those of seq: use it in place of seq.
func NewSequentialModule(seq *nn.Sequential, segments int) *SequentialModule {
	segmentsFor(seq.Len(), segments)
	m := &SequentialModule{Segments: segments}
	for i := range seq.Len() {
		l := seq.At(i)
		m.AddModule(strconv.Itoa(i), l)
		m.layers = append(m.layers, l)
	}
	m.SetTraining(seq.Training())
	return m
}

// Forward runs the layers on x, checkpointed in segments.
func (m *SequentialModule) Forward(x *tensor.Tensor) *tensor.Tensor {
	return Sequential(m.layers, m.Segments, x)
}

// Len returns the number of layers.
func (m *SequentialModule) Len() int { return len(m.layers) }

// At returns layer i.
func (m *SequentialModule) At(i int) nn.Module { return m.layers[i] }
