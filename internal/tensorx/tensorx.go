// Package tensorx gives this module's optimizers and scaler a tensor's backend view
// (its backend and storage), which package tensor does not export, so they can run a
// backend's optional capabilities (backend.FusedOptimizer, backend.MultiUnscaler) on
// tensors. It is internal: only gamp's own packages can import it.
package tensorx

import (
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/internal/tensorhook"
	"github.com/gamp-ml/gamp/tensor"
)

// Dense returns t's backend and storage when t is dense and starts its storage (ok
// false otherwise). It panics as any tensor op named op does when t was released. The
// storage must be used only while t lives, for n = t.Numel() elements.
func Dense(t *tensor.Tensor, op string) (b backend.Backend, s backend.Storage, ok bool) {
	return tensorhook.Dense(t, op, false)
}

// MustDense is Dense that panics with tensor's OpError naming op when t is not dense.
func MustDense(t *tensor.Tensor, op string) (backend.Backend, backend.Storage) {
	b, s, _ := tensorhook.Dense(t, op, true)
	return b, s
}
