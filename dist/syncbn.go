package dist

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// SyncBatchNorm is a BatchNorm whose training statistics are those of the global
// batch — every process's share together — rather than of this process's share
// (torch.nn.SyncBatchNorm). In the forward it all-reduces the per-channel sums, sums of
// squares and counts; in the backward it all-reduces their gradients, so the result
// and the gradients equal BatchNorm's on the whole batch in one process. Evaluation,
// and a world of one process, use BatchNorm as is. It computes in BatchNorm's dtype
// (float32 under mixed precision) and shares the wrapped layer's parameters and
// buffers, names included.
//
// Every process must run the same SyncBatchNorm layers in the same order: each
// training forward is a collective.
type SyncBatchNorm struct {
	*nn.BatchNorm
	pg ProcessGroup
}

// NewSyncBatchNorm wraps bn (a BatchNorm, BatchNorm1d's or BatchNorm2d's embedded one).
func NewSyncBatchNorm(bn *nn.BatchNorm, pg ProcessGroup) *SyncBatchNorm {
	return &SyncBatchNorm{BatchNorm: bn, pg: pg}
}

// ConvertSyncBatchNorm returns m with every BatchNorm layer in it replaced by a
// SyncBatchNorm around it (torch.nn.SyncBatchNorm.convert_sync_batchnorm). It looks
// into nn.Sequential containers, which it rebuilds around the same layers (parameter
// names do not change); a BatchNorm inside another kind of module is left alone.
// Convert before NewDDP and before building the optimizer is not required (the
// parameters stay the same), but m must be replaced by the result.
func ConvertSyncBatchNorm(m nn.Module, pg ProcessGroup) nn.Module {
	switch l := m.(type) {
	case *nn.BatchNorm:
		return NewSyncBatchNorm(l, pg)
	case *nn.BatchNorm1d:
		return NewSyncBatchNorm(&l.BatchNorm, pg)
	case *nn.BatchNorm2d:
		return NewSyncBatchNorm(&l.BatchNorm, pg)
	case *nn.Sequential:
		layers := make([]nn.Module, l.Len())
		changed := false
		for i := range layers {
			layers[i] = ConvertSyncBatchNorm(l.At(i), pg)
			changed = changed || layers[i] != l.At(i)
		}
		if !changed {
			return m
		}
		s := nn.NewSequential(layers...)
		s.SetTraining(l.Training())
		return s
	}
	return m
}

// Forward normalises x [N, C, ...], in training with the global batch's statistics.
func (b *SyncBatchNorm) Forward(x *tensor.Tensor) *tensor.Tensor {
	batchStats := b.Training() || b.RunningMean == nil
	if !batchStats || b.pg.Size() == 1 {
		return b.BatchNorm.Forward(x)
	}
	if x.Dim() < 2 || x.Size(1) != b.Features || !x.DType().IsFloat() {
		return b.BatchNorm.Forward(x) // BatchNorm reports the misuse
	}
	in := x
	if dt := b.ComputeDType(); x.DType() != dt {
		in = x.Cast(dt)
	}
	c := x.Size(1)
	dims := []int{0}
	for d := 2; d < in.Dim(); d++ {
		dims = append(dims, d)
	}
	count := float64(in.Numel() / c)
	n := tensor.Full(tensor.Shape{1}, count, tensor.WithDevice(in.Device()))
	if err := b.pg.AllReduce(n, Sum); err != nil {
		panic(fmt.Errorf("dist: SyncBatchNorm: all-reducing the batch size: %w", err))
	}
	total := n.Item()
	n.Release()

	local := tensor.Concat([]*tensor.Tensor{in.Sum(dims...), in.Square().Sum(dims...)}, 0)
	stats := b.allReduceSum(local)
	mean := stats.Narrow(0, 0, c).MulScalar(1 / total)
	variance := stats.Narrow(0, c, c).MulScalar(1/total).Sub(mean.Square()).Clamp(0, math.Inf(1))

	bshape := make([]int, in.Dim())
	for i := range bshape {
		bshape[i] = 1
	}
	bshape[1] = c
	invstd := variance.AddScalar(b.Eps).Rsqrt()
	y := in.Sub(mean.Reshape(bshape...)).Mul(invstd.Reshape(bshape...))
	if b.Weight != nil {
		y = y.Mul(b.Weight.T.Reshape(bshape...)).Add(b.Bias.T.Reshape(bshape...))
	}
	if b.RunningMean != nil {
		b.updateRunning(mean, variance, total)
	}
	if y.DType() != x.DType() {
		y = y.Cast(x.DType())
	}
	return y
}

// updateRunning moves the running statistics toward the batch's, with the unbiased
// variance, as BatchNorm does.
func (b *SyncBatchNorm) updateRunning(mean, variance *tensor.Tensor, n float64) {
	ctx := tensor.NewContext(tensor.NoGradMode())
	defer ctx.Close()
	m := b.Momentum
	unbiased := n / max(n-1, 1)
	rm, rv := b.RunningMean.T, b.RunningVar.T
	bm := ctx.Bind(mean.Detach()).MulScalar(m)
	bv := ctx.Bind(variance.Detach()).MulScalar(m * unbiased)
	rm.MulScalarInPlace(1 - m).AddInPlace(bm)
	rv.MulScalarInPlace(1 - m).AddInPlace(bv)
	if t := b.NumBatchesTracked; t != nil {
		t.T.AddInPlace(tensor.Ones(tensor.Shape{}, tensor.WithDType(t.T.DType()), tensor.WithDevice(t.T.Device()), tensor.WithContext(ctx)))
	}
}

// allReduceSum is a differentiable all-reduce: the forward sums every process's t, the
// backward sums every process's gradient (the gradient of a sum over processes with
// respect to one process's term is the sum of the processes' gradients).
func (b *SyncBatchNorm) allReduceSum(t *tensor.Tensor) *tensor.Tensor {
	return tensor.Custom("sync_batch_norm_all_reduce", []*tensor.Tensor{t},
		func(c *tensor.Context, in []*tensor.Tensor) *tensor.Tensor {
			out := in[0].MulScalar(1)
			if err := b.pg.AllReduce(out, Sum); err != nil {
				panic(fmt.Errorf("dist: SyncBatchNorm: all-reducing statistics: %w", err))
			}
			return out
		},
		func(c *tensor.Context, g *tensor.Tensor) []*tensor.Tensor {
			out := g.MulScalar(1)
			if err := b.pg.AllReduce(out, Sum); err != nil {
				panic(fmt.Errorf("dist: SyncBatchNorm: all-reducing gradients: %w", err))
			}
			return []*tensor.Tensor{out}
		})
}
