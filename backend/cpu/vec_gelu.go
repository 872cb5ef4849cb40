package cpu

import (
	"math"

	"github.com/gamp-ml/gamp/backend/cpu/internal/gelucoef"
)

// The exact (erf) GELU of the float32 kernels, forward and backward, in float32
// arithmetic: vector loops (vec_amd64.s, AVX-512 and AVX2, from internal/vecgen) and
// their pure-Go twin geluGo, equal bit for bit. Φ(x) = ½(1 + erf(x/√2)) comes from the
// pieces of FreeBSD's s_erf.c (those of Go's math.Erf), with the coefficients rounded to
// float32 and evaluated with float32 FMA Horner steps, rearranged so that nothing cancels:
//
//   - u = x/√2 is carried as uh + ul (uh rounded, ul its error, from FMAs), a = |uh|;
//   - a < 0.84375: Φ = ½ + ½uh + ½(uh·P/Q(uh²) + ul);
//   - a < 1.25: Φ = ½(1 ± erx) ± ½·P/Q(s), s = (a - 1) + |ul|-with-u's-sign, erx = erf(1)
//     to 24 bits, + for x > 0 and - for x < 0;
//   - a ≥ 1.25: erfc(|u|) = exp(-x²/2 - 0.5625 + R/S(1/a²))·(√2/|x|), one exp32 whose
//     argument is -s/2 + (R/S - 0.5625 - e/2), with x² split exactly into s + e by an FMA
//     so that the exponential sees x² to float32's precision twice over; Φ = ½erfc for
//     x < 0 and 1 - ½erfc for x > 0.
//
// Forward y = x·Φ; backward gx = gy·(Φ + x·φ), φ = exp(-x²/2)/√(2π), the sum one FMA.
// Against the float64 formulas (math.Erfc, math.Exp), over every float32 in [-10, 10]
// (TestGeluUlp): y is within geluFwdUlp ulp; gx within geluBwdUlp ulp of gy·(Φ + |x|φ),
// the size of the terms (the derivative crosses zero at x ≈ -0.75, where no bound relative
// to the result exists). Below x ≈ -13.1 (x² > 172) exp32 flushes to zero and y is -0
// where the exact |y| < 2^-125. NaN gives NaN; y(+Inf) = +Inf, and y(-Inf) and the
// backward at ±Inf are NaN, as the float64 formulas give.
//
// With AVX-512 and at least geluCompactMin elements, vecGelu runs geluCompactAVX512
// (gelu_f32_amd64.go, from internal/gelugen) by blocks of geluBlock elements instead of
// vecGeluAVX512. That loop computes in each 16-lane vector every piece some lane needs,
// and activations put lanes of several pieces in most vectors; the compacting loop
// first packs the block's lanes of the second and third pieces (a ≥ 0.84375) into a
// dense buffer per piece (VCOMPRESSPS, the lane masks kept), runs each of those pieces
// over its own packed lanes, then runs the first piece over every lane and expands the
// others' results over it in order (VEXPANDPS; then gy· for the backward). Every lane's
// arithmetic is the instructions vecGeluAVX512 gives a lane of its piece, so results
// are bit for bit the same (TestGeluCompact*); a block with a NaN in x is left to
// vecGeluAVX512. One core (BenchmarkGeluCompactPair): N(0, 1) activations 2.0× faster
// forward, 1.58× backward; N(0, 0.58²), about the transformer's, where 96% of lanes
// are in the first piece and vecGeluAVX512 already skips the others in most vectors,
// 1.29× and 1.15×.
//
// On BFloat16 and Float16 data (x, and y of the same dtype; x alone for the backward)
// the backend runs these loops once per process, not per element: gelu_table.go
// tabulates their forward, rounded to the dtype, and their factor Φ + x·φ for all
// 65,536 patterns of x, and Unary and UnaryBackward look the results up (AVX-512
// gathers), bit for bit what widening, these loops and rounding give (GeluTanh's
// float64 formulas too).

// The ulp bounds TestGeluUlp asserts over the float32s in [-10, 10]. Over all 2.2
// billion of them (go test -run TestGeluUlp -gelu.stride=1, AVX-512) the worst were
// 4.004 ulp forward (x = -4.9468966) and 3.469 backward (x = -8.375861).
const (
	geluFwdUlp = 4.5
	geluBwdUlp = 4.0
)

