package checkpoint_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/checkpoint"
	"github.com/gamp-ml/gamp/tensor"
)

type memObs struct{ base int64 }

func (o *memObs) Begin(c *tensor.Context, op *tensor.Op) {}
func (o *memObs) Forward(c *tensor.Context, op *tensor.Op, in []*tensor.Tensor, out *tensor.Tensor) any {
	b := backend.MustGet(memDev)
	fmt.Printf("F %-16s alloc %5.1f peak %5.1f\n", op.Name, float64(b.MemoryStats().Allocated-o.base)/(1<<20), float64(b.MemoryStats().PeakAllocated-o.base)/(1<<20))
	return nil
}
func (o *memObs) Backward(op *tensor.Op, tag any, g *tensor.Tensor, gi []*tensor.Tensor, took time.Duration) {
	b := backend.MustGet(memDev)
	fmt.Printf("B %-16s alloc %5.1f peak %5.1f\n", op.Name, float64(b.MemoryStats().Allocated-o.base)/(1<<20), float64(b.MemoryStats().PeakAllocated-o.base)/(1<<20))
}

func TestDebugMem(t *testing.T) {
	blocks := mlp16(memDev)
	x := tensor.Randn(tensor.Shape{mlpBatch, mlpWidth}, tensor.WithDevice(memDev), tensor.WithContext(nil))
	step(blocks, x, 0)
	b := backend.MustGet(memDev)
	o := &memObs{base: b.MemoryStats().Allocated}
	b.ResetPeak()
	ctx := tensor.NewContext(tensor.UseObserver(o))
	h := checkpoint.Sequential(blocks, 0, ctx.Bind(x))
	h.Square().Mean().Backward()
	ctx.Close()
}
