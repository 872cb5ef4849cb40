package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

func init() {
	register("Im2Col", testIm2Col)
	register("Col2Im", testCol2Im)
}

// convGeom builds ConvArgs with the output size the geometry gives.
func convGeom(n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw int) backend.ConvArgs {
	return backend.ConvArgs{
		N: n, C: c, H: h, W: w, KH: kh, KW: kw,
		StrideH: sh, StrideW: sw, PadH: ph, PadW: pw, DilationH: dh, DilationW: dw,
		OH: (h+2*ph-dh*(kh-1)-1)/sh + 1,
		OW: (w+2*pw-dw*(kw-1)-1)/sw + 1,
	}
}

// convCases are the geometries Im2Col and Col2Im are checked on.
var convCases = []struct {
	name string
	a    backend.ConvArgs
}{
	{"k1", convGeom(2, 3, 4, 5, 1, 1, 1, 1, 0, 0, 1, 1)},
	{"k3p1", convGeom(2, 3, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1)},
	{"k3s2", convGeom(2, 3, 7, 6, 3, 3, 2, 2, 0, 0, 1, 1)},
	{"k5s2p2", convGeom(2, 3, 9, 6, 5, 5, 2, 2, 2, 2, 1, 1)},
	{"k3d2p2", convGeom(2, 3, 8, 11, 3, 3, 1, 1, 2, 2, 2, 2)},
	{"k3x1s2x1d1x2", convGeom(2, 3, 7, 9, 3, 1, 2, 1, 1, 0, 1, 2)},
	{"k2x3d2x1p1", convGeom(2, 3, 6, 5, 2, 3, 1, 2, 1, 1, 2, 1)},
	{"kernel-wider-than-input", convGeom(2, 3, 2, 3, 5, 5, 1, 1, 2, 2, 1, 1)},
	{"large", convGeom(2, 8, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1)},
}

// convPixel returns the flat input index that column entry (n, c, ki, kj, oh, ow) reads,
// or -1 when it lies in the padding.
func convPixel(a backend.ConvArgs, n, c, ki, kj, oh, ow int) int {
	ih := oh*a.StrideH - a.PadH + ki*a.DilationH
	iw := ow*a.StrideW - a.PadW + kj*a.DilationW
	if ih < 0 || ih >= a.H || iw < 0 || iw >= a.W {
		return -1
	}
	return ((n*a.C+c)*a.H+ih)*a.W + iw
}

// convEach calls fn(col, pix) for every column entry col of the unfolded [N, C·KH·KW,
// OH·OW] tensor with the input index pix it reads (-1 for padding).
func convEach(a backend.ConvArgs, fn func(col, pix int)) {
	col := 0
	for n := 0; n < a.N; n++ {
		for c := 0; c < a.C; c++ {
			for ki := 0; ki < a.KH; ki++ {
				for kj := 0; kj < a.KW; kj++ {
					for oh := 0; oh < a.OH; oh++ {
						for ow := 0; ow < a.OW; ow++ {
							fn(col, convPixel(a, n, c, ki, kj, oh, ow))
							col++
						}
					}
				}
			}
		}
	}
}

func convColLen(a backend.ConvArgs) int { return a.N * a.C * a.KH * a.KW * a.OH * a.OW }
func convImgLen(a backend.ConvArgs) int { return a.N * a.C * a.H * a.W }

// convIm2ColRef unfolds x by definition.
func convIm2ColRef(x []float64, a backend.ConvArgs) []float64 {
	out := make([]float64, convColLen(a))
	convEach(a, func(col, pix int) {
		if pix >= 0 {
			out[col] = x[pix]
		}
	})
	return out
}

// convCol2ImRef folds cols back by definition, and returns the largest Σ|terms| of any
// pixel (the scale of its rounding error).
func convCol2ImRef(cols []float64, a backend.ConvArgs) ([]float64, float64) {
	out := make([]float64, convImgLen(a))
	abs := make([]float64, len(out))
	convEach(a, func(col, pix int) {
		if pix >= 0 {
			out[pix] += cols[col]
			abs[pix] += math.Abs(cols[col])
		}
	})
	return out, absMaxOf(abs)
}

// absMaxOf returns the largest |v[i]|, ignoring NaNs (0 for an empty slice).
func absMaxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		if math.Abs(x) > m {
			m = math.Abs(x)
		}
	}
	return m
}

// uploadGarbage allocates n elements of dt filled with nonzero values, so a check sees
// whether a kernel overwrites its whole output.
func uploadGarbage(t testing.TB, b backend.Backend, dt backend.DType, n int) backend.Storage {
	t.Helper()
	v := make([]float64, n)
	for i := range v {
		v[i] = 7.25
	}
	return Upload(t, b, dt, v)
}

func testIm2Col(t *testing.T, b backend.Backend) {
	for ci, tc := range convCases {
		for _, dt := range FloatDTypes {
			t.Run(fmt.Sprintf("%s/%s", tc.name, dt), func(t *testing.T) {
				a := tc.a
				x := Rounded(dt, RandVals(uint64(100+ci), convImgLen(a), -2, 2))
				xs := Upload(t, b, dt, x)
				ds := uploadGarbage(t, b, dt, convColLen(a))
				defer Free(b, xs, ds)
				b.Im2Col(ds, xs, a)
				// A copy: exact in every dtype.
				ExpectClose(t, "Im2Col", Download(t, b, ds), convIm2ColRef(x, a), 0, 0)
			})
		}
	}
}

func testCol2Im(t *testing.T, b backend.Backend) {
	for ci, tc := range convCases {
		for _, dt := range FloatDTypes {
			t.Run(fmt.Sprintf("%s/%s", tc.name, dt), func(t *testing.T) {
				a := tc.a
				cols := Rounded(dt, RandVals(uint64(200+ci), convColLen(a), -2, 2))
				cs := Upload(t, b, dt, cols)
				ds := uploadGarbage(t, b, dt, convImgLen(a))
				defer Free(b, cs, ds)
				b.Col2Im(ds, cs, a)
				want, scale := convCol2ImRef(cols, a)
				ExpectClose(t, "Col2Im", Download(t, b, ds), want, Tol(dt), scale)
			})
		}
	}
	// ⟨im2col(x), y⟩ = ⟨x, col2im(y)⟩: the two kernels are adjoint.
	for ci, tc := range convCases {
		t.Run("adjoint/"+tc.name, func(t *testing.T) {
			a, dt := tc.a, backend.Float64
			x := RandVals(uint64(300+ci), convImgLen(a), -1, 1)
			y := RandVals(uint64(400+ci), convColLen(a), -1, 1)
			xs, ys := Upload(t, b, dt, x), Upload(t, b, dt, y)
			cs, is := uploadGarbage(t, b, dt, len(y)), uploadGarbage(t, b, dt, len(x))
			defer Free(b, xs, ys, cs, is)
			b.Im2Col(cs, xs, a)
			b.Col2Im(is, ys, a)
			lhs, lAbs := convDot(Download(t, b, cs), y)
			rhs, rAbs := convDot(x, Download(t, b, is))
			if !Close(lhs, rhs, Tol(dt), math.Max(lAbs, rAbs)) {
				t.Fatalf("⟨im2col(x), y⟩ = %v but ⟨x, col2im(y)⟩ = %v", lhs, rhs)
			}
		})
	}
}

// convDot returns Σ u·v and Σ |u·v|.
func convDot(u, v []float64) (dot, abs float64) {
	for i := range u {
		dot += u[i] * v[i]
		abs += math.Abs(u[i] * v[i])
	}
	return dot, abs
}
