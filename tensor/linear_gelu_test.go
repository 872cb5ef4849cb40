package tensor

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLinearGELUMatchesComposed checks that LinearGELU gives the bits of Linear then
// Gelu, forward and backward (output, and the gradients of x, w and b), in every float
// dtype (float32 saving the GELU's backward factor, float64 and the half dtypes
// through the Gelu kernels), with and without a bias, with grad on and off, for
// shapes whose output lengths are and are not multiples of 16 and reach several
// parallel ranges, and NaN, ±Inf and -0 in x, the bias and the output gradient.
func TestLinearGELUMatchesComposed(t *testing.T) {
	for _, dt := range []DType{Float32, Float64, BFloat16, Float16} {
		for _, sh := range [][3]int{{1, 1, 1}, {7, 60, 45}, {25, 37, 70}, {300, 60, 1100}, {13, 33, 1}} {
			for _, withBias := range []bool{true, false} {
				rows, in, out := sh[0], sh[1], sh[2]
				name := fmt.Sprintf("%s/%v/bias=%v", dt, sh, withBias)
				c := NewContext()
				xv := randVals(1, rows*in, 1)
				for r := range min(rows, len(linearSpecials)) {
					xv[r*in+(7*r+5)%in] = linearSpecials[r]
				}
				wv := randVals(2, out*in, 0.1)
				bv := sprinkleSpecials(randVals(3, out, 1), 17)
				gv := sprinkleSpecials(randVals(4, rows*out, 1), 29)
				run := func(fused, grad bool) [4][]float64 {
					x := FromSlice(xv, Shape{rows, in}, WithDType(dt), WithContext(c)).SetRequiresGrad(grad)
					w := FromSlice(wv, Shape{out, in}, WithDType(dt), WithContext(c)).SetRequiresGrad(grad)
					var b *Tensor
					if withBias {
						b = FromSlice(bv, Shape{out}, WithDType(dt), WithContext(c)).SetRequiresGrad(grad)
					}
					var r *Tensor
					if fused {
						r = LinearGELU(x, w, b)
					} else {
						r = Linear(x, w, b).Gelu()
					}
					if !grad {
						return [4][]float64{r.Float64s()}
					}
					r.Backward(GradOutput(FromSlice(gv, Shape{rows, out}, WithDType(dt), WithContext(c))))
					var gb []float64
					if withBias {
						gb = b.Grad().Float64s()
					}
					return [4][]float64{r.Float64s(), x.Grad().Float64s(), w.Grad().Float64s(), gb}
				}
				want := run(false, true)
				requireSameAffine(t, name, want, run(true, true))
				requireExactBits(t, want[0], run(true, false)[0], "forward, grad off "+name)
				c.Close()
			}
		}
	}
}

// TestLinearGELUOpName checks that the fused op records as linear_gelu, forward and
// backward, in place of linear and gelu.
func TestLinearGELUOpName(t *testing.T) {
	rec := &recorder{}
	c := NewContext(UseObserver(rec))
	defer c.Close()
	x := FromSlice(randVals(1, 6, 1), Shape{2, 3}, WithContext(c), WithDType(Float32)).SetRequiresGrad(true)
	w := FromSlice(randVals(2, 12, 1), Shape{4, 3}, WithContext(c), WithDType(Float32))
	LinearGELU(x, w, nil).Sum().Backward()
	require.Equal(t, []string{"linear_gelu", "sum"}, rec.forwards)
	require.Equal(t, []string{"sum", "linear_gelu"}, rec.backwards)
}

// TestLinearGELUMemory checks that with a gradient to come, LinearGELU's float32
// forward, which saves the GELU's factor T instead of its input, leaves two tensors of
// the output's size allocated (the output and T), as Linear then Gelu do (Linear's
// output, which Gelu saves, and Gelu's).
func TestLinearGELUMemory(t *testing.T) {
	const rows, in, out = 64, 32, 256
	xv, wv := randVals(1, rows*in, 1), randVals(2, out*in, 0.1)
	grown := func(f func(x, w *Tensor) *Tensor) int64 {
		c := NewContext()
		defer c.Close()
		x := FromSlice(xv, Shape{rows, in}, WithDType(Float32), WithContext(c)).SetRequiresGrad(true)
		w := FromSlice(wv, Shape{out, in}, WithDType(Float32), WithContext(c)).SetRequiresGrad(true)
		be := x.ref.b
		before := be.MemoryStats().Allocated
		f(x, w)
		return be.MemoryStats().Allocated - before
	}
	size := int64(rows * out * 4)
	fused := grown(func(x, w *Tensor) *Tensor { return LinearGELU(x, w, nil) })
	two := grown(func(x, w *Tensor) *Tensor { return Linear(x, w, nil).Gelu() })
	require.Equal(t, 2*size, fused, "LinearGELU")
	require.Equal(t, 2*size, two, "Linear then Gelu")
}

// TestLinearGELURetainGraph checks that a second backward through a retained graph
// finds the saved factor intact (the first backward computes the GELU's gradient over
// it only when the graph is not retained): the float32 gradients of two backwards
// are twice those of one, bit for bit (a sum of two equal floats is exact).
func TestLinearGELURetainGraph(t *testing.T) {
	c := NewContext()
	defer c.Close()
	const rows, in, out = 9, 7, 100
	mk := func() (*Tensor, *Tensor) {
		x := FromSlice(randVals(1, rows*in, 1), Shape{rows, in}, WithDType(Float32), WithContext(c)).SetRequiresGrad(true)
		w := FromSlice(randVals(2, out*in, 0.3), Shape{out, in}, WithDType(Float32), WithContext(c)).SetRequiresGrad(true)
		return x, w
	}
	gv := FromSlice(randVals(3, rows*out, 1), Shape{rows, out}, WithDType(Float32), WithContext(c))
	x1, w1 := mk()
	LinearGELU(x1, w1, nil).Backward(GradOutput(gv))
	x2, w2 := mk()
	y := LinearGELU(x2, w2, nil)
	y.Backward(GradOutput(gv), RetainGraph())
	y.Backward(GradOutput(gv))
	for _, p := range [][2]*Tensor{{x1, x2}, {w1, w2}} {
		one, two := p[0].Grad().Float32s(), p[1].Grad().Float32s()
		for i := range one {
			require.Equal(t, math.Float32bits(2*one[i]), math.Float32bits(two[i]), "element %d", i)
		}
	}
}
