package tensor

import (
	"fmt"
	"math"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLinearReLUMatchesComposed checks that LinearReLU gives the bits of Linear then
// Relu, forward and backward (output, and the gradients of x, w and b), in every float
// dtype (float32 and float64 with the ReLU inside the GEMM, bf16 and fp16 through the
// ReLU kernel after it), with and without a bias, for shapes with rows not a multiple
// of 12, out features not a multiple of 32, in features over 512 (two k slices), rows
// ≤ 288 and > 288 (the GEMM's two schedules), and NaN, ±Inf and -0 in x, the bias and
// the output gradient.
func TestLinearReLUMatchesComposed(t *testing.T) {
	for _, dt := range []DType{Float32, Float64, BFloat16, Float16} {
		for _, sh := range [][3]int{{1, 1, 1}, {7, 600, 45}, {25, 37, 70}, {300, 600, 70}, {256, 784, 130}, {13, 33, 1}} {
			for _, withBias := range []bool{true, false} {
				rows, in, out := sh[0], sh[1], sh[2]
				name := fmt.Sprintf("%s/%v/bias=%v", dt, sh, withBias)
				c := NewContext()
				xv := randVals(1, rows*in, 1)
				for r := range min(rows, len(linearSpecials)) {
					xv[r*in+(7*r+5)%in] = linearSpecials[r] // the other rows stay finite
				}
				wv := randVals(2, out*in, 1)
				bv := sprinkleSpecials(randVals(3, out, 1), 17)
				gv := sprinkleSpecials(randVals(4, rows*out, 1), 29)
				run := func(fused bool) [4][]float64 {
					x := FromSlice(xv, Shape{rows, in}, WithDType(dt), WithContext(c)).SetRequiresGrad(true)
					w := FromSlice(wv, Shape{out, in}, WithDType(dt), WithContext(c)).SetRequiresGrad(true)
					var b *Tensor
					if withBias {
						b = FromSlice(bv, Shape{out}, WithDType(dt), WithContext(c)).SetRequiresGrad(true)
					}
					var r *Tensor
					if fused {
						r = LinearReLU(x, w, b)
					} else {
						r = Linear(x, w, b).Relu()
					}
					r.Backward(GradOutput(FromSlice(gv, Shape{rows, out}, WithDType(dt), WithContext(c))))
					var gb []float64
					if withBias {
						gb = b.Grad().Float64s()
					}
					return [4][]float64{r.Float64s(), x.Grad().Float64s(), w.Grad().Float64s(), gb}
				}
				requireSameAffine(t, name, run(false), run(true))
				c.Close()
			}
		}
	}
}

// requireExactBits fails unless want and got hold the same float64 bits.
// requireSameAffine compares two runs' output and gradients of x, the weight and the
// bias (in that order) bit for bit.
func requireSameAffine(t *testing.T, name string, want, got [4][]float64) {
	t.Helper()
	for i, what := range []string{"forward ", "grad x ", "grad w ", "grad b "} {
		requireExactBits(t, want[i], got[i], what+name)
	}
}

func requireExactBits(t *testing.T, want, got []float64, what string) {
	t.Helper()
	require.Equal(t, len(want), len(got), what)
	for i := range want {
		if math.Float64bits(want[i]) != math.Float64bits(got[i]) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestLinearReLUOpName checks that the fused op records as linear_relu, forward and
// backward, in place of linear and relu.
func TestLinearReLUOpName(t *testing.T) {
	rec := &recorder{}
	c := NewContext(UseObserver(rec))
	defer c.Close()
	x := FromSlice(randVals(1, 6, 1), Shape{2, 3}, WithContext(c)).SetRequiresGrad(true)
	w := FromSlice(randVals(2, 12, 1), Shape{4, 3}, WithContext(c))
	LinearReLU(x, w, nil).Sum().Backward()
	require.Equal(t, []string{"linear_relu", "sum"}, rec.forwards)
	require.Equal(t, []string{"sum", "linear_relu"}, rec.backwards)
}

// BenchmarkLinearReLU times the MLP's hidden layer (x [256, 1024], w [1024, 1024], b
// [1024], float32), forward ("fwd") and forward plus backward ("step"), as Linear then
// Relu ("two") and as LinearReLU ("fused"), with the process's CPU time per op
// (cpu-ns/op) beside the wall time.
func BenchmarkLinearReLU(b *testing.B) {
	const rows, in, out = 256, 1024, 1024
	xv, wv, bv, gv := randVals(1, rows*in, 1), randVals(2, out*in, 0.03), randVals(3, out, 0.1), randVals(4, rows*out, 1)
	for _, what := range []string{"fwd", "step"} {
		for _, mode := range []string{"two", "fused"} {
			b.Run(what+"/"+mode, func(b *testing.B) {
				w := FromSlice(wv, Shape{out, in}, WithDType(Float32)).SetRequiresGrad(what == "step")
				bias := FromSlice(bv, Shape{out}, WithDType(Float32)).SetRequiresGrad(what == "step")
				defer w.Release()
				defer bias.Release()
				cpu0 := benchCPU()
				for b.Loop() {
					c := NewContext()
					x := FromSlice(xv, Shape{rows, in}, WithDType(Float32), WithContext(c)).SetRequiresGrad(what == "step")
					var y *Tensor
					if mode == "two" {
						y = Linear(x, w, bias).Relu()
					} else {
						y = LinearReLU(x, w, bias)
					}
					if what == "step" {
						y.Backward(GradOutput(FromSlice(gv, Shape{rows, out}, WithDType(Float32), WithContext(c))))
						w.ZeroGrad()
						bias.ZeroGrad()
					}
					c.Close()
				}
				b.ReportMetric(float64(benchCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// benchCPU returns the process's CPU time in nanoseconds.
func benchCPU() int64 {
	var r syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return r.Utime.Nano() + r.Stime.Nano()
}

// linearSpecials are the values the linear+activation tests put into their operands.
var linearSpecials = []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0}

// sprinkleSpecials puts linearSpecials in turn into every every-th element of v from
// index 3, and returns v.
func sprinkleSpecials(v []float64, every int) []float64 {
	for i := 3; i < len(v); i += every {
		v[i] = linearSpecials[(i/every)%len(linearSpecials)]
	}
	return v
}