// The coefficients of the erf pieces, highest degree first (math/erf.go's pp, qq, pa, qa,
// ra, sa, rb, sb), rounded to float32; the denominators' constant term 1 is implied.
// erfDM is erf'(u) = (2/√π)·exp(-z), z = u², to degree 4 in z: enough for the correction
// ul·erf'(uh) of the first piece. expC are the Taylor coefficients 1/i!, i = 7 … 0, of
// exp32's polynomial. Package gelucoef holds them once for this file and the generators.
var (
	erfPP = f32s(gelucoef.Coef("pp")...)
	erfQQ = f32s(gelucoef.Coef("qq")...)
	erfPA = f32s(gelucoef.Coef("pa")...)
	erfQA = f32s(gelucoef.Coef("qa")...)
	erfRA = f32s(gelucoef.Coef("ra")...)
	erfSA = f32s(gelucoef.Coef("sa")...)
	erfRB = f32s(gelucoef.Coef("rb")...)
	erfSB = f32s(gelucoef.Coef("sb")...)
	erfDM = f32s(gelucoef.Coef("dm")...)
	expC  = f32s(gelucoef.Coef("ex")...)
)

// The float32 constants of the GELU loops; internal/vecgen holds the same values.
const (
	erfA       float32 = 0.84375 // the pieces' bounds on a = |x/√2|
	erfB       float32 = 1.25
	erfC       float32 = 1 / 0.35
	erfErx             = gelucoef.Erx     // erf(1) rounded to 24 bits
	geluChp    float32 = 0.5 + 0.5*erfErx // ½(1 ± erx); the minus one is exact
	geluChm    float32 = 0.5 - 0.5*erfErx
	invSqrt2   float32 = math.Sqrt2 / 2
	geluSqrt2  float32 = math.Sqrt2
	invSqrt2Pi float32 = 0.3989422804014327 // 1/√(2π)
	expLog2e32 float32 = math.Log2E
	expLn2Hi32 float32 = math.Ln2
	expCut32   float32 = -86 // exp32(hi, lo) is 0 below: keeps 2^k normal for lo > -1
)

var (
	invSqrt2Lo = float32(math.Sqrt2/2 - float64(invSqrt2)) // 1/√2 - invSqrt2
	expLn2Lo32 = float32(math.Ln2 - float64(expLn2Hi32))
)

// f32s rounds c to float32.
func f32s(c ...float64) []float32 {
	r := make([]float32, len(c))
	for i, v := range c {
		r[i] = float32(v)
	}
	return r
}

// fma32 returns a·b + c rounded once to float32, as VFMADD…PS computes it. The product of
// two float32s is exact in float64, so math.FMA rounds the exact sum once to float64; a
// second rounding to float32 then errs only when that float64 is exactly halfway between
// two float32s and the exact sum was not (double rounding), which fma32Slow settles.
func fma32(a, b, c float32) float32 {
	s := math.FMA(float64(a), float64(b), float64(c))
	bits := math.Float64bits(s)
	// Halfway between two normal float32s: the 29 bits below float32's last are 1000….
	if bits&(1<<29-1) != 1<<28 && (math.Abs(s) >= 0x1p-126 || s == 0) {
		return float32(s)
	}
	return fma32Slow(a, b, c)
}

// fma32Slow is fma32 for a float64 sum that may be a float32 halfway point (or in
// float32's subnormal range): the exact sum's error (TwoSum) breaks the tie.
func fma32Slow(a, b, c float32) float32 {
	p, cc := float64(a)*float64(b), float64(c)
	s := p + cc
	r := float32(s)
	if s != s || math.IsInf(s, 0) || float64(r) == s {
		return r
	}
	// The other float32 neighbour of s; s is a tie if it lies halfway.
	o := math.Nextafter32(r, float32(math.Copysign(math.Inf(1), s-float64(r))))
	if float64(r)+float64(o) != 2*s {
		return r
	}
	bb := s - p
	e := (p - (s - bb)) + (cc - bb)
	switch {
	case e > 0:
		s = math.Nextafter(s, math.Inf(1))
	case e < 0:
		s = math.Nextafter(s, math.Inf(-1))
	}
	return float32(s)
}

