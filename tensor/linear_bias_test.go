package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLinearBiasMatchesComposed checks that Linear with a bias (the GEMM
// starting C from the bias row, backend.GemmBias) gives the bits of the
// composed x·wᵀ + b in float32 where k fits one GEMM slice (both then add
// the bias once to the same product sum), forward and backward, the bias
// holding NaN, ±Inf, -0 and a subnormal.
func TestLinearBiasMatchesComposed(t *testing.T) {
	for _, sh := range [][3]int{{1, 1, 1}, {5, 7, 3}, {64, 130, 96}, {2 * 40, 128, 384}, {37, 300, 65}} {
		rows, in, out := sh[0], sh[1], sh[2]
		c := NewContext()
		xv := randVals(1, rows*in, 1)
		wv := randVals(2, out*in, 1)
		bv := randVals(3, out, 3)
		specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0x1p-140}
		for i := 0; i < out; i += 7 {
			bv[i] = specials[(i/7)%len(specials)]
		}
		gv := randVals(4, rows*out, 1)
		run := func(fused bool) (y, gx, gw, gb []float32) {
			x := FromSlice(xv, Shape{rows, in}, WithDType(Float32), WithContext(c)).SetRequiresGrad(true)
			w := FromSlice(wv, Shape{out, in}, WithDType(Float32), WithContext(c)).SetRequiresGrad(true)
			b := FromSlice(bv, Shape{out}, WithDType(Float32), WithContext(c)).SetRequiresGrad(true)
			var r *Tensor
			if fused {
				r = Linear(x, w, b)
			} else {
				r = Add(MatMul(x, w.T()), b)
			}
			r.Backward(GradOutput(FromSlice(gv, Shape{rows, out}, WithDType(Float32), WithContext(c))))
			return r.Float32s(), x.Grad().Float32s(), w.Grad().Float32s(), b.Grad().Float32s()
		}
		y0, gx0, gw0, gb0 := run(false)
		y1, gx1, gw1, gb1 := run(true)
		bits := func(v []float32) []uint32 {
			u := make([]uint32, len(v))
			for i, x := range v {
				u[i] = math.Float32bits(x)
			}
			return u
		}
		require.Equal(t, bits(y0), bits(y1), "forward %v", sh)
		require.Equal(t, bits(gx0), bits(gx1), "grad x %v", sh)
		require.Equal(t, bits(gw0), bits(gw1), "grad w %v", sh)
		require.Equal(t, bits(gb0), bits(gb1), "grad b %v", sh)
		c.Close()
	}
}
