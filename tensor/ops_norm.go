package tensor

import (
	"github.com/gamp-ml/gamp/backend"
)

var (
	// batch_norm is Passthrough: the nn layer keeps its parameters and statistics in
	// FP32 and hands it a half input as it is (the kernel computes in FP32 and writes
	// half), and an all-half (O3) model must be able to run it in half.
	opBatchNorm = defOp("batch_norm", Passthrough)
	// batch_norm_relu is BatchNorm then Relu as one op (Passthrough like both).
	opBatchNormReLU = defOp("batch_norm_relu", Passthrough)
	opLayerNorm     = defOp("layer_norm", FP32)
)

// storageOf returns t's storage, or a nil Storage for a nil tensor (optional kernel
// operands).
func storageOf(t *Tensor) backend.Storage {
	if t == nil {
		return nil
	}
	return t.ref.s
}

// float32Operand returns t as a dense, offset-0 Float32 tensor for the normalisation
// kernels, whose statistics and affine operands are always FP32: t itself when it
// already is one, else a converted copy in c (nil stays nil).
func (c *Context) float32Operand(t *Tensor) *Tensor {
	if t == nil || (t.dtype == Float32 && t.offset == 0 && t.IsContiguous()) {
		return t
	}
	out := allocOut(c, Float32, t.device, t.shape)
	t.ref.b.Copy(out.bview(), t.bview())
	return out
}

// float32Copy returns a fresh dense Float32 copy of t in c.
func (c *Context) float32Copy(t *Tensor) *Tensor {
	out := allocOut(c, Float32, t.device, t.shape)
	t.ref.b.Copy(out.bview(), t.bview())
	return out
}

// paramGrad converts a Float32 kernel gradient to the dtype of the parameter it
// belongs to (nil stays nil).
func (c *Context) paramGrad(g32, p *Tensor) *Tensor {
	if g32 == nil {
		return nil
	}
	return c.cast(g32, p.dtype)
}

// BatchNorm is torch.nn.functional.batch_norm on x [N, C] or [N, C, …] with statistics
// per channel C. weight and bias ([C], nil: no affine) and the running statistics ([C],
// both nil: none) may have any floating dtype; the statistics are computed in FP32
// whatever their dtype, and the output has x's dtype. In training it normalises with
// the batch mean and biased variance and updates runningMean and runningVar in place
// (new = (1−momentum)·old + momentum·batch, with the unbiased variance), rounding them
// to their own dtype — so a half model gets half running statistics, which overflow
// where FP32 ones would not. In eval it normalises with the running statistics.
// Gradients flow to x, weight and bias, each in its own dtype.
func BatchNorm(x, weight, bias, runningMean, runningVar *Tensor, training bool, momentum, eps float64) *Tensor {
	return resolve(opBatchNorm, x, weight, bias, runningMean, runningVar).
		batchNorm(x, weight, bias, runningMean, runningVar, training, momentum, eps, nil)
}

// BatchNormReLU is BatchNorm(…).Relu() with the same results, bit for bit, and the
// same gradients. Where the backend fuses them (backend.BatchNormReLUer) it is one op
// that applies the ReLU while it writes the output and masks the gradient inside
// batch norm's backward passes, which saves the ReLU's passes over memory (and the
// memory of the pre-activation); otherwise it is the two ops.
func BatchNormReLU(x, weight, bias, runningMean, runningVar *Tensor, training bool, momentum, eps float64) *Tensor {
	c := resolve(opBatchNormReLU, x, weight, bias, runningMean, runningVar)
	if x != nil && x.ref != nil {
		if f, ok := x.ref.b.(backend.BatchNormReLUer); ok {
			return c.batchNorm(x, weight, bias, runningMean, runningVar, training, momentum, eps, f)
		}
	}
	return BatchNorm(x, weight, bias, runningMean, runningVar, training, momentum, eps).Relu()
}

