package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

func init() {
	register("Unary", testUnary)
	register("UnaryBackward", testUnaryBackward)
	register("UnscaleCheck", testUnscaleCheck)
	register("CountNonFinite", testCountNonFinite)
}

// elemSizes cross the kernels' 1024-element chunks and their parallel split.
var elemSizes = []int{0, 1, 7, 1023, 1025, 100000}

// unarySizes returns the sizes checked for unary case ci: with -short (race runs) only
// every fourth case runs the large, parallel size.
func unarySizes(ci int) []int {
	if testing.Short() && ci%4 != 0 {
		return elemSizes[:len(elemSizes)-1]
	}
	return elemSizes
}

// unaryCase is one unary op with parameters, an input domain on which it is defined,
// and float64 references for the function and its derivative.
type unaryCase struct {
	op     backend.UnaryOp
	name   string
	p0, p1 float64
	lo, hi float64
	// signed flips the sign of every other input (domains like ±[0.25, 4]).
	signed bool
	// fwdCancel and bwdCancel mark results that pass through zero where inputs do not
	// (x + p0, Gelu'): compare relative to the largest |result| instead.
	fwdCancel, bwdCancel bool
	f                    func(x, p0, p1 float64) float64
	// useY: df reads the forward output y, as backends do (else the input x).
	useY bool
	df   func(v, p0, p1 float64) float64
}

// geluRef is x·Φ(x) with Φ(x) = ½·erfc(−x/√2), accurate in the negative tail where
// 1 + erf(x/√2) cancels (backends may take erf from different libraries).
func geluRef(x float64) float64 { return 0.5 * x * math.Erfc(-x/math.Sqrt2) }

func geluGradRef(x float64) float64 {
	return 0.5*math.Erfc(-x/math.Sqrt2) + x*math.Exp(-x*x/2)/math.Sqrt(2*math.Pi)
}

const geluK = 0.7978845608028654 // √(2/π)

func geluTanhRef(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(geluK*(x+0.044715*x*x*x)))
}

func geluTanhGradRef(x float64) float64 {
	t := math.Tanh(geluK * (x + 0.044715*x*x*x))
	return 0.5*(1+t) + 0.5*x*(1-t*t)*geluK*(1+3*0.044715*x*x)
}

