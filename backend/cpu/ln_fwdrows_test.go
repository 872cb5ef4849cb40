package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// lnFwdRowsData fills rows·n values for trial: normal rows with a growing offset,
// then rows holding NaN, ±Inf, -0, huge (near float32's maximum) and tiny (subnormal)
// values, and constant rows.
func lnFwdRowsData(rng *rand.Rand, rows, n, trial int) []float32 {
	x := make([]float32, rows*n)
	for i := range x {
		x[i] = float32(rng.NormFloat64()*float64(1+trial) + float64(trial*trial*100))
	}
	for r := range rows {
		row := x[r*n : (r+1)*n]
		switch (r + trial) % 9 {
		case 1:
			row[rng.IntN(n)] = float32(math.NaN())
		case 2:
			row[rng.IntN(n)] = float32(math.Inf(1))
		case 3:
			row[rng.IntN(n)] = float32(math.Inf(-1))
			row[rng.IntN(n)] = float32(math.Inf(1))
		case 4:
			for i := range row {
				row[i] = float32(math.Copysign(0, -1))
			}
		case 5:
			for i := range row {
				row[i] = float32(rng.NormFloat64() * 1e38)
			}
		case 6:
			for i := range row {
				row[i] = float32(rng.NormFloat64() * 1e-42)
			}
		case 7:
			for i := range row {
				row[i] = 3.25
			}
		}
	}
	return x
}

// lnFwdRowsAffine returns a weight around 1 and a bias around 0 of width n.
func lnFwdRowsAffine(rng *rand.Rand, n int) (w, b []float32) {
	w, b = make([]float32, n), make([]float32, n)
	for i := range w {
		w[i], b[i] = float32(1+rng.NormFloat64()*0.5), float32(rng.NormFloat64()*0.5)
	}
	return w, b
}

// TestLnFwdRows checks lnFwdRows (the AVX-512 routine where it runs) against its
// pure-Go twin lnFwdRowsGo bit for bit: outputs, means and inverse deviations, in place
// and not, on widths that are multiples of 16 and row counts from 1 up, with NaN, ±Inf,
// -0, huge and subnormal rows; and that it declines the widths it cannot take.
func TestLnFwdRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	same := func(a, b float32) bool {
		return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
	}
	for _, n := range []int{16, 32, 48, 128, 144, 512, 1040} {
		for _, rows := range []int{1, 2, 3, 9, 64} {
			for trial := range 4 {
				x := lnFwdRowsData(rng, rows, n, trial)
				w, b := lnFwdRowsAffine(rng, n)
				w[0] = float32(math.Copysign(0, -1))
				eps := []float64{1e-5, 0, 1e-12, 1e-3}[trial]
				wy, wm, wi := make([]float32, rows*n), make([]float32, rows), make([]float32, rows)
				lnFwdRowsGo(wy, x, w, b, wm, wi, eps, n)
				for _, inPlace := range []bool{false, true} {
					what := fmt.Sprintf("n=%d rows=%d trial %d in place %v", n, rows, trial, inPlace)
					xs := append([]float32(nil), x...)
					y := make([]float32, rows*n)
					if inPlace {
						y = xs
					}
					ms, is := make([]float32, rows), make([]float32, rows)
					if !lnFwdRows(y, xs, w, b, ms, is, eps, n) {
						if vecAVX512OK() {
							t.Fatalf("%s: lnFwdRows declined", what)
						}
						continue
					}
					for r := range rows {
						if !same(ms[r], wm[r]) || !same(is[r], wi[r]) {
							t.Fatalf("%s: row %d stats %v, %v, want %v, %v", what, r, ms[r], is[r], wm[r], wi[r])
						}
					}
					for i := range y {
						if !same(y[i], wy[i]) {
							t.Fatalf("%s: y[%d] = %v, want %v", what, i, y[i], wy[i])
						}
					}
				}
			}
		}
	}
	for _, n := range []int{0, 1, 15, 17, 100} {
		x := make([]float32, 2*max(n, 1))
		if lnFwdRows(x, x, x, x, make([]float32, 2), make([]float32, 2), 1e-5, n) {
			t.Fatalf("n=%d: lnFwdRows ran", n)
		}
	}
}

