package parallel_test

import (
	"fmt"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/data"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/parallel"
	"github.com/gamp-ml/gamp/tensor"
)

// Data parallelism over two logical CPU devices with bf16 autocast: amp.Trainer drives
// the DataParallel like any model, and every batch is split between the devices.
func Example() {
	devs := []tensor.Device{tensor.CPUDevice(22), tensor.CPUDevice(23)}
	model := models.MLP(16, []int{32}, 4, nn.Seeded(1))
	parallel.Place(model, devs[0])
	dp, _ := parallel.NewDataParallel(model, devs, parallel.Options{})
	opt, _ := optim.NewAdamW(dp.Params(), optim.AdamWConfig{LR: 1e-2})
	loss := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }
	tr, _ := amp.NewTrainer(dp, opt, loss, devs[0], amp.Config{Level: amp.O1, Low: tensor.BFloat16})

	train := data.Synthetic(256, 4, tensor.Shape{16}, 1)
	loader, _ := data.NewLoader(train, data.LoaderOptions{BatchSize: 64, Seed: 1})
	var first, last amp.Result
	for epoch := range 5 {
		it := loader.Epoch(epoch)
		for it.Next() {
			x, y := it.Batch().Tensors(tensor.WithDevice(devs[0]))
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
	// Output:
	// steps: 20
	// loss halved: true
}

// A model cut in two stages on two devices, run on GPipe's schedule with four
// micro-batches.
func ExamplePipeline() {
	a, b := tensor.CPUDevice(22), tensor.CPUDevice(23)
	init := nn.Seeded(1)
	s0 := nn.NewSequential(nn.NewLinear(16, 32, init), nn.NewReLU())
	s1 := nn.NewSequential(nn.NewLinear(32, 4, init))
	parallel.Place(s0, a)
	parallel.Place(s1, b)
	p, _ := parallel.NewPipeline([]nn.Module{s0, s1}, []tensor.Device{a, b}, parallel.PipelineOptions{MicroBatches: 4})

	x := tensor.Randn(tensor.Shape{8, 16}, tensor.WithDevice(a))
	defer x.Release()
	ctx := tensor.NewContext()
	out := p.Forward(ctx.Bind(x))
	out.Sum().Backward()
	fmt.Println(out.Shape(), "on", out.Device())
	ctx.Close()
	st := p.Stats()
	fmt.Printf("%d stages, %d micro-batches, bubble %.2f\n", st.Stages, st.MicroBatches, st.Bubble)
	// Output:
	// [8 4] on cpu:23
	// 2 stages, 4 micro-batches, bubble 0.20
}
