package cpu

import (
	"math/rand/v2"
	"testing"
)

// TestBNSumsTwins compares the fused backward-sums loop (bnSumsF32, with and without
// the ReLU mask, o apart from g and o = g) with its twin, the vector-layer passes it
// fuses, bit for bit (NaN payloads aside), at every length to 200 and a few longer,
// misaligned, with signed zeros, subnormals, infinities and NaNs.
func TestBNSumsTwins(t *testing.T) {
	rng := rand.New(rand.NewPCG(55, 56))
	for _, n := range vecLens {
		mis := rng.IntN(3)
		in := func() []float32 { return vecInputs(rng, n+mis)[mis:] }
		g, y, x := in(), in(), in()
		m, a1, a2 := make([]float64, n), make([]float64, n), make([]float64, n)
		for i := range m {
			m[i], a1[i], a2[i] = float64(rng.NormFloat64()), float64(rng.NormFloat64()), float64(rng.NormFloat64())
		}
		for _, mode := range []string{"nomask", "mask", "mask-in-place"} {
			run := func(f func(o []float32, acc1, acc2 []float64, g, y, x []float32, m []float64)) ([]float32, []float64, []float64) {
				gc := append([]float32(nil), g...)
				acc1, acc2 := append([]float64(nil), a1...), append([]float64(nil), a2...)
				var o, yv []float32
				switch mode {
				case "mask":
					o, yv = make([]float32, n), y
				case "mask-in-place":
					o, yv = gc, y
				}
				f(o, acc1, acc2, gc, yv, x, m)
				return o, acc1, acc2
			}
			wo, w1, w2 := run(bnSumsVec)
			gotO, g1, g2 := run(bnSumsF32)
			for i := range n {
				if mode != "nomask" && !sameBits(gotO[i], wo[i]) {
					t.Fatalf("bnSumsF32 %s n=%d: o[%d] = %v, twin %v", mode, n, i, gotO[i], wo[i])
				}
				if !sameBits64(g1[i], w1[i]) || !sameBits64(g2[i], w2[i]) {
					t.Fatalf("bnSumsF32 %s n=%d: acc[%d] = %v %v, twin %v %v", mode, n, i, g1[i], g2[i], w1[i], w2[i])
				}
			}
		}
	}
}

// TestBNVecTwins compares the fused batch-norm loops (bnAffineF32 with and without
// ReLU, bnGradF32) with their twins, the vecOp passes they fuse, bit for bit (NaN
// payloads aside) at every length to 200 and a few longer, misaligned, with signed
// zeros, subnormals, infinities and NaNs in every operand, and the gradient loop
// writing over its g and x operands as bnGrad allows.
func TestBNVecTwins(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 54))
	for _, n := range vecLens {
		mis := rng.IntN(3)
		in := func() []float32 { return vecInputs(rng, n+mis)[mis:] }
		v, m, s, b := in(), in(), in(), in()
		for _, relu := range []bool{false, true} {
			want, got := make([]float32, n), make([]float32, n)
			bnAffineVec(want, v, m, s, b, relu)
			bnAffineF32(got, v, m, s, b, relu)
			for i := range want {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("bnAffineF32 n=%d relu=%v: %d = %v, twin %v (v %v m %v s %v b %v)", n, relu, i, got[i], want[i], v[i], m[i], s[i], b[i])
				}
			}
		}
		g, x, ea, eb, ec, em := in(), in(), in(), in(), in(), in()
		want, tb := make([]float32, n), make([]float32, n)
		bnGradVec(want, g, x, ea, eb, ec, em, tb)
		for _, alias := range []string{"", "g", "x"} {
			gc, xc := append([]float32(nil), g...), append([]float32(nil), x...)
			got := make([]float32, n)
			switch alias {
			case "g":
				got = gc
			case "x":
				got = xc
			}
			bnGradF32(got, gc, xc, ea, eb, ec, em, tb)
			for i := range want {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("bnGradF32 n=%d o=%q: %d = %v, twin %v", n, alias, i, got[i], want[i])
				}
			}
		}
	}
}
