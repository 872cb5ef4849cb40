package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

func init() {
	register("Pool", testPool)
	register("PoolBackward", testPoolBackward)
}

// poolGeom builds PoolArgs with the floor (or, with ceil, PyTorch's ceil_mode) output
// size.
func poolGeom(kind backend.PoolKind, n, c, h, w, kh, kw, sh, sw, ph, pw int, ceil, includePad bool) backend.PoolArgs {
	out := func(in, k, s, p int) int {
		if !ceil {
			return (in+2*p-k)/s + 1
		}
		o := (in+2*p-k+s-1)/s + 1
		if (o-1)*s >= in+p {
			o--
		}
		return o
	}
	return backend.PoolArgs{
		Kind: kind, N: n, C: c, H: h, W: w, KH: kh, KW: kw,
		StrideH: sh, StrideW: sw, PadH: ph, PadW: pw,
		OH: out(h, kh, sh, ph), OW: out(w, kw, sw, pw), CountIncludePad: includePad,
	}
}

type poolCase struct {
	name string
	a    backend.PoolArgs
}

// poolCases returns the geometries pooling is checked on, for one kind.
func poolCases(kind backend.PoolKind, includePad bool) []poolCase {
	return []poolCase{
		{"2x2s2", poolGeom(kind, 2, 3, 6, 8, 2, 2, 2, 2, 0, 0, false, includePad)},
		{"3x3s1p1", poolGeom(kind, 2, 3, 5, 7, 3, 3, 1, 1, 1, 1, false, includePad)},
		{"3x3s2p1-ceil", poolGeom(kind, 1, 2, 6, 7, 3, 3, 2, 2, 1, 1, true, includePad)},
		{"3x3s2-ceil", poolGeom(kind, 1, 2, 6, 6, 3, 3, 2, 2, 0, 0, true, includePad)},
		{"3x2s2x1p1x0", poolGeom(kind, 2, 3, 7, 5, 3, 2, 2, 1, 1, 0, false, includePad)},
		{"large", poolGeom(kind, 4, 16, 32, 32, 3, 3, 2, 2, 1, 1, false, includePad)},
	}
}

// allPoolCases lists MaxPool, AvgPool and AvgPool with count_include_pad cases.
func allPoolCases() []poolCase {
	var out []poolCase
	for _, k := range []struct {
		name       string
		kind       backend.PoolKind
		includePad bool
	}{{"max", backend.MaxPool, false}, {"avg", backend.AvgPool, false}, {"avg-include-pad", backend.AvgPool, true}} {
		for _, c := range poolCases(k.kind, k.includePad) {
			out = append(out, poolCase{k.name + "/" + c.name, c.a})
		}
	}
	return out
}

// poolEach calls fn(o, pix, counted) for every window position of output o: pix is the
// flat input index (-1 in the padding) and counted tells whether the position lies
// inside the padded input (count_include_pad counts it).
func poolEach(a backend.PoolArgs, fn func(o, pix int, counted bool)) {
	o := 0
	for p := 0; p < a.N*a.C; p++ {
		for oh := 0; oh < a.OH; oh++ {
			for ow := 0; ow < a.OW; ow++ {
				for ki := 0; ki < a.KH; ki++ {
					for kj := 0; kj < a.KW; kj++ {
						ih, iw := oh*a.StrideH-a.PadH+ki, ow*a.StrideW-a.PadW+kj
						counted := ih < a.H+a.PadH && iw < a.W+a.PadW
						pix := -1
						if ih >= 0 && ih < a.H && iw >= 0 && iw < a.W {
							pix = (p*a.H+ih)*a.W + iw
						}
						fn(o, pix, counted)
					}
				}
				o++
			}
		}
	}
}

// poolRef pools x by definition. For MaxPool idx holds the in-plane index of the first
// strict maximum (a NaN always wins); for AvgPool div holds each output's divisor.
func poolRef(x []float64, a backend.PoolArgs) (y, idx, div []float64) {
	nOut := a.N * a.C * a.OH * a.OW
	y, idx, div = make([]float64, nOut), make([]float64, nOut), make([]float64, nOut)
	plane := a.H * a.W
	for i := range y {
		y[i], idx[i] = math.Inf(-1), -1
		if a.Kind == backend.AvgPool {
			y[i] = 0
		}
	}
	inside := make([]float64, nOut)
	poolEach(a, func(o, pix int, counted bool) {
		if a.Kind == backend.MaxPool {
			if pix >= 0 && (idx[o] < 0 || x[pix] > y[o] || math.IsNaN(x[pix])) {
				y[o], idx[o] = x[pix], float64(pix%plane)
			}
			return
		}
		if pix >= 0 {
			y[o] += x[pix]
			inside[o]++
		}
		if a.CountIncludePad && counted {
			div[o]++
		}
	})
	if a.Kind == backend.AvgPool {
		for o := range y {
			if !a.CountIncludePad {
				div[o] = inside[o]
			}
			y[o] /= div[o]
		}
	}
	return y, idx, div
}

