package cuda

import (
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/kernels"
)

// optimKernel names the sgd/adam kernel: suffixed by the half copy's dtype when one is
// written, else by the masters' dtype.
func (b *Backend) optimKernel(op, family string, n int, w, g, half backend.Storage, state ...backend.Storage) (string, uint64) {
	ws, gs := b.st(w), b.st(g)
	if ws.dt != backend.Float32 && ws.dt != backend.Float64 {
		b.fail(op, "master weights are %s, want float32 or float64", ws.dt)
	}
	b.checkLen(op, "weights", ws, n)
	b.checkLen(op, "gradient", gs, n)
	for _, s := range append([]backend.Storage{g}, state...) {
		if s != nil {
			c := b.st(s)
			if c.dt != ws.dt {
				b.fail(op, "state is %s, weights %s", c.dt, ws.dt)
			}
			b.checkLen(op, "state", c, n)
		}
	}
	if half == nil {
		return kernels.Name(family, ws.dt), 0
	}
	h := b.st(half)
	if !h.dt.IsHalf() || ws.dt != backend.Float32 {
		b.fail(op, "the half copy is %s (weights %s), want float16/bfloat16 of float32 masters", h.dt, ws.dt)
	}
	b.checkLen(op, "half copy", h, n)
	return kernels.Name(family, h.dt), h.blk.addr
}

// SGDStep implements backend.FusedOptimizer: one kernel per parameter.
func (b *Backend) SGDStep(a backend.SGDArgs) {
	if a.Momentum != 0 && a.Buf == nil {
		b.fail("SGDStep", "momentum without a buffer")
	}
	name, hp := b.optimKernel("SGDStep", "sgd", a.N, a.W, a.G, a.Half, a.Buf)
	var flags int32
	if a.Maximize {
		flags |= kernels.FlagMaximize
	}
	if a.Nesterov {
		flags |= kernels.FlagNesterov
	}
	if a.First {
		flags |= kernels.FlagFirst
	}
	args := withHalf([]any{b.ptr(a.W), b.ptr(a.G), b.ptr(a.Buf)}, a.Half, hp)
	b.launch(name, int64(a.N), append(args, int64(a.N),
		a.LR, a.Momentum, a.Dampening, a.WeightDecay, flags, uint64(0))...)
}

// AdamStep implements backend.FusedOptimizer.
func (b *Backend) AdamStep(a backend.AdamArgs) {
	if a.M == nil || a.V == nil || (a.AMSGrad && a.VMax == nil) {
		b.fail("AdamStep", "missing moment storage")
	}
	name, hp := b.optimKernel("AdamStep", "adam", a.N, a.W, a.G, a.Half, a.M, a.V, a.VMax)
	var flags int32
	if a.Decoupled {
		flags |= kernels.FlagDecoupled
	}
	if a.AMSGrad {
		flags |= kernels.FlagAMSGrad
	}
	if a.Maximize {
		flags |= kernels.FlagMaximize
	}
	stepSize, bc2Sqrt := kernels.AdamScalars(a.LR, a.Beta1, a.Beta2, a.Step)
	args := withHalf([]any{b.ptr(a.W), b.ptr(a.G), b.ptr(a.M), b.ptr(a.V), b.ptr(a.VMax)}, a.Half, hp)
	b.launch(name, int64(a.N), append(args, int64(a.N),
		a.LR, a.Beta1, a.Beta2, a.Eps, a.WeightDecay, stepSize, bc2Sqrt, flags, uint64(0))...)
}

// withHalf appends the half copy's pointer to the state pointers when there is one:
// only the half kernels (sgd_f16, adam_bf16, …) take the p parameter.
func withHalf(args []any, half backend.Storage, p uint64) []any {
	if half == nil {
		return args
	}
	return append(args, p)
}