// batchNorm runs batch_norm, or batch_norm_relu on fused when it is not nil.
func (c *Context) batchNorm(x, weight, bias, rm, rv *Tensor, training bool, momentum, eps float64, fused backend.BatchNormReLUer) *Tensor {
	op := opBatchNorm
	if fused != nil {
		op = opBatchNormReLU
	}
	name := op.Name()
	in := c.prep(op, x, weight, bias)
	x, weight, bias = in[0], in[1], in[2]
	// The running statistics are updated in place, so they never go through autocast.
	all := []*Tensor{x, weight, bias, rm, rv}
	for _, t := range all {
		if t == nil {
			continue
		}
		t.mustLive(name)
		if t.device != x.device {
			fail(name, all, "inputs are on different devices (%s and %s); move them with To first", x.device, t.device)
		}
		if !t.dtype.IsFloat() {
			fail(name, all, "needs floating-point tensors; Cast them first")
		}
	}
	if x.Dim() < 2 {
		fail(name, all, "input must be [N, C] or [N, C, …], got %d-d", x.Dim())
	}
	n, ch := x.shape[0], x.shape[1]
	s := Shape(x.shape[2:]).Numel()
	for i, t := range all[1:] {
		if t != nil && (t.Dim() != 1 || t.shape[0] != ch) {
			fail(name, all, "%s must be [%d] (one per channel of the input's dimension 1), got %v",
				[...]string{"weight", "bias", "runningMean", "runningVar"}[i], ch, t.shape)
		}
	}
	switch {
	case (rm == nil) != (rv == nil):
		fail(name, all, "give both runningMean and runningVar, or neither")
	case !training && rm == nil:
		fail(name, all, "eval mode normalises with the running statistics, and none were given; pass them, or training=true to use batch statistics")
	case training && n*s < 2 && ch > 0:
		fail(name, all, "training needs more than one value per channel, got %d (batch %d × spatial %d)", n*s, n, s)
	}

	xd := x.dense(c)
	y := allocOut(c, x.dtype, x.device, x.shape)
	w32, b32 := c.float32Operand(weight), c.float32Operand(bias)
	a := backend.NormArgs{
		X: xd.ref.s, Y: y.ref.s, Weight: storageOf(w32), Bias: storageOf(b32),
		N: n, C: ch, S: s, Training: training, Momentum: momentum, Eps: eps,
	}
	// What backward reads: the batch statistics in training, a snapshot of the running
	// ones in eval (the caller may update them before backward runs).
	var save []*Tensor
	var rm32, rv32 *Tensor
	if training {
		mean := allocOut(c, Float32, x.device, Shape{ch})
		invstd := allocOut(c, Float32, x.device, Shape{ch})
		save = []*Tensor{mean, invstd}
		a.SaveMean, a.SaveInvStd = mean.ref.s, invstd.ref.s
		rm32, rv32 = c.float32Operand(rm), c.float32Operand(rv)
	} else {
		rm32, rv32 = c.float32Copy(rm), c.float32Copy(rv)
		save = []*Tensor{rm32, rv32}
	}
	a.RunningMean, a.RunningVar = storageOf(rm32), storageOf(rv32)
	if fused != nil {
		fused.BatchNormReLU(a)
	} else {
		x.ref.b.BatchNorm(a)
	}
	if training {
		// Write the updated statistics back, rounded to the caller's dtype.
		for _, p := range [][2]*Tensor{{rm, rm32}, {rv, rv32}} {
			if p[0] != nil && p[0] != p[1] {
				p[0].ref.b.Copy(p[0].bview(), p[1].bview())
				p[1].Release()
			}
		}
	}
	releaseTemp(b32, bias)

	out := c.record(op, y, in, func(bc *Context, g *Tensor) []*Tensor {
		gd, gx, gw32, gb32 := bc.normGradBuffers(g, x, weight, bias)
		ba := backend.NormArgs{
			X: xd.ref.s, GY: gd.ref.s, GX: gx.ref.s, Weight: storageOf(w32),
			GWeight: storageOf(gw32), GBias: storageOf(gb32),
			N: n, C: ch, S: s, Training: training, Eps: eps,
		}
		if training {
			ba.SaveMean, ba.SaveInvStd = save[0].ref.s, save[1].ref.s
		} else {
			ba.RunningMean, ba.RunningVar = save[0].ref.s, save[1].ref.s
		}
		if fused != nil {
			ba.Y = y.ref.s // the ReLU's output: its gradient mask
			fused.BatchNormReLUBackward(ba)
		} else {
			g.ref.b.BatchNormBackward(ba)
		}
		return []*Tensor{gx, bc.paramGrad(gw32, weight), bc.paramGrad(gb32, bias)}
	})
	if out.node == nil {
		// No backward will read them.
		for _, t := range save {
			t.Release()
		}
		releaseTemp(w32, weight)
		releaseTemp(xd, x)
	}
	return out
}

// LayerNorm is torch.nn.functional.layer_norm: x is normalised over its last
// len(normShape) dimensions, which must equal normShape, with the mean and biased
// variance of each such slice, then scaled by weight and shifted by bias (shape
// normShape; nil: none). Statistics are FP32 and the output has x's dtype; under
// autocast it runs in float32. Gradients flow to x, weight and bias.
func LayerNorm(x *Tensor, normShape Shape, weight, bias *Tensor, eps float64) *Tensor {
	return resolve(opLayerNorm, x, weight, bias).layerNorm(x, normShape, weight, bias, eps, backend.Invalid)
}

