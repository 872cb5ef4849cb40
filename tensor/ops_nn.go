package tensor

import (
	"fmt"

	"github.com/gamp-ml/gamp/backend"
)

// Softmax, the losses and dropout. Softmax and every loss are FP32 ops under autocast
// (as PyTorch's lists); without a policy they run in the input dtype, with float32 (or
// float64) arithmetic inside the kernels.

var (
	opSoftmax       = defOp("softmax", FP32)
	opLogSoftmax    = defOp("log_softmax", FP32)
	opCrossEntropy  = defOp("cross_entropy", FP32)
	opMSELoss       = defOp("mse_loss", FP32)
	opBCEWithLogits = defOp("binary_cross_entropy_with_logits", FP32)
	opDropout       = defOp("dropout", Passthrough)
)

// --- moving one dimension last, for the row kernels

// permuteView returns an unrecorded view of t with dimension perm[i] at position i.
func (t *Tensor) permuteView(c *Context, perm []int) *Tensor {
	shape := make(Shape, len(perm))
	st := make([]int, len(perm))
	for i, p := range perm {
		shape[i], st[i] = t.shape[p], t.strides[p]
	}
	return t.view(c, shape, st, t.offset)
}

// toLast returns a dense, offset-0 tensor holding t with dimension d moved last — t
// itself when d is already last and t is dense — and the permutation it applied (nil:
// none). Row kernels (Softmax, OneHot) then see [outer, n] rows.
func (c *Context) toLast(t *Tensor, d int) (*Tensor, []int) {
	n := t.Dim()
	if n == 0 || d == n-1 {
		return t.dense(c), nil
	}
	perm := make([]int, 0, n)
	for i := 0; i < n; i++ {
		if i != d {
			perm = append(perm, i)
		}
	}
	perm = append(perm, d)
	v := t.permuteView(c, perm)
	out := v.dense(c)
	if out != v {
		v.Release()
	}
	return out, perm
}

// fromLast undoes toLast's permutation on a tensor laid out like toLast's result,
// as a view in the original dimension order.
func (t *Tensor) fromLast(c *Context, perm []int) *Tensor {
	if perm == nil {
		return t
	}
	inv := make([]int, len(perm))
	for i, p := range perm {
		inv[p] = i
	}
	return t.permuteView(c, inv)
}

// releaseTemp releases a temporary made by dense or toLast when it is not src itself.
func releaseTemp(tmp, src *Tensor) {
	if tmp != src {
		tmp.Release()
	}
}

// --- softmax

// Softmax returns exp(x) / Σ exp(x) over dimension dim (negative counts from the end),
// as torch.softmax. Under autocast it runs in float32.
func Softmax(x *Tensor, dim int) *Tensor { return resolve(opSoftmax, x).softmax(opSoftmax, x, dim) }

// LogSoftmax returns x - log Σ exp(x) over dimension dim, as torch.log_softmax. Under
// autocast it runs in float32.
func LogSoftmax(x *Tensor, dim int) *Tensor {
	return resolve(opLogSoftmax, x).softmax(opLogSoftmax, x, dim)
}

// Softmax returns the softmax of t over dim (see Softmax).
func (t *Tensor) Softmax(dim int) *Tensor { return Softmax(t, dim) }

// LogSoftmax returns the log-softmax of t over dim (see LogSoftmax).
func (t *Tensor) LogSoftmax(dim int) *Tensor { return LogSoftmax(t, dim) }

