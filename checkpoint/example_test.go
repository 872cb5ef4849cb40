package checkpoint_test

import (
	"fmt"
	"slices"

	"github.com/gamp-ml/gamp/checkpoint"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// Checkpointing a block changes the memory a step needs, not its gradients.
func Example() {
	build := func() *nn.Sequential {
		return nn.NewSequential(nn.NewLinear(4, 8, nn.Seeded(1)), nn.NewReLU(), nn.NewDropout(0.5), nn.NewLinear(8, 2, nn.Seeded(2)))
	}
	x := tensor.FromSlice([]float32{0.5, -1, 2, 0.25, 1, 1.5, -0.5, 3}, tensor.Shape{2, 4})
	defer x.Release()
	step := func(model *nn.Sequential, ck bool) []float32 {
		ctx := tensor.NewContext(tensor.UseGenerator(tensor.NewGenerator(1)))
		defer ctx.Close()
		var y *tensor.Tensor
		if ck {
			y = checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor { return model.Forward(xs[0]) }, ctx.Bind(x))
		} else {
			y = model.Forward(ctx.Bind(x))
		}
		y.Square().Mean().Backward()
		return model.Params()[0].Grad().Float32s()
	}
	plain, ck := step(build(), false), step(build(), true)
	fmt.Println("same gradients, dropout included:", slices.Equal(plain, ck))
	// Output:
	// same gradients, dropout included: true
}

// checkpoint_sequential: 9 layers in 3 segments; the first two are recomputed in
// backward, the last is not.
func ExampleSequential() {
	layers := []nn.Module{}
	for i := range 3 {
		layers = append(layers, nn.NewLinear(8, 8, nn.Seeded(uint64(i))), nn.NewTanh(), nn.NewDropout(0.1))
	}
	x := tensor.Ones(tensor.Shape{2, 8})
	defer x.Release()
	ctx := tensor.NewContext()
	defer ctx.Close()
	y := checkpoint.Sequential(layers, 0, ctx.Bind(x))
	y.Sum().Backward()
	fmt.Println(y.Shape(), layers[0].Params()[0].Grad().Shape())
	// Output:
	// [2 8] [8 8]
}
