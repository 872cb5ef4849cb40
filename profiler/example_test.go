package profiler_test

import (
	"fmt"

	"github.com/gamp-ml/gamp/profiler"
	"github.com/gamp-ml/gamp/tensor"
)

// Profile one step; the records say which ops ran, in which pass and dtype, in the
// order they finished (the times, in p.Summary() and the trace, vary from run to run).
func Example() {
	w := tensor.FromSlice([]float32{1, 2, 3, 4, 5, 6}, tensor.Shape{2, 3}, tensor.WithGrad())
	defer w.Release()
	defer w.ZeroGrad()

	p := profiler.New()
	ctx := p.Context()
	x := tensor.Ones(tensor.Shape{4, 3}, tensor.WithContext(ctx))
	tensor.Linear(x, w, nil).Relu().Sum().Backward()
	ctx.Close()

	for _, r := range p.Records() {
		fmt.Println(r.Pass, r.Op, r.DType(), r.InShapes[0])
	}
	fmt.Println(len(p.Rows(false)), "rows in the summary")
	// Output:
	// forward linear float32 [4 3]
	// forward relu float32 [4 2]
	// forward sum float32 [4 2]
	// backward sum float32 []
	// backward relu float32 [4 2]
	// backward linear float32 [4 2]
	// 6 rows in the summary
}
