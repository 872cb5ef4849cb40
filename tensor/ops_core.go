package tensor

import (
	"fmt"

	"github.com/gamp-ml/gamp/backend"
)

const addOp = backend.Add

// prep is the first step of every op: it checks that the inputs are alive and share a
// device (mixed devices never copy silently), then applies autocast — the one hook
// point where a policy casts inputs. It returns the inputs to compute with.
func (c *Context) prep(op *Op, ins ...*Tensor) []*Tensor {
	c.begin(op)
	var dev *Device
	for _, t := range ins {
		if t == nil {
			continue
		}
		t.mustLive(op.Name())
		if dev == nil {
			dev = &t.device
		} else if t.device != *dev {
			fail(op.Name(), ins, "inputs are on different devices (%s and %s); move them with To first", *dev, t.device)
		}
	}
	if dev == nil {
		return ins
	}
	cat := op.Category()
	if p := c.Autocast(); p != nil {
		cat = p.Category(op, *dev)
	} else if cat != Promote {
		return ins
	}
	var target DType
	switch cat {
	case Passthrough:
		return ins
	case LowerPrecision:
		target = c.policy.LowDType()
	case FP32:
		target = Float32
	case Promote:
		target = widest(ins)
		if target == backend.Invalid {
			return ins
		}
	}
	out := ins
	copied := false
	for i, t := range ins {
		if t == nil || t.dtype == target {
			continue
		}
		// Autocast never touches float64 or integer tensors; promotion also lifts
		// integers to the floating type.
		if cat != Promote && (!t.dtype.IsFloat() || t.dtype == Float64) {
			continue
		}
		if !copied {
			out = append([]*Tensor(nil), ins...)
			copied = true
		}
		out[i] = c.autocastInput(t, target)
	}
	return out
}

// widest returns the dtype a Promote op computes in: the widest floating type among
// the inputs (float16 with bfloat16 gives float32), or, with no float, the widest
// integer; Invalid when all inputs already agree.
func widest(ins []*Tensor) DType {
	var dt DType
	same := true
	for _, t := range ins {
		if t == nil {
			continue
		}
		if dt != backend.Invalid && t.dtype != dt {
			same = false
		}
		dt = promote(dt, t.dtype)
	}
	if same {
		return backend.Invalid
	}
	return dt
}

func rank(d DType) int {
	switch d {
	case Bool:
		return 1
	case Int32:
		return 2
	case Int64:
		return 3
	case Float16, BFloat16:
		return 4
	case Float32:
		return 5
	case Float64:
		return 6
	}
	return 0
}

// promote is the PyTorch type-promotion rule for two tensor dtypes.
func promote(a, b DType) DType {
	if a == backend.Invalid {
		return b
	}
	if a == b {
		return a
	}
	if (a == Float16 && b == BFloat16) || (a == BFloat16 && b == Float16) {
		return Float32
	}
	if rank(a) >= rank(b) {
		return a
	}
	return b
}

// autocastInput casts t to dt for an op under autocast. FP32 leaf parameters that
// require grad are cast once per autocast region (the weight-cast cache).
func (c *Context) autocastInput(t *Tensor, dt DType) *Tensor {
	if c == nil || c.policy == nil || !(t.node == nil && t.requiresGrad && t.dtype == Float32) {
		return c.cast(t, dt)
	}
	owner := c
	for owner != nil && !owner.hasCast {
		owner = owner.parent
	}
	if owner == nil {
		return c.cast(t, dt)
	}
	owner.mu.Lock()
	if owner.castCache == nil {
		owner.castCache = map[*Tensor]*Tensor{}
	}
	if ct, ok := owner.castCache[t]; ok && ct.dtype == dt && !ct.released.Load() {
		owner.mu.Unlock()
		return ct
	}
	owner.mu.Unlock()
	ct := c.cast(t, dt)
	owner.mu.Lock()
	if owner.castCache != nil {
		owner.castCache[t] = ct
	}
	owner.mu.Unlock()
	return ct
}

