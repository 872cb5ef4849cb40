package cpu

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// unaryNames spell the unary ops in panic messages.
var unaryNames = [backend.NumUnaryOps]string{
	backend.Neg: "Neg", backend.Exp: "Exp", backend.Log: "Log", backend.Sqrt: "Sqrt",
	backend.Rsqrt: "Rsqrt", backend.Abs: "Abs", backend.Sign: "Sign", backend.Relu: "Relu",
	backend.Gelu: "Gelu", backend.GeluTanh: "GeluTanh", backend.Tanh: "Tanh",
	backend.Sigmoid: "Sigmoid", backend.Square: "Square", backend.Recip: "Recip",
	backend.AddScalar: "AddScalar", backend.MulScalar: "MulScalar",
	backend.PowScalar: "PowScalar", backend.Clamp: "Clamp", backend.RSubScalar: "RSubScalar",
}

func unaryName(op backend.UnaryOp) string {
	if int(op) < backend.NumUnaryOps {
		return unaryNames[op]
	}
	panic(fmt.Sprintf("cpu: unknown unary op %d", op))
}

// elemCheckLen panics unless s (named what) holds at least need elements.
func elemCheckLen(kernel, what string, s *storage, need int) {
	if s == nil {
		panic(fmt.Sprintf("cpu: %s: %s is nil", kernel, what))
	}
	if need < 0 || s.n < need {
		panic(fmt.Sprintf("cpu: %s: %s has %d elements, the call needs %d", kernel, what, s.n, need))
	}
}

// elemCheckFloat panics unless s holds a floating dtype.
func elemCheckFloat(kernel, what string, s *storage) {
	if !s.dt.IsFloat() {
		panic(fmt.Sprintf("cpu: %s: %s must be a floating dtype, got %s", kernel, what, s.dt))
	}
}

// elemRun is a contiguous storage seen in compute type C: its own elements when it
// stores C (Float32 data computed in float32, Float64 in float64), so a kernel works on
// the data in place, and otherwise a scratch buffer filled by bulk conversion.
type elemRun[C numeric] struct {
	s      *storage
	native []C
	ok     bool
}

func elemRunOf[C numeric](s *storage) elemRun[C] {
	r := elemRun[C]{s: s}
	if s == nil {
		return r
	}
	var z C
	switch any(z).(type) {
	case float32:
		if s.dt == backend.Float32 {
			r.native, r.ok = any(s.f32()).([]C), true
		}
	case float64:
		if s.dt == backend.Float64 {
			r.native, r.ok = any(s.f64()).([]C), true
		}
	}
	return r
}

// read returns elements [off, off+len(buf)): a window on the storage, or buf filled.
func (r elemRun[C]) read(buf []C, off int) []C {
	if r.ok {
		return r.native[off : off+len(buf)]
	}
	load(buf, r.s, off, 1)
	return buf
}

// out returns where to compute elements [off, off+len(buf)): the storage itself, or
// buf, which flush then stores (rounding once).
func (r elemRun[C]) out(buf []C, off int) []C {
	if r.ok {
		return r.native[off : off+len(buf)]
	}
	return buf
}

// flush stores res, the slice out returned for off, unless it was written in place.
func (r elemRun[C]) flush(off int, res []C) {
	if !r.ok {
		store(r.s, off, 1, res)
	}
}

// Unary implements backend.Backend. Arithmetic ops run in the compute type (float32 for
// Float32 and half data, float64 for Float64); transcendental ones call float64 math and
// convert. Sign maps NaN to NaN; Relu and Clamp propagate NaN.
func (b *Backend) Unary(op backend.UnaryOp, dst, src backend.Storage, n int, p0, p1 float64) {
	unaryName(op)
	d, s := st(dst), st(src)
	elemCheckLen("Unary", "dst", d, n)
	elemCheckLen("Unary", "src", s, n)
	elemCheckFloat("Unary", "dst", d)
	elemCheckFloat("Unary", "src", s)
	if (op == backend.Gelu || op == backend.GeluTanh) && geluHalfForward(op, d, s, n) {
		return // half data: table lookup (gelu_table.go)
	}
	if f, ok := halfFmtOf(d.dt); ok && op == backend.Relu && s.dt == d.dt {
		// On the words, the bits of the float32 round trip (vec_halfelem.go).
		du, su := d.u16(), s.u16()
		ParallelFor(n, grainElems, func(lo, hi int) { reluHalf(f, du[lo:hi], su[lo:hi]) })
		return
	}
	if f, ok := halfFmtOf(d.dt); ok && s.dt == d.dt && vecAVX512OK() {
		if hop, hs, ok := halfUnaryOp(op, p0); ok {
			// On the words, the float32 operation in registers (halfOp): the
			// bits of unaryKernel's widen, vecUnary, round.
			du, su := d.u16(), s.u16()
			ParallelFor(n, grainElems, func(lo, hi int) {
				halfOp(f, hop, du[lo:hi], su[lo:hi], su[lo:hi], hs)
			})
			return
		}
	}
	if computeF64(d.dt, s.dt) {
		unaryKernel[float64](op, d, s, n, p0, p1)
	} else {
		unaryKernel[float32](op, d, s, n, p0, p1)
	}
}

