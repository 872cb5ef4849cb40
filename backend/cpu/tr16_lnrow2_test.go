package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestVecLnRow2 pins vecLnRow2 to vecLnRowGo on row 0 and then on row 1, bit for bit:
// the sums of each row and the column sums gw, gb.
func TestVecLnRow2(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for _, n := range vecLens {
		for mis := range 3 {
			in := func() []float32 { return vecInputs(rng, n+mis)[mis:] }
			g0, gy0, x0, g1, gy1, x1 := in(), in(), in(), in(), in(), in()
			m0, is0 := rng.Float64()*2-1, rng.Float64()*3
			m1, is1 := rng.Float64()*2-1, rng.Float64()*3
			gw0, gb0 := make([]float64, n), make([]float64, n)
			for i := range gw0 {
				gw0[i], gb0[i] = rng.NormFloat64(), rng.NormFloat64()
			}
			wgw, wgb := append([]float64(nil), gw0...), append([]float64(nil), gb0...)
			var w0, w1 [32]float64
			vecLnRowGo(&w0, wgw, wgb, g0, gy0, x0, m0, is0)
			vecLnRowGo(&w1, wgw, wgb, g1, gy1, x1, m1, is1)
			want := []float64{vecFold((*[16]float64)(w0[:16])), vecFold((*[16]float64)(w0[16:])),
				vecFold((*[16]float64)(w1[:16])), vecFold((*[16]float64)(w1[16:]))}
			ggw, ggb := append([]float64(nil), gw0...), append([]float64(nil), gb0...)
			a1, a2, b1, b2 := vecLnRow2(ggw, ggb, g0, gy0, x0, g1, gy1, x1, m0, is0, m1, is1)
			for k, v := range []float64{a1, a2, b1, b2} {
				if !sameBits64(v, want[k]) {
					t.Fatalf("vecLnRow2 n=%d sum %d: %v, twin %v", n, k, v, want[k])
				}
			}
			for i := range wgw {
				if !sameBits64(ggw[i], wgw[i]) || !sameBits64(ggb[i], wgb[i]) {
					t.Fatalf("vecLnRow2 n=%d: [%d] gw %v gb %v, twin %v %v", n, i, ggw[i], ggb[i], wgw[i], wgb[i])
				}
			}
		}
	}
}

// TestLayerNormBackward2Rows pins the two-row backward to two layerNormBackwardRowF32
// calls, bit for bit, with and without weights and column sums.
func TestLayerNormBackward2Rows(t *testing.T) {
	rng := rand.New(rand.NewPCG(73, 74))
	for _, n := range []int{1, 15, 16, 48, 64, 100, 128, 256} {
		for _, affine := range []bool{false, true} {
			in := func() []float32 { return vecInputs(rng, n) }
			gy0, x0, gy1, x1 := in(), in(), in(), in()
			var w []float32
			var gw0, gb0 []float64
			if affine {
				w = in()
				gw0, gb0 = make([]float64, n), make([]float64, n)
				for i := range gw0 {
					gw0[i], gb0[i] = rng.NormFloat64(), rng.NormFloat64()
				}
			}
			m0, is0 := rng.Float64()*2-1, rng.Float64()*3
			m1, is1 := rng.Float64()*2-1, rng.Float64()*3
			cp := func(s []float64) []float64 { return append([]float64(nil), s...) }
			wg0, wg1 := make([]float32, n), make([]float32, n)
			wgw, wgb := cp(gw0), cp(gb0)
			layerNormBackwardRowF32(wg0, gy0, x0, w, wgw, wgb, make([]float64, n), m0, is0)
			layerNormBackwardRowF32(wg1, gy1, x1, w, wgw, wgb, make([]float64, n), m1, is1)
			g0, g1 := make([]float32, n), make([]float32, n)
			ggw, ggb := cp(gw0), cp(gb0)
			layerNormBackward2RowsF32(g0, gy0, x0, g1, gy1, x1, w, ggw, ggb, make([]float64, n), m0, is0, m1, is1)
			for i := range n {
				if math.Float32bits(g0[i]) != math.Float32bits(wg0[i]) || math.Float32bits(g1[i]) != math.Float32bits(wg1[i]) {
					t.Fatalf("n=%d affine=%v: g[%d] %v %v, one row at a time %v %v", n, affine, i, g0[i], g1[i], wg0[i], wg1[i])
				}
			}
			for i := range ggw {
				if !sameBits64(ggw[i], wgw[i]) || !sameBits64(ggb[i], wgb[i]) {
					t.Fatalf("n=%d: [%d] gw %v gb %v, one row at a time %v %v", n, i, ggw[i], ggb[i], wgw[i], wgb[i])
				}
			}
		}
	}
}

// TestVecLnRow2W pins vecLnRow2W to its twin, vecBinary's products and then
// vecLnRowGo on row 0 and on row 1, bit for bit: the products g, the sums of each row
// and the column sums gw, gb, over vecInputs (NaN, ±Inf, subnormals among them).
func TestVecLnRow2W(t *testing.T) {
	rng := rand.New(rand.NewPCG(75, 76))
	for _, n := range vecLens {
		for mis := range 3 {
			in := func() []float32 { return vecInputs(rng, n+mis)[mis:] }
			w, gy0, x0, gy1, x1 := in(), in(), in(), in(), in()
			m0, is0 := rng.Float64()*2-1, rng.Float64()*3
			m1, is1 := rng.Float64()*2-1, rng.Float64()*3
			gw0, gb0 := make([]float64, n), make([]float64, n)
			for i := range gw0 {
				gw0[i], gb0[i] = rng.NormFloat64(), rng.NormFloat64()
			}
			wg0, wg1 := make([]float32, n), make([]float32, n)
			vecOpGo(vecMul, wg0, gy0, w)
			vecOpGo(vecMul, wg1, gy1, w)
			wgw, wgb := append([]float64(nil), gw0...), append([]float64(nil), gb0...)
			var w0, w1 [32]float64
			vecLnRowGo(&w0, wgw, wgb, wg0, gy0, x0, m0, is0)
			vecLnRowGo(&w1, wgw, wgb, wg1, gy1, x1, m1, is1)
			want := []float64{vecFold((*[16]float64)(w0[:16])), vecFold((*[16]float64)(w0[16:])),
				vecFold((*[16]float64)(w1[:16])), vecFold((*[16]float64)(w1[16:]))}
			g0, g1 := make([]float32, n), make([]float32, n)
			ggw, ggb := append([]float64(nil), gw0...), append([]float64(nil), gb0...)
			a1, a2, b1, b2 := vecLnRow2W(ggw, ggb, w, g0, gy0, x0, g1, gy1, x1, m0, is0, m1, is1)
			for i := range n {
				if math.Float32bits(g0[i]) != math.Float32bits(wg0[i]) || math.Float32bits(g1[i]) != math.Float32bits(wg1[i]) {
					t.Fatalf("vecLnRow2W n=%d: g[%d] %v %v, twin %v %v", n, i, g0[i], g1[i], wg0[i], wg1[i])
				}
			}
			for k, v := range []float64{a1, a2, b1, b2} {
				if !sameBits64(v, want[k]) {
					t.Fatalf("vecLnRow2W n=%d sum %d: %v, twin %v", n, k, v, want[k])
				}
			}
			for i := range wgw {
				if !sameBits64(ggw[i], wgw[i]) || !sameBits64(ggb[i], wgb[i]) {
					t.Fatalf("vecLnRow2W n=%d: [%d] gw %v gb %v, twin %v %v", n, i, ggw[i], ggb[i], wgw[i], wgb[i])
				}
			}
		}
	}
}