// CastCacheLen reports how many parameter casts the region c belongs to holds (for
// tests and diagnostics).
func (c *Context) CastCacheLen() int {
	for o := c; o != nil; o = o.parent {
		if o.hasCast {
			o.mu.Lock()
			defer o.mu.Unlock()
			return len(o.castCache)
		}
	}
	return 0
}

var opCast = defOp("cast", Passthrough)

// Cast returns t converted to dt (round to nearest even for half types). Casting to
// the same dtype returns t itself. The gradient is cast back to t's dtype.
func (t *Tensor) Cast(dt DType) *Tensor { return resolve(opCast, t).cast(t, dt) }

func (c *Context) cast(t *Tensor, dt DType) *Tensor {
	t.mustLive("cast")
	if t.dtype == dt {
		return t
	}
	out := allocOut(c, dt, t.device, t.shape)
	t.ref.b.Copy(out.bview(), t.bview())
	if !dt.IsFloat() || !t.dtype.IsFloat() {
		return out
	}
	src := t.dtype
	return c.record(opCast, out, []*Tensor{t}, func(bc *Context, g *Tensor) []*Tensor {
		return []*Tensor{bc.cast(g, src)}
	})
}

// Contiguous returns t if it is dense row-major, else a dense copy.
func (t *Tensor) Contiguous() *Tensor { return resolve(opContiguous, t).contiguous(t) }

var opContiguous = defOp("contiguous", Passthrough)

func (c *Context) contiguous(t *Tensor) *Tensor {
	t.mustLive("contiguous")
	if t.IsContiguous() {
		return t
	}
	out := allocOut(c, t.dtype, t.device, t.shape)
	t.ref.b.Copy(out.bview(), t.bview())
	return c.record(opContiguous, out, []*Tensor{t}, func(bc *Context, g *Tensor) []*Tensor {
		return []*Tensor{g}
	})
}

var opTo = defOp("to", Passthrough)

// To returns t on device d (t itself when already there). The copy goes through host
// memory between backends of different kinds; gradients flow back across devices.
func (t *Tensor) To(d Device) *Tensor { return resolve(opTo, t).to(t, d) }

func (c *Context) to(t *Tensor, d Device) *Tensor {
	t.mustLive("to")
	if t.device == d {
		return t
	}
	src := t.contiguousCopy()
	defer src.Release()
	out := allocTensor(c, t.dtype, d, t.shape)
	n := t.Numel()
	from := t.device
	back := func(bc *Context, g *Tensor) []*Tensor { return []*Tensor{bc.to(g, from)} }
	if dc, ok := out.ref.b.(backend.DeviceCopier); ok && from.Kind == d.Kind {
		// Device to device of one kind (GPU to GPU): no trip through host memory.
		if err := dc.CopyFromDevice(out.ref.s, 0, src.ref.s, src.offset, n); err != nil {
			panic(fmt.Errorf("tensor: to %s: %w", d, err))
		}
		return c.record(opTo, out, []*Tensor{t}, back)
	}
	var host any
	switch t.dtype {
	case Float32:
		host = make([]float32, n)
	case Float64:
		host = make([]float64, n)
	case Float16, BFloat16:
		host = make([]uint16, n)
	case Int32:
		host = make([]int32, n)
	case Int64:
		host = make([]int64, n)
	case Bool:
		host = make([]bool, n)
	}
	if err := src.ref.b.Synchronize(); err != nil {
		panic(err)
	}
	src.ref.b.Download(host, src.ref.s, 0)
	out.ref.b.Upload(out.ref.s, 0, host)
	return c.record(opTo, out, []*Tensor{t}, back)
}

// --- broadcasting

