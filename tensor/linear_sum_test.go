package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLinearBiasGradInGemm checks that a Linear's gradients are the same bits
// whether the bias gradient comes from the weight gradient's GEMM
// (backend.GemmSumA) or from Reduce (linearBiasInGemm off): gx, gw and gb, for
// Linear, LinearReLU and LinearGELU, over row counts that fit one k slice of
// the GEMM or several, with Reduce's blocks cut by them, a single output (which
// Reduce sums in another order) and batch dims, the output gradient holding NaN,
// ±Inf, -0, subnormals and large and small magnitudes. bf16 keeps Reduce.
func TestLinearBiasGradInGemm(t *testing.T) {
	defer func(v bool) { linearBiasInGemm = v }(linearBiasInGemm)
	type shape struct {
		lead      Shape
		in, out   int
		dt        DType
		act       linearAct
		gradOnlyW bool
	}
	shapes := []shape{
		{Shape{1}, 3, 2, Float32, linearNone, false},
		{Shape{5}, 7, 1, Float32, linearNone, false},
		{Shape{513}, 20, 10, Float32, linearReLU, false},
		{Shape{3, 171}, 33, 13, Float32, linearGELU, false},
		{Shape{2055}, 24, 100, Float32, linearNone, false},
		{Shape{1030}, 16, 1024, Float32, linearNone, true},
		{Shape{64}, 40, 30, BFloat16, linearNone, false},
	}
	for _, sh := range shapes {
		rows := sh.lead.Numel()
		xv := randVals(1, rows*sh.in, 1)
		wv := randVals(2, sh.out*sh.in, 1)
		bv := randVals(3, sh.out, 1)
		gv := randVals(4, rows*sh.out, 1)
		specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0x1p-140, 0x1p100, 0x1p-100}
		for i := 0; i < len(gv); i += 37 {
			gv[i] *= math.Ldexp(1, i%121-60)
		}
		for i := 0; i < len(gv); i += 1001 {
			gv[i] = specials[(i/1001)%len(specials)]
		}
		run := func(inGemm bool) [][]float32 {
			linearBiasInGemm = inGemm
			c := NewContext()
			defer c.Close()
			x := FromSlice(xv, append(sh.lead.Clone(), sh.in), WithDType(sh.dt), WithContext(c)).SetRequiresGrad(!sh.gradOnlyW)
			w := FromSlice(wv, Shape{sh.out, sh.in}, WithDType(sh.dt), WithContext(c)).SetRequiresGrad(true)
			b := FromSlice(bv, Shape{sh.out}, WithDType(sh.dt), WithContext(c)).SetRequiresGrad(true)
			var y *Tensor
			switch sh.act {
			case linearReLU:
				y = LinearReLU(x, w, b)
			case linearGELU:
				y = LinearGELU(x, w, b)
			default:
				y = Linear(x, w, b)
			}
			y.Backward(GradOutput(FromSlice(gv, y.Shape(), WithDType(sh.dt), WithContext(c))))
			out := [][]float32{y.Float32s(), w.Grad().Float32s(), b.Grad().Float32s()}
			if !sh.gradOnlyW {
				out = append(out, x.Grad().Float32s())
			}
			return out
		}
		want, got := run(false), run(true)
		for i := range want {
			require.Equal(t, f32Bits(want[i]), f32Bits(got[i]), "%+v: output %d (y, gw, gb, gx)", sh, i)
		}
	}
}

// f32Bits returns the bits of v, every NaN as one: Reduce and the GEMM may keep the
// payload of either NaN of a column (cpu's sumABits).
func f32Bits(v []float32) []uint32 {
	u := make([]uint32, len(v))
	for i, x := range v {
		u[i] = math.Float32bits(x)
		if x != x {
			u[i] = 0x7fc00000
		}
	}
	return u
}
