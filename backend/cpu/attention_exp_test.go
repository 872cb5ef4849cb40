package cpu

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/half"
)

var attnExpStride = flag.Int("attnexp.stride", 101, "TestAttnExpUlp tries every attnexp.stride-th float32 in [-87, 1] (1: all of them)")

// TestAttnExpUlp measures attnExp32 against math.Exp over the float32s in [-87, 1] and
// asserts attnExpUlp; below the cut it must give an exact 0, and -Inf gives 0.
func TestAttnExpUlp(t *testing.T) {
	stride := uint32(*attnExpStride)
	if testing.Short() {
		stride = 1031
	}
	var worst float64
	var at float32
	check := func(x float32) {
		got := attnExp32(x)
		want := math.Exp(float64(x))
		if x < expCut32 {
			if got != 0 || math.Signbit(float64(got)) {
				t.Fatalf("attnExp32(%g) = %g, want +0 below the cut", x, got)
			}
			return
		}
		if e := math.Abs(float64(got)-want) / ulp32(want); !(e <= worst) {
			worst, at = e, x
		}
	}
	// Negative float32s from -0 down to -87 (bits ascend as values descend), then (0, 1].
	for b := uint32(0x80000000); b <= math.Float32bits(-87); b += stride {
		check(math.Float32frombits(b))
	}
	for b := uint32(0); b <= math.Float32bits(1); b += stride {
		check(math.Float32frombits(b))
	}
	for _, x := range []float32{0, -86, math.Nextafter32(-86, 0), math.Nextafter32(-86, -100), 1, -0.5 * math.Ln2, 0.5 * math.Ln2} {
		check(x)
	}
	t.Logf("worst %.3f ulp at x = %g (stride %d)", worst, at, stride)
	if worst > attnExpUlp {
		t.Fatalf("attnExp32 is %.3f ulp off at x = %g; the bound is %g", worst, at, attnExpUlp)
	}
	if attnExp32(float32(math.Inf(-1))) != 0 {
		t.Fatalf("attnExp32(-Inf) = %g, want 0", attnExp32(float32(math.Inf(-1))))
	}
	if v := attnExp32(float32(math.NaN())); v == v {
		t.Fatalf("attnExp32(NaN) = %g, want NaN", v)
	}
}

// attnExpInputs is a score row: normal values around shift/scale, with -Inf (masked),
// values at the cut, huge negatives and the odd NaN mixed in.
func attnExpInputs(rng *rand.Rand, n int, scale, shift float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		switch rng.IntN(10) {
		case 0:
			x[i] = float32(math.Inf(-1))
		case 1:
			// An argument next to the cut: x·scale - shift ≈ -86.
			x[i] = (shift - 86 + float32(rng.NormFloat64())*1e-3) / scale
		case 2:
			x[i] = -1e30
		default:
			x[i] = shift/scale - float32(math.Abs(rng.NormFloat64())*4)
		}
	}
	if n > 3 && rng.IntN(4) == 0 {
		x[rng.IntN(n)] = float32(math.NaN())
	}
	return x
}