// broadcastShapes returns the NumPy broadcast of the shapes of ts.
func broadcastShapes(op string, ts ...*Tensor) Shape {
	n := 0
	for _, t := range ts {
		n = max(n, len(t.shape))
	}
	out := make(Shape, n)
	for i := range out {
		out[i] = 1
	}
	for _, t := range ts {
		off := n - len(t.shape)
		for i, d := range t.shape {
			o := &out[off+i]
			switch {
			case d == *o || d == 1:
			case *o == 1:
				*o = d
			default:
				fail(op, ts, "shapes cannot be broadcast together")
			}
		}
	}
	return out
}

// expandView returns a backend view of t broadcast to shape (zero strides).
func (t *Tensor) expandView(shape Shape) backend.View {
	st := make([]int, len(shape))
	off := len(shape) - len(t.shape)
	for i := range t.shape {
		if t.shape[i] != 1 || shape[off+i] == 1 {
			st[off+i] = t.strides[i]
		}
	}
	return backend.View{S: t.ref.s, Offset: t.offset, Shape: shape, Strides: st}
}

// sumTo reduces a broadcast gradient g back to shape (summing broadcast dimensions).
func (c *Context) sumTo(g *Tensor, shape Shape) *Tensor {
	if g.shape.Equal(shape) {
		return g
	}
	lead := len(g.shape) - len(shape)
	var dims []int
	for i := range g.shape {
		if i < lead || (shape[i-lead] == 1 && g.shape[i] != 1) {
			dims = append(dims, i)
		}
	}
	s := c.sum(g, dims, true)
	return c.reshape(s, shape)
}

// --- elementwise binary ops

var (
	opAdd     = defOp("add", Promote)
	opSub     = defOp("sub", Promote)
	opMul     = defOp("mul", Promote)
	opDiv     = defOp("div", Promote)
	opPow     = defOp("pow", FP32)
	opMaximum = defOp("maximum", Promote)
	opMinimum = defOp("minimum", Promote)
	opCompare = defOpDiff("compare", Promote, false)
)

// Add returns a + b with broadcasting.
func Add(a, b *Tensor) *Tensor { return resolve(opAdd, a, b).add(a, b) }

// Sub returns a - b with broadcasting.
func Sub(a, b *Tensor) *Tensor { return resolve(opSub, a, b).sub(a, b) }

// Mul returns a · b with broadcasting.
func Mul(a, b *Tensor) *Tensor { return resolve(opMul, a, b).mul(a, b) }

// Div returns a / b with broadcasting.
func Div(a, b *Tensor) *Tensor { return resolve(opDiv, a, b).div(a, b) }

// Pow returns a ^ b with broadcasting.
func Pow(a, b *Tensor) *Tensor { return resolve(opPow, a, b).pow(a, b) }

// Maximum returns the elementwise maximum (NaN propagates).
func Maximum(a, b *Tensor) *Tensor { return resolve(opMaximum, a, b).maxmin(opMaximum, a, b) }

// Minimum returns the elementwise minimum (NaN propagates).
func Minimum(a, b *Tensor) *Tensor { return resolve(opMinimum, a, b).maxmin(opMinimum, a, b) }

// Add returns t + o.
func (t *Tensor) Add(o *Tensor) *Tensor { return Add(t, o) }

// Sub returns t - o.
func (t *Tensor) Sub(o *Tensor) *Tensor { return Sub(t, o) }

// Mul returns t · o.
func (t *Tensor) Mul(o *Tensor) *Tensor { return Mul(t, o) }

// Div returns t / o.
func (t *Tensor) Div(o *Tensor) *Tensor { return Div(t, o) }

// binaryRaw computes op(a, b) into a new tensor without recording.
func (c *Context) binaryRaw(op *Op, bop backend.BinaryOp, a, b *Tensor) *Tensor {
	shape := broadcastShapes(op.Name(), a, b)
	dt := a.dtype
	if bop.IsComparison() {
		dt = Bool
	}
	out := allocOut(c, dt, a.device, shape)
	a.ref.b.Binary(bop, out.bview(), a.expandView(shape), b.expandView(shape))
	return out
}