func sgn(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

var unaryCases = []unaryCase{
	{op: backend.Neg, name: "Neg", lo: -3, hi: 3,
		f: func(x, _, _ float64) float64 { return -x }, df: func(float64, float64, float64) float64 { return -1 }},
	{op: backend.Exp, name: "Exp", lo: -5, hi: 5, useY: true,
		f: func(x, _, _ float64) float64 { return math.Exp(x) }, df: func(y, _, _ float64) float64 { return y }},
	{op: backend.Log, name: "Log", lo: 0.05, hi: 20,
		f: func(x, _, _ float64) float64 { return math.Log(x) }, df: func(x, _, _ float64) float64 { return 1 / x }},
	{op: backend.Sqrt, name: "Sqrt", lo: 0.01, hi: 10, useY: true,
		f: func(x, _, _ float64) float64 { return math.Sqrt(x) }, df: func(y, _, _ float64) float64 { return 0.5 / y }},
	{op: backend.Rsqrt, name: "Rsqrt", lo: 0.01, hi: 10, useY: true,
		f: func(x, _, _ float64) float64 { return 1 / math.Sqrt(x) }, df: func(y, _, _ float64) float64 { return -0.5 * y * y * y }},
	{op: backend.Abs, name: "Abs", lo: -3, hi: 3,
		f: func(x, _, _ float64) float64 { return math.Abs(x) }, df: func(x, _, _ float64) float64 { return sgn(x) }},
	{op: backend.Sign, name: "Sign", lo: -3, hi: 3,
		f: func(x, _, _ float64) float64 { return sgn(x) }, df: func(float64, float64, float64) float64 { return 0 }},
	{op: backend.Relu, name: "Relu", lo: -3, hi: 3,
		f:  func(x, _, _ float64) float64 { return math.Max(x, 0) },
		df: func(x, _, _ float64) float64 { return sgn(math.Max(x, 0)) }},
	{op: backend.Gelu, name: "Gelu", lo: -6, hi: 6, bwdCancel: true,
		f: func(x, _, _ float64) float64 { return geluRef(x) }, df: func(x, _, _ float64) float64 { return geluGradRef(x) }},
	{op: backend.GeluTanh, name: "GeluTanh", lo: -6, hi: 6, bwdCancel: true,
		f: func(x, _, _ float64) float64 { return geluTanhRef(x) }, df: func(x, _, _ float64) float64 { return geluTanhGradRef(x) }},
	{op: backend.Tanh, name: "Tanh", lo: -4, hi: 4, useY: true,
		f: func(x, _, _ float64) float64 { return math.Tanh(x) }, df: func(y, _, _ float64) float64 { return 1 - y*y }},
	{op: backend.Sigmoid, name: "Sigmoid", lo: -8, hi: 8, useY: true,
		f: func(x, _, _ float64) float64 { return 1 / (1 + math.Exp(-x)) }, df: func(y, _, _ float64) float64 { return y * (1 - y) }},
	{op: backend.Square, name: "Square", lo: -3, hi: 3,
		f: func(x, _, _ float64) float64 { return x * x }, df: func(x, _, _ float64) float64 { return 2 * x }},
	{op: backend.Recip, name: "Recip", lo: 0.25, hi: 4, signed: true, useY: true,
		f: func(x, _, _ float64) float64 { return 1 / x }, df: func(y, _, _ float64) float64 { return -y * y }},
	{op: backend.AddScalar, name: "AddScalar", p0: 0.7, lo: -3, hi: 3, fwdCancel: true,
		f: func(x, p, _ float64) float64 { return x + p }, df: func(float64, float64, float64) float64 { return 1 }},
	{op: backend.MulScalar, name: "MulScalar", p0: -1.3, lo: -3, hi: 3,
		f: func(x, p, _ float64) float64 { return x * p }, df: func(_, p, _ float64) float64 { return p }},
	{op: backend.PowScalar, name: "PowScalar(2.5)", p0: 2.5, lo: 0.1, hi: 4,
		f: func(x, p, _ float64) float64 { return math.Pow(x, p) }, df: func(x, p, _ float64) float64 { return p * math.Pow(x, p-1) }},
	{op: backend.PowScalar, name: "PowScalar(2)", p0: 2, lo: -3, hi: 3,
		f: func(x, p, _ float64) float64 { return math.Pow(x, p) }, df: func(x, p, _ float64) float64 { return p * math.Pow(x, p-1) }},
	{op: backend.PowScalar, name: "PowScalar(3)", p0: 3, lo: -2, hi: 2,
		f: func(x, p, _ float64) float64 { return math.Pow(x, p) }, df: func(x, p, _ float64) float64 { return p * math.Pow(x, p-1) }},
	{op: backend.PowScalar, name: "PowScalar(-1.5)", p0: -1.5, lo: 0.2, hi: 3,
		f: func(x, p, _ float64) float64 { return math.Pow(x, p) }, df: func(x, p, _ float64) float64 { return p * math.Pow(x, p-1) }},
	{op: backend.Clamp, name: "Clamp", p0: -1, p1: 0.5, lo: -3, hi: 3,
		f:  func(x, lo, hi float64) float64 { return math.Min(math.Max(x, lo), hi) },
		df: clampGradRef},
	{op: backend.Clamp, name: "Clamp(-Inf,1)", p0: math.Inf(-1), p1: 1, lo: -3, hi: 3,
		f:  func(x, lo, hi float64) float64 { return math.Min(math.Max(x, lo), hi) },
		df: clampGradRef},
	{op: backend.RSubScalar, name: "RSubScalar", p0: 1.5, lo: -3, hi: 3, fwdCancel: true,
		f: func(x, p, _ float64) float64 { return p - x }, df: func(float64, float64, float64) float64 { return -1 }},
}

// clampGradRef passes the gradient where lo ≤ x ≤ hi, bounds included (PyTorch).
func clampGradRef(x, lo, hi float64) float64 {
	if x >= lo && x <= hi {
		return 1
	}
	return 0
}

// unaryInputs returns n inputs of c's domain rounded to dt.
func unaryInputs(c unaryCase, dt backend.DType, seed uint64, n int) []float64 {
	x := RandVals(seed, n, c.lo, c.hi)
	if c.signed {
		for i := 1; i < n; i += 2 {
			x[i] = -x[i]
		}
	}
	return Rounded(dt, x)
}

// fillGarbage allocates n elements of dt holding a nonzero value, so a check sees
// whether a kernel writes its whole output.
func fillGarbage(t testing.TB, b backend.Backend, dt backend.DType, n int) backend.Storage {
	t.Helper()
	v := make([]float64, n)
	for i := range v {
		v[i] = -5.5
	}
	return Upload(t, b, dt, v)
}

// maxAbs returns the largest finite |v[i]| (0 for none).
func maxAbs(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		if a := math.Abs(x); a > m && !math.IsInf(a, 0) {
			m = a
		}
	}
	return m
}

