package tensorx

import (
	"github.com/gamp-ml/gamp/internal/tensorhook"
	"github.com/gamp-ml/gamp/tensor"
)

// LowGrad returns the float32 leaf t's gradient while it is still deferred in the half
// dtype it arrived in (Grad widens it on first call), nil otherwise. The tensor stays
// t's: it must not be released or written, and is valid until t's gradient changes
// (Backward, SetGrad, ZeroGrad, Grad). Its values widened to float32 are exactly what
// Grad returns.
func LowGrad(t *tensor.Tensor) *tensor.Tensor {
	if g, _ := tensorhook.LowGrad(t).(*tensor.Tensor); g != nil {
		return g
	}
	return nil
}
