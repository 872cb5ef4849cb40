package cuda

import (
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/kernels"
)

var _ backend.Attention = (*Backend)(nil)

// attnOperands checks the [BH, T, D] operands of a fused attention call and returns
// their dtype and the dtype of the log-sum-exp rows (float32; float64 with float64
// operands).
func (b *Backend) attnOperands(op string, a backend.AttentionArgs, ss ...backend.Storage) (dt, lt backend.DType) {
	if a.BH < 0 || a.T < 0 || a.D < 0 {
		b.fail(op, "negative geometry BH=%d T=%d D=%d", a.BH, a.T, a.D)
	}
	if a.Layout != nil {
		b.fail(op, "operands with a Layout are not supported (the backend does not implement backend.AttentionLayouts); pass contiguous [BH, T, D]")
	}
	n := a.BH * a.T * a.D
	for i, s := range ss {
		st := b.st(s)
		b.checkFloat(op, "operand", st)
		if i == 0 {
			dt = st.dt
		} else if st.dt != dt {
			b.fail(op, "operands must share one dtype, got %s and %s", dt, st.dt)
		}
		b.checkLen(op, "operand", st, n)
	}
	lt = backend.Float32
	if dt == backend.Float64 {
		lt = backend.Float64
	}
	l := b.st(a.LSE)
	if l.dt != lt {
		b.fail(op, "LSE is %s, want %s for %s operands", l.dt, lt, dt)
	}
	b.checkLen(op, "LSE", l, a.BH*a.T)
	return dt, lt
}

func causalFlag(c bool) int32 {
	if c {
		return 1
	}
	return 0
}

// Attention implements backend.Attention: one thread per query row (kernels/attention.cu).
func (b *Backend) Attention(a backend.AttentionArgs) {
	dt, _ := b.attnOperands("Attention", a, a.Q, a.K, a.V, a.O)
	rows := int64(a.BH * a.T)
	b.launch(kernels.Name("attention_forward", dt), rows, b.ptr(a.O), b.ptr(a.LSE), b.ptr(a.Q), b.ptr(a.K), b.ptr(a.V),
		int64(a.BH), int64(a.T), int64(a.D), a.Scale, causalFlag(a.Causal))
}

// AttentionBackward implements backend.Attention: dQ per query row (saving each row's
// dO·O in a scratch buffer), then dK and dV per key row.
func (b *Backend) AttentionBackward(a backend.AttentionArgs) {
	dt, lt := b.attnOperands("AttentionBackward", a, a.Q, a.K, a.V, a.O, a.GO, a.GQ, a.GK, a.GV)
	rows := int64(a.BH * a.T)
	if rows == 0 {
		return
	}
	delta := b.temp(lt, a.BH*a.T)
	defer b.Free(delta)
	geom := []any{int64(a.BH), int64(a.T), int64(a.D), a.Scale, causalFlag(a.Causal)}
	b.launch(kernels.Name("attention_backward_dq", dt), rows, append([]any{b.ptr(a.GQ), delta.blk.addr, b.ptr(a.GO),
		b.ptr(a.Q), b.ptr(a.K), b.ptr(a.V), b.ptr(a.O), b.ptr(a.LSE)}, geom...)...)
	b.launch(kernels.Name("attention_backward_dkv", dt), rows, append([]any{b.ptr(a.GK), b.ptr(a.GV), b.ptr(a.GO),
		b.ptr(a.Q), b.ptr(a.K), b.ptr(a.V), b.ptr(a.LSE), delta.blk.addr}, geom...)...)
}

// fusedAttentionMinScores is the number of attention scores (heads × T²) from which
// the fused kernels run instead of the composed path. They give each query (and key)
// row one thread that reads whole rows of K and V from global memory: correct on any
// grid, but slower than the composed path's cuBLAS products and softmax at every shape
// measured on an H100 (ampbench's transformer 9.9 against 5.9 ms a step in FP32, 8.8
// against 6.1 in FP16; transformer-large 69.7 against 16.7 and 68.6 against 11.5;
// BERT-base shapes 2073 against 297 and 2019 against 183; docs/decisions.md). What they
// still save is memory: the composed path keeps the float32 scores and probabilities,
// so attention whose scores alone would fill 1 GiB runs fused.
var fusedAttentionMinScores int64 = 1 << 28

// FusedAttention implements backend.AttentionChooser: the composed path unless one
// attention's scores number fusedAttentionMinScores or more.
func (b *Backend) FusedAttention(dt backend.DType, bh, t, d int) bool {
	return int64(bh)*int64(t)*int64(t) >= fusedAttentionMinScores
}
