package cpu

import "math"

// The exact (erf) GELU of the float32 kernels, forward and backward, as a vector loop
// (vec_amd64.s, AVX-512) with the pure-Go twin geluGo. Its erf, erfF64, is the
// piecewise rational approximation of FreeBSD's s_erf.c that Go's math.Erf also uses,
// evaluated with FMA Horner steps and expF64, so that every lane can compute every
// piece and keep its own: within a few float64 ulp of math.Erf (TestErfF64), and after
// rounding to float32 the same as the math.Erf formula but for rare ties
// (TestVecGeluMatchesMath counts them).

// The coefficients of erfF64's pieces, highest degree first (math/erf.go's pp, qq, pa,
// qa, ra, sa, rb, sb). The denominators' constant term 1 is implied.
var (
	erfPP = [...]float64{-2.37630166566501626084e-05, -5.77027029648944159157e-03, -2.84817495755985104766e-02, -3.25042107247001499370e-01, 1.28379167095512558561e-01}
	erfQQ = [...]float64{-3.96022827877536812320e-06, 1.32494738004321644526e-04, 5.08130628187576562776e-03, 6.50222499887672944485e-02, 3.97917223959155352819e-01, 1}
	erfPA = [...]float64{-2.16637559486879084300e-03, 3.54783043256182359371e-02, -1.10894694282396677476e-01, 3.18346619901161753674e-01, -3.72207876035701323847e-01, 4.14856118683748331666e-01, -2.36211856075265944077e-03}
	erfQA = [...]float64{1.19844998467991074170e-02, 1.36370839120290507362e-02, 1.26171219808761642112e-01, 7.18286544141962662868e-02, 5.40397917702171048937e-01, 1.06420880400844228286e-01, 1}
	erfRA = [...]float64{-9.81432934416914548592e+00, -8.12874355063065934246e+01, -1.84605092906711035994e+02, -1.62396669462573470355e+02, -6.23753324503260060396e+01, -1.05586262253232909814e+01, -6.93858572707181764372e-01, -9.86494403484714822705e-03}
	erfSA = [...]float64{-6.04244152148580987438e-02, 6.57024977031928170135e+00, 1.08635005541779435134e+02, 4.29008140027567833386e+02, 6.45387271733267880336e+02, 4.34565877475229228821e+02, 1.37657754143519042600e+02, 1.96512716674392571292e+01, 1}
	erfRB = [...]float64{-4.83519191608651397019e+02, -1.02509513161107724954e+03, -6.37566443368389627722e+02, -1.60636384855821916062e+02, -1.77579549177547519889e+01, -7.99283237680523006574e-01, -9.86494292470009928597e-03}
	erfSB = [...]float64{-2.24409524465858183362e+01, 4.74528541206955367215e+02, 2.55305040643316442583e+03, 3.19985821950859553908e+03, 1.53672958608443695994e+03, 3.25792512996573918826e+02, 3.03380607434824582924e+01, 1}
)

const (
	erfErx     = 8.45062911510467529297e-01 // erf(1) rounded to 24 bits
	erfA       = 0.84375                    // the pieces' bounds on |x|
	erfB       = 1.25
	erfC       = 1 / 0.35
	erfD       = 6
	invSqrt2Pi = 0.3989422804014327 // 1/√(2π)
)

// horner returns c[0]·x^(len(c)-1) + … + c[len(c)-1], one FMA per step.
func horner(c []float64, x float64) float64 {
	p := c[0]
	for _, k := range c[1:] {
		p = math.FMA(p, x, k)
	}
	return p
}

// erfF64 returns erf(x). Its pieces on |x| are those of math.Erf: [0, 0.84375) x +
// x·P(x²)/Q(x²); [0.84375, 1.25) erx + P(s)/Q(s) with s = |x|-1; [1.25, 6) 1 - erfc
// with erfc = exp(-z²-0.5625)·exp((z-|x|)(z+|x|) + R(s)/S(s))·(1/|x|), s = (1/|x|)², z
// = |x| with its low 32 bits cleared, R and S from ra, sa below 1/0.35 and from rb, sb
// above; 1 from 6 on. NaN gives NaN. (The reciprocal stands in for two of math.Erf's
// divisions, and the vector loop divides once for the three pieces' quotients.)
func erfF64(x float64) float64 {
	a := math.Abs(x)
	var e float64
	switch {
	case a < erfA:
		z := x * x
		return math.FMA(x, horner(erfPP[:], z)/horner(erfQQ[:], z), x)
	case a < erfB:
		s := a - 1
		e = erfErx + horner(erfPA[:], s)/horner(erfQA[:], s)
	case a < erfD:
		ia := 1 / a
		s := ia * ia
		var r, q float64
		if a < erfC {
			r, q = horner(erfRA[:], s), horner(erfSA[:], s)
		} else {
			r, q = horner(erfRB[:], s), horner(erfSB[:], s)
		}
		z := math.Float64frombits(math.Float64bits(a) & 0xffffffff00000000)
		erfc := expF64(math.FMA(-z, z, -0.5625)) * expF64(math.FMA(z-a, z+a, r/q)) * ia
		e = 1 - erfc
	case a >= erfD:
		e = 1
	default:
		return x // NaN
	}
	return math.Copysign(e, x)
}

// geluGo is the twin of the gelu loops. Forward (gy nil): dst[i] =
// float32(0.5·x·(1 + erf(x/√2))). Backward: dst[i] = float32(g·(Φ + x·φ)), with
// Φ = 0.5·(1 + erf(x/√2)), φ = exp(-0.5·x·x)/√(2π) and the last step an FMA.
func geluGo(dst, x, gy []float32) {
	x = x[:len(dst)]
	if gy == nil {
		for i, v := range x {
			f := float64(v)
			dst[i] = float32(0.5 * f * (1 + erfF64(f/math.Sqrt2)))
		}
		return
	}
	gy = gy[:len(dst)]
	for i, v := range x {
		f := float64(v)
		cdf := 0.5 * (1 + erfF64(f/math.Sqrt2))
		pdf := invSqrt2Pi * expF64(-0.5*f*f)
		dst[i] = float32(float64(gy[i]) * math.FMA(f, pdf, cdf))
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
	if vecAVX512OK() {
		if m = n &^ 15; m > 0 {
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
