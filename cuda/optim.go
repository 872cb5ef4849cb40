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
	var flags int32
	if a.Rounding != backend.RoundMaster {
		name := b.halfWeightsKernel("SGDStep", "sgd_hw", a.N, a.W, a.G, a.Half, a.HalfWeights, a.Buf)
		if a.Nesterov {
			flags |= kernels.FlagNesterov
		}
		if a.Maximize {
			flags |= kernels.FlagMaximize
		}
		if a.First {
			flags |= kernels.FlagFirst
		}
		b.launch(name, int64(a.N), b.ptr(a.Half), b.ptr(a.Lo), b.ptr(a.G), b.ptr(a.Buf), int64(a.N),
			a.LR, a.Momentum, a.Dampening, a.WeightDecay, flags, int32(a.Rounding), a.RNG.Seed, a.RNG.Offset, uint64(0))
		return
	}
	name, hp := b.optimKernel("SGDStep", "sgd", a.N, a.W, a.G, a.Half, a.Buf)
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
	if a.Rounding != backend.RoundMaster {
		name := b.halfWeightsKernel("AdamStep", "adam_hw", a.N, a.W, a.G, a.Half, a.HalfWeights, a.M, a.V, a.VMax)
		b.launch(name, int64(a.N), b.ptr(a.Half), b.ptr(a.Lo), b.ptr(a.G), b.ptr(a.M), b.ptr(a.V), b.ptr(a.VMax),
			int64(a.N), a.LR, a.Beta1, a.Beta2, a.Eps, a.WeightDecay, stepSize, bc2Sqrt, flags,
			int32(a.Rounding), a.RNG.Seed, a.RNG.Offset, uint64(0))
		return
	}
	name, hp := b.optimKernel("AdamStep", "adam", a.N, a.W, a.G, a.Half, a.M, a.V, a.VMax)
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

// halfWeightsKernel checks an update of half weights without an FP32 master
// (backend.HalfWeights) and names its kernel (sgd_hw_bf16, adam_hw_f16, …).
func (b *Backend) halfWeightsKernel(op, family string, n int, w, g, half backend.Storage, hw backend.HalfWeights, state ...backend.Storage) string {
	if w != nil {
		b.fail(op, "a half-weights update takes no FP32 master W")
	}
	if half == nil {
		b.fail(op, "a half-weights update needs the half weights")
	}
	h := b.st(half)
	b.checkLen(op, "half weights", h, n)
	switch {
	case h.dt == backend.BFloat16 && hw.Rounding <= backend.RoundSplit:
	case h.dt == backend.Float16 && hw.Rounding != backend.RoundSplit:
	default:
		b.fail(op, "rounding %d needs bfloat16 weights (float16 rounds to nearest or stochastically), got %s", hw.Rounding, h.dt)
	}
	for _, s := range append([]backend.Storage{g}, state...) {
		if s != nil {
			c := b.st(s)
			if c.dt != backend.Float32 {
				b.fail(op, "state is %s beside half weights, want float32", c.dt)
			}
			b.checkLen(op, "state", c, n)
		}
	}
	if hw.Rounding == backend.RoundSplit {
		if hw.Lo == nil {
			b.fail(op, "the 16+16 split needs the low halves Lo")
		}
		l := b.st(hw.Lo)
		if !l.dt.IsHalf() {
			b.fail(op, "the low halves are %s, want a 16-bit storage", l.dt)
		}
		b.checkLen(op, "low halves", l, n)
	}
	return kernels.Name(family, h.dt)
}