// LayerNormAs is LayerNorm(x, normShape, weight, bias, eps).Cast(dt), values and
// gradients bit for bit. Where LayerNorm's output would be Float32, dt is a half dtype
// and the backend rounds as it stores (backend.LayerNormHalfIO; the CPU backend), it is
// one layer_norm op whose output is dt: each float32 result is rounded once into it, so
// no float32 output is allocated and no cast runs, and the backward reads the dt
// gradient in place, widening it exactly as the cast's backward would. Otherwise it is
// the two ops. nn.CallInto uses it for a LayerNorm whose output goes to a Linear that
// autocast runs in dt, which would otherwise cast that output first.
func LayerNormAs(x *Tensor, normShape Shape, weight, bias *Tensor, eps float64, dt DType) *Tensor {
	return resolve(opLayerNorm, x, weight, bias).layerNorm(x, normShape, weight, bias, eps, dt)
}

// layerNorm is LayerNorm, and LayerNormAs where outDT is not Invalid.
func (c *Context) layerNorm(x *Tensor, normShape Shape, weight, bias *Tensor, eps float64, outDT DType) *Tensor {
	const name = "layer_norm"
	in := c.prep(opLayerNorm, x, weight, bias)
	x, weight, bias = in[0], in[1], in[2]
	// yDT is the output's dtype; castAfter is set when LayerNormAs needs a cast op.
	yDT, castAfter := x.dtype, false
	if outDT != backend.Invalid && outDT != yDT {
		if h, ok := x.ref.b.(backend.LayerNormHalfIO); ok && yDT == Float32 && outDT.IsHalf() && h.LayerNormHalfIO(outDT) {
			yDT = outDT
		} else {
			castAfter = true
		}
	}
	for _, t := range in {
		if t != nil && !t.dtype.IsFloat() {
			fail(name, in, "needs floating-point tensors; Cast them first")
		}
	}
	k := len(normShape)
	if k == 0 || k > x.Dim() || !Shape(x.shape[x.Dim()-k:]).Equal(normShape) {
		fail(name, in, "normalized shape %v must be non-empty and equal the input's trailing dimensions", normShape)
	}
	for i, t := range []*Tensor{weight, bias} {
		if t != nil && !t.shape.Equal(normShape) {
			fail(name, in, "%s must have the normalized shape %v, got %v", [...]string{"weight", "bias"}[i], normShape, t.shape)
		}
	}
	cols := normShape.Numel()
	rows := Shape(x.shape[:x.Dim()-k]).Numel()

	xd := x.dense(c)
	y := allocOut(c, yDT, x.device, x.shape)
	w32, b32 := c.float32Operand(weight), c.float32Operand(bias)
	mean := allocOut(c, Float32, x.device, Shape{rows})
	invstd := allocOut(c, Float32, x.device, Shape{rows})
	x.ref.b.LayerNorm(backend.NormArgs{
		X: xd.ref.s, Y: y.ref.s, Weight: storageOf(w32), Bias: storageOf(b32),
		SaveMean: mean.ref.s, SaveInvStd: invstd.ref.s, N: rows, C: cols, Eps: eps,
	})
	releaseTemp(b32, bias)

	out := c.record(opLayerNorm, y, in, func(bc *Context, g *Tensor) []*Tensor {
		gd, gx, gw32, gb32 := bc.normGradBuffers(g, x, weight, bias)
		g.ref.b.LayerNormBackward(backend.NormArgs{
			X: xd.ref.s, GY: gd.ref.s, GX: gx.ref.s, Weight: storageOf(w32),
			SaveMean: mean.ref.s, SaveInvStd: invstd.ref.s,
			GWeight: storageOf(gw32), GBias: storageOf(gb32),
			N: rows, C: cols, Eps: eps,
		})
		return []*Tensor{gx, bc.paramGrad(gw32, weight), bc.paramGrad(gb32, bias)}
	})
	if out.node == nil {
		mean.Release()
		invstd.Release()
		releaseTemp(w32, weight)
		releaseTemp(xd, x)
	}
	if castAfter {
		return out.Cast(outDT)
	}
	return out
}

// normGradBuffers returns what a norm backward kernel writes into: the dense output
// gradient, the input gradient (x's dtype; the kernels write all of it, so it skips the
// zero fill) and FP32 weight/bias gradients (nil where the
// parameter is absent or needs no gradient).
func (c *Context) normGradBuffers(g, x, weight, bias *Tensor) (gd, gx, gw32, gb32 *Tensor) {
	gd = g.dense(c)
	gx = allocOut(c, x.dtype, x.device, x.shape)
	if weight != nil && weight.requiresGrad {
		gw32 = allocTensor(c, Float32, x.device, weight.shape)
	}
	if bias != nil && bias.requiresGrad {
		gb32 = allocTensor(c, Float32, x.device, bias.shape)
	}
	return gd, gx, gw32, gb32
}
