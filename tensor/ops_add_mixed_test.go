package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// Adding a Float32 and a half tensor reads the half one in place (no cast op): the sum
// and both gradients must be those of casting it to Float32 first, bit for bit, in
// either order, with broadcasting, in both half types.
func TestAddMixedMatchesCast(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, dt := range []DType{BFloat16, Float16} {
		for _, shapes := range [][2]Shape{{{4, 6, 8}, {4, 6, 8}}, {{4, 6, 8}, {8}}, {{8}, {3, 8}}} {
			for _, halfFirst := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%v/halfFirst=%v", dt, shapes, halfFirst), func(t *testing.T) {
					va, vb := randSlice(r, shapes[0].Numel(), 3), randSlice(r, shapes[1].Numel(), 3)
					gw := randSlice(r, broadcastShape(shapes[0], shapes[1]).Numel(), 1)
					run := func(cast bool) (out, ga, gb []float64) {
						c := NewContext()
						defer c.Close()
						x := FromSlice(va, shapes[0], WithContext(c), WithDType(Float32), WithGrad())
						h := FromSlice(vb, shapes[1], WithContext(c), WithDType(dt), WithGrad())
						hh := h
						if cast {
							hh = h.Cast(Float32)
						}
						var y *Tensor
						if halfFirst {
							y = hh.Add(x)
						} else {
							y = x.Add(hh)
						}
						require.Equal(t, Float32, y.DType())
						w := FromSlice(gw, y.Shape(), WithContext(c), WithDType(Float32))
						y.Mul(w).Sum().Backward()
						require.Equal(t, dt, h.Grad().DType())
						return y.Float64s(), x.Grad().Float64s(), h.Grad().Float64s()
					}
					wo, wa, wb := run(true)
					o, a, b := run(false)
					requireSameBits(t, "sum", wo, o)
					requireSameBits(t, "grad of the float32 input", wa, a)
					requireSameBits(t, "grad of the half input", wb, b)
				})
			}
		}
	}
}

// broadcastShape is the broadcast of two shapes (the test's shapes broadcast).
func broadcastShape(a, b Shape) Shape {
	if len(a) < len(b) {
		a, b = b, a
	}
	out := a.Clone()
	for i := range b {
		j := len(a) - len(b) + i
		out[j] = max(a[j], b[i])
	}
	return out
}