func testUnary(t *testing.T, b backend.Backend) {
	for ci, c := range unaryCases {
		for _, dt := range FloatDTypes {
			for _, n := range unarySizes(ci) {
				what := fmt.Sprintf("%s %s n=%d", c.name, dt, n)
				x := unaryInputs(c, dt, uint64(100*ci+n), n)
				want := make([]float64, n)
				for i, v := range x {
					want[i] = c.f(v, c.p0, c.p1)
				}
				src := Upload(t, b, dt, x)
				dst := fillGarbage(t, b, dt, n)
				b.Unary(c.op, dst, src, n, c.p0, c.p1)
				// minNormal: results in dt's subnormal range carry absolute rounding error.
				scale := minNormal(dt)
				if c.fwdCancel {
					scale = max(scale, maxAbs(want))
				}
				ExpectClose(t, what, Download(t, b, dst), want, Tol(dt), scale)
				// In place: dst and src the same storage.
				b.Unary(c.op, src, src, n, c.p0, c.p1)
				ExpectClose(t, what+" in place", Download(t, b, src), want, Tol(dt), scale)
				Free(b, src, dst)
			}
		}
	}
	testUnarySpecial(t, b)
}

// testUnarySpecial checks edge values: overflow to Inf, saturation, NaN propagation.
func testUnarySpecial(t *testing.T, b backend.Backend) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		op     backend.UnaryOp
		p0, p1 float64
		x      []float64
		want   func(dt backend.DType) []float64
	}{
		{op: backend.Exp, x: []float64{100, -200, 0},
			want: func(dt backend.DType) []float64 { return []float64{Round(dt, math.Exp(100)), 0, 1} }},
		{op: backend.Sigmoid, x: []float64{100, -100, 0},
			want: func(dt backend.DType) []float64 { return []float64{1, Round(dt, math.Exp(-100)), 0.5} }},
		{op: backend.Tanh, x: []float64{100, -100, 0},
			want: func(backend.DType) []float64 { return []float64{1, -1, 0} }},
		{op: backend.Relu, x: []float64{nan, 0, -inf, inf},
			want: func(backend.DType) []float64 { return []float64{nan, 0, 0, inf} }},
		{op: backend.Clamp, p0: -1, p1: 1, x: []float64{nan, -inf, inf, -1, 1},
			want: func(backend.DType) []float64 { return []float64{nan, -1, 1, -1, 1} }},
		{op: backend.Log, x: []float64{0, -1, inf},
			want: func(backend.DType) []float64 { return []float64{-inf, nan, inf} }},
		{op: backend.Recip, x: []float64{0, inf},
			want: func(backend.DType) []float64 { return []float64{inf, 0} }},
	}
	for _, c := range cases {
		for _, dt := range FloatDTypes {
			src := Upload(t, b, dt, c.x)
			dst := fillGarbage(t, b, dt, len(c.x))
			b.Unary(c.op, dst, src, len(c.x), c.p0, c.p1)
			ExpectClose(t, fmt.Sprintf("special op %d %s %v", c.op, dt, c.x), Download(t, b, dst), c.want(dt), Tol(dt), 0)
			Free(b, src, dst)
		}
	}
}

