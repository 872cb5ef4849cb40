package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBatchNormReLUMatchesComposed runs BatchNormReLU and BatchNorm(…).Relu() on the
// same inputs, in training and eval, in float32, bfloat16 and float16 (x cast from a
// float32 leaf), and compares outputs, running statistics and the gradients of x,
// weight and bias bit for bit.
func TestBatchNormReLUMatchesComposed(t *testing.T) {
	for _, dt := range []DType{Float32, BFloat16, Float16} {
		for _, training := range []bool{true, false} {
			r := rand.New(rand.NewPCG(5, 6))
			xv := make([]float32, 4*3*5*5)
			for i := range xv {
				xv[i] = float32(r.NormFloat64())
			}
			xv[0] = float32(math.Copysign(0, -1))
			run := func(fused bool) (out, gx, gw, gb []float64, rm, rv []float64) {
				ctx := NewContext()
				defer ctx.Close()
				x32 := FromSlice(xv, Shape{4, 3, 5, 5}, WithContext(ctx), WithGrad())
				x := x32.Cast(dt)
				w := FromSlice([]float32{0.5, 1.25, -0.75}, Shape{3}, WithContext(ctx), WithGrad())
				b := FromSlice([]float32{0.1, -0.2, 0}, Shape{3}, WithContext(ctx), WithGrad())
				rmT := FromSlice([]float32{0.1, 0.2, -0.3}, Shape{3})
				rvT := FromSlice([]float32{1, 2, 0.5}, Shape{3})
				defer rmT.Release()
				defer rvT.Release()
				var y *Tensor
				if fused {
					y = BatchNormReLU(x, w, b, rmT, rvT, training, 0.1, 1e-5)
				} else {
					y = BatchNorm(x, w, b, rmT, rvT, training, 0.1, 1e-5).Relu()
				}
				gy := FromSlice(xv, Shape{4, 3, 5, 5}, WithContext(ctx)).Cast(dt).AddScalar(0.25)
				y.Mul(gy).Sum().Backward()
				f := func(t *Tensor) []float64 { return t.Cast(Float64).Float64s() }
				out, gx, gw, gb = f(y), f(x32.Grad()), f(w.Grad()), f(b.Grad())
				for _, p := range []*Tensor{x32, w, b} {
					p.ZeroGrad()
				}
				return out, gx, gw, gb, rmT.Float64s(), rvT.Float64s()
			}
			o1, gx1, gw1, gb1, rm1, rv1 := run(false)
			o2, gx2, gw2, gb2, rm2, rv2 := run(true)
			for _, p := range [][2][]float64{{o1, o2}, {gx1, gx2}, {gw1, gw2}, {gb1, gb2}, {rm1, rm2}, {rv1, rv2}} {
				require.Equal(t, len(p[0]), len(p[1]))
				for i := range p[0] {
					require.Equal(t, math.Float64bits(p[0][i]), math.Float64bits(p[1][i]), "%s training=%v element %d: composed %v, fused %v", dt, training, i, p[0][i], p[1][i])
				}
			}
		}
	}
}
