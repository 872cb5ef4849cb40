package memory_test

import (
	"fmt"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/memory"
	"github.com/gamp-ml/gamp/tensor"
)

// The counters of one device: a tensor's storage is allocated, then cached when the
// tensor is released, then given back by EmptyCache.
func Example() {
	dev := tensor.CPUDevice(30)
	x := tensor.Zeros(tensor.Shape{256, 256}, tensor.WithDevice(dev)) // 256 KiB of float32
	a, _ := memory.Allocated(dev)
	fmt.Println("allocated:", backend.FormatBytes(a))
	x.Release()
	a, _ = memory.Allocated(dev)
	r, _ := memory.Reserved(dev)
	fmt.Println("after release:", backend.FormatBytes(a), "allocated,", backend.FormatBytes(r), "reserved")
	_ = memory.EmptyCache(dev)
	r, _ = memory.Reserved(dev)
	peak, _ := memory.MaxAllocated(dev)
	fmt.Println("after EmptyCache:", backend.FormatBytes(r), "reserved; peak", backend.FormatBytes(peak))
	_, err := memory.Allocated(tensor.CUDA(0))
	fmt.Println(err != nil)
	// Output:
	// allocated: 256.00 KiB
	// after release: 0 B allocated, 256.00 KiB reserved
	// after EmptyCache: 0 B reserved; peak 256.00 KiB
	// true
}

// A step that needs 2 KiB per sample under a 1 MiB cap: 4096, 2048 and 1024 run out
// of memory, 512 fits.
func ExampleFindExecutableBatchSize() {
	dev := tensor.CPUDevice(31)
	_ = memory.SetLimit(dev, 1<<20)
	defer memory.SetLimit(dev, 0)
	batch, err := memory.FindExecutableBatchSize(4096, func(batch int) error {
		ctx := tensor.NewContext()
		defer ctx.Close() // a failed attempt gives its memory back here
		x := tensor.Zeros(tensor.Shape{batch, 256}, tensor.WithDevice(dev), tensor.WithContext(ctx))
		x.Relu()
		return nil
	})
	fmt.Println(batch, err)
	// Output: 512 <nil>
}

// Keeping a running total as a tensor keeps every step's graph alive.
func ExampleHistoryDetector() {
	w := tensor.FromSlice([]float32{1, 2}, nil, tensor.WithGrad())
	defer w.Release()
	ctx := tensor.NewContext()
	defer ctx.Close()
	det := memory.NewHistoryDetector(memory.HistoryOptions{})
	total := tensor.Scalar(0, tensor.WithContext(ctx))
	for step := range 5 {
		loss := ctx.Bind(w).Square().Sum()
		total = tensor.Add(total, loss) // the bug: use a float64 and loss.Item()
		if warn := det.Observe(step, total); warn != nil {
			fmt.Println("step", warn.Step, "graph sizes", warn.Sizes)
		}
	}
	// Output: step 2 graph sizes [4 8 12]
}
