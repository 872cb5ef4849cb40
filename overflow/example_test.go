package overflow_test

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/overflow"
	"github.com/gamp-ml/gamp/scaler"
	"github.com/gamp-ml/gamp/tensor"
)

// A NaN injected into a gradient at step 1: the scaler skips that step, and the report
// names the op where the NaN first appeared.
func ExampleWatcher_InjectGrad() {
	model := nn.NewSequential(nn.NewLinear(4, 8, nn.Seeded(1)), nn.NewReLU(), nn.NewLinear(8, 3, nn.Seeded(2)))
	w := overflow.Watch(model)
	defer w.Close()
	w.InjectGrad(model.Params()[2], []int{1}, math.NaN()) // "2.weight"

	opt, _ := optim.NewSGD(model.Params(), optim.SGDConfig{LR: 0.1})
	loss := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }
	sc := scaler.DefaultConfig()
	sc.InitScale = 1024 // at 2^16 this toy overflows at step 0 on its own
	cfg := amp.Config{Level: amp.O1, Low: tensor.Float16, Scaler: sc}
	tr, _ := amp.NewTrainer(w.Model(), opt, loss, tensor.CPU, cfg) // w.Model() runs the hooks
	x := tensor.FromSlice([]float32{1, 2, 3, 4, -1, 0, 1, 0}, tensor.Shape{2, 4})
	y := tensor.FromSlice([]int64{0, 2}, nil)
	for range 3 {
		r, _ := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
		w.Record(r)
	}
	rep := w.Report()
	fmt.Println("skipped:", rep.SkippedSteps)
	fmt.Println("first non-finite:", rep.FirstNonFinite)
	// Output:
	// skipped: [1]
	// first non-finite: 2 (Linear) accumulate_grad(weight) (backward) at step 1
}
