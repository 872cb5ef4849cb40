package amp_test

import (
	"fmt"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/data"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
)

// A complete mixed-precision training loop: an MLP on a synthetic 10-class problem,
// autocast O1 with float16 and dynamic loss scaling.
func Example() {
	train := data.Synthetic(2048, 10, tensor.Shape{784}, 1)
	init := nn.Seeded(1)
	model := nn.NewSequential(nn.NewLinear(784, 128, init), nn.NewReLU(), nn.NewLinear(128, 10, init))
	opt, _ := optim.NewAdamW(model.Params(), optim.AdamWConfig{LR: 1e-3})
	loss := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }
	tr, _ := amp.NewTrainer(model, opt, loss, tensor.CPU, amp.Config{Level: amp.O1, Low: tensor.Float16})
	loader, _ := data.NewLoader(train, data.LoaderOptions{BatchSize: 128, Shuffle: true, Seed: 1})
	var first, last amp.Result
	for epoch := 0; epoch < 2; epoch++ {
		it := loader.Epoch(epoch)
		for it.Next() {
			x, y := it.Batch().Tensors()
			res, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
			x.Release()
			y.Release()
			if err != nil {
				panic(err)
			}
			if res.Step == 1 {
				first = res
			}
			last = res
		}
	}
	fmt.Println("steps:", last.Step)
	fmt.Println("loss halved:", last.Loss < first.Loss/2)
	fmt.Println("scale:", last.Scale)
	// Output:
	// steps: 32
	// loss halved: true
	// scale: 65536
}