func unaryKernel[C numeric](op backend.UnaryOp, d, s *storage, n int, p0, p1 float64) {
	dr, sr := elemRunOf[C](d), elemRunOf[C](s)
	ParallelFor(n, grainElems, func(lo, hi int) {
		var xb, yb [chunk]C
		for c := lo; c < hi; c += chunk {
			m := min(chunk, hi-c)
			x := sr.read(xb[:m], c)
			y := dr.out(yb[:m], c)
			unaryApply(op, y, x, p0, p1)
			dr.flush(c, y)
		}
	})
}

// halfUnaryOp returns the halfOp operation and scalar that compute op as vecUnary does
// on float32 (AddScalar, MulScalar, RSubScalar, Recip, Square), and whether op is one.
func halfUnaryOp(op backend.UnaryOp, p0 float64) (vecOp, float32, bool) {
	switch {
	case op == backend.AddScalar:
		return vecAddS, float32(p0), true
	case op == backend.MulScalar:
		return vecMulS, float32(p0), true
	case op == backend.RSubScalar:
		return vecRSubS, float32(p0), true
	case op == backend.Recip:
		return vecRDivS, 1, true
	case op == backend.Square, op == backend.PowScalar && p0 == 2:
		return vecMul, 0, true
	}
	return 0, 0, false
}

// gelu is x·Φ(x) with the exact (erf) normal CDF.
// gelu is x·Φ(x) with Φ(x) = ½·erfc(−x/√2): 1 + erf(x/√2) would cancel for x < 0 and
// leave GELU's tail (x ≲ −4) only as exact as erf's last bits (CUDA's erf and Go's differ
// there by relative 1e-9 in the result); erfc keeps it to a few ulps on both.
func gelu(x float64) float64 { return 0.5 * x * math.Erfc(-x/math.Sqrt2) }

// geluTanhK is √(2/π), the tanh approximation's scale.
const geluTanhK = 0.7978845608028654

func geluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(geluTanhK*(x+0.044715*x*x*x)))
}

// geluTanhGrad is geluTanh's derivative.
func geluTanhGrad(x float64) float64 {
	t := math.Tanh(geluTanhK * (x + 0.044715*x*x*x))
	return 0.5*(1+t) + 0.5*x*(1-t)*(1+t)*geluTanhK*(1+3*0.044715*x*x)
}