// poolBackwardRef returns gx for gy, scattering to idx (MaxPool) or spreading gy/div
// over the window (AvgPool), and the largest number of outputs one input receives from.
func poolBackwardRef(gy, idx, div []float64, a backend.PoolArgs) []float64 {
	gx := make([]float64, a.N*a.C*a.H*a.W)
	ohw, plane := a.OH*a.OW, a.H*a.W
	if a.Kind == backend.MaxPool {
		for o, g := range gy {
			gx[o/ohw*plane+int(idx[o])] += g
		}
		return gx
	}
	poolEach(a, func(o, pix int, _ bool) {
		if pix >= 0 {
			gx[pix] += gy[o] / div[o]
		}
	})
	return gx
}

// poolInputs returns the input of a pooling check: negative for MaxPool (so a padding
// zero would win if it were considered), with NaNs where nan is set.
func poolInputs(dt backend.DType, seed uint64, a backend.PoolArgs, nan bool) []float64 {
	lo, hi := -1.0, 2.0
	if a.Kind == backend.MaxPool {
		lo, hi = -2, -0.25
	}
	x := RandVals(seed, a.N*a.C*a.H*a.W, lo, hi)
	if nan {
		x[a.W+2] = math.NaN()
		x[len(x)-1] = math.NaN()
	}
	return Rounded(dt, x)
}

// runPool runs Pool on x and returns the output and, for MaxPool, the index storage
// (which the caller frees).
func runPool(t *testing.T, b backend.Backend, dt backend.DType, x []float64, a backend.PoolArgs) ([]float64, backend.Storage) {
	t.Helper()
	nOut := a.N * a.C * a.OH * a.OW
	xs, ys := Upload(t, b, dt, x), uploadGarbage(t, b, dt, nOut)
	defer Free(b, xs, ys)
	var is backend.Storage
	if a.Kind == backend.MaxPool {
		is = uploadGarbage(t, b, backend.Int64, nOut)
	}
	b.Pool(ys, is, xs, a)
	return Download(t, b, ys), is
}

func testPool(t *testing.T, b backend.Backend) {
	cases := allPoolCases()
	cases = append(cases, poolCase{"max-nan/3x3s1p1", poolCases(backend.MaxPool, false)[1].a})
	for ci, tc := range cases {
		for _, dt := range FloatDTypes {
			t.Run(fmt.Sprintf("%s/%s", tc.name, dt), func(t *testing.T) {
				a := tc.a
				x := poolInputs(dt, uint64(500+ci), a, tc.name == "max-nan/3x3s1p1")
				got, is := runPool(t, b, dt, x, a)
				defer Free(b, is)
				y, idx, _ := poolRef(x, a)
				ExpectClose(t, "Pool", got, y, Tol(dt), absMaxOf(x))
				if is != nil {
					ExpectClose(t, "Pool index", Download(t, b, is), idx, 0, 0)
				}
			})
		}
	}
}

func testPoolBackward(t *testing.T, b backend.Backend) {
	for ci, tc := range allPoolCases() {
		for _, dt := range FloatDTypes {
			t.Run(fmt.Sprintf("%s/%s", tc.name, dt), func(t *testing.T) {
				a := tc.a
				nOut := a.N * a.C * a.OH * a.OW
				x := poolInputs(dt, uint64(600+ci), a, false)
				_, idx, div := poolRef(x, a)
				gy := Rounded(dt, RandVals(uint64(700+ci), nOut, -1, 1))
				gys, gxs := Upload(t, b, dt, gy), uploadGarbage(t, b, dt, len(x))
				var is backend.Storage
				if a.Kind == backend.MaxPool {
					// The reference index, so a Pool bug does not show up here.
					is = Upload(t, b, backend.Int64, idx)
				}
				defer Free(b, gys, gxs, is)
				b.PoolBackward(gxs, gys, is, a)
				// An input is in at most ⌈KH/StrideH⌉·⌈KW/StrideW⌉ windows.
				overlap := float64(((a.KH + a.StrideH - 1) / a.StrideH) * ((a.KW + a.StrideW - 1) / a.StrideW))
				ExpectClose(t, "PoolBackward", Download(t, b, gxs), poolBackwardRef(gy, idx, div, a), Tol(dt), overlap*absMaxOf(gy))
			})
		}
	}
}