func (c *Context) add(a, b *Tensor) *Tensor {
	if in, ok := c.prepWiden(opAdd, a, b); ok {
		// A Float32 and a half operand (the residual stream plus a block's low-precision
		// output under autocast): the kernel widens the half one as it reads it, which
		// is exact, so the sum is the one of the cast operands without the cast pass;
		// the half input's gradient is rounded to its dtype as the cast's backward
		// would round it.
		a, b = in[0], in[1]
		shape := broadcastShapes(opAdd.Name(), a, b)
		out := allocOut(c, Float32, a.device, shape)
		a.ref.b.Binary(backend.Add, out.bview(), a.expandView(shape), b.expandView(shape))
		return c.record(opAdd, out, in, func(bc *Context, g *Tensor) []*Tensor {
			gs := make([]*Tensor, 2)
			for i, x := range in {
				if x.requiresGrad {
					gs[i] = bc.cast(bc.sumTo(g, x.shape), x.dtype)
				}
			}
			return gs
		})
	}
	in := c.prep(opAdd, a, b)
	a, b = in[0], in[1]
	out := c.binaryRaw(opAdd, backend.Add, a, b)
	return c.record(opAdd, out, in, func(bc *Context, g *Tensor) []*Tensor {
		return []*Tensor{bc.sumTo(g, a.shape), bc.sumTo(g, b.shape)}
	})
}

// prepWiden is prep for a Promote op whose backend kernel reads operands of mixed
// floating dtypes: when promotion would only widen a half operand to the other one's
// Float32, it checks the inputs as prep does and returns them uncast, with ok set.
// Otherwise it does nothing and reports false.
func (c *Context) prepWiden(op *Op, a, b *Tensor) (in []*Tensor, ok bool) {
	if a == nil || b == nil || a.device != b.device ||
		!(a.dtype == Float32 && b.dtype.IsHalf() || b.dtype == Float32 && a.dtype.IsHalf()) {
		return nil, false
	}
	cat := op.Category()
	if p := c.Autocast(); p != nil {
		cat = p.Category(op, a.device)
	}
	if cat != Promote {
		return nil, false
	}
	c.begin(op)
	a.mustLive(op.Name())
	b.mustLive(op.Name())
	return []*Tensor{a, b}, true
}

func (c *Context) sub(a, b *Tensor) *Tensor {
	in := c.prep(opSub, a, b)
	a, b = in[0], in[1]
	out := c.binaryRaw(opSub, backend.Sub, a, b)
	return c.record(opSub, out, in, func(bc *Context, g *Tensor) []*Tensor {
		var gb *Tensor
		if b.requiresGrad {
			gb = bc.sumTo(bc.unaryRaw(g, backend.Neg, 0, 0), b.shape)
		}
		return []*Tensor{bc.sumTo(g, a.shape), gb}
	})
}

func (c *Context) mul(a, b *Tensor) *Tensor {
	in := c.prep(opMul, a, b)
	a, b = in[0], in[1]
	out := c.binaryRaw(opMul, backend.Mul, a, b)
	return c.record(opMul, out, in, func(bc *Context, g *Tensor) []*Tensor {
		var ga, gb *Tensor
		if a.requiresGrad {
			ga = bc.sumTo(bc.binaryRaw(opMul, backend.Mul, g, b), a.shape)
		}
		if b.requiresGrad {
			gb = bc.sumTo(bc.binaryRaw(opMul, backend.Mul, g, a), b.shape)
		}
		return []*Tensor{ga, gb}
	})
}

func (c *Context) div(a, b *Tensor) *Tensor {
	in := c.prep(opDiv, a, b)
	a, b = in[0], in[1]
	out := c.binaryRaw(opDiv, backend.Div, a, b)
	return c.record(opDiv, out, in, func(bc *Context, g *Tensor) []*Tensor {
		var ga, gb *Tensor
		gdb := bc.binaryRaw(opDiv, backend.Div, g, b)
		if a.requiresGrad {
			ga = bc.sumTo(gdb, a.shape)
		}
		if b.requiresGrad {
			// d(a/b)/db = -(a/b)/b
			t := bc.binaryRaw(opMul, backend.Mul, gdb, out)
			gb = bc.sumTo(bc.unaryRaw(t, backend.Neg, 0, 0), b.shape)
		}
		return []*Tensor{ga, gb}
	})
}