// unaryApply computes y = op(x) elementwise; y may alias x.
func unaryApply[C numeric](op backend.UnaryOp, y, x []C, p0, p1 float64) {
	x = x[:len(y)]
	if vecUnary(op, y, x, p0) {
		return
	}
	switch op {
	case backend.Neg:
		for i, v := range x {
			y[i] = -v
		}
	case backend.Exp:
		for i, v := range x {
			y[i] = C(math.Exp(float64(v)))
		}
	case backend.Log:
		for i, v := range x {
			y[i] = C(math.Log(float64(v)))
		}
	case backend.Sqrt:
		for i, v := range x {
			y[i] = C(math.Sqrt(float64(v)))
		}
	case backend.Rsqrt:
		for i, v := range x {
			y[i] = C(1 / math.Sqrt(float64(v)))
		}
	case backend.Abs:
		for i, v := range x {
			if v <= 0 {
				v = 0 - v // also turns -0 into +0
			}
			y[i] = v
		}
	case backend.Sign:
		for i, v := range x {
			switch {
			case v > 0:
				v = 1
			case v < 0:
				v = -1
			case v == 0:
				v = 0
			}
			y[i] = v // NaN stays NaN
		}
	case backend.Relu:
		for i, v := range x {
			if v <= 0 {
				v = 0
			}
			y[i] = v
		}
	case backend.Gelu:
		for i, v := range x {
			y[i] = C(gelu(float64(v)))
		}
	case backend.GeluTanh:
		for i, v := range x {
			y[i] = C(geluTanh(float64(v)))
		}
	case backend.Tanh:
		for i, v := range x {
			y[i] = C(math.Tanh(float64(v)))
		}
	case backend.Sigmoid:
		for i, v := range x {
			y[i] = C(1 / (1 + math.Exp(-float64(v))))
		}
	case backend.Square:
		for i, v := range x {
			y[i] = v * v
		}
	case backend.Recip:
		for i, v := range x {
			y[i] = 1 / v
		}
	case backend.AddScalar:
		a := C(p0)
		for i, v := range x {
			y[i] = v + a
		}
	case backend.MulScalar:
		a := C(p0)
		for i, v := range x {
			y[i] = v * a
		}
	case backend.PowScalar:
		if p0 == 2 {
			// x·x equals the correctly rounded power and is far cheaper.
			for i, v := range x {
				y[i] = v * v
			}
			return
		}
		for i, v := range x {
			y[i] = C(math.Pow(float64(v), p0))
		}
	case backend.Clamp:
		lo, hi := C(p0), C(p1)
		for i, v := range x {
			if v < lo {
				v = lo
			}
			if v > hi {
				v = hi
			}
			y[i] = v
		}
	case backend.RSubScalar:
		a := C(p0)
		for i, v := range x {
			y[i] = a - v
		}
	default:
		panic(fmt.Sprintf("cpu: unknown unary op %d", op))
	}
}

// vecUnary computes y = op(x) on the vector layer and reports true when C is float32
// and op is one of the ops it has: Relu, AddScalar, MulScalar, RSubScalar, Recip
// (1/x), and Square and PowScalar 2 (x·x), with the results of unaryApply's loops; and
// Gelu in float32 arithmetic, within the few ulp of the float64 formula that
// vec_gelu.go states.
func vecUnary[C numeric](op backend.UnaryOp, y, x []C, p0 float64) bool {
	yf, ok := any(y).([]float32)
	if !ok {
		return false
	}
	xf := any(x).([]float32)
	switch {
	case op == backend.Relu:
		vecScalar(vecRelu, yf, xf, 0)
	case op == backend.AddScalar:
		vecScalar(vecAddS, yf, xf, float32(p0))
	case op == backend.MulScalar:
		vecScalar(vecMulS, yf, xf, float32(p0))
	case op == backend.RSubScalar:
		vecScalar(vecRSubS, yf, xf, float32(p0))
	case op == backend.Recip:
		vecScalar(vecRDivS, yf, xf, 1)
	case op == backend.Square, op == backend.PowScalar && p0 == 2:
		vecBinary(vecMul, yf, xf, xf)
	case op == backend.Gelu:
		vecGelu(yf, xf, nil)
	case op == backend.Exp:
		vecExpF32(yf, xf)
	default:
		return false
	}
	return true
}

// vecExpF32 sets y[i] = float32(math.Exp(float64(x[i]))) for i < len(y), y and x the
// same or not overlapping, through the vector exponential of the softmax (expF64) and
// the vector narrowing: for every float32 x, float32(expF64(x)) is
// float32(math.Exp(x)) bit for bit (checked on all 2³² patterns once; TestExpF32
// checks a stride of them and the edges on every run), so this is unaryApply's scalar
// loop, only in vectors.
func vecExpF32(y, x []float32) {
	y = y[:len(x)]
	var e [256]float64
	for lo := 0; lo < len(x); lo += len(e) {
		m := min(len(e), len(x)-lo)
		vecExpF64(e[:m], x[lo:lo+m], 0)
		vecNarrow(narrowCopy, y[lo:lo+m], e[:m], nil, nil, 0, 0)
	}
}

// Which saved tensor an op's derivative is written in.
const (
	gradUsesNone = iota
	gradUsesX
	gradUsesY
)

// unaryGradUses: Exp, Sqrt, Rsqrt, Tanh, Sigmoid and Recip differentiate through the
// output y (recomputed from x when y is nil); Log, Abs, Relu, Gelu, GeluTanh, Square,
// PowScalar and Clamp need the input x; the rest need neither.
func unaryGradUses(op backend.UnaryOp) int {
	switch op {
	case backend.Exp, backend.Sqrt, backend.Rsqrt, backend.Tanh, backend.Sigmoid, backend.Recip:
		return gradUsesY
	case backend.Log, backend.Abs, backend.Relu, backend.Gelu, backend.GeluTanh,
		backend.Square, backend.PowScalar, backend.Clamp:
		return gradUsesX
	}
	return gradUsesNone
}

