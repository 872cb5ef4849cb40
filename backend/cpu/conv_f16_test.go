package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// convF16Geoms are convTestGeoms plus a geometry padded in height only (the
// forward widens its rows straight into the padded buffer) and a strided one the
// direct kernels decline.
func convF16Geoms() []backend.Conv2dArgs {
	gs := convTestGeoms()
	a := backend.Conv2dArgs{ConvArgs: backend.ConvArgs{N: 3, C: 5, H: 7, W: 9, KH: 3, KW: 2, PadH: 1,
		StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 2}, O: 7, Groups: 1}
	a.OH = convOut(a.H, a.KH, 1, a.PadH, a.DilationH)
	a.OW = convOut(a.W, a.KW, 1, a.PadW, a.DilationW)
	return append(gs, a)
}

// TestConvF16 runs the float16 convolutions through the Backend methods and checks
// each result (forward with and without bias, input gradient, weight gradient)
// two ways: bit for bit against the float32 kernels on the widened operands,
// rounded once to float16 (the design: float32 arithmetic, one rounding), and
// against the float64 definition within the float32 accumulation bound 2⁻²⁰·Σ|terms|
// plus the final rounding, 2⁻¹¹ relative and 2⁻²⁵ absolute (float16 subnormals).
func TestConvF16(t *testing.T) {
	b, _ := New(0)
	rng := rand.New(rand.NewPCG(31, 32))
	for _, a := range convF16Geoms() {
		t.Run(fmt.Sprintf("%+v", a), func(t *testing.T) {
			// Float16 operands; v becomes the exact values they hold.
			h := func(v []float64) ([]half.Float16, []float32) {
				out, f := make([]half.Float16, len(v)), make([]float32, len(v))
				for i, e := range v {
					out[i] = half.Float16FromFloat64(e)
					f[i] = out[i].Float32()
					v[i] = float64(f[i])
				}
				return out, f
			}
			nW := a.O * a.C / a.Groups * a.KH * a.KW
			xv, wv := convRandom(rng, a.N*a.C*a.H*a.W), convRandom(rng, nW)
			bv, gyv := convRandom(rng, a.O), convRandom(rng, a.N*a.O*a.OH*a.OW)
			x, x32 := h(xv)
			w, w32 := h(wv)
			bias, b32 := h(bv)
			gy, gy32 := h(gyv)
			up := func(v []half.Float16) backend.Storage {
				s, _ := b.Alloc(backend.Float16, len(v))
				b.Upload(s, 0, v)
				return s
			}
			down := func(s backend.Storage, n int) []half.Float16 {
				v := make([]half.Float16, n)
				b.Download(v, s, 0)
				return v
			}
			// same checks got against the float32 path's want, rounded.
			same := func(what string, got []half.Float16, want []float32) {
				t.Helper()
				for i, v := range want {
					if w := half.Float16FromFloat32(v); got[i] != w {
						t.Fatalf("%s[%d] = %v (%#04x), float32 path rounded %v (%#04x)", what, i, got[i], uint16(got[i]), w, uint16(w))
					}
				}
			}
			near := func(what string, got []half.Float16, want, mag []float64) {
				t.Helper()
				for i, e := range want {
					g := got[i].Float64()
					if d := math.Abs(g - e); !(d <= mag[i]/(1<<20)+math.Abs(e)/(1<<11)+1.0/(1<<25)) {
						t.Fatalf("%s[%d] = %v, want %v (error %.3g, terms' magnitude %.3g)", what, i, g, e, d, mag[i])
					}
				}
			}
			xs, ws, bs, gys := up(x), up(w), up(bias), up(gy)
			ys := up(make([]half.Float16, len(gy)))

			if a.StrideH != 1 {
				t.Fatal("unit strides expected")
			}
			for _, withBias := range []bool{false, true} {
				bb, bb32, bb64 := backend.Storage(nil), []float32(nil), []float64(nil)
				if withBias {
					bb, bb32, bb64 = bs, b32, bv
				}
				if !b.Conv2d(ys, xs, ws, bb, a) {
					t.Fatal("Conv2d declined a float16 unit-stride geometry")
				}
				got := down(ys, len(gy))
				want := make([]float32, len(gy))
				convForward(convF32For(a.O/a.Groups), want, x32, w32, bb32, a)
				same(fmt.Sprintf("y (bias %v)", withBias), got, want)
				ref, mag, _, _, _, _ := convRef(a, xv, wv, bb64, gyv)
				near(fmt.Sprintf("y (bias %v)", withBias), got, ref, mag)
			}
			_, _, gx, gxMag, gw, gwMag := convRef(a, xv, wv, nil, gyv)

			gxs := up(make([]half.Float16, len(x)))
			d, ok := inputGradArgs(a)
			if b.Conv2dInputGrad(gxs, gys, ws, a) != ok {
				t.Fatalf("Conv2dInputGrad took the geometry: %v, its input-gradient padding is valid: %v", !ok, ok)
			}
			if ok {
				got := down(gxs, len(x))
				want := make([]float32, len(x))
				convForward(convF32For(a.C/a.Groups), want, gy32, flipWeights(w32, a), nil, d)
				same("gx", got, want)
				near("gx", got, gx, gxMag)
			}

			gws := up(make([]half.Float16, nW))
			if !b.Conv2dWeightGrad(gws, xs, gys, a) {
				t.Fatal("Conv2dWeightGrad declined finite float16 data")
			}
			got := down(gws, nW)
			want := make([]float32, nW)
			if !convWeightGrad(convF32WGrad(a.O/a.Groups), want, x32, gy32, a) {
				t.Fatal("float32 weight gradient declined finite data")
			}
			same("gw", got, want)
			near("gw", got, gw, gwMag)

			// An Inf in the last image: the weight gradient declines, gw untouched.
			b.Upload(xs, len(x)-1, []half.Float16{half.Float16FromFloat32(float32(math.Inf(-1)))})
			if b.Conv2dWeightGrad(gws, xs, gys, a) {
				t.Fatal("weight gradient of an image with an Inf did not fall back")
			}
			if after := down(gws, nW); !slices.Equal(after, got) {
				t.Fatal("declined weight gradient wrote gw")
			}

			strided := a
			strided.StrideW, strided.OW = 2, convOut(a.W, a.KW, 2, a.PadW, a.DilationW)
			if b.Conv2d(ys, xs, ws, nil, strided) {
				t.Fatal("Conv2d took a strided float16 geometry")
			}
		})
	}
}

