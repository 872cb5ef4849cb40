package autocast_test

import (
	"fmt"

	"github.com/gamp-ml/gamp/autocast"
	"github.com/gamp-ml/gamp/tensor"
)

// Under a float16 policy a matmul runs in half, softmax in float32, and a disabled
// nested region runs in its inputs' dtypes.
func Example() {
	ctx := tensor.NewContext()
	defer ctx.Close()
	x := tensor.Randn(tensor.Shape{4, 8}, tensor.WithContext(ctx))
	w := tensor.Randn(tensor.Shape{8, 8}, tensor.WithContext(ctx))
	p, _ := autocast.Parse("params=float32,compute=float16,output=float32")
	autocast.Run(ctx, p, func(ac *tensor.Context) *tensor.Tensor {
		y := tensor.MatMul(ac.Bind(x), w)
		fmt.Println("matmul:", y.DType())
		fmt.Println("softmax:", tensor.Softmax(y, 1).DType())
		inner := autocast.Run(ac, autocast.Disabled(), func(off *tensor.Context) *tensor.Tensor {
			return tensor.MatMul(off.Bind(x), w)
		})
		fmt.Println("disabled region:", inner.DType())
		return y
	})
	fmt.Println(p)
	// Output:
	// matmul: float16
	// softmax: float32
	// disabled region: float32
	// params=float32,compute=float16,output=float32
}
