package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/stretchr/testify/require"
)

// TestGeluSavesFactor checks that float32 Gelu, whose CPU forward saves the backward's
// factor T (backend.GeluWithGrad), gives the bits of the old path, the backend's Unary
// and UnaryBackward from x, for y and for the gradient, autocast off, on lengths
// around the vector width and over several parallel ranges, with ±0, ±Inf,
// subnormals and NaN payloads in x and in the output gradient; and that with grad off
// it computes y alone, with the same bits.
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
			leaf := FromSlice(xv, Shape{n}, WithGrad())
			x := c.Bind(leaf)
			gy := FromSlice(gv, Shape{n})
			y := x.Gelu()
			y.Backward(GradOutput(gy))
			gotY, gotG := y.Float32s(), leaf.Grad().Float32s()

			be := x.ref.b
			_, ok := be.(backend.GeluWithGrad)
			require.True(t, ok, "the CPU backend implements GeluWithGrad")
			s := func(v []float32) backend.Storage {
				st, err := be.Alloc(backend.Float32, n)
				require.NoError(t, err)
				if v != nil {
					be.Upload(st, 0, v)
				}
				return st
			}
			xs, gys, y0, g0 := s(xv), s(gv), s(nil), s(nil)
			be.Unary(backend.Gelu, y0, xs, n, 0, 0)
			be.UnaryBackward(backend.Gelu, g0, gys, xs, nil, n, 0, 0)
			wantY, wantG := make([]float32, n), make([]float32, n)
			be.Download(wantY, y0, 0)
			be.Download(wantG, g0, 0)
			for _, st := range []backend.Storage{xs, gys, y0, g0} {
				be.Free(st)
			}
			ng := NewContext(NoGradMode())
			plain := ng.Bind(FromSlice(xv, Shape{n})).Gelu().Float32s()
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
			leaf.Release()
			leaf.Grad().Release()
			gy.Release()
		}
	}
}