func testUnaryBackward(t *testing.T, b backend.Backend) {
	for ci, c := range unaryCases {
		for _, dt := range FloatDTypes {
			for _, n := range unarySizes(ci) {
				what := fmt.Sprintf("%s' %s n=%d", c.name, dt, n)
				x := unaryInputs(c, dt, uint64(100*ci+n+7), n)
				y := make([]float64, n)
				for i, v := range x {
					y[i] = Round(dt, c.f(v, c.p0, c.p1))
				}
				gy := Rounded(dt, RandVals(uint64(100*ci+n+8), n, -2, 2))
				want := make([]float64, n)
				for i := range want {
					v := x[i]
					if c.useY {
						v = y[i]
					}
					want[i] = gy[i] * c.df(v, c.p0, c.p1)
				}
				scale := minNormal(dt)
				if c.bwdCancel {
					scale = max(scale, maxAbs(want))
				}
				xs, ys, gys := Upload(t, b, dt, x), Upload(t, b, dt, y), Upload(t, b, dt, gy)
				gx := fillGarbage(t, b, dt, n)
				// Both saved tensors given.
				b.UnaryBackward(c.op, gx, gys, xs, ys, n, c.p0, c.p1)
				ExpectClose(t, what, Download(t, b, gx), want, Tol(dt), scale)
				// Only the one the derivative is written in; the other nil.
				gx2 := fillGarbage(t, b, dt, n)
				if c.useY {
					b.UnaryBackward(c.op, gx2, gys, nil, ys, n, c.p0, c.p1)
				} else {
					b.UnaryBackward(c.op, gx2, gys, xs, nil, n, c.p0, c.p1)
				}
				ExpectClose(t, what+" (one saved tensor)", Download(t, b, gx2), want, Tol(dt), scale)
				Free(b, xs, ys, gys, gx, gx2)
			}
		}
	}
	testUnaryBackwardSpecial(t, b)
}

// testUnaryBackwardSpecial checks the conventions at kinks: Relu'(0) = 0, Abs'(0) = 0,
// Clamp passes the gradient at both bounds, Sign' = 0.
func testUnaryBackwardSpecial(t *testing.T, b backend.Backend) {
	cases := []struct {
		op     backend.UnaryOp
		p0, p1 float64
		x      []float64
		want   []float64 // for gy = 3
	}{
		{op: backend.Relu, x: []float64{0, 1, -1}, want: []float64{0, 3, 0}},
		{op: backend.Abs, x: []float64{0, 1, -1}, want: []float64{0, 3, -3}},
		{op: backend.Clamp, p0: -1, p1: 0.5, x: []float64{-1, 0.5, -1.5, 0.75, 0}, want: []float64{3, 3, 0, 0, 3}},
		{op: backend.Sign, x: []float64{0, 2, -2}, want: []float64{0, 0, 0}},
	}
	for _, c := range cases {
		for _, dt := range FloatDTypes {
			n := len(c.x)
			gyv := make([]float64, n)
			for i := range gyv {
				gyv[i] = 3
			}
			y := make([]float64, n) // unused by these ops; given so no backend lacks it
			xs, ys, gys := Upload(t, b, dt, c.x), Upload(t, b, dt, y), Upload(t, b, dt, gyv)
			gx := fillGarbage(t, b, dt, n)
			b.UnaryBackward(c.op, gx, gys, xs, ys, n, c.p0, c.p1)
			ExpectClose(t, fmt.Sprintf("backward op %d %s at %v", c.op, dt, c.x), Download(t, b, gx), c.want, 0, 0)
			Free(b, xs, ys, gys, gx)
		}
	}
}