func (c *Context) softmax(op *Op, x *Tensor, dim int) *Tensor {
	in := c.prep(op, x)
	x = in[0]
	if !x.dtype.IsFloat() {
		fail(op.Name(), in, "needs a floating-point tensor; Cast it first")
	}
	log := op == opLogSoftmax
	d := 0
	if x.Dim() == 0 {
		// A 0-d tensor is one row of one element, as in PyTorch.
		if dim != 0 && dim != -1 {
			fail(op.Name(), in, "dimension %d out of range for a 0-d tensor", dim)
		}
	} else {
		d = x.axis(op.Name(), dim)
	}
	xm, perm := c.toLast(x, d)
	n := 1
	if x.Dim() > 0 {
		n = x.shape[d]
	}
	outer := 1
	for i, s := range x.shape {
		if i != d {
			outer *= s
		}
	}
	y := allocOut(c, x.dtype, x.device, xm.shape)
	x.ref.b.Softmax(y.ref.s, xm.ref.s, outer, n, log)
	releaseTemp(xm, x)
	out := y.fromLast(c, perm)
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		gm, _ := bc.toLast(g, d)
		gx := allocOut(bc, g.dtype, g.device, gm.shape)
		g.ref.b.SoftmaxBackward(gx.ref.s, gm.ref.s, y.ref.s, outer, n, log)
		return []*Tensor{gx.fromLast(bc, perm)}
	})
}

// --- losses

// Reduction says how a loss combines its per-element values (PyTorch's reduction=).
type Reduction uint8

// Reductions. The zero value is the mean, PyTorch's default.
const (
	// ReductionMean averages the per-element losses into a scalar.
	ReductionMean Reduction = iota
	// ReductionSum adds them into a scalar.
	ReductionSum
	// ReductionNone returns them unreduced.
	ReductionNone
)

// String returns PyTorch's name of the reduction ("mean", "sum", "none").
func (r Reduction) String() string {
	switch r {
	case ReductionMean:
		return "mean"
	case ReductionSum:
		return "sum"
	case ReductionNone:
		return "none"
	}
	return fmt.Sprintf("Reduction(%d)", uint8(r))
}

// LossOptions are the optional arguments of MSELossWith and BCEWithLogitsWith
// (CrossEntropyWith takes CrossEntropyOptions). The zero value is the mean.
type LossOptions struct {
	// Reduction combines the per-element losses (mean by default).
	Reduction Reduction
}

// checkReduction fails unless r is one of the three Reductions.
func checkReduction(op string, in []*Tensor, r Reduction) Reduction {
	if r > ReductionNone {
		fail(op, in, "Reduction must be ReductionMean, ReductionSum or ReductionNone, got %v", r)
	}
	return r
}

// reduceLoss combines per-element losses as r says (not recorded).
func (c *Context) reduceLoss(per *Tensor, r Reduction) *Tensor {
	if r == ReductionNone {
		return per
	}
	kind := backend.Mean
	if r == ReductionSum {
		kind = backend.Sum
	}
	return c.reduceRaw(kind, per, per.normDims("loss", nil), false)
}

// lossGrad scales the incoming gradient of a reduced loss by the reduction's
// derivative times k: a tensor that broadcasts (expandView) to the per-element shape.
func (bc *Context) lossGrad(g *Tensor, r Reduction, count int, k float64) *Tensor {
	if r == ReductionMean {
		k /= float64(count)
	}
	if k == 1 {
		return g
	}
	return bc.unaryRaw(g, backend.MulScalar, k, 0)
}

// CrossEntropy is torch.nn.functional.cross_entropy with class-index targets:
// logits [N, C] with labels [N] (or [C] with a 0-d label, or [N, C, d…] with [N, d…]),
// labels Int32 or Int64 in [0, C). smoothing is label_smoothing: the target puts
// 1-ε+ε/C on the label and ε/C on every other class. The loss is the mean over the
// labels (CrossEntropyWith takes another Reduction). Labels are checked on the host (one small
// download) so that a bad label panics with an OpError naming it. Under autocast it
// runs in float32. A logit of -Inf (a masked class) is allowed: it gets probability 0
// and gradient 0. CrossEntropyWith also ignores a label value (ignore_index).
func CrossEntropy(logits, labels *Tensor, smoothing float64) *Tensor {
	return resolve(opCrossEntropy, logits, labels).crossEntropy(logits, labels, CrossEntropyOptions{Smoothing: smoothing})
}

// DefaultIgnoreIndex is PyTorch's default ignore_index, for CrossEntropyOptions.
const DefaultIgnoreIndex = -100