func (c *Context) pow(a, b *Tensor) *Tensor {
	in := c.prep(opPow, a, b)
	a, b = in[0], in[1]
	if a.dtype != b.dtype {
		w := promote(a.dtype, b.dtype)
		a, b = c.cast(a, w), c.cast(b, w)
		in = []*Tensor{a, b}
	}
	out := c.binaryRaw(opPow, backend.Pow, a, b)
	return c.record(opPow, out, in, func(bc *Context, g *Tensor) []*Tensor {
		var ga, gb *Tensor
		if a.requiresGrad {
			// b·a^(b-1)
			bm1 := bc.unaryRaw(b, backend.AddScalar, -1, 0)
			t := bc.binaryRaw(opPow, backend.Pow, a, bm1)
			t = bc.binaryRaw(opMul, backend.Mul, t, b)
			ga = bc.sumTo(bc.binaryRaw(opMul, backend.Mul, g, t), a.shape)
		}
		if b.requiresGrad {
			// a^b·ln a
			la := bc.unaryRaw(a, backend.Log, 0, 0)
			t := bc.binaryRaw(opMul, backend.Mul, out, la)
			gb = bc.sumTo(bc.binaryRaw(opMul, backend.Mul, g, t), b.shape)
		}
		return []*Tensor{ga, gb}
	})
}

func (c *Context) maxmin(op *Op, a, b *Tensor) *Tensor {
	in := c.prep(op, a, b)
	a, b = in[0], in[1]
	bop := backend.Maximum
	if op == opMinimum {
		bop = backend.Minimum
	}
	out := c.binaryRaw(op, bop, a, b)
	return c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		// The winner takes the gradient; ties split it in half (as PyTorch).
		wa := bc.binaryRaw(opCompare, backend.Eq, out, a)
		wb := bc.binaryRaw(opCompare, backend.Eq, out, b)
		both := bc.binaryRaw(opCompare, backend.Eq, wa, wb)
		half := bc.unaryRaw(g, backend.MulScalar, 0.5, 0)
		zero := Zeros(Shape{}, WithDType(g.dtype), WithDevice(g.device), WithContext(bc))
		gg := bc.whereRaw(both, half, g)
		var ga, gb *Tensor
		if a.requiresGrad {
			ga = bc.sumTo(bc.whereRaw(wa, gg, zero), a.shape)
		}
		if b.requiresGrad {
			gb = bc.sumTo(bc.whereRaw(wb, gg, zero), b.shape)
		}
		return []*Tensor{ga, gb}
	})
}

// whereRaw computes cond ? a : b with broadcasting, without recording.
func (c *Context) whereRaw(cond, a, b *Tensor) *Tensor {
	shape := broadcastShapes("where", cond, a, b)
	out := allocOut(c, a.dtype, a.device, shape)
	a.ref.b.Where(out.bview(), cond.expandView(shape), a.expandView(shape), b.expandView(shape))
	return out
}

// Compare ops return Bool tensors and have no gradient.

// Eq returns a == b elementwise.
func Eq(a, b *Tensor) *Tensor { return resolve(opCompare, a, b).compare(backend.Eq, a, b) }

// Ne returns a != b elementwise.
func Ne(a, b *Tensor) *Tensor { return resolve(opCompare, a, b).compare(backend.Ne, a, b) }

// Lt returns a < b elementwise.
func Lt(a, b *Tensor) *Tensor { return resolve(opCompare, a, b).compare(backend.Lt, a, b) }

// Le returns a <= b elementwise.
func Le(a, b *Tensor) *Tensor { return resolve(opCompare, a, b).compare(backend.Le, a, b) }

