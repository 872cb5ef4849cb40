package optim

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/tensor"
)

// ClipGradNorm clips the gradients in place so that their total norm is at most
// maxNorm (torch.nn.utils.clip_grad_norm_) and returns the total norm before clipping.
// normType is the p of the p-norm: 2 (the usual), any p > 0, or math.Inf(1) for the
// largest absolute value. Nil gradients are skipped.
//
// The norm is accumulated in float64 whatever the gradients' dtype, so float32
// gradients whose squares overflow float32 still have a finite norm. When the total
// exceeds maxNorm every gradient is multiplied by maxNorm/(total+1e-6) (the factor is
// applied when it is below 1, as PyTorch's clamped coefficient). maxNorm = +Inf
// measures without clipping.
//
// A non-finite total — some gradient holds Inf or NaN, as after an fp16 overflow — is
// returned as is and the gradients are left untouched: the scaler will skip the step,
// so there is nothing to clip. Call it after the scaler's Unscale, on the optimizer's
// MasterGrads: clipping still-scaled gradients clips against the wrong threshold.
func ClipGradNorm(grads []*tensor.Tensor, maxNorm float64, normType float64) (total float64) {
	if !(maxNorm >= 0) {
		panic(fmt.Errorf("optim: ClipGradNorm: maxNorm must be ≥ 0, got %g", maxNorm))
	}
	if !(normType > 0) {
		panic(fmt.Errorf("optim: ClipGradNorm: normType must be > 0 or +Inf, got %g", normType))
	}
	total = GradNorm(grads, normType)
	if math.IsNaN(total) || math.IsInf(total, 0) {
		return total
	}
	coef := maxNorm / (total + 1e-6)
	if coef < 1 {
		for _, g := range grads {
			if g != nil && g.Numel() > 0 {
				g.MulScalarInPlace(coef)
			}
		}
	}
	return total
}

// GradNorm returns the total normType-norm of the gradients (nil ones skipped),
// accumulated in float64, without changing them (see ClipGradNorm).
func GradNorm(grads []*tensor.Tensor, normType float64) float64 {
	inf := math.IsInf(normType, 1)
	var acc float64
	for _, g := range grads {
		if g == nil || g.Numel() == 0 {
			continue
		}
		v := gradNorm1(g, normType)
		switch {
		case math.IsNaN(v):
			return math.NaN()
		case inf:
			acc = math.Max(acc, v)
		default:
			acc += v
		}
	}
	switch {
	case inf || normType == 1:
		return acc
	case normType == 2:
		return math.Sqrt(acc)
	}
	return math.Pow(acc, 1/normType)
}

// gradNorm1 returns max|g| for the inf-norm, else Σ|g|^p, computed in float64 in a
// scope of its own.
func gradNorm1(g *tensor.Tensor, p float64) float64 {
	ctx := tensor.NewContext(tensor.NoGradMode())
	defer ctx.Close()
	x := ctx.Bind(g)
	if math.IsInf(p, 1) {
		// |x| and max are exact in any dtype; Max propagates NaN.
		return x.Abs().Reshape(-1).Max(0).Item()
	}
	// float32² is exact in float64 (24+24 bits < 53), so only the sum rounds.
	x = x.Cast(tensor.Float64)
	switch p {
	case 1:
		x = x.Abs()
	case 2:
		x = x.Square()
	default:
		x = x.Abs().PowScalar(p)
	}
	return x.Sum().Item()
}