// CrossEntropyOptions are the optional arguments of CrossEntropyWith. The zero value
// is the plain mean cross entropy that ignores no label (a label outside [0, C)
// panics, which catches a wrong label set early).
type CrossEntropyOptions struct {
	// Smoothing is label_smoothing in [0, 1].
	Smoothing float64
	// Reduction combines the per-label losses (mean by default).
	Reduction Reduction
	// Ignore makes labels equal to IgnoreIndex contribute nothing: their loss is 0
	// (under ReductionNone), they are left out of the mean's count, and their logits
	// get gradient 0 — PyTorch's ignore_index. Set IgnoreIndex to DefaultIgnoreIndex
	// for PyTorch's default.
	Ignore      bool
	IgnoreIndex int64
}

// CrossEntropyWith is CrossEntropy with options, ignore_index among them. With every
// label ignored the mean is NaN (0/0), as in PyTorch.
func CrossEntropyWith(logits, labels *Tensor, o CrossEntropyOptions) *Tensor {
	return resolve(opCrossEntropy, logits, labels).crossEntropy(logits, labels, o)
}

// uploadInt64 copies host indices to a new Int64 tensor on dev owned by c.
func (c *Context) uploadInt64(v []int64, dev Device) *Tensor {
	t := allocTensor(c, Int64, dev, Shape{len(v)})
	if len(v) > 0 {
		t.ref.b.Upload(t.ref.s, 0, v)
	}
	return t
}

// ceLabelsOnly lets CrossEntropy's backward subtract the target from its labels'
// entries alone where that gives the same bits (a variable so that a test can compare
// it with the full subtraction).
var ceLabelsOnly = true