// The AVX-512 row loops against attnExpRowGo, attnMaxGo and attnDSGo bit for bit
// (values, their bf16 roundings, sums and maxima), every length from 1 to 80 so that
// the masked tail takes every width.
func TestAttnExpRowTwin(t *testing.T) {
	if !attnAsm {
		t.Skip("no AVX-512 (or purego build): the Go loops are the only implementation")
	}
	same := func(a, b float32) bool { return sameBits(a, b) || a != a && b != b }
	sameLo := func(a, b []half.BFloat16) int {
		for i := range a {
			if a[i] != b[i] && !(a[i].IsNaN() && b[i].IsNaN()) {
				return i
			}
		}
		return -1
	}
	rng := rand.New(rand.NewPCG(5, 9))
	for n := 1; n <= 80; n++ {
		for range 20 {
			scale := float32(0.05 + rng.Float64())
			shift := float32(rng.NormFloat64() * 3)
			x := attnExpInputs(rng, n, scale, shift)
			if gm, wm := attnMax(x), attnMaxGo(x); !same(gm, wm) {
				t.Fatalf("n=%d: max asm %g, Go %g", n, gm, wm)
			}
			for _, withLo := range []bool{false, true} {
				a, g := append([]float32(nil), x...), append([]float32(nil), x...)
				var la, lg []half.BFloat16
				if withLo {
					// One element more than the row: the loop must not write past it.
					la, lg = make([]half.BFloat16, n+1), make([]half.BFloat16, n+1)
					la[n], lg[n] = 0x1234, 0x1234
				}
				sa := attnExpRow(a, la, scale, shift)
				sg := attnExpRowGo(g, lg, scale, shift)
				for i := range a {
					if !same(a[i], g[i]) {
						t.Fatalf("n=%d x[%d]=%g: asm %g, Go %g", n, i, x[i], a[i], g[i])
					}
				}
				if !same(sa, sg) {
					t.Fatalf("n=%d: sum asm %g, Go %g", n, sa, sg)
				}
				if i := sameLo(la, lg); i >= 0 {
					t.Fatalf("n=%d: bf16[%d] asm %#04x, Go %#04x", n, i, la[i], lg[i])
				}
			}
			// dS = p·(dp - δ) with tiny (subnormal), huge and NaN values mixed in.
			dp, p := make([]float32, n), make([]float32, n)
			for i := range dp {
				dp[i] = float32(rng.NormFloat64())
				p[i] = float32(rng.Float64())
				switch rng.IntN(8) {
				case 0:
					p[i] = 0x1p-140
				case 1:
					dp[i] = float32(math.NaN())
				case 2:
					p[i] = 0
				}
			}
			delta := float32(rng.NormFloat64())
			da, dg := append([]float32(nil), dp...), append([]float32(nil), dp...)
			la, lg := make([]half.BFloat16, n+1), make([]half.BFloat16, n+1)
			attnDS(da, p, delta, la)
			attnDSGo(dg, p, delta, lg)
			for i := range da {
				if !same(da[i], dg[i]) {
					t.Fatalf("n=%d dS[%d]: asm %g, Go %g", n, i, da[i], dg[i])
				}
			}
			if i := sameLo(la, lg); i >= 0 {
				t.Fatalf("n=%d: dS bf16[%d] asm %#04x, Go %#04x", n, i, la[i], lg[i])
			}
		}
	}
}

// Masked scores (-Inf) become exact +0, and the row sum is the lanes' tree.
func TestAttnExpRowMasked(t *testing.T) {
	row := []float32{0, float32(math.Inf(-1)), -1, float32(math.Inf(-1))}
	sum := attnExpRow(row, nil, 1, 0)
	if row[1] != 0 || row[3] != 0 || math.Signbit(float64(row[1])) {
		t.Fatalf("masked entries %g, %g: want +0", row[1], row[3])
	}
	if row[0] != 1 {
		t.Fatalf("exp(0) = %g", row[0])
	}
	if want := row[0] + row[2]; sum != want {
		t.Fatalf("sum %g, want %g", sum, want)
	}
}

// attnPackT's AVX-512 loop against attnPackTGo, every rows ≤ mr ≤ 16.
func TestAttnPackTTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 4))
	const ld, k = 37, 9
	src := make([]float32, k*ld)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	for mr := 1; mr <= 16; mr++ {
		for rows := 1; rows <= mr; rows++ {
			got, want := make([]float32, k*mr), make([]float32, k*mr)
			for i := range got {
				got[i], want[i] = -1, -1
			}
			attnPackT(got, src[3:], ld, k, rows, mr)
			attnPackTGo(want, src[3:], ld, k, rows, mr)
			for i := range got {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("mr=%d rows=%d: dst[%d] = %g, want %g", mr, rows, i, got[i], want[i])
				}
			}
		}
	}
}