// TestAllFiniteF16 checks allFiniteF16 and allFiniteBF16 on every bit pattern, at
// each position of runs that end in each of the loop's parts (two words a step, one
// word, single elements) and of one that starts off an 8-byte boundary.
func TestAllFiniteF16(t *testing.T) {
	for _, r := range []struct{ n, off int }{{1, 0}, {4, 0}, {7, 0}, {9, 0}, {16, 0}, {21, 0}, {35, 0}, {35, 1}, {24, 3}} {
		n := r.n
		x := make([]half.Float16, r.off+n)[r.off:]
		y := make([]half.BFloat16, r.off+n)[r.off:]
		for p := range 1 << 16 {
			v, w := half.Float16(p), half.BFloat16(p)
			i := p % n
			x[i], y[i] = v, w
			if got, want := allFiniteF16(x), !v.IsNaN() && !v.IsInf(); got != want {
				t.Fatalf("n=%d: %#04x at %d: allFiniteF16 = %v, want %v", n, p, i, got, want)
			}
			if got, want := allFiniteBF16(y), w.IsFinite(); got != want {
				t.Fatalf("n=%d: %#04x at %d: allFiniteBF16 = %v, want %v", n, p, i, got, want)
			}
			x[i], y[i] = 0, 0
		}
	}
}
