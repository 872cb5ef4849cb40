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
// is Inf or NaN (the scaler's fused unscale + finite check).
func (t *Tensor) UnscaleCheckInPlace(inv float32) (nonFinite bool) {
	t.mustLive("unscale_")
	return UnscaleCheckAll([]*Tensor{t}, inv)[0]
}

// UnscaleCheckAll is UnscaleCheckInPlace over several tensors: found[i] reports
// tensor i. Backends with a multi-tensor kernel (CUDA) unscale every tensor of a device
// with no wait between them and read the flags back once, instead of once per tensor.
// nil entries are skipped (found false).
func UnscaleCheckAll(ts []*Tensor, inv float32) (found []bool) {
	found = make([]bool, len(ts))
	type group struct {
		m   backend.MultiUnscaler
		idx []int
		ss  []backend.Storage
		ns  []int
	}
	groups := map[Device]*group{}
	for i, t := range ts {
		if t == nil {
			continue
		}
		t.mustLive("unscale_")
		if t.offset != 0 || !t.IsContiguous() {
			fail("unscale_", []*Tensor{t}, "needs a dense tensor")
		}
		m, ok := t.ref.b.(backend.MultiUnscaler)
		if !ok {
			found[i] = t.ref.b.UnscaleCheck(t.ref.s, t.Numel(), inv)
			continue
		}
		g := groups[t.device]
		if g == nil {
			g = &group{m: m}
			groups[t.device] = g
		}
		g.idx = append(g.idx, i)
		g.ss = append(g.ss, t.ref.s)
		g.ns = append(g.ns, t.Numel())
	}
	for _, g := range groups {
		for k, f := range g.m.UnscaleCheckMulti(g.ss, g.ns, inv) {
			found[g.idx[k]] = f
		}
	}
	return found
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
