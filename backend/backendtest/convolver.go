package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

func init() {
	register("Convolver", testConvolver)
}

// convolverCases are the geometries a backend.Convolver is checked on: the Fashion
// CNN's convolutions (smaller batch), groups, dilation, asymmetric padding, strides
// (which a backend may decline) and output channels that fill no register tile.
var convolverCases = []struct {
	name string
	a    backend.Conv2dArgs
}{
	{"cnn1", backend.Conv2dArgs{ConvArgs: convGeom(3, 1, 28, 28, 5, 5, 1, 1, 2, 2, 1, 1), O: 16, Groups: 1}},
	{"cnn2", backend.Conv2dArgs{ConvArgs: convGeom(2, 16, 14, 14, 5, 5, 1, 1, 2, 2, 1, 1), O: 32, Groups: 1}},
	{"k3p1o5", backend.Conv2dArgs{ConvArgs: convGeom(2, 3, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1), O: 5, Groups: 1}},
	{"groups2d2", backend.Conv2dArgs{ConvArgs: convGeom(2, 4, 8, 11, 3, 3, 1, 1, 2, 1, 2, 1), O: 6, Groups: 2}},
	{"k1g3", backend.Conv2dArgs{ConvArgs: convGeom(2, 6, 4, 5, 1, 1, 1, 1, 0, 0, 1, 1), O: 9, Groups: 3}},
	{"k3s2", backend.Conv2dArgs{ConvArgs: convGeom(2, 3, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1), O: 4, Groups: 1}},
	{"nopad", backend.Conv2dArgs{ConvArgs: convGeom(1, 2, 6, 5, 2, 3, 1, 1, 0, 0, 1, 1), O: 13, Groups: 1}},
}

// convolverRef returns y = x ⋆ w + bias, gx and gw (from gy) by definition, each with
// the largest sum of its terms' magnitudes (the scale of float32 accumulation error).
func convolverRef(a backend.Conv2dArgs, x, w, bias, gy []float64) (y, gx, gw []float64, sy, sx, sw float64) {
	cg, og := a.C/a.Groups, a.O/a.Groups
	y = make([]float64, a.N*a.O*a.OH*a.OW)
	gx, gw = make([]float64, len(x)), make([]float64, len(w))
	my, mx, mw := make([]float64, len(y)), make([]float64, len(x)), make([]float64, len(w))
	for n := range a.N {
		for o := range a.O {
			g := o / og
			for oh := range a.OH {
				for ow := range a.OW {
					yi := ((n*a.O+o)*a.OH+oh)*a.OW + ow
					y[yi], my[yi] = bias[o], math.Abs(bias[o])
					for c := range cg {
						for ki := range a.KH {
							for kj := range a.KW {
								xi := convPixel(a.ConvArgs, n, g*cg+c, ki, kj, oh, ow)
								if xi < 0 {
									continue
								}
								wi := ((o*cg+c)*a.KH+ki)*a.KW + kj
								y[yi] += x[xi] * w[wi]
								my[yi] += math.Abs(x[xi] * w[wi])
								gx[xi] += gy[yi] * w[wi]
								mx[xi] += math.Abs(gy[yi] * w[wi])
								gw[wi] += gy[yi] * x[xi]
								mw[wi] += math.Abs(gy[yi] * x[xi])
							}
						}
					}
				}
			}
		}
	}
	return y, gx, gw, absMaxOf(my), absMaxOf(mx), absMaxOf(mw)
}

// testConvolver checks the three Convolver methods against the definition where the
// backend takes the geometry, and that a method that declines writes nothing.
func testConvolver(t *testing.T, b backend.Backend) {
	cv, ok := b.(backend.Convolver)
	if !ok {
		t.Skip("the backend has no backend.Convolver")
	}
	for ci, tc := range convolverCases {
		for _, dt := range FloatDTypes {
			t.Run(fmt.Sprintf("%s/%s", tc.name, dt), func(t *testing.T) {
				a := tc.a
				nw := a.O * a.C / a.Groups * a.KH * a.KW
				ny := a.N * a.O * a.OH * a.OW
				x := Rounded(dt, RandVals(uint64(200+ci), convImgLen(a.ConvArgs), -2, 2))
				w := Rounded(dt, RandVals(uint64(300+ci), nw, -1, 1))
				bias := Rounded(dt, RandVals(uint64(400+ci), a.O, -1, 1))
				gy := Rounded(dt, RandVals(uint64(500+ci), ny, -1, 1))
				y, gx, gw, sy, sx, sw := convolverRef(a, x, w, bias, gy)
				xs, ws, bs, gys := Upload(t, b, dt, x), Upload(t, b, dt, w), Upload(t, b, dt, bias), Upload(t, b, dt, gy)
				ys, gxs, gws := uploadGarbage(t, b, dt, ny), uploadGarbage(t, b, dt, len(x)), uploadGarbage(t, b, dt, nw)
				defer Free(b, xs, ws, bs, gys, ys, gxs, gws)
				// Float32 accumulation: a few ulps of the terms' magnitude, then one
				// rounding to dt.
				rel := max(Tol(dt), 4*Tol(backend.Float32))
				check := func(what string, ran bool, s backend.Storage, want []float64, scale float64, n int) {
					t.Helper()
					got := Download(t, b, s)
					if !ran {
						garbage := make([]float64, n)
						for i := range garbage {
							garbage[i] = 7.25
						}
						ExpectClose(t, what+" (declined)", got, garbage, 0, 0)
						return
					}
					ExpectClose(t, what, got, want, rel, scale)
				}
				check("Conv2d", cv.Conv2d(ys, xs, ws, bs, a), ys, y, sy, ny)
				check("Conv2dInputGrad", cv.Conv2dInputGrad(gxs, gys, ws, a), gxs, gx, sx, len(x))
				check("Conv2dWeightGrad", cv.Conv2dWeightGrad(gws, xs, gys, a), gws, gw, sw, nw)
			})
		}
	}
}
