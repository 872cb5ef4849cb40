package cpu

import (
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// Float16 convolutions run the float32 direct kernels (convF32For, convF32WGrad)
// on operands widened as they are read: each image, and each group of gy for the
// weight gradient, is widened in one vector conversion into a per-task buffer
// (convScratch.tmp, one image) and copied from there into the zero-padded buffer the
// kernels read anyway; the weights and bias are widened once per call. The float32
// sums are rounded to float16 once, on store (round to nearest even). Products of
// float16 values are exact in float32, so every result is the float32 path's on the
// widened operands, rounded once, bit for bit (TestConvF16MatchesF32): the numerics
// of the Im2Col path, which widens the column matrix to the float32 GEMM, up to the
// order of the float32 additions — without its column matrix or any float32 copy of
// a whole tensor.

// convWidenImage widens image x (C planes of H×W) into xp, whose padding and tail
// are zero: straight into xp where the rows have no padding (each plane is then
// contiguous there), else through tmp and padImage's row copies (a conversion per
// short row would run mostly in the converter's scalar tail).
func convWidenImage(s *convShape, xp []float32, tmp *[]float32, x []half.Float16) {
	plane := s.H * s.W
	x = x[:s.C*plane]
	if s.PadW == 0 {
		for c := range s.C {
			half.Float16ToFloat32(xp[(c*s.hp+s.PadH)*s.wp:][:plane], x[c*plane:][:plane])
		}
		return
	}
	*tmp = grow(*tmp, len(x))
	half.Float16ToFloat32(*tmp, x)
	padImage(s, xp, *tmp)
}

// widenF16 returns x widened to float32 (nil for nil).
func widenF16(x []half.Float16) []float32 {
	if x == nil {
		return nil
	}
	out := make([]float32, len(x))
	half.Float16ToFloat32(out, x)
	return out
}

// convForwardF16 computes y = x ⋆ w + bias for float16 x and y with the weights
// and bias already widened (bias may be nil): convForward's float32 kernels, each
// output plane rounded once to float16.
func convForwardF16(y, x []half.Float16, w32, b32 []float32, a backend.Conv2dArgs) {
	load := func(s *convShape, sc *convScratch[float32, float32], n int) {
		convWidenImage(s, sc.xp, &sc.tmp, x[n*s.C*s.H*s.W:])
	}
	store := func(s *convShape, n, oc int, cr []float32) {
		convRows(cr, s.OW, cr, s.wp, s.OW, s.OH)
		half.Float32ToFloat16(y[(n*s.O+oc)*s.OH*s.OW:][:s.OH*s.OW], cr[:s.OH*s.OW])
	}
	convForwardFn(convF32For(a.O/a.Groups), w32, b32, a, load, store, nil)
}

// convWeightGradF16 is convWeightGrad for float16 operands on the float32 kernels:
// it reports false, leaving gw untouched, when an image holds Inf or NaN.
func convWeightGradF16(gw, x, gy []half.Float16, a backend.Conv2dArgs) bool {
	o := convF32WGrad(a.O / a.Groups)
	io := convWGradIO[float32, float32]{
		image: func(s *convShape, sc *convScratch[float32, float32], n int) bool {
			img := x[n*s.C*s.H*s.W:][:s.C*s.H*s.W]
			if !allFiniteF16(img) {
				return false
			}
			convWidenImage(s, sc.xp, &sc.tmp, img)
			return true
		},
		gy: func(s *convShape, sc *convScratch[float32, float32], ldq, n, g int) {
			ohw := s.OH * s.OW
			sc.tmp = grow(sc.tmp, s.og*ohw)
			half.Float16ToFloat32(sc.tmp, gy[(n*s.O+g*s.og)*ohw:][:s.og*ohw])
			for oc := range s.og {
				convRows(sc.gy[oc*ldq:], s.wp, sc.tmp[oc*ohw:], s.OW, s.OW, s.OH)
			}
		},
		store: func(r int, row []float32) { half.Float32ToFloat16(gw[r*len(row):][:len(row)], row) },
	}
	return convWeightGradFn(o, io, a)
}

// allFiniteF16 reports whether no element of x is Inf or NaN.
func allFiniteF16(x []half.Float16) bool { return half.AllFiniteF16(x) }
