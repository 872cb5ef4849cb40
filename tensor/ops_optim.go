package tensor

import "github.com/gamp-ml/gamp/backend"

// Fused optimizer updates for package optim: one backend pass per parameter instead of
// a chain of in-place ops, bit-identical to that chain (backend.FusedOptimizer). They
// report false, doing nothing, when the device's backend has no fused kernels or an
// operand is not a dense tensor at offset 0 on the weights' device; the caller then
// composes the update from tensor ops.

// fusable reports whether every non-nil tensor is dense, starts its storage and lives
// on dev, and returns dev's backend as a FusedOptimizer.
func fusable(dev Device, ts ...*Tensor) (backend.FusedOptimizer, bool) {
	var f backend.FusedOptimizer
	for _, t := range ts {
		if t == nil {
			continue
		}
		t.mustLive("fused_step")
		if t.device != dev || t.offset != 0 || !t.IsContiguous() {
			return nil, false
		}
		if f == nil {
			var ok bool
			if f, ok = t.ref.b.(backend.FusedOptimizer); !ok {
				return nil, false
			}
		}
	}
	return f, f != nil
}

// FusedSGDStep applies a (the hyperparameters; its storages and N are filled here) to
// the master weights w with gradient g and momentum buffer buf (nil without momentum),
// writing the rounded weights into half when it is not nil.
func FusedSGDStep(w, g, buf, half *Tensor, a backend.SGDArgs) bool {
	f, ok := fusable(w.device, w, g, buf, half)
	if !ok || g.Numel() != w.Numel() || (buf != nil && buf.Numel() != w.Numel()) || (half != nil && half.Numel() != w.Numel()) {
		return false
	}
	a.W, a.G, a.Buf, a.Half, a.N = w.ref.s, g.ref.s, storageOf(buf), storageOf(half), w.Numel()
	f.SGDStep(a)
	return true
}

// FusedAdamStep is FusedSGDStep for Adam/AdamW with moments m, v and vmax (AMSGrad).
func FusedAdamStep(w, g, m, v, vmax, half *Tensor, a backend.AdamArgs) bool {
	f, ok := fusable(w.device, w, g, m, v, vmax, half)
	if !ok {
		return false
	}
	for _, t := range []*Tensor{g, m, v, vmax, half} {
		if t != nil && t.Numel() != w.Numel() {
			return false
		}
	}
	a.W, a.G, a.M, a.V, a.VMax, a.Half, a.N = w.ref.s, g.ref.s, m.ref.s, v.ref.s, storageOf(vmax), storageOf(half), w.Numel()
	f.AdamStep(a)
	return true
}

// FusedSGDHalfStep is FusedSGDStep for half weights without an FP32 master
// (backend.HalfWeights, selected by a.Rounding): w is the half parameter, read and
// written in place, lo the low halves of a 16+16 split (nil for the other roundings),
// and g and buf float32.
func FusedSGDHalfStep(w, lo, g, buf *Tensor, a backend.SGDArgs) bool {
	f, ok := fusable(w.device, w, lo, g, buf)
	if !ok || !sameNumel(w, lo, g, buf) {
		return false
	}
	a.W, a.G, a.Buf, a.Half, a.Lo, a.N = nil, g.ref.s, storageOf(buf), w.ref.s, storageOf(lo), w.Numel()
	f.SGDStep(a)
	return true
}

// FusedAdamHalfStep is FusedAdamStep for half weights without an FP32 master, as
// FusedSGDHalfStep.
func FusedAdamHalfStep(w, lo, g, m, v, vmax *Tensor, a backend.AdamArgs) bool {
	f, ok := fusable(w.device, w, lo, g, m, v, vmax)
	if !ok || !sameNumel(w, lo, g, m, v, vmax) {
		return false
	}
	a.W, a.G, a.M, a.V, a.VMax, a.Half, a.Lo, a.N = nil, g.ref.s, m.ref.s, v.ref.s, storageOf(vmax), w.ref.s, storageOf(lo), w.Numel()
	f.AdamStep(a)
	return true
}

// sameNumel reports whether every non-nil tensor of ts has w's element count.
func sameNumel(w *Tensor, ts ...*Tensor) bool {
	for _, t := range ts {
		if t != nil && t.Numel() != w.Numel() {
			return false
		}
	}
	return true
}