// TestLnFwdRowsTwin checks lnFwdRowsGo, the twin, against the row path it stands for
// (rowStats and vecLnFwd, the way layerNormRow took them before lnFwdRows) bit for bit.
func TestLnFwdRowsTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(83, 84))
	for _, n := range []int{16, 48, 512} {
		rows := 19
		x := lnFwdRowsData(rng, rows, n, 2)
		w, b := make([]float32, n), make([]float32, n)
		for i := range w {
			w[i], b[i] = float32(1+rng.NormFloat64()), float32(rng.NormFloat64())
		}
		y, ms, is := make([]float32, rows*n), make([]float32, rows), make([]float32, rows)
		lnFwdRowsGo(y, x, w, b, ms, is, 1e-5, n)
		for r := range rows {
			mean, invstd := rowStatsRef(x[r*n:(r+1)*n], 1e-5)
			want := make([]float32, n)
			vecLnFwd(want, x[r*n:(r+1)*n], w, b, float32(mean), float32(invstd))
			if math.Float32bits(ms[r]) != math.Float32bits(float32(mean)) && !math.IsNaN(mean) ||
				math.Float32bits(is[r]) != math.Float32bits(float32(invstd)) && !math.IsNaN(invstd) {
				t.Fatalf("n=%d row %d: stats %v, %v, want %v, %v", n, r, ms[r], is[r], mean, invstd)
			}
			for i, v := range want {
				if g := y[r*n+i]; math.Float32bits(g) != math.Float32bits(v) && !(g != g && v != v) {
					t.Fatalf("n=%d row %d: y[%d] = %v, want %v", n, r, i, g, v)
				}
			}
		}
	}
}

// TestLayerNormNoStats runs the float32 LayerNorm without SaveMean and SaveInvStd
// (lnFwdInPlace's stack statistics) against the reference, bit for bit, on row counts
// that cross lnFwdRowsMax and the parallel chunks.
func TestLayerNormNoStats(t *testing.T) {
	b, _ := New(0)
	rng := rand.New(rand.NewPCG(85, 86))
	for _, gm := range [][2]int{{131, 512}, {200, 160}, {5, 16}} {
		n, c := gm[0], gm[1]
		xv := lnFwdRowsData(rng, n, c, 1)
		wv, bv := make([]float32, c), make([]float32, c)
		for i := range wv {
			wv[i], bv[i] = float32(1+rng.NormFloat64()), float32(rng.NormFloat64())
		}
		run := func(ref bool) []float32 {
			mk := func(v []float32) *storage {
				s, err := b.Alloc(backend.Float32, len(v))
				if err != nil {
					t.Fatal(err)
				}
				st(s).storeF32(0, v)
				return st(s)
			}
			x, y := mk(xv), mk(make([]float32, n*c))
			p := bnParams{w: mk(wv).f32(), bias: mk(bv).f32()}
			a := backend.NormArgs{N: n, C: c, Eps: 1e-5}
			if ref {
				layerNormRef[float32](&a, x, y, &p)
			} else {
				layerNorm[float32](&a, x, y, &p)
			}
			return y.f32()[:n*c]
		}
		want, got := run(true), run(false)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
				t.Fatalf("N=%d C=%d: y[%d] = %v, reference %v", n, c, i, got[i], want[i])
			}
		}
	}
}

// TestLayerNormBackwardBlockOrder checks that GWeight and GBias add the blocks'
// partial sums in block order (as the reference does) on gradients where the order
// shows: in each column block 0 holds 2^60, block 1 −2^60 and block 2 one, so the
// sums are 1 in block order and 0 in others; on a width that spans several column
// tiles and parallel chunks of the final sum.
func TestLayerNormBackwardBlockOrder(t *testing.T) {
	b, _ := New(0)
	const n, c = 300, 1000 // blocks of 30 rows
	rng := rand.New(rand.NewPCG(87, 88))
	xv, gv := make([]float32, n*c), make([]float32, n*c)
	for i := range xv {
		xv[i] = float32(rng.NormFloat64())
	}
	for j := range c {
		gv[0*c+j], gv[30*c+j], gv[60*c+j] = 1<<60, -(1 << 60), 1
	}
	run := func(ref bool) (gw, gb []float32) {
		mk := func(v []float32) *storage {
			s, err := b.Alloc(backend.Float32, len(v))
			if err != nil {
				t.Fatal(err)
			}
			st(s).storeF32(0, v)
			return st(s)
		}
		x, gy, gx := mk(xv), mk(gv), mk(make([]float32, n*c))
		p := bnParams{sm: make([]float32, n), si: make([]float32, n), w: mk(make([]float32, c)).f32()[:c],
			gw: make([]float32, c), gb: make([]float32, c)}
		for r := range n {
			p.sm[r], p.si[r] = 0.25, 1.5
		}
		for j := range p.w {
			p.w[j] = 1
		}
		a := backend.NormArgs{N: n, C: c, Eps: 1e-5}
		if ref {
			layerNormBackwardRef[float32](&a, x, gy, gx, &p)
		} else {
			layerNormBackward[float32](&a, x, gy, gx, &p)
		}
		return p.gw, p.gb
	}
	wgw, wgb := run(true)
	ggw, ggb := run(false)
	for j := range c {
		if wgb[j] != 1 {
			t.Fatalf("reference GBias[%d] = %v, want 1: the data does not show the order", j, wgb[j])
		}
		if math.Float32bits(ggb[j]) != math.Float32bits(wgb[j]) || math.Float32bits(ggw[j]) != math.Float32bits(wgw[j]) {
			t.Fatalf("column %d: GWeight, GBias = %v, %v, reference %v, %v", j, ggw[j], ggb[j], wgw[j], wgb[j])
		}
	}
}