func (c *Context) crossEntropy(logits, labels *Tensor, o CrossEntropyOptions) *Tensor {
	op := opCrossEntropy
	in := c.prep(op, logits, labels)
	x, lab := in[0], in[1]
	red := checkReduction(op.Name(), in, o.Reduction)
	eps := o.Smoothing
	if !x.dtype.IsFloat() {
		fail(op.Name(), in, "logits must be floating point; Cast them first")
	}
	if !lab.dtype.IsInt() {
		fail(op.Name(), in, "labels must be Int32 or Int64 class indices (probabilities as targets are not supported)")
	}
	if !(eps >= 0 && eps <= 1) {
		fail(op.Name(), in, "label smoothing %g is outside [0, 1]", eps)
	}
	cd := -1 // the class dimension of x
	switch {
	case x.Dim() == 1 && lab.Dim() == 0:
		cd = 0
	case x.Dim() >= 2 && lab.Dim() == x.Dim()-1 && x.shape[0] == lab.shape[0] &&
		x.shape[2:].Equal(lab.shape[1:]):
		cd = 1
	}
	if cd < 0 {
		fail(op.Name(), in, "want logits [N, C] with labels [N] (or [C] with a 0-d label, or [N, C, d…] with labels [N, d…])")
	}
	classes := x.shape[cd]
	m := lab.Numel()
	// The loss gathers each counted row's log-probability of its label rather than
	// multiplying a one-hot target into every log-probability: a masked class has
	// log p = -Inf, and 0·(-Inf) would make the loss NaN.
	labs := lab.Int64s()
	flat := make([]int64, 0, m) // row·classes + label of each counted row
	var kept, clean []int64     // counted rows and labels with ignored ones set to 0; nil when none is ignored
	for i, v := range labs {
		if o.Ignore && v == o.IgnoreIndex {
			if clean == nil {
				clean = append([]int64(nil), labs...)
				kept = make([]int64, 0, m)
				for j := range i {
					kept = append(kept, int64(j))
				}
			}
			clean[i] = 0
			continue
		}
		if v < 0 || v >= int64(classes) {
			hint := "there is no ignore_index unless CrossEntropyOptions.Ignore is set"
			if o.Ignore {
				hint = fmt.Sprintf("only %d is ignored", o.IgnoreIndex)
			}
			fail(op.Name(), in, "label %d at position %d is outside [0, %d); labels are class indices (%s)", v, i, classes, hint)
		}
		if kept != nil {
			kept = append(kept, int64(i))
		}
		flat = append(flat, int64(i)*int64(classes)+v)
	}
	k := len(flat)
	on, off := 1-eps+eps/float64(classes), eps/float64(classes)

	xm, perm := c.toLast(x, cd)
	mshape := xm.shape.Clone()
	logp := allocTensor(c, x.dtype, x.device, Shape{m, classes})
	x.ref.b.Softmax(logp.ref.s, xm.ref.s, m, classes, true)
	releaseTemp(xm, x)
	// loss_i = -(on-off)·log p_i[label_i] - off·Σ_c log p_ic, which equals -Σ_c q_ic·log p_ic.
	idx := c.uploadInt64(flat, x.device)
	picked := allocTensor(c, x.dtype, x.device, Shape{k})
	if k > 0 {
		x.ref.b.IndexSelect(picked.ref.s, logp.ref.s, idx.ref.s, 1, m*classes, 1, k)
	}
	idx.Release()
	per := c.unaryRaw(picked, backend.MulScalar, -(on - off), 0)
	picked.Release()
	var keptIdx *Tensor
	if kept != nil {
		keptIdx = c.uploadInt64(kept, x.device)
	}
	if off != 0 {
		rows := c.reduceRaw(backend.Sum, logp, []int{1}, false)
		if keptIdx != nil {
			sel := allocTensor(c, x.dtype, x.device, Shape{k})
			if k > 0 {
				x.ref.b.IndexSelect(sel.ref.s, rows.ref.s, keptIdx.ref.s, 1, m, 1, k)
			}
			rows.Release()
			rows = sel
		}
		smooth := c.unaryRaw(rows, backend.MulScalar, -off, 0)
		rows.Release()
		sum := c.binaryRaw(op, backend.Add, per, smooth)
		per.Release()
		smooth.Release()
		per = sum
	}
	switch {
	case kept == nil:
		per = c.reshapeRaw(per, lab.shape)
	case red == ReductionNone:
		// Ignored labels have loss 0 in the unreduced output, as in PyTorch.
		full := allocTensor(c, x.dtype, x.device, Shape{m})
		x.ref.b.Fill(full.bview(), 0)
		if k > 0 {
			x.ref.b.IndexAdd(full.ref.s, per.ref.s, keptIdx.ref.s, 1, m, 1, k)
		}
		per.Release()
		per = c.reshapeRaw(full, lab.shape)
	}
	if keptIdx != nil {
		keptIdx.Release()
	}
	out := c.reduceLoss(per, red)
	if out != per {
		per.Release()
	}
	var labd *Tensor
	if clean != nil {
		labd = c.uploadInt64(clean, x.device)
	} else {
		labd = lab.dense(c)
	}
	var mask []bool // counted rows, for the gradient; nil when all are
	if kept != nil {
		mask = make([]bool, m)
		for _, r := range kept {
			mask[r] = true
		}
	}
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		// d loss_i / d x_i = softmax(x_i) - q_i, times the reduction's weight; 0 for
		// ignored rows. A masked class has softmax 0 and target weight 0 (without
		// smoothing), so its gradient is exactly 0.
		p := bc.unaryRaw(logp, backend.Exp, 0, 0)
		if ceLabelsOnly && off == 0 && mask == nil && (p.dtype == Float32 || p.dtype == Float64) {
			// q is on at each row's label and 0 elsewhere. exp gives +0 to +Inf or NaN,
			// and such a p minus +0 is p, so only the labels' entries change: p + (-on),
			// one addition rounded once (IndexAdd sums in float64; for float32 that
			// rounds as the float32 subtraction does), with no q and no pass over the
			// rest.
			if k > 0 {
				idx := bc.uploadInt64(flat, p.device)
				src := allocOut(bc, p.dtype, p.device, Shape{k})
				p.ref.b.Fill(src.bview(), -on)
				p.ref.b.IndexAdd(p.ref.s, src.ref.s, idx.ref.s, 1, m*classes, 1, k)
				idx.Release()
				src.Release()
			}
		} else {
			q := allocTensor(bc, p.dtype, p.device, p.shape)
			p.ref.b.OneHot(q.ref.s, labd.ref.s, m, classes, on, off)
			p.ref.b.Binary(backend.Sub, p.bview(), p.bview(), q.bview())
			q.Release()
		}
		w := bc.lossGrad(g, red, k, 1)
		if red == ReductionNone {
			w = bc.reshapeRaw(w, Shape{m, 1})
		}
		p.ref.b.Binary(backend.Mul, p.bview(), p.bview(), w.expandView(p.shape))
		if mask != nil {
			cond := allocTensor(bc, Bool, p.device, Shape{m, 1})
			p.ref.b.Upload(cond.ref.s, 0, mask)
			zero := allocTensor(bc, p.dtype, p.device, Shape{})
			p.ref.b.Fill(zero.bview(), 0)
			p = bc.whereRaw(cond, p, zero)
		}
		gx := bc.reshapeRaw(p, mshape).fromLast(bc, perm)
		return []*Tensor{gx, nil}
	})
}

