package overflow

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// Fault injection, for tests that prove a run survives an overflow: each function arms
// a fault for the given steps of the Watcher (Record and SetStep count them; nil steps
// means every step) and returns a function that disarms it.

// InjectGrad puts value (+Inf, NaN, or any number) into the first element of p's
// gradient at the given steps, as the gradient arrives at the parameter in backward
// (through the Watcher's gradient hook on p, which then measures the faulty gradient:
// the report's first non-finite names p's module and "accumulate_grad(<name>)").
func (w *Watcher) InjectGrad(p *nn.Param, steps []int, value float64) (undo func()) {
	return w.gradFault(p, steps, func(g *tensor.Tensor) { setFirst(g, value) })
}

// FlushSmallGrads zeroes the elements of p's gradient with |g| < threshold at the
// given steps, as float16 flushes gradients too small for it (what loss scaling
// prevents): the parameter then learns nothing from them.
func (w *Watcher) FlushSmallGrads(p *nn.Param, threshold float64, steps []int) (undo func()) {
	if !(threshold >= 0) {
		panic(fmt.Sprintf("overflow: FlushSmallGrads threshold must be ≥ 0, got %g", threshold))
	}
	return w.gradFault(p, steps, func(g *tensor.Tensor) { flushBelow(g, threshold) })
}

func (w *Watcher) gradFault(p *nn.Param, steps []int, apply func(*tensor.Tensor)) (undo func()) {
	f := &gradFault{steps: newStepSet(steps), apply: apply}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		panic("overflow: fault injection on a closed Watcher")
	}
	pw := w.watchParam(p)
	pw.faults = append(pw.faults, f)
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		f.removed = true
	}
}

// ScaleOutput multiplies m's output by factor at the given steps (through a forward
// hook on m; m must be a module of the watched model), to force an overflow in the
// ops that follow, or in the multiplication itself when the output is half precision.
// The multiplication is recorded as m's "mul_scalar".
func (w *Watcher) ScaleOutput(m nn.Module, factor float64, steps []int) (undo func()) {
	path := w.pathOf(m)
	set := newStepSet(steps)
	return nn.RegisterForwardHook(m, func(_ nn.Module, _, out *tensor.Tensor) *tensor.Tensor {
		w.mu.Lock()
		active := !w.closed && set.has(w.step)
		if active {
			w.stack = append(w.stack, path)
		}
		w.mu.Unlock()
		if !active {
			return nil
		}
		r := out.MulScalar(factor)
		w.leave(path)
		return r
	})
}

// setFirst writes v into the first element of g, in place.
func setFirst(g *tensor.Tensor, v float64) {
	e := g
	for d := range g.Dim() {
		s := e.Slice(d, 0, 1, 1)
		if e != g {
			e.Release()
		}
		e = s
	}
	e.FillInPlace(v)
	if e != g {
		e.Release()
	}
}

// flushBelow zeroes the elements of g with |x| < thr, in place (through the host: a
// test fault, not a hot path).
func flushBelow(g *tensor.Tensor, thr float64) {
	vals := g.Float64s()
	for i, x := range vals {
		if math.Abs(x) < thr {
			vals[i] = 0
		}
	}
	tmp := tensor.FromSlice(vals, g.Shape(), tensor.WithDevice(g.Device()))
	g.CopyFrom(tmp)
	tmp.Release()
}