// attnPackF32 (the kernels' packing loops for whole panels) against attnPackF32Go, word
// for word, with every float32 kernel, both orientations, and widths and depths around
// the panel sizes; dst starts as NaN so a word left unwritten would show.
func TestAttnPackF32Twin(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, kern := range gemmKernels32() {
		for _, trans := range []bool{false, true} {
			for _, k := range []int{1, 5, 16, 17, 64, 128} {
				for _, n := range []int{1, 7, 8, 31, 32, 33, 64, 100, 128} {
					name := fmt.Sprintf("%s/trans=%v/k=%d/n=%d", kern.name, trans, k, n)
					rows, width := k, n
					if trans {
						rows, width = n, k
					}
					ld := width + 3
					x := make([]float32, (rows-1)*ld+width)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					size := gemmCeilDiv(n, kern.nr) * k * kern.nr
					got, want := make([]float32, size), make([]float32, size)
					for i := range got {
						got[i] = float32(math.NaN())
					}
					attnPackF32(kern, got, x, ld, k, n, trans)
					attnPackF32Go(kern.nr, want, x, ld, k, n, trans)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s: word %d = %v, want %v", name, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// Arguments past the softmax's range (x above ln(MaxFloat32) ≈ 88.72, where 2^k
// leaves the float32 range): the row and tile loops equal the Go twin bit for bit,
// and both give +Inf where e^x overflows float32 and a finite rounding below it.
func TestAttnExpOverflow(t *testing.T) {
	var xs []float32
	for x := float32(86); x <= 90.5; x += 1.0 / 64 {
		xs = append(xs, x)
	}
	want := make([]float32, len(xs))
	for i, x := range xs {
		want[i] = attnExp32(x)
		e := math.Exp(float64(x))
		switch {
		case e > math.MaxFloat32 && !math.IsInf(float64(want[i]), 1):
			t.Fatalf("attnExp32(%g) = %g, want +Inf", x, want[i])
		case e <= math.MaxFloat32*(1-1e-6) && math.IsInf(float64(want[i]), 0):
			t.Fatalf("attnExp32(%g) = %g, want %g", x, want[i], e)
		}
	}
	row := append([]float32(nil), xs...)
	attnExpRow(row, nil, 1, 0)
	tile := append([]float32(nil), xs[:64]...)
	attnExpTile(tile, 64, 1, 64, 64, []float32{0}, 1, nil, nil)
	for i := range xs {
		if !sameBits(row[i], want[i]) {
			t.Fatalf("attnExpRow at x = %g: %g, Go twin %g", xs[i], row[i], want[i])
		}
		if i < 64 && !sameBits(tile[i], want[i]) {
			t.Fatalf("attnExpTile at x = %g: %g, Go twin %g", xs[i], tile[i], want[i])
		}
	}
}

// attnLSERows against attnLSEGo (math.Log per row), bit for bit: sums over the range a
// softmax row gives (1 up to the key count) and far beyond, subnormal, tiny and huge
// sums, block lengths around the eight lanes, and blocks holding a 0, +Inf or NaN sum
// (which take the Go loop).
func TestAttnLSERowsTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	same := func(a, b float32) bool { return sameBits(a, b) || a != a && b != b }
	for _, n := range []int{1, 7, 8, 9, 16, 63, 64, 200} {
		for trial := range 40 {
			l, m := make([]float32, n), make([]float32, n)
			for i := range l {
				switch rng.IntN(6) {
				case 0:
					l[i] = math.Float32frombits(rng.Uint32() & 0x7f7fffff) // any positive finite
				case 1:
					l[i] = 1 + rng.Float32()*float32(rng.IntN(4096))
				default:
					l[i] = 1 + rng.Float32()*127
				}
				if l[i] == 0 {
					l[i] = 1
				}
				m[i] = float32(rng.NormFloat64() * 5)
			}
			if trial%5 == 4 {
				l[rng.IntN(n)] = []float32{0, float32(math.Inf(1)), float32(math.NaN())}[rng.IntN(3)]
			}
			got, want := make([]float32, n+1), make([]float32, n+1)
			got[n], want[n] = 7.25, 7.25
			attnLSERows(got[:n], m, l)
			attnLSEGo(want[:n], m, l)
			for i := range got {
				if !same(got[i], want[i]) {
					t.Fatalf("n %d: row %d (l = %g, m = %g): %g, math.Log gives %g", n, i, l[i], m[i], got[i], want[i])
				}
			}
		}
	}
}
