package tensor

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLayerNormAsMatchesCast checks LayerNormAs against LayerNorm then Cast: output,
// and the gradients of x, weight and bias, bit for bit, for float32, bfloat16 and
// float64 inputs, every target dtype, with and without autocast (layer_norm in
// float32), with and without affine parameters, on rows holding NaN, ±Inf and values
// that leave float16's range once scaled.
func TestLayerNormAsMatchesCast(t *testing.T) {
	const rows, cols = 37, 100
	xv := randVals(11, rows*cols, 2)
	xv[3*cols+5], xv[8*cols] = math.NaN(), math.Inf(-1)
	wv := randVals(12, cols, 2e4)
	bv := randVals(13, cols, 1)
	gv := sprinkleSpecials(randVals(14, rows*cols, 1), 31)
	for _, xdt := range []DType{Float32, BFloat16, Float64} {
		for _, dt := range []DType{BFloat16, Float16, Float32} {
			for _, auto := range []bool{false, true} {
				for _, affine := range []bool{false, true} {
					name := fmt.Sprintf("x %s → %s autocast=%v affine=%v", xdt, dt, auto, affine)
					run := func(fused bool) [4][]float64 {
						c := NewContext()
						defer c.Close()
						cc := c
						if auto {
							cc = c.WithAutocast(castAllPolicy{low: BFloat16})
						}
						x := FromSlice(xv, Shape{rows, cols}, WithDType(xdt), WithContext(cc), WithGrad())
						var w, b *Tensor
						if affine {
							w = FromSlice(wv, Shape{cols}, WithContext(cc), WithGrad())
							b = FromSlice(bv, Shape{cols}, WithContext(cc), WithGrad())
						}
						var r *Tensor
						if fused {
							r = LayerNormAs(x, Shape{cols}, w, b, 1e-5, dt)
						} else {
							r = LayerNorm(x, Shape{cols}, w, b, 1e-5).Cast(dt)
						}
						require.Equal(t, dt, r.DType(), name)
						r.Backward(GradOutput(FromSlice(gv, Shape{rows, cols}, WithDType(dt), WithContext(cc))))
						var gw, gb []float64
						if affine {
							gw, gb = w.Grad().Float64s(), b.Grad().Float64s()
						}
						return [4][]float64{r.Float64s(), x.Grad().Float64s(), gw, gb}
					}
					requireSameAffine(t, name, run(false), run(true))
				}
			}
		}
	}
}

// TestLayerNormAsOps checks which ops LayerNormAs records: one layer_norm, forward
// and backward, where the norm's float32 output is rounded as it is stored (no cast),
// and layer_norm then cast where it is not (float64 input).
func TestLayerNormAsOps(t *testing.T) {
	for _, c := range []struct {
		xdt        DType
		fwd, bwd   []string
		wantOutDTs DType
	}{
		{Float32, []string{"layer_norm"}, []string{"layer_norm"}, BFloat16},
		{Float64, []string{"layer_norm", "cast"}, []string{"cast", "layer_norm"}, BFloat16},
	} {
		rec := &recorder{}
		ctx := NewContext(UseObserver(rec))
		x := FromSlice(randVals(1, 24, 1), Shape{4, 6}, WithContext(ctx), WithDType(c.xdt)).SetRequiresGrad(true)
		y := LayerNormAs(x, Shape{6}, nil, nil, 1e-5, BFloat16)
		require.Equal(t, c.wantOutDTs, y.DType())
		y.Backward(GradOutput(FromSlice(randVals(2, 24, 1), Shape{4, 6}, WithContext(ctx), WithDType(BFloat16))))
		require.Equal(t, c.fwd, rec.forwards, "x %s", c.xdt)
		require.Equal(t, c.bwd, rec.backwards, "x %s", c.xdt)
		ctx.Close()
	}
}
