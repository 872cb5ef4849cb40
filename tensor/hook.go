package tensor

import (
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/internal/tensorhook"
)

// The optimizers' fused steps and the scaler's multi-tensor unscale reach a tensor's
// backend and storage through internal/tensorx, which only this module can import;
// tensor's public API shows neither (docs/decisions.md, "Fused steps and the
// multi-tensor unscale live with their users").
func init() {
	tensorhook.Dense = func(x any, op string, must bool) (backend.Backend, backend.Storage, bool) {
		t := x.(*Tensor)
		if !t.denseAtZero(op, must) {
			return nil, nil, false
		}
		return t.ref.b, t.ref.s, true
	}
	tensorhook.LowGrad = func(x any) any {
		if g := x.(*Tensor).lowGrad(); g != nil {
			return g
		}
		return nil
	}
}

// denseAtZero panics if t was released and reports whether t is dense and starts its
// storage; when it is not and must is set it panics naming op.
func (t *Tensor) denseAtZero(op string, must bool) bool {
	t.mustLive(op)
	if t.offset != 0 || !t.IsContiguous() {
		if must {
			fail(op, []*Tensor{t}, "needs a dense tensor")
		}
		return false
	}
	return true
}