// UnaryBackward implements backend.Backend. Derivatives, with the tensor each reads:
//
//	Neg, RSubScalar -gy            AddScalar gy          MulScalar gy·p0     Sign 0
//	Exp    gy·y                    Sqrt gy/(2y)          Rsqrt -gy·y³/2
//	Tanh   gy·(1-y)(1+y)           Sigmoid gy·y(1-y)     Recip -gy·y²
//	Log    gy/x                    Square 2x·gy          Abs gy·sign(x), 0 at 0
//	Relu   gy where x > 0          Clamp gy where p0 ≤ x ≤ p1 (PyTorch)
//	Gelu, GeluTanh  gy·d/dx        PowScalar gy·p0·x^(p0-1), 0 when p0 = 0
//
// Ops written in y recompute it from x when y is nil.
func (b *Backend) UnaryBackward(op backend.UnaryOp, gx, gy, x, y backend.Storage, n int, p0, p1 float64) {
	name := unaryName(op)
	gxs, gys, xs, ys := st(gx), st(gy), st(x), st(y)
	elemCheckLen("UnaryBackward", "gx", gxs, n)
	elemCheckLen("UnaryBackward", "gy", gys, n)
	elemCheckFloat("UnaryBackward", "gx", gxs)
	elemCheckFloat("UnaryBackward", "gy", gys)
	var a *storage // the tensor the derivative reads
	recompute := false
	switch unaryGradUses(op) {
	case gradUsesY:
		switch {
		case ys != nil:
			a = ys
			elemCheckLen("UnaryBackward", "y", a, n)
		case xs != nil:
			a, recompute = xs, true
			elemCheckLen("UnaryBackward", "x", a, n)
		default:
			panic("cpu: UnaryBackward: " + name + " needs its output y (or its input x to recompute it)")
		}
	case gradUsesX:
		if xs == nil {
			panic("cpu: UnaryBackward: " + name + " needs its input x")
		}
		a = xs
		elemCheckLen("UnaryBackward", "x", a, n)
	}
	f64 := computeF64(gxs.dt, gys.dt)
	if a != nil {
		elemCheckFloat("UnaryBackward", "x/y", a)
		f64 = f64 || computeF64(a.dt)
	}
	if (op == backend.Gelu || op == backend.GeluTanh) && !f64 && geluHalfBackward(op, gxs, gys, a, n) {
		return // half x: table lookup (gelu_table.go)
	}
	if f, ok := halfFmtOf(gxs.dt); ok && op == backend.Relu && gys.dt == gxs.dt && a.dt == gxs.dt {
		// On the words, the bits of the float32 round trip (vec_halfelem.go).
		gu, gyu, xu := gxs.u16(), gys.u16(), a.u16()
		ParallelFor(n, grainElems, func(lo, hi int) { reluGradHalf(f, gu[lo:hi], gyu[lo:hi], xu[lo:hi]) })
		return
	}
	if f64 {
		unaryBackwardKernel[float64](op, gxs, gys, a, recompute, n, p0, p1)
	} else {
		unaryBackwardKernel[float32](op, gxs, gys, a, recompute, n, p0, p1)
	}
}

func unaryBackwardKernel[C numeric](op backend.UnaryOp, gx, gy, a *storage, recompute bool, n int, p0, p1 float64) {
	gxr, gyr, ar := elemRunOf[C](gx), elemRunOf[C](gy), elemRunOf[C](a)
	ParallelFor(n, grainElems, func(lo, hi int) {
		var gb, ab, ob [chunk]C
		for c := lo; c < hi; c += chunk {
			m := min(chunk, hi-c)
			g := gyr.read(gb[:m], c)
			var v []C
			if a != nil {
				v = ar.read(ab[:m], c)
				if recompute {
					unaryApply(op, ab[:m], v, p0, p1)
					v = ab[:m]
				}
			}
			o := gxr.out(ob[:m], c)
			unaryGrad(op, o, g, v, p0, p1)
			gxr.flush(c, o)
		}
	})
}

