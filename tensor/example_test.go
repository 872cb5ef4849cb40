package tensor_test

import (
	"fmt"

	"github.com/gamp-ml/gamp/tensor"
)

// A step in a Context: build, compute, backward, read the gradient, release it all.
func Example() {
	w := tensor.FromSlice([]float32{1, 2, 3}, nil, tensor.WithGrad())
	defer w.Release()
	ctx := tensor.NewContext()
	x := tensor.FromSlice([]float32{0.5, -1, 2}, nil, tensor.WithContext(ctx))
	loss := ctx.Bind(w).Mul(x).Sum()
	loss.Backward()
	fmt.Println("loss:", loss.Item())
	fmt.Println("grad:", w.Grad().Float32s())
	ctx.Close() // every intermediate of the step is released here
	h := w.Cast(tensor.Float16)
	defer h.Release()
	fmt.Println(h.DType(), h.Float32s())
	// Output:
	// loss: 4.5
	// grad: [0.5 -1 2]
	// float16 [1 2 3]
}