// Gt returns a > b elementwise.
func Gt(a, b *Tensor) *Tensor { return resolve(opCompare, a, b).compare(backend.Gt, a, b) }

// Ge returns a >= b elementwise.
func Ge(a, b *Tensor) *Tensor { return resolve(opCompare, a, b).compare(backend.Ge, a, b) }

func (c *Context) compare(bop backend.BinaryOp, a, b *Tensor) *Tensor {
	in := c.prep(opCompare, a, b)
	return c.observe(opCompare, in, c.binaryRaw(opCompare, bop, in[0], in[1]))
}

// --- elementwise unary ops

// unaryUses says which forward tensors an op's derivative needs.
type unaryUses uint8

const (
	usesNone unaryUses = iota
	usesX
	usesY
)

type unaryDef struct {
	op   *Op
	kind backend.UnaryOp
	uses unaryUses
}

var (
	uNeg     = unaryDef{defOp("neg", Passthrough), backend.Neg, usesNone}
	uExp     = unaryDef{defOp("exp", FP32), backend.Exp, usesY}
	uLog     = unaryDef{defOp("log", FP32), backend.Log, usesX}
	uSqrt    = unaryDef{defOp("sqrt", Passthrough), backend.Sqrt, usesY}
	uRsqrt   = unaryDef{defOp("rsqrt", FP32), backend.Rsqrt, usesY}
	uAbs     = unaryDef{defOp("abs", Passthrough), backend.Abs, usesX}
	uRelu    = unaryDef{defOp("relu", Passthrough), backend.Relu, usesX}
	uGelu    = unaryDef{defOp("gelu", Passthrough), backend.Gelu, usesX}
	uGeluT   = unaryDef{defOp("gelu_tanh", Passthrough), backend.GeluTanh, usesX}
	uTanh    = unaryDef{defOp("tanh", Passthrough), backend.Tanh, usesY}
	uSigmoid = unaryDef{defOp("sigmoid", Passthrough), backend.Sigmoid, usesY}
	uSquare  = unaryDef{defOp("square", Passthrough), backend.Square, usesX}
	uRecip   = unaryDef{defOp("reciprocal", FP32), backend.Recip, usesY}
	uAddS    = unaryDef{defOp("add_scalar", Passthrough), backend.AddScalar, usesNone}
	uMulS    = unaryDef{defOp("mul_scalar", Passthrough), backend.MulScalar, usesNone}
	uPowS    = unaryDef{defOp("pow_scalar", FP32), backend.PowScalar, usesX}
	uClamp   = unaryDef{defOp("clamp", Passthrough), backend.Clamp, usesX}
	uRSubS   = unaryDef{defOp("rsub_scalar", Passthrough), backend.RSubScalar, usesNone}
)

// unaryRaw applies a unary kernel without recording.
func (c *Context) unaryRaw(x *Tensor, k backend.UnaryOp, p0, p1 float64) *Tensor {
	x = x.dense(c)
	out := allocOut(c, x.dtype, x.device, x.shape)
	x.ref.b.Unary(k, out.ref.s, x.ref.s, x.Numel(), p0, p1)
	return out
}

// dense returns t if it is contiguous and starts at its storage's first element, else a
// copy: what the contiguous-storage kernels take.
func (t *Tensor) dense(c *Context) *Tensor {
	if t.offset == 0 && t.IsContiguous() {
		return t
	}
	out := allocOut(c, t.dtype, t.device, t.shape)
	t.ref.b.Copy(out.bview(), t.bview())
	return out
}

