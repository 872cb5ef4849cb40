package cpu

import (
	"math/rand/v2"
	"testing"
)

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