// MSELoss is torch.nn.functional.mse_loss: the mean of (x - y)² (MSELossWith takes
// another Reduction). x and y must have one shape; mixed floating dtypes compute in
// the wider one. Under autocast it runs in float32.
func MSELoss(x, y *Tensor) *Tensor {
	return resolve(opMSELoss, x, y).mseLoss(x, y, LossOptions{})
}

// MSELossWith is MSELoss with options.
func MSELossWith(x, y *Tensor, o LossOptions) *Tensor {
	return resolve(opMSELoss, x, y).mseLoss(x, y, o)
}

// pairLossInputs checks the two inputs of an elementwise loss and promotes them to one
// dtype (recording the casts).
func (c *Context) pairLossInputs(op *Op, x, y *Tensor) []*Tensor {
	in := c.prep(op, x, y)
	x, y = in[0], in[1]
	if !x.dtype.IsFloat() || !y.dtype.IsFloat() {
		fail(op.Name(), in, "input and target must be floating point; Cast them first")
	}
	if !x.shape.Equal(y.shape) {
		fail(op.Name(), in, "input %v and target %v must have the same shape; Reshape or Expand the target", x.shape, y.shape)
	}
	if x.dtype != y.dtype {
		w := promote(x.dtype, y.dtype)
		in = []*Tensor{c.cast(x, w), c.cast(y, w)}
	}
	return in
}

func (c *Context) mseLoss(x, y *Tensor, o LossOptions) *Tensor {
	in := c.pairLossInputs(opMSELoss, x, y)
	x, y = in[0], in[1]
	red := checkReduction(opMSELoss.Name(), in, o.Reduction)
	d := c.binaryRaw(opMSELoss, backend.Sub, x, y)
	sq := c.binaryRaw(opMSELoss, backend.Mul, d, d)
	out := c.reduceLoss(sq, red)
	if out != sq {
		sq.Release()
	}
	n := x.Numel()
	return c.record(opMSELoss, out, in, func(bc *Context, g *Tensor) []*Tensor {
		w := bc.lossGrad(g, red, n, 2)
		gx := allocTensor(bc, d.dtype, d.device, d.shape)
		d.ref.b.Binary(backend.Mul, gx.bview(), d.bview(), w.expandView(d.shape))
		var gy *Tensor
		if y.requiresGrad {
			gy = bc.unaryRaw(gx, backend.Neg, 0, 0)
		}
		return []*Tensor{gx, gy}
	})
}

// BCEWithLogits is torch.nn.functional.binary_cross_entropy_with_logits: for logits x
// and targets y in [0, 1], the mean of max(x, 0) - x·y + log(1 + e^-|x|), the form that
// neither overflows nor loses precision at large |x| (BCEWithLogitsWith takes another
// Reduction). Under autocast it runs in float32.
func BCEWithLogits(x, y *Tensor) *Tensor {
	return resolve(opBCEWithLogits, x, y).bceWithLogits(x, y, LossOptions{})
}

