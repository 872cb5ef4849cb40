package nn_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// The package's happy path: build an MLP, run a step in a Context, backward.
func Example() {
	model := nn.NewSequential(nn.NewLinear(784, 128, nn.Seeded(1)), nn.NewReLU(), nn.NewLinear(128, 10, nn.Seeded(2)))
	x := tensor.Randn(tensor.Shape{64, 784})
	labels := tensor.Zeros(tensor.Shape{64}, tensor.WithDType(tensor.Int64))

	ctx := tensor.NewContext()
	logits := model.Forward(ctx.Bind(x))
	nn.CrossEntropyLoss{}.Loss(logits, ctx.Bind(labels)).Backward()
	ctx.Close()

	for _, p := range model.Params() {
		fmt.Println(p.Name, p.T.Shape(), p.Grad().Shape())
	}
	fmt.Println(nn.NumParams(model), "parameters")
	// Output:
	// 0.weight [128 784] [128 784]
	// 0.bias [128] [128]
	// 2.weight [10 128] [10 128]
	// 2.bias [10] [10]
	// 101770 parameters
}

// Saving and loading a model's state dict as a safetensors file.
func ExampleLoadState() {
	dir, _ := os.MkdirTemp("", "gamp")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")

	trained := nn.NewSequential(nn.NewConv2d(1, 4, nn.Pair(3), tensor.ConvOptions{Padding: nn.Pair(1)}, nn.Seeded(1)), nn.NewBatchNorm2d(4))
	if err := nn.SaveState(trained, path); err != nil {
		fmt.Println(err)
		return
	}
	fresh := nn.NewSequential(nn.NewConv2d(1, 4, nn.Pair(3), tensor.ConvOptions{Padding: nn.Pair(1)}, nn.Seeded(2)), nn.NewBatchNorm2d(4))
	nn.Cast(fresh, tensor.Float16) // O2: the conv in half, BatchNorm kept in float32
	fmt.Println(nn.LoadState(fresh, path, true))
	for _, p := range append(fresh.Params(), fresh.Buffers()...) {
		fmt.Println(p.Name, p.T.DType())
	}
	// Output:
	// <nil>
	// 0.weight float16
	// 0.bias float16
	// 1.weight float32
	// 1.bias float32
	// 1.running_mean float32
	// 1.running_var float32
	// 1.num_batches_tracked int64
}