// unaryGrad computes gx = gy·op'(·) from a, which holds x or y as unaryGradUses says.
// gx may alias gy or a.
func unaryGrad[C numeric](op backend.UnaryOp, gx, gy, a []C, p0, p1 float64) {
	gy = gy[:len(gx)]
	if unaryGradUses(op) != gradUsesNone {
		a = a[:len(gx)]
	}
	if vecUnaryGrad(op, gx, gy, a, p0) {
		return
	}
	switch op {
	case backend.Neg, backend.RSubScalar:
		for i, g := range gy {
			gx[i] = -g
		}
	case backend.AddScalar:
		copy(gx, gy)
	case backend.MulScalar:
		k := C(p0)
		for i, g := range gy {
			gx[i] = g * k
		}
	case backend.Sign:
		clear(gx)
	case backend.Exp:
		for i, g := range gy {
			gx[i] = g * a[i]
		}
	case backend.Log:
		for i, g := range gy {
			gx[i] = g / a[i]
		}
	case backend.Sqrt:
		for i, g := range gy {
			gx[i] = g / (2 * a[i])
		}
	case backend.Rsqrt:
		for i, g := range gy {
			y := a[i]
			gx[i] = -0.5 * g * (y * y * y)
		}
	case backend.Tanh:
		// (1-y)(1+y) rather than 1-y², which cancels badly as |y| → 1.
		for i, g := range gy {
			y := a[i]
			gx[i] = g * ((1 - y) * (1 + y))
		}
	case backend.Sigmoid:
		for i, g := range gy {
			y := a[i]
			gx[i] = g * (y * (1 - y))
		}
	case backend.Recip:
		for i, g := range gy {
			y := a[i]
			gx[i] = -g * (y * y)
		}
	case backend.Square:
		for i, g := range gy {
			gx[i] = g * (2 * a[i])
		}
	case backend.Abs:
		for i, g := range gy {
			switch x := a[i]; {
			case x > 0:
				gx[i] = g
			case x < 0:
				gx[i] = -g
			case x == 0:
				gx[i] = 0
			default:
				gx[i] = x // NaN
			}
		}
	case backend.Relu:
		for i, g := range gy {
			if a[i] > 0 {
				gx[i] = g
			} else {
				gx[i] = 0
			}
		}
	case backend.Clamp:
		lo, hi := C(p0), C(p1)
		for i, g := range gy {
			if x := a[i]; x >= lo && x <= hi {
				gx[i] = g
			} else {
				gx[i] = 0
			}
		}
	case backend.Gelu:
		const invSqrt2Pi = 0.3989422804014327 // 1/√(2π)
		for i, g := range gy {
			x := float64(a[i])
			cdf := 0.5 * math.Erfc(-x/math.Sqrt2) // as gelu
			pdf := invSqrt2Pi * math.Exp(-0.5*x*x)
			gx[i] = C(float64(g) * (cdf + x*pdf))
		}
	case backend.GeluTanh:
		for i, g := range gy {
			gx[i] = C(float64(g) * geluTanhGrad(float64(a[i])))
		}
	case backend.PowScalar:
		if p0 == 0 {
			clear(gx)
			return
		}
		for i, g := range gy {
			gx[i] = C(float64(g) * p0 * math.Pow(float64(a[i]), p0-1))
		}
	default:
		panic(fmt.Sprintf("cpu: unknown unary op %d", op))
	}
}

// vecUnaryGrad computes gx = gy·op'(·) on the vector layer and reports true when C is
// float32 and op is Relu (gy where x > 0), MulScalar (gy·p0), Exp (gy·y), Log (gy/x) or
// Gelu (vecGelu). The results are those of unaryGrad's loops (Gelu's within the bound
// vec_gelu.go states).
func vecUnaryGrad[C numeric](op backend.UnaryOp, gx, gy, a []C, p0 float64) bool {
	gxf, ok := any(gx).([]float32)
	if !ok {
		return false
	}
	gyf, af := any(gy).([]float32), any(a).([]float32)
	switch op {
	case backend.Relu:
		vecBinary(vecMask, gxf, gyf, af)
	case backend.MulScalar:
		vecScalar(vecMulS, gxf, gyf, float32(p0))
	case backend.Exp:
		vecBinary(vecMul, gxf, gyf, af)
	case backend.Log:
		vecBinary(vecDiv, gxf, gyf, af)
	case backend.Gelu:
		vecGelu(gxf, af, gyf)
	default:
		return false
	}
	return true
}

