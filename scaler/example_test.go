package scaler_test

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/scaler"
	"github.com/gamp-ml/gamp/tensor"
)

// A training loop whose third step overflows: the step is skipped (the weights do not
// move), the scale backs off, and after GrowthInterval clean steps it grows again.
func Example() {
	w := &nn.Param{Name: "w", T: tensor.FromSlice([]float32{0.5, -0.25}, nil, tensor.WithGrad())}
	opt, err := optim.NewSGD([]*nn.Param{w}, optim.SGDConfig{LR: 0.1})
	if err != nil {
		panic(err)
	}
	sc, err := scaler.New(scaler.Config{GrowthInterval: 2}) // the rest: PyTorch's defaults
	if err != nil {
		panic(err)
	}
	for step := 1; step <= 5; step++ {
		ctx := tensor.NewContext()
		x := ctx.Bind(w.T)
		sc.Scale(x.Mul(x).Sum()).Backward()
		ctx.Close()
		if step == 3 {
			w.T.Grad().FillInPlace(math.Inf(1)) // what an fp16 overflow leaves behind
		}
		stepped := sc.Step(opt)
		if err := sc.Update(); err != nil {
			panic(err)
		}
		opt.ZeroGrad()
		fmt.Printf("step %d: stepped %-5v scale %-6g w %.4f\n", step, stepped, sc.ScaleValue(), w.T.Float64s())
	}
	fmt.Println("skipped:", sc.SkippedSteps())
	// Output:
	// step 1: stepped true  scale 65536  w [0.4000 -0.2000]
	// step 2: stepped true  scale 131072 w [0.3200 -0.1600]
	// step 3: stepped false scale 65536  w [0.3200 -0.1600]
	// step 4: stepped true  scale 65536  w [0.2560 -0.1280]
	// step 5: stepped true  scale 131072 w [0.2048 -0.1024]
	// skipped: 1
}

// With bfloat16 no loss scaling is needed (scaler.Needed is false): NewFor returns a
// disabled scaler that passes the loss through and always steps. New scales anyway.
func ExampleNewFor() {
	sc, err := scaler.NewFor(tensor.BFloat16, scaler.Config{})
	if err != nil {
		panic(err)
	}
	loss := tensor.Scalar(0.75)
	fmt.Println(sc.Enabled(), sc.ScaleValue(), sc.Scale(loss) == loss)
	forced, err := scaler.New(scaler.Config{})
	if err != nil {
		panic(err)
	}
	fmt.Println(forced.Enabled(), forced.ScaleValue())
	// Output:
	// false 1 true
	// true 65536
}

// The zero Config is PyTorch's defaults; turning the scaler off is explicit.
func ExampleConfig() {
	var cfg scaler.Config
	sc, err := scaler.New(cfg)
	if err != nil {
		panic(err)
	}
	c := sc.Config()
	fmt.Println(sc.Enabled(), c.InitScale, c.GrowthFactor, c.BackoffFactor, c.GrowthInterval)
	off, err := scaler.New(scaler.Config{Disabled: true})
	if err != nil {
		panic(err)
	}
	fmt.Println(off.Enabled(), off.ScaleValue())
	fmt.Println(scaler.Needed(tensor.Float16), scaler.Needed(tensor.BFloat16))
	// Output:
	// true 65536 2 0.5 2000
	// false 1
	// true false
}
