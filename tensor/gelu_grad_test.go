package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/stretchr/testify/require"
)

// TestGeluSavesFactor checks that LinearGELU on float32, whose CPU forward saves the
// GELU's backward factor T (backend.GeluWithGrad), gives the bits of the old path,
// Linear then Gelu, which saves the GELU's input and runs UnaryBackward from it, for y
// and for the gradient, autocast off. The GEMM is x [n, 1] times a weight of 1, which
// passes x (-0 becomes +0) and the gradient through; lengths around the vector width
// and over several parallel ranges, with ±0, ±Inf, subnormals and NaN payloads in x
// and in the output gradient; and with grad off it computes y alone, with the same
// bits.
func TestGeluSavesFactor(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	sp := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(0x7fc01234), math.Float32frombits(0xffc0abcd), math.Float32frombits(1),
		-math.Float32frombits(0x7fffff), 1e20, -1e20, -13.2, 1.19, -1.77}
	for _, n := range []int{1, 15, 16, 17, 100, 1029, 3<<15 + 77} {
		for _, special := range []bool{false, true} {
			xv, gv := make([]float32, n), make([]float32, n)
			for i := range xv {
				xv[i], gv[i] = float32(rng.NormFloat64()*0.58), float32(rng.NormFloat64())
				if special && rng.IntN(3) == 0 {
					xv[i] = sp[rng.IntN(len(sp))]
				}
				if special && rng.IntN(3) == 0 {
					gv[i] = sp[rng.IntN(len(sp))]
				}
			}
			c := NewContext()
			leaf := FromSlice(xv, Shape{n, 1}, WithGrad())
			x := c.Bind(leaf)
			one := c.Bind(FromSlice([]float32{1}, Shape{1, 1}))
			gy := FromSlice(gv, Shape{n, 1})
			y := LinearGELU(x, one, nil)
			y.Backward(GradOutput(gy))
			gotY, gotG := y.Float32s(), leaf.Grad().Float32s()

			_, ok := x.ref.b.(backend.GeluWithGrad)
			require.True(t, ok, "the CPU backend implements GeluWithGrad")
			// The old path: Linear, then Gelu saving its input, UnaryBackward from it.
			leaf0 := FromSlice(xv, Shape{n, 1}, WithGrad())
			y0 := Linear(c.Bind(leaf0), one, nil).Gelu()
			y0.Backward(GradOutput(gy))
			wantY, wantG := y0.Float32s(), leaf0.Grad().Float32s()
			ng := NewContext(NoGradMode())
			plain := LinearGELU(ng.Bind(FromSlice(xv, Shape{n, 1})), ng.Bind(FromSlice([]float32{1}, Shape{1, 1})), nil).Float32s()
			for i := range wantY {
				if math.Float32bits(gotY[i]) != math.Float32bits(wantY[i]) || math.Float32bits(plain[i]) != math.Float32bits(wantY[i]) ||
					math.Float32bits(gotG[i]) != math.Float32bits(wantG[i]) {
					t.Fatalf("n=%d [%d] x=%#08x gy=%#08x: y %#08x (grad off %#08x) gx %#08x, old path y %#08x gx %#08x", n, i,
						math.Float32bits(xv[i]), math.Float32bits(gv[i]), math.Float32bits(gotY[i]), math.Float32bits(plain[i]),
						math.Float32bits(gotG[i]), math.Float32bits(wantY[i]), math.Float32bits(wantG[i]))
				}
			}
			ng.Close()
			c.Close()
			for _, l := range []*Tensor{leaf, leaf0} {
				l.Grad().Release()
				l.Release()
			}
			gy.Release()
		}
	}
}