// BCEWithLogitsWith is BCEWithLogits with options.
func BCEWithLogitsWith(x, y *Tensor, o LossOptions) *Tensor {
	return resolve(opBCEWithLogits, x, y).bceWithLogits(x, y, o)
}

func (c *Context) bceWithLogits(x, y *Tensor, o LossOptions) *Tensor {
	op := opBCEWithLogits
	in := c.pairLossInputs(op, x, y)
	x, y = in[0], in[1]
	red := checkReduction(op.Name(), in, o.Reduction)
	// log(1 + e^-|x|), one kernel pass per step.
	sp := c.unaryRaw(x, backend.Abs, 0, 0)
	for _, k := range []struct {
		op backend.UnaryOp
		p  float64
	}{{backend.Neg, 0}, {backend.Exp, 0}, {backend.AddScalar, 1}, {backend.Log, 0}} {
		next := c.unaryRaw(sp, k.op, k.p, 0)
		sp.Release()
		sp = next
	}
	per := c.unaryRaw(x, backend.Relu, 0, 0)
	xy := c.binaryRaw(op, backend.Mul, x, y)
	per.ref.b.Binary(backend.Sub, per.bview(), per.bview(), xy.bview())
	per.ref.b.Binary(backend.Add, per.bview(), per.bview(), sp.bview())
	xy.Release()
	sp.Release()
	out := c.reduceLoss(per, red)
	if out != per {
		per.Release()
	}
	n := x.Numel()
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		w := bc.lossGrad(g, red, n, 1)
		var gx, gy *Tensor
		if x.requiresGrad {
			// (σ(x) - y)·w
			gx = bc.unaryRaw(x, backend.Sigmoid, 0, 0)
			gx.ref.b.Binary(backend.Sub, gx.bview(), gx.bview(), y.bview())
			gx.ref.b.Binary(backend.Mul, gx.bview(), gx.bview(), w.expandView(gx.shape))
		}
		if y.requiresGrad {
			// -x·w
			gy = bc.unaryRaw(x, backend.Neg, 0, 0)
			gy.ref.b.Binary(backend.Mul, gy.bview(), gy.bview(), w.expandView(gy.shape))
		}
		return []*Tensor{gx, gy}
	})
}

// --- dropout

// Dropout zeroes each element of x with probability p and scales the rest by 1/(1-p)
// when training (torch.nn.functional.dropout). The mask is drawn from the Context's
// generator, so restoring the generator's state replays it exactly. With p = 0 or
// training off it returns x itself.
func Dropout(x *Tensor, p float64, training bool) *Tensor {
	return resolve(opDropout, x).dropout(x, p, training)
}

func (c *Context) dropout(x *Tensor, p float64, training bool) *Tensor {
	in := c.prep(opDropout, x)
	x = in[0]
	if !(p >= 0 && p <= 1) {
		fail(opDropout.Name(), in, "probability %g is outside [0, 1]", p)
	}
	if !x.dtype.IsFloat() {
		fail(opDropout.Name(), in, "needs a floating-point tensor; Cast it first")
	}
	if p == 0 || !training {
		return c.observe(opDropout, in, x)
	}
	n := x.Numel()
	mask := allocTensor(c, x.dtype, x.device, x.shape)
	if p < 1 {
		rng := c.generator(x.device).Next(uint64(n))
		x.ref.b.Bernoulli(mask.ref.s, n, rng, p, 1/(1-p))
	}
	out := allocOut(c, x.dtype, x.device, x.shape)
	x.ref.b.Binary(backend.Mul, out.bview(), x.bview(), mask.bview())
	return c.record(opDropout, out, in, func(bc *Context, g *Tensor) []*Tensor {
		gx := allocOut(bc, g.dtype, g.device, g.shape)
		g.ref.b.Binary(backend.Mul, gx.bview(), g.bview(), mask.bview())
		return []*Tensor{gx}
	})
}
