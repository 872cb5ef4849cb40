package tensor

import "github.com/gamp-ml/gamp/backend"

// In-place operations update a tensor's storage directly and record no autograd
// history. They are for optimizer updates, gradient clipping and the scaler: code
// that runs between backward and the next forward, on leaves or gradients.

func (t *Tensor) inplace(op string, o *Tensor) {
	t.mustLive(op)
	o.mustLive(op)
	if t.device != o.device {
		fail(op, []*Tensor{t, o}, "tensors are on different devices (%s and %s); move one with To", t.device, o.device)
	}
	if !broadcastShapes(op, t, o).Equal(t.shape) {
		fail(op, []*Tensor{t, o}, "the operand cannot be broadcast to the updated tensor's shape %v", t.shape)
	}
}

func (t *Tensor) binaryInPlace(op string, k backend.BinaryOp, o *Tensor) *Tensor {
	t.inplace(op, o)
	t.ref.b.Binary(k, t.bview(), t.bview(), o.expandView(t.shape))
	return t
}

// AddInPlace adds o (broadcast) into t and returns t.
func (t *Tensor) AddInPlace(o *Tensor) *Tensor { return t.binaryInPlace("add_", backend.Add, o) }

// SubInPlace subtracts o (broadcast) from t and returns t.
func (t *Tensor) SubInPlace(o *Tensor) *Tensor { return t.binaryInPlace("sub_", backend.Sub, o) }

// MulInPlace multiplies t by o (broadcast) and returns t.
func (t *Tensor) MulInPlace(o *Tensor) *Tensor { return t.binaryInPlace("mul_", backend.Mul, o) }

// DivInPlace divides t by o (broadcast) and returns t.
func (t *Tensor) DivInPlace(o *Tensor) *Tensor { return t.binaryInPlace("div_", backend.Div, o) }

// MulScalarInPlace multiplies t by s and returns t.
func (t *Tensor) MulScalarInPlace(s float64) *Tensor {
	return t.unaryInPlace("mul_", backend.MulScalar, s, 0)
}

// AddScalarInPlace adds s to t and returns t.
func (t *Tensor) AddScalarInPlace(s float64) *Tensor {
	return t.unaryInPlace("add_", backend.AddScalar, s, 0)
}

// ClampInPlace limits t to [lo, hi] and returns t.
func (t *Tensor) ClampInPlace(lo, hi float64) *Tensor {
	return t.unaryInPlace("clamp_", backend.Clamp, lo, hi)
}

func (t *Tensor) unaryInPlace(op string, k backend.UnaryOp, p0, p1 float64) *Tensor {
	t.mustLive(op)
	if t.offset != 0 || !t.IsContiguous() {
		fail(op, []*Tensor{t}, "in-place scalar ops need a dense tensor")
	}
	t.ref.b.Unary(k, t.ref.s, t.ref.s, t.Numel(), p0, p1)
	return t
}

// CopyFrom copies src (broadcast, converting its dtype) into t and returns t.
func (t *Tensor) CopyFrom(src *Tensor) *Tensor {
	t.inplace("copy_", src)
	t.ref.b.Copy(t.bview(), src.expandView(t.shape))
	return t
}

// FillInPlace sets every element of t to v and returns t.
func (t *Tensor) FillInPlace(v float64) *Tensor {
	t.mustLive("fill_")
	t.ref.b.Fill(t.bview(), v)
	return t
}

// UnscaleCheckInPlace multiplies t by inv in one pass and reports whether any element
// is Inf or NaN (the scaler's fused unscale + finite check). t must be dense.
func (t *Tensor) UnscaleCheckInPlace(inv float32) (nonFinite bool) {
	t.denseAtZero("unscale_", true)
	return t.ref.b.UnscaleCheck(t.ref.s, t.Numel(), inv)
}

// NonFiniteStats counts the Inf and NaN elements of t and returns the largest finite
// |x| (the overflow harness and the scaler's diagnostics use it).
func (t *Tensor) NonFiniteStats() (inf, nan int, maxAbs float64) {
	d := t.dense(nil)
	if d != t {
		defer d.Release()
	}
	return d.ref.b.CountNonFinite(d.ref.s, d.Numel())
}
