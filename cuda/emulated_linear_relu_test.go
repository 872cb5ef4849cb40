package cuda_test

import (
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/cuda"
	"github.com/gamp-ml/gamp/tensor"
)

// TestEmulatedLinearReLU runs tensor.LinearReLU and tensor.LinearGELU on cuda:0, whose
// backend applies no ReLU inside its GEMM and writes no GELU backward factor (each op
// runs the GEMM, then the activation kernel), and checks their outputs and gradients
// against Linear then Relu (Gelu) on the same device, bit for bit, in float32 and
// float16.
func TestEmulatedLinearReLU(t *testing.T) {
	cuda.NeedEmulated(t)
	dev := backend.CUDA(0)
	const rows, in, out = 13, 40, 37
	vals := func(n int, seed float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Sin(seed + 0.37*float64(i))
		}
		v[3] = math.Copysign(0, -1)
		return v
	}
	acts := []struct {
		name  string
		fused func(x, w, b *tensor.Tensor) *tensor.Tensor
		act   func(y *tensor.Tensor) *tensor.Tensor
	}{
		{"Relu", tensor.LinearReLU, (*tensor.Tensor).Relu},
		{"Gelu", tensor.LinearGELU, (*tensor.Tensor).Gelu},
	}
	for _, a := range acts {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float16} {
			run := func(fused bool) [][]float64 {
				ctx := tensor.NewContext()
				defer ctx.Close()
				mk := func(v []float64, s tensor.Shape) *tensor.Tensor {
					return tensor.FromSlice(v, s, tensor.WithDType(dt), tensor.WithDevice(dev), tensor.WithContext(ctx))
				}
				x := mk(vals(rows*in, 1), tensor.Shape{rows, in}).SetRequiresGrad(true)
				w := mk(vals(out*in, 2), tensor.Shape{out, in}).SetRequiresGrad(true)
				b := mk(vals(out, 3), tensor.Shape{out}).SetRequiresGrad(true)
				var y *tensor.Tensor
				if fused {
					y = a.fused(x, w, b)
				} else {
					y = a.act(tensor.Linear(x, w, b))
				}
				y.Backward(tensor.GradOutput(mk(vals(rows*out, 4), tensor.Shape{rows, out})))
				f := func(t *tensor.Tensor) []float64 { return t.To(tensor.CPU).Float64s() }
				return [][]float64{f(y), f(x.Grad()), f(w.Grad()), f(b.Grad())}
			}
			want, got := run(false), run(true)
			for k, what := range []string{"output", "grad x", "grad w", "grad b"} {
				for i := range want[k] {
					if math.Float64bits(want[k][i]) != math.Float64bits(got[k][i]) {
						t.Fatalf("%s %s element %d: Linear then %s %v, fused %v", dt, what, i, a.name, want[k][i], got[k][i])
					}
				}
			}
		}
	}
}
