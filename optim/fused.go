package optim

import (
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/internal/tensorx"
	"github.com/gamp-ml/gamp/tensor"
)

// Fused optimizer updates: one backend pass per parameter instead of a chain of
// in-place ops, bit-identical to that chain (backend.FusedOptimizer). They report
// false, doing nothing, when the device's backend has no fused kernels or an operand is
// not a dense tensor at offset 0 on the weights' device; the caller then composes the
// update from tensor ops.

// fusable reports whether every non-nil tensor of ts (at most 6, ts[0] the weights) is
// dense, starts its storage and lives on ts[0]'s device, and returns that device's
// backend as a FusedOptimizer with the storages (nil for nil tensors).
func fusable(ts ...*tensor.Tensor) (f backend.FusedOptimizer, ss [6]backend.Storage, ok bool) {
	dev := ts[0].Device()
	for i, t := range ts {
		if t == nil {
			continue
		}
		b, s, dense := tensorx.Dense(t, "fused_step")
		if !dense || t.Device() != dev {
			return nil, ss, false
		}
		if f == nil {
			if f, ok = b.(backend.FusedOptimizer); !ok {
				return nil, ss, false
			}
		}
		ss[i] = s
	}
	return f, ss, f != nil
}

// fusedSGDStep applies a (the hyperparameters; its storages and N are filled here) to
// the master weights w with gradient g and momentum buffer buf (nil without momentum),
// writing the rounded weights into half when it is not nil.
func fusedSGDStep(w, g, buf, half *tensor.Tensor, a backend.SGDArgs) bool {
	f, ss, ok := fusable(w, g, buf, half)
	if !ok || !sameNumel(w, g, buf, half) {
		return false
	}
	a.W, a.G, a.Buf, a.Half, a.N = ss[0], ss[1], ss[2], ss[3], w.Numel()
	f.SGDStep(a)
	return true
}

// fusedAdamStep is fusedSGDStep for Adam/AdamW with moments m, v and vmax (AMSGrad).
func fusedAdamStep(w, g, m, v, vmax, half *tensor.Tensor, a backend.AdamArgs) bool {
	f, ss, ok := fusable(w, g, m, v, vmax, half)
	if !ok || !sameNumel(w, g, m, v, vmax, half) {
		return false
	}
	a.W, a.G, a.M, a.V, a.VMax, a.Half, a.N = ss[0], ss[1], ss[2], ss[3], ss[4], ss[5], w.Numel()
	f.AdamStep(a)
	return true
}

// fusedSGDHalfStep is fusedSGDStep for half weights without an FP32 master
// (backend.HalfWeights, selected by a.Rounding): w is the half parameter, read and
// written in place, lo the low halves of a 16+16 split (nil for the other roundings),
// and g and buf float32.
func fusedSGDHalfStep(w, lo, g, buf *tensor.Tensor, a backend.SGDArgs) bool {
	f, ss, ok := fusable(w, lo, g, buf)
	if !ok || !sameNumel(w, lo, g, buf) {
		return false
	}
	a.W, a.G, a.Buf, a.Half, a.Lo, a.N = nil, ss[2], ss[3], ss[0], ss[1], w.Numel()
	f.SGDStep(a)
	return true
}

// fusedAdamHalfStep is fusedAdamStep for half weights without an FP32 master, as
// fusedSGDHalfStep.
func fusedAdamHalfStep(w, lo, g, m, v, vmax *tensor.Tensor, a backend.AdamArgs) bool {
	f, ss, ok := fusable(w, lo, g, m, v, vmax)
	if !ok || !sameNumel(w, lo, g, m, v, vmax) {
		return false
	}
	a.W, a.G, a.M, a.V, a.VMax, a.Half, a.Lo, a.N = nil, ss[2], ss[3], ss[4], ss[5], ss[0], ss[1], w.Numel()
	f.AdamStep(a)
	return true
}

// sameNumel reports whether every non-nil tensor of ts has w's element count.
func sameNumel(w *tensor.Tensor, ts ...*tensor.Tensor) bool {
	for _, t := range ts {
		if t != nil && t.Numel() != w.Numel() {
			return false
		}
	}
	return true
}

// halfGradFused returns the fused optimizer of w's backend when w (float32) and the
// half gradient g are both dense on that one device with as many elements, else nil.
func halfGradFused(w, g *tensor.Tensor) backend.FusedOptimizer {
	f, _, ok := fusable(w, g)
	if !ok || w.DType() != tensor.Float32 || !g.DType().IsHalf() || w.Numel() != g.Numel() {
		return nil
	}
	return f
}

// sgdHalfGradOK reports whether fusedSGDStep can update the float32 weights w from the
// half gradient g as it is: both dense on one device whose backend's fused SGD reads
// half gradients (backend.HalfGradSGD). The momentum buffer SGD makes is dense on w's
// device too.
func sgdHalfGradOK(w, g *tensor.Tensor) bool {
	h, ok := halfGradFused(w, g).(backend.HalfGradSGD)
	return ok && h.SGDHalfGrads()
}

// adamHalfGradOK is sgdHalfGradOK for fusedAdamStep (backend.HalfGradAdam); the
// moments Adam makes are dense on w's device too.
func adamHalfGradOK(w, g *tensor.Tensor) bool {
	h, ok := halfGradFused(w, g).(backend.HalfGradAdam)
	return ok && h.AdamHalfGrads()
}