func (c *Context) unary(d unaryDef, x *Tensor, p0, p1 float64) *Tensor {
	in := c.prep(d.op, x)
	x = in[0]
	if !x.dtype.IsFloat() {
		fail(d.op.Name(), in, "needs a floating-point tensor; Cast it first")
	}
	xd := x.dense(c)
	out := allocOut(c, x.dtype, x.device, x.shape)
	x.ref.b.Unary(d.kind, out.ref.s, xd.ref.s, x.Numel(), p0, p1)
	return c.record(d.op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		g = g.dense(bc)
		gx := allocOut(bc, g.dtype, g.device, g.shape)
		var xs, ys backend.Storage
		switch d.uses {
		case usesX:
			xs = xd.ref.s
		case usesY:
			ys = out.ref.s
		}
		g.ref.b.UnaryBackward(d.kind, gx.ref.s, g.ref.s, xs, ys, g.Numel(), p0, p1)
		return []*Tensor{gx}
	})
}

// Neg returns -x.
func (t *Tensor) Neg() *Tensor { return resolve(uNeg.op, t).unary(uNeg, t, 0, 0) }

// Exp returns e^x (computed in float32 under autocast).
func (t *Tensor) Exp() *Tensor { return resolve(uExp.op, t).unary(uExp, t, 0, 0) }

// Log returns ln x.
func (t *Tensor) Log() *Tensor { return resolve(uLog.op, t).unary(uLog, t, 0, 0) }

// Sqrt returns √x.
func (t *Tensor) Sqrt() *Tensor { return resolve(uSqrt.op, t).unary(uSqrt, t, 0, 0) }

// Rsqrt returns 1/√x.
func (t *Tensor) Rsqrt() *Tensor { return resolve(uRsqrt.op, t).unary(uRsqrt, t, 0, 0) }

// Abs returns |x|.
func (t *Tensor) Abs() *Tensor { return resolve(uAbs.op, t).unary(uAbs, t, 0, 0) }

// Relu returns max(x, 0).
func (t *Tensor) Relu() *Tensor { return resolve(uRelu.op, t).unary(uRelu, t, 0, 0) }

// Gelu returns the exact (erf) GELU.
func (t *Tensor) Gelu() *Tensor { return resolve(uGelu.op, t).unary(uGelu, t, 0, 0) }

// GeluTanh returns the tanh approximation of GELU.
func (t *Tensor) GeluTanh() *Tensor { return resolve(uGeluT.op, t).unary(uGeluT, t, 0, 0) }

// Tanh returns tanh x.
func (t *Tensor) Tanh() *Tensor { return resolve(uTanh.op, t).unary(uTanh, t, 0, 0) }

// Sigmoid returns 1/(1+e^-x).
func (t *Tensor) Sigmoid() *Tensor { return resolve(uSigmoid.op, t).unary(uSigmoid, t, 0, 0) }

// Square returns x².
func (t *Tensor) Square() *Tensor { return resolve(uSquare.op, t).unary(uSquare, t, 0, 0) }

// Reciprocal returns 1/x.
func (t *Tensor) Reciprocal() *Tensor { return resolve(uRecip.op, t).unary(uRecip, t, 0, 0) }

// AddScalar returns x + s.
func (t *Tensor) AddScalar(s float64) *Tensor { return resolve(uAddS.op, t).unary(uAddS, t, s, 0) }

// MulScalar returns x · s.
func (t *Tensor) MulScalar(s float64) *Tensor { return resolve(uMulS.op, t).unary(uMulS, t, s, 0) }

// DivScalar returns x / s.
func (t *Tensor) DivScalar(s float64) *Tensor { return t.MulScalar(1 / s) }

// RSubScalar returns s - x.
func (t *Tensor) RSubScalar(s float64) *Tensor { return resolve(uRSubS.op, t).unary(uRSubS, t, s, 0) }

// PowScalar returns x ^ p.
func (t *Tensor) PowScalar(p float64) *Tensor { return resolve(uPowS.op, t).unary(uPowS, t, p, 0) }

// Clamp limits x to [lo, hi]; pass ±Inf for a missing bound.
func (t *Tensor) Clamp(lo, hi float64) *Tensor {
	return resolve(uClamp.op, t).unary(uClamp, t, lo, hi)
}