// maxFinite is the largest finite value of dt.
func maxFinite(dt backend.DType) float64 {
	switch dt {
	case backend.Float16:
		return 65504
	case backend.BFloat16:
		return 0x1.fep127
	case backend.Float32:
		return math.MaxFloat32
	}
	return math.MaxFloat64
}

// unscaleRef is g·inv as the contract computes it: float32 arithmetic for float32 and
// half data (then rounded to dt), float64 for Float64.
func unscaleRef(dt backend.DType, v float64, inv float32) float64 {
	if dt == backend.Float64 {
		return v * float64(inv)
	}
	return Round(dt, float64(float32(v)*inv))
}

func testUnscaleCheck(t *testing.T, b backend.Backend) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, dt := range FloatDTypes {
		for _, n := range []int{0, 1, 1025, 100000} {
			for _, inv := range []float32{1.0 / 1024, 0.3} {
				// plant: -1 none, else the position of an Inf or NaN.
				for _, plant := range []struct {
					name string
					at   int
					v    float64
				}{{"finite", -1, 0}, {"Inf", n / 2, -inf}, {"NaN", n - 1, nan}} {
					if plant.at < 0 && plant.name != "finite" || n == 0 && plant.at >= 0 {
						continue
					}
					what := fmt.Sprintf("UnscaleCheck %s n=%d inv=%g %s", dt, n, inv, plant.name)
					// Three values past n are NaN: they must be neither read nor written.
					x := Rounded(dt, RandVals(uint64(n)+7, n+3, -1000, 1000))
					x[n], x[n+1], x[n+2] = nan, nan, nan
					if plant.at >= 0 {
						x[plant.at] = plant.v
					}
					want := make([]float64, n+3)
					for i, v := range x {
						want[i] = v
						if i < n {
							want[i] = unscaleRef(dt, v, inv)
						}
					}
					g := Upload(t, b, dt, x)
					got := b.UnscaleCheck(g, n, inv)
					if got != (plant.at >= 0) {
						t.Fatalf("%s: reported nonFinite = %v", what, got)
					}
					ExpectClose(t, what, Download(t, b, g), want, 0, 0)
					Free(b, g)
				}
			}
		}
		// A finite value that overflows when scaled up is reported too.
		g := Upload(t, b, dt, []float64{1, maxFinite(dt), 2})
		if !b.UnscaleCheck(g, 3, 4) {
			t.Fatalf("UnscaleCheck %s: max finite ×4 overflows but was not reported", dt)
		}
		Free(b, g)
	}
}

func testCountNonFinite(t *testing.T, b backend.Backend) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, dt := range FloatDTypes {
		for _, n := range []int{0, 1, 7, 1025, 100000} {
			x := Rounded(dt, RandVals(uint64(n)+11, n+2, -100, 100))
			// Past n: ignored.
			x[n], x[n+1] = nan, maxFinite(dt)
			planted := map[int]float64{}
			if n >= 7 {
				planted = map[int]float64{0: inf, 3: nan, n / 2: -inf, n - 1: nan, n - 2: nan, 1: Round(dt, -5000)}
			}
			for i, v := range planted {
				x[i] = v
			}
			var wi, wn int
			var wm float64
			for _, v := range x[:n] {
				switch {
				case math.IsNaN(v):
					wn++
				case math.IsInf(v, 0):
					wi++
				default:
					wm = math.Max(wm, math.Abs(v))
				}
			}
			s := Upload(t, b, dt, x)
			gi, gn, gm := b.CountNonFinite(s, n)
			if gi != wi || gn != wn || gm != wm {
				t.Fatalf("CountNonFinite %s n=%d = (%d, %d, %v), want (%d, %d, %v)", dt, n, gi, gn, gm, wi, wn, wm)
			}
			Free(b, s)
		}
	}
}
