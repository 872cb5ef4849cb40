package optim_test

import (
	"fmt"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
)

// Minimize Σw² with SGD and momentum: each step runs a forward and a backward in a
// Context of its own, then updates and clears the gradient.
func Example() {
	w := &nn.Param{Name: "w", T: tensor.FromSlice([]float32{1, -2}, nil, tensor.WithGrad())}
	opt, err := optim.NewSGD([]*nn.Param{w}, optim.SGDConfig{LR: 0.1, Momentum: 0.9})
	if err != nil {
		panic(err)
	}
	for range 3 {
		ctx := tensor.NewContext()
		x := ctx.Bind(w.T)
		x.Mul(x).Sum().Backward() // the gradient is 2w
		ctx.Close()
		opt.Step()
		opt.ZeroGrad()
		fmt.Printf("step %d: w = %.4f\n", opt.StepCount(), w.T.Float64s())
	}
	// Output:
	// step 1: w = [0.8000 -1.6000]
	// step 2: w = [0.4600 -0.9200]
	// step 3: w = [0.0620 -0.1240]
}

// A float16 parameter trained with updates too small for float16: the FP32 master
// accumulates them and the parameter follows once they add up to a half ULP.
func Example_masterWeights() {
	w := &nn.Param{Name: "w", T: tensor.FromSlice([]float32{1}, nil, tensor.WithDType(tensor.Float16), tensor.WithGrad())}
	opt, err := optim.NewSGD([]*nn.Param{w}, optim.SGDConfig{LR: 1e-4})
	if err != nil {
		panic(err)
	}
	for range 10 {
		w.T.SetGrad(tensor.Ones(tensor.Shape{1}, tensor.WithDType(tensor.Float16)))
		opt.Step()
	}
	fmt.Printf("master %.4f, float16 parameter %.6f\n", opt.MasterParams()[0].Item(), w.T.Item())
	// Output:
	// master 0.9990, float16 parameter 0.999023
}

func ExampleClipGradNorm() {
	g := tensor.FromSlice([]float32{3, 4}, nil)
	total := optim.ClipGradNorm([]*tensor.Tensor{g}, 1, 2)
	fmt.Printf("norm %.1f, clipped %.4f\n", total, g.Float64s())
	// Output:
	// norm 5.0, clipped [0.6000 0.8000]
}

// A schedule counts the steps that ran: a step the scaler skipped does not advance it.
func ExampleScheduler() {
	w := &nn.Param{Name: "w", T: tensor.FromSlice([]float32{1}, nil, tensor.WithGrad())}
	opt, _ := optim.NewAdamW([]*nn.Param{w}, optim.DefaultAdamW())
	sched, err := optim.NewScheduler(opt, optim.LinearWarmup{Steps: 2, Then: optim.CosineAnnealing{TMax: 2}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("first update: lr %.4f\n", opt.LR())
	for _, stepped := range []bool{true, false, true, true, true} {
		sched.Step(stepped)
		fmt.Printf("stepped %-5v → lr %.4f\n", stepped, opt.LR())
	}
	// Output:
	// first update: lr 0.0005
	// stepped true  → lr 0.0010
	// stepped false → lr 0.0010
	// stepped true  → lr 0.0010
	// stepped true  → lr 0.0005
	// stepped true  → lr 0.0000
}
