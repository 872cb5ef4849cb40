// Package gelucoef holds the numbers of the exact-erf GELU: the coefficients of the
// pieces of FreeBSD's s_erf.c (those of Go's math.Erf) and exp32's Taylor polynomial,
// in float64 as published, and the scalar constants around them. backend/cpu's Go twin
// (vec_gelu.go) and both assembly generators (internal/vecgen, internal/gelugen) round
// them to float32 from here, so the three can never disagree on a coefficient.
package gelucoef

import "math"

// Erx is erf(1) rounded to 24 bits (s_erf.c's erx).
const Erx = 8.45062911510467529297e-01

// Poly is one polynomial's coefficients, highest degree first; the name is the one
// the generated assembly gives its constants (name0, name1, …).
type Poly struct {
	Name string
	C    []float64
}

// Polys are the erf pieces' numerators and denominators (s_erf.c's pp, qq, pa, qa, ra,
// sa, rb, sb; the denominators' constant term 1 included), erf'(u) = (2/√π)·exp(-u²)
// to degree 4 in u² (dm), and the Taylor coefficients 1/i!, i = 7 … 0, of exp32 (ex).
var Polys = []Poly{
	{"pp", []float64{-2.37630166566501626084e-05, -5.77027029648944159157e-03, -2.84817495755985104766e-02, -3.25042107247001499370e-01, 1.28379167095512558561e-01}},
	{"qq", []float64{-3.96022827877536812320e-06, 1.32494738004321644526e-04, 5.08130628187576562776e-03, 6.50222499887672944485e-02, 3.97917223959155352819e-01, 1}},
	{"pa", []float64{-2.16637559486879084300e-03, 3.54783043256182359371e-02, -1.10894694282396677476e-01, 3.18346619901161753674e-01, -3.72207876035701323847e-01, 4.14856118683748331666e-01, -2.36211856075265944077e-03}},
	{"qa", []float64{1.19844998467991074170e-02, 1.36370839120290507362e-02, 1.26171219808761642112e-01, 7.18286544141962662868e-02, 5.40397917702171048937e-01, 1.06420880400844228286e-01, 1}},
	{"ra", []float64{-9.81432934416914548592e+00, -8.12874355063065934246e+01, -1.84605092906711035994e+02, -1.62396669462573470355e+02, -6.23753324503260060396e+01, -1.05586262253232909814e+01, -6.93858572707181764372e-01, -9.86494403484714822705e-03}},
	{"sa", []float64{-6.04244152148580987438e-02, 6.57024977031928170135e+00, 1.08635005541779435134e+02, 4.29008140027567833386e+02, 6.45387271733267880336e+02, 4.34565877475229228821e+02, 1.37657754143519042600e+02, 1.96512716674392571292e+01, 1}},
	{"rb", []float64{-4.83519191608651397019e+02, -1.02509513161107724954e+03, -6.37566443368389627722e+02, -1.60636384855821916062e+02, -1.77579549177547519889e+01, -7.99283237680523006574e-01, -9.86494292470009928597e-03}},
	{"sb", []float64{-2.24409524465858183362e+01, 4.74528541206955367215e+02, 2.55305040643316442583e+03, 3.19985821950859553908e+03, 1.53672958608443695994e+03, 3.25792512996573918826e+02, 3.03380607434824582924e+01, 1}},
	{"dm", []float64{2 / math.SqrtPi / 24, -2 / math.SqrtPi / 6, 2 / math.SqrtPi / 2, -2 / math.SqrtPi, 2 / math.SqrtPi}},
	{"ex", []float64{1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1}},
}

// Coef returns the coefficients of the named poly; it panics on an unknown name.
func Coef(name string) []float64 {
	for _, p := range Polys {
		if p.Name == name {
			return p.C
		}
	}
	panic("gelucoef: no poly " + name)
}

// Scalar is one float constant of the GELU loops, by the name the assembly uses.
type Scalar struct {
	Name string
	V    float64
}

// Scalars are the float constants of the GELU loops besides the polys: 1/√2 split into
// a float32 head and its error, √2, the pieces' bounds on |x/√2| (a, b, c), ½(1 ± erx),
// 1/√(2π), and exp32's log₂e, ln 2 split in two and its cut. Each rounds to float32.
func Scalars() []Scalar {
	inv := float32(math.Sqrt2 / 2)
	ln2 := float32(math.Ln2)
	return []Scalar{
		{"invsqrt2", float64(inv)}, {"invsqrt2lo", math.Sqrt2/2 - float64(inv)}, {"sqrt2", math.Sqrt2},
		{"one", 1}, {"half", 0.5}, {"neghalf", -0.5}, {"zero", 0}, {"m05625", -0.5625},
		{"chp", 0.5 + 0.5*Erx}, {"chm", 0.5 - 0.5*Erx},
		{"a", 0.84375}, {"b", 1.25}, {"c", 1 / 0.35}, {"invsqrt2pi", 0.3989422804014327},
		{"log2e", math.Log2E}, {"ln2hi", float64(ln2)}, {"ln2lo", math.Ln2 - float64(ln2)}, {"cut", -86},
	}
}