// horner32 returns c[0]·x^(len(c)-1) + … + c[len(c)-1], one fma32 per step.
func horner32(c []float32, x float32) float32 {
	p := c[0]
	for _, k := range c[1:] {
		p = fma32(p, x, k)
	}
	return p
}

// abs32 clears the sign bit.
func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// exp32 returns exp(hi + lo) for hi ≤ 0 and |lo| < 1: k = round((hi+lo)·log₂e), r =
// hi - k·ln2 (two FMAs with ln2 split in two) + lo, the degree-7 Taylor polynomial of
// exp(r) by Horner, times 2^k; 0 when hi < -86.
func exp32(hi, lo float32) float32 {
	k := float32(math.RoundToEven(float64((hi + lo) * expLog2e32)))
	r := fma32(-k, expLn2Hi32, hi)
	r = fma32(-k, expLn2Lo32, r)
	r += lo
	p := horner32(expC, r)
	if hi < expCut32 {
		return 0
	}
	return p * math.Float32frombits(uint32(int32(k)+127)<<23)
}

// geluParts returns Φ(x) as the loops compute it, and exp(-x²/2) when withE is set (the
// backward's φ needs it), else 0.
func geluParts(x float32, withE bool) (cdf, e float32) {
	uh := x * invSqrt2
	ul := fma32(x, invSqrt2, -uh)
	ul = fma32(x, invSqrt2Lo, ul)
	a := abs32(uh)
	s := x * x
	sl := fma32(x, x, -s)
	if withE {
		e = exp32(-0.5*s, -0.5*sl)
	}
	switch {
	case a < erfA:
		z := uh * uh
		q := horner32(erfPP, z) / horner32(erfQQ, z)
		// erf(uh + ul) ≈ uh + uh·q + ul·erf'(uh), erf' from its Taylor polynomial.
		t := fma32(uh, q, ul*horner32(erfDM, z))
		cdf = fma32(t, 0.5, fma32(uh, 0.5, 0.5))
	case a < erfB:
		if x < 0 {
			ul = -ul
		}
		sb := (a - 1) + ul
		q := horner32(erfPA, sb) / horner32(erfQA, sb)
		if x < 0 {
			cdf = fma32(q, -0.5, geluChm)
		} else {
			cdf = fma32(q, 0.5, geluChp)
		}
	case a >= erfB:
		ia := geluSqrt2 / abs32(x)
		qq := ia * ia
		var q float32
		if a < erfC {
			q = horner32(erfRA, qq) / horner32(erfSA, qq)
		} else {
			q = horner32(erfRB, qq) / horner32(erfSB, qq)
		}
		ec := exp32(-0.5*s, fma32(sl, -0.5, q-0.5625)) * ia
		if x < 0 {
			cdf = ec * 0.5
		} else {
			cdf = fma32(ec, -0.5, 1)
		}
	default:
		cdf = x // NaN
	}
	return cdf, e
}

// geluGo is the twin of the gelu loops. Forward (gy nil): dst[i] = x·Φ(x). Backward:
// dst[i] = gy[i]·fma(x, φ(x), Φ(x)), φ = exp(-x²/2)·(1/√(2π)); see above.
func geluGo(dst, x, gy []float32) {
	x = x[:len(dst)]
	if gy == nil {
		for i, v := range x {
			cdf, _ := geluParts(v, false)
			dst[i] = v * cdf
		}
		return
	}
	gy = gy[:len(dst)]
	for i, v := range x {
		cdf, e := geluParts(v, true)
		pdf := e * invSqrt2Pi
		dst[i] = gy[i] * fma32(v, pdf, cdf)
	}
}

// vecGelu computes the GELU forward (gy nil) or backward of geluGo over len(dst)
// elements; dst may be x or gy, or not overlap them.
func vecGelu(dst, x, gy []float32) {
	n := len(dst)
	x = x[:n]
	var gp *float32
	if gy != nil {
		gy = gy[:n]
	}
	m := 0
	if vec != nil {
		// AVX-512 and long enough: the lanes sorted by piece (gelu_f32_amd64.go).
		if m = n &^ 15; m > 0 && !vecGeluCompact(dst, x, gy, m) {
			if gy != nil {
				gp = &gy[0]
			}
			vecGeluRun(&dst[0], &x[0], gp, m)
		}
	}
	if gy != nil {
		gy = gy[m:]
	}
	geluGo(dst[m:], x[m:], gy)
}
