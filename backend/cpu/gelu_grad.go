package cpu

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/backend"
)

// The float32 GELU forward that also writes its backward's factor (backend.GeluWithGrad).
// vecGelu's backward computes, per element, T = fma(x, φ(x), Φ(x)) from the saved x and
// then gx = T·gy (VMULPS with T the first source; geluGo's gy·T in the Go tails): an
// erf piece and an exponential per element, more work than the forward. vecGeluGrad
// computes y and T in one pass with the backward's instructions (geluCompactGradAVX512
// with AVX-512, else the backward loop on a gy of ones: T·1 is T, NaN payload
// included, as T is never a signalling NaN), so the backward is one multiply,
// gx = T·gy, with T first as before: the bits of UnaryBackward(Gelu) (TestGeluGrad*).

// geluOnes is the gy of the backward loops when they compute T alone.
var geluOnes = func() *[geluOnesN]float32 {
	var o [geluOnesN]float32
	for i := range o {
		o[i] = 1
	}
	return &o
}()

const geluOnesN = 1024

// geluGradGo is the twin of vecGeluGrad: y[i] = geluGo's forward of x[i] and t[i] =
// fma(x, φ, Φ), the factor geluGo's backward multiplies gy by. y may be x; t must not
// overlap x or y.
func geluGradGo(y, t, x []float32) {
	t = t[:len(y)]
	for i, v := range x[:len(y)] {
		cdf, e := geluParts(v, true)
		t[i] = fma32(v, e*invSqrt2Pi, cdf)
		y[i] = v * cdf
	}
}

// geluGradVec is vecGeluGrad on the vector loops without compaction, len(y) a multiple
// of 16: by blocks of geluOnesN, t from the backward loop on a gy of ones, then y.
func geluGradVec(y, t, x []float32) {
	for i := 0; i < len(y); i += geluOnesN {
		k := min(geluOnesN, len(y)-i)
		vecGeluRun(&t[i], &x[i], &geluOnes[0], k)
		vecGeluRun(&y[i], &x[i], nil, k)
	}
}

// vecGeluGrad sets y = vecGelu(y, x, nil)'s result and t = the factor vecGelu(·, x, gy)
// multiplies gy by, over len(y) elements, so that geluGradMul(gx, t, gy) equals
// vecGelu(gx, x, gy) bit for bit. y may be x; t must not overlap x or y.
func vecGeluGrad(y, t, x []float32) {
	n := len(y)
	t, x = t[:n], x[:n]
	m := 0
	if vec != nil {
		if m = n &^ 15; m > 0 && !vecGeluGradCompact(y, t, x, m) {
			geluGradVec(y[:m], t[:m], x[:m])
		}
	}
	geluGradGo(y[m:], t[m:], x[m:])
}

// geluGradMul sets gx = t·gy over len(gx) elements: the vector loop's VMULPS with t the
// first source, and the Go tail's gy·t, as vecGelu's backward multiplies.
func geluGradMul(gx, t, gy []float32) {
	n := len(gx)
	t, gy = t[:n], gy[:n]
	m := 0
	if vec != nil {
		if m = n &^ 15; m > 0 {
			vecOpRun(vecMul, &gx[0], &t[0], &gy[0], m)
		}
	}
	geluGradMulGo(gx[m:], t[m:], gy[m:])
}

// geluGradMulGo is geluGradMul's twin. Where t and gy are both NaN, the product is t
// quieted, spelled out: an x86 multiply returns its first source's NaN, and the Go
// compiler orders a product's operands as it likes (gy[i]*t[i] here gave gy's NaN, and
// geluGo's gy[i]*fma32(…) gives T's: TestGeluGradLengths).
func geluGradMulGo(gx, t, gy []float32) {
	t, gy = t[:len(gx)], gy[:len(gx)]
	for i := range gx {
		if v := t[i]; v != v {
			gx[i] = math.Float32frombits(math.Float32bits(v) | 1<<22)
		} else {
			gx[i] = v * gy[i]
		}
	}
}

// GeluWithGrad implements backend.GeluWithGrad: Float32 (the half dtypes look their
// GELU up in tables, Float64 computes in float64).
func (b *Backend) GeluWithGrad(dt backend.DType) bool { return dt == backend.Float32 }

// geluGradCheck panics unless every storage is Float32 with at least n elements.
func geluGradCheck(kernel string, n int, names []string, ss ...*storage) {
	for i, s := range ss {
		elemCheckLen(kernel, names[i], s, n)
		if s.dt != backend.Float32 {
			panic(fmt.Sprintf("cpu: %s: %s must be Float32, got %s (ask GeluWithGrad first)", kernel, names[i], s.dt))
		}
	}
}

// GeluForwardGrad implements backend.GeluWithGrad: y = Unary(Gelu, x) and t, the
// factor of its backward, over n elements, with Unary's split into parallel ranges and
// chunks (so the same elements reach the Go tails as in Unary and UnaryBackward).
func (b *Backend) GeluForwardGrad(y, t, x backend.Storage, n int) {
	ys, ts, xs := st(y), st(t), st(x)
	geluGradCheck("GeluForwardGrad", n, []string{"y", "t", "x"}, ys, ts, xs)
	yf, tf, xf := ys.f32(), ts.f32(), xs.f32()
	parallelChunks(n, func(c, e int) { vecGeluGrad(yf[c:e], tf[c:e], xf[c:e]) })
}

// GeluBackwardGrad implements backend.GeluWithGrad: gx = t·gy over n elements, t from
// GeluForwardGrad; the bits of UnaryBackward(Gelu, gx, gy, x, nil, n) for its x. gx
// may be gy or t.
func (b *Backend) GeluBackwardGrad(gx, gy, t backend.Storage, n int) {
	gxs, gys, ts := st(gx), st(gy), st(t)
	geluGradCheck("GeluBackwardGrad", n, []string{"gx", "gy", "t"}, gxs, gys, ts)
	gxf, gyf, tf := gxs.f32(), gys.f32(), ts.f32()
	parallelChunks(n, func(c, e int) { geluGradMul(gxf[c:e], tf[c:e], gyf[c:e]) })
}

// parallelChunks runs fn(c, e) on every chunk [c, e) of at most chunk elements of
// [0, n), the ranges split over the pool as Unary splits its elements (ParallelFor
// with grain grainElems), so the same elements reach each call's vector loop and tail.
func parallelChunks(n int, fn func(c, e int)) {
	ParallelFor(n, grainElems, func(lo, hi int) {
		for c := lo; c < hi; c += chunk {
			fn(c, c+min(chunk, hi-c))
		}
	})
}
