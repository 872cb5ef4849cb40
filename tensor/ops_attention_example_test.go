package tensor_test

import (
	"fmt"

	"github.com/gamp-ml/gamp/tensor"
)

// Causal attention over three positions with equal scores (q = 0): position i averages
// the values of positions 0…i, and never sees a later one.
func ExampleScaledDotProductAttention() {
	ctx := tensor.NewContext()
	defer ctx.Close()
	q := tensor.Zeros(tensor.Shape{1, 3, 2}, tensor.WithContext(ctx))
	k := tensor.FromSlice([]float32{1, 0, 0, 1, 1, 1}, tensor.Shape{1, 3, 2}, tensor.WithContext(ctx))
	v := tensor.FromSlice([]float32{3, 0, 0, 3, 6, 6}, tensor.Shape{1, 3, 2}, tensor.WithContext(ctx))
	y := tensor.ScaledDotProductAttention(q, k, v, tensor.AttentionOptions{Causal: true})
	fmt.Println(y.Float32s())
	// Output: [3 0 1.5 1.5 3 3]
}