// TestLnFwdRowsHalf checks lnFwdRowsHalf (lnFwdRows2BF16AVX512 and lnFwdRows2F16AVX512
// where they run) against its twin, lnFwdRowsGo then the half package's rounding, bit
// for bit: outputs (NaN payloads aside), means and inverse deviations, on the rows of
// lnFwdRowsData (NaN, ±Inf, -0, huge rows whose outputs overflow float16, subnormal
// ones), with an odd row count leaving the last row to the caller, and the widths it
// declines.
func TestLnFwdRowsHalf(t *testing.T) {
	// Both bfloat16 kernels where the CPU has AVX512_BF16: VCVTNE2PS2BF16's and the
	// integer rounding.
	cvts := []bool{false}
	if lnHalfCVT {
		cvts = append(cvts, true)
	}
	defer func(v bool) { lnHalfCVT = v }(lnHalfCVT)
	for _, cvt := range cvts {
		lnHalfCVT = cvt
		testLnFwdRowsHalf(t)
	}
}

func testLnFwdRowsHalf(t *testing.T) {
	rng := rand.New(rand.NewPCG(83, 84))
	for _, bf := range []bool{true, false} {
		for _, n := range []int{16, 48, 128, 512} {
			for _, rows := range []int{1, 2, 3, 9, 64} {
				for trial := range 4 {
					x := lnFwdRowsData(rng, rows, n, trial)
					w, b := lnFwdRowsAffine(rng, n)
					if trial == 3 { // outputs near the half formats' subnormal range
						for i := range w {
							w[i] *= 1e-6
							b[i] *= 1e-7
						}
					}
					eps := []float64{1e-5, 0, 1e-12, 1e-3}[trial]
					wy, wm, wi := make([]float32, rows*n), make([]float32, rows), make([]float32, rows)
					lnFwdRowsGo(wy, x, w, b, wm, wi, eps, n)
					want := make([]uint16, rows*n)
					if bf {
						half.Float32ToBFloat16(u16As[half.BFloat16](want), wy)
					} else {
						half.Float32ToFloat16(u16As[half.Float16](want), wy)
					}
					y := make([]uint16, rows*n)
					ms, is := make([]float32, rows), make([]float32, rows)
					done := lnFwdRowsHalf(bf, y, x, w, b, ms, is, eps, n)
					what := fmt.Sprintf("bf16 %v (cvt %v) n=%d rows=%d trial %d", bf, lnHalfCVT, n, rows, trial)
					if vecAVX512OK() {
						if done != rows&^1 {
							t.Fatalf("%s: did %d rows, want %d", what, done, rows&^1)
						}
					} else if done != 0 {
						t.Fatalf("%s: did %d rows without AVX-512", what, done)
					}
					for i := range done * n {
						g, e := y[i], want[i]
						gn := (bf && g&0x7f80 == 0x7f80 && g&0x7f != 0) || (!bf && g&0x7c00 == 0x7c00 && g&0x3ff != 0)
						en := (bf && e&0x7f80 == 0x7f80 && e&0x7f != 0) || (!bf && e&0x7c00 == 0x7c00 && e&0x3ff != 0)
						if g != e && !(gn && en) {
							t.Fatalf("%s: y[%d] = %#04x, want %#04x (float32 %g)", what, i, g, e, wy[i])
						}
					}
					for r := range done {
						if math.Float32bits(ms[r]) != math.Float32bits(wm[r]) && !(ms[r] != ms[r] && wm[r] != wm[r]) {
							t.Fatalf("%s: mean[%d] = %g, want %g", what, r, ms[r], wm[r])
						}
						if math.Float32bits(is[r]) != math.Float32bits(wi[r]) && !(is[r] != is[r] && wi[r] != wi[r]) {
							t.Fatalf("%s: invstd[%d] = %g, want %g", what, r, is[r], wi[r])
						}
					}
				}
			}
		}
		for _, n := range []int{0, 8, 24, 130} {
			x := make([]float32, 4*max(n, 1))
			if lnFwdRowsHalf(bf, make([]uint16, len(x)), x, x[:max(n, 1)], x[:max(n, 1)], make([]float32, 4), make([]float32, 4), 1e-5, n) != 0 {
				t.Fatalf("n=%d: a width the kernels cannot take was taken", n)
			}
		}
	}
}