// UnscaleCheck implements backend.Backend: g *= inv in g's dtype (float32 arithmetic for
// Float32 and half data, float64 for Float64), checking the stored results. A value that
// was Inf or NaN before scaling is still Inf or NaN after it, so checking the results
// covers both, including finite values that overflow when scaled or rounded to half.
func (b *Backend) UnscaleCheck(g backend.Storage, n int, inv float32) bool {
	s := st(g)
	elemCheckLen("UnscaleCheck", "g", s, n)
	elemCheckFloat("UnscaleCheck", "g", s)
	var bad atomic.Bool
	ParallelFor(n, grainElems, func(lo, hi int) {
		var ok bool
		switch {
		case s.dt == backend.Float64:
			ok = scaleFinite(s.f64()[lo:hi], float64(inv))
		case s.dt == backend.Float32:
			ok = vecScaleFinite(s.f32()[lo:hi], inv)
		case vecAVX512OK():
			f, _ := halfFmtOf(s.dt)
			ok = halfScaleFinite(f, s.u16()[lo:hi], inv)
		default:
			ok = scaleHalfFinite(s, lo, hi, inv)
		}
		if !ok {
			bad.Store(true)
		}
	})
	return bad.Load()
}

// scaleFinite multiplies x by k in place and reports whether every result is finite.
func scaleFinite[C numeric](x []C, k C) bool {
	// Four running sums of v·0: 0 while every v is finite, NaN from the first Inf or
	// NaN on. Four chains hide the add latency.
	var z0, z1, z2, z3 C
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v0, v1, v2, v3 := x[i]*k, x[i+1]*k, x[i+2]*k, x[i+3]*k
		x[i], x[i+1], x[i+2], x[i+3] = v0, v1, v2, v3
		z0 += v0 * 0
		z1 += v1 * 0
		z2 += v2 * 0
		z3 += v3 * 0
	}
	for ; i < len(x); i++ {
		v := x[i] * k
		x[i] = v
		z0 += v * 0
	}
	return (z0+z1)+(z2+z3) == 0
}

// scaleHalfFinite scales half elements [lo, hi) of s through float32 buffers (the
// vector loops of CPUs without AVX-512; halfScaleFinite where it has) and reports
// whether every stored result is finite.
func scaleHalfFinite(s *storage, lo, hi int, inv float32) bool {
	f, _ := halfFmtOf(s.dt)
	bits := s.u16()
	var buf [chunk]float32
	ok := true
	for c := lo; c < hi; c += chunk {
		m := min(chunk, hi-c)
		x := buf[:m]
		s.loadF32(x, c)
		vecScalar(vecMulS, x, x, inv)
		s.storeF32(c, x)
		ok = halfAllFinite(bits[c:c+m], f.inf) && ok
	}
	return ok
}

// halfAllFinite reports whether no 16-bit float in h has its exponent field (mask) all
// ones (half.AllFinite16).
func halfAllFinite(h []uint16, mask uint16) bool { return half.AllFinite16(h, mask) }

// CountNonFinite implements backend.Backend.
func (b *Backend) CountNonFinite(src backend.Storage, n int) (inf, nan int, maxAbs float64) {
	s := st(src)
	elemCheckLen("CountNonFinite", "src", s, n)
	elemCheckFloat("CountNonFinite", "src", s)
	if s.dt == backend.Float64 {
		return countNonFiniteKernel[float64](s, n)
	}
	return countNonFiniteKernel[float32](s, n)
}

func countNonFiniteKernel[C numeric](s *storage, n int) (inf, nan int, maxAbs float64) {
	sr := elemRunOf[C](s)
	var mu sync.Mutex
	// Counts add and maxima compare exactly, so the merge order does not matter.
	ParallelFor(n, grainElems, func(lo, hi int) {
		var buf [chunk]C
		var ni, nn int
		var mx C
		for c := lo; c < hi; c += chunk {
			x := sr.read(buf[:min(chunk, hi-c)], c)
			for _, v := range x {
				if v-v == 0 { // finite
					if v < 0 {
						v = -v
					}
					if v > mx {
						mx = v
					}
				} else if v == v {
					ni++
				} else {
					nn++
				}
			}
		}
		mu.Lock()
		inf += ni
		nan += nn
		maxAbs = max(maxAbs, float64(mx))
		mu.Unlock()
	})
	return inf, nan, maxAbs
}
