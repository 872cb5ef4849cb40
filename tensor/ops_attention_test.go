package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/stretchr/testify/require"
)

func attentionGradCases() []gradCase {
	att := func(o AttentionOptions) func(xs []*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return ScaledDotProductAttention(xs[0], xs[1], xs[2], o) }
	}
	return []gradCase{
		{op: "scaled_dot_product_attention", name: "causal", in: []gradInput{gN(2, 2, 5, 3), gN(2, 2, 5, 3), gN(2, 2, 5, 3)},
			f: att(AttentionOptions{Causal: true})},
		{op: "scaled_dot_product_attention", name: "full", in: []gradInput{gN(3, 4, 2), gN(3, 4, 2), gN(3, 4, 2)},
			f: att(AttentionOptions{Scale: 0.7})},
		// 70 rows cross the kernels' 64-row block boundary in queries and keys.
		{op: "scaled_dot_product_attention", name: "causal two blocks", in: []gradInput{gN(1, 70, 2), gN(1, 70, 2), gN(1, 70, 2)},
			f: att(AttentionOptions{Causal: true})},
	}
}

func TestGradCheckAttention(t *testing.T) { runGradCases(t, attentionGradCases()) }

// attnRun runs f on fresh copies of q, k, v (as dt leaves) and returns the output and
// the three gradients of Σ output·w, all as float64.
func attnRun(f func(q, k, v *Tensor) *Tensor, dt DType, qkv [3][]float64, w []float64, shape Shape) (out []float64, grads [3][]float64) {
	c := NewContext()
	defer c.Close()
	var in [3]*Tensor
	for i := range in {
		in[i] = FromSlice(qkv[i], shape, WithContext(c), WithDType(dt), WithGrad())
	}
	y := f(in[0], in[1], in[2])
	y.Mul(FromSlice(w, shape, WithContext(c), WithDType(dt))).Cast(Float64).Sum().Backward()
	out = y.Float64s()
	for i := range in {
		grads[i] = in[i].Grad().Float64s()
	}
	return out, grads
}

func randSlice(r *rand.Rand, n int, s float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = r.NormFloat64() * s
	}
	return v
}

// roundTo rounds v to dt's precision, so float64 references start from the same inputs.
func attnRound(v []float64, dt DType) []float64 {
	return FromSlice(v, Shape{len(v)}, WithDType(dt)).Float64s()
}

func attnClose(t *testing.T, what string, want, got []float64, rtol, atol float64) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		require.False(t, math.IsNaN(got[i]), "%s[%d] is NaN", what, i)
		if d := math.Abs(got[i] - want[i]); d > atol+rtol*math.Abs(want[i]) {
			t.Fatalf("%s[%d]: got %.8g, want %.8g (diff %.3g)", what, i, got[i], want[i], d)
		}
	}
}

// The fused op against the composed ops (matmul, mask, softmax, matmul): forward and
// the three gradients, FP32 and BF16 (storage rounded, float32 math), causal and not,
// with T crossing the block size.
func TestAttentionMatchesComposed(t *testing.T) {
	fused := func(o AttentionOptions) func(q, k, v *Tensor) *Tensor {
		return func(q, k, v *Tensor) *Tensor { return ScaledDotProductAttention(q, k, v, o) }
	}
	composed := func(o AttentionOptions) func(q, k, v *Tensor) *Tensor {
		return func(q, k, v *Tensor) *Tensor { return ComposedAttention(q, k, v, o) }
	}
	for _, dt := range []DType{Float32, BFloat16, Float16} {
		for _, causal := range []bool{true, false} {
			for _, shape := range []Shape{{2, 3, 7, 5}, {1, 2, 100, 16}, {1, 130, 8}} {
				t.Run(fmt.Sprintf("%s/causal=%v/%v", dt, causal, shape), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(shape.Numel()), 7))
					n := shape.Numel()
					var qkv [3][]float64
					for i := range qkv {
						qkv[i] = attnRound(randSlice(r, n, 1), dt)
					}
					w := attnRound(randSlice(r, n, 1), dt)
					o := AttentionOptions{Causal: causal}
					// The exact answer from the same rounded inputs, in float64.
					want, wantG := attnRun(composed(o), Float64, qkv, w, shape)
					got, gotG := attnRun(fused(o), dt, qkv, w, shape)
					rtol, atol := 1e-5, 1e-5
					if dt != Float32 {
						// One rounding of the output to 8 (bf16) or 11 (fp16) bits, and
						// of the incoming gradient; the math is float32.
						rtol, atol = 2e-2, 2e-2
					}
					attnClose(t, "output", want, got, rtol, atol)
					for i, name := range []string{"dq", "dk", "dv"} {
						attnClose(t, name, wantG[i], gotG[i], rtol, atol)
					}
					if dt == Float32 {
						// The composed ops in float32 agree with the fused op as closely.
						cg, cgG := attnRun(composed(o), dt, qkv, w, shape)
						attnClose(t, "composed output", cg, got, 1e-5, 1e-5)
						for i := range cgG {
							attnClose(t, "composed grad", cgG[i], gotG[i], 1e-5, 1e-5)
						}
					}
				})
			}
		}
	}
}

// Masked keys must not leak in: a future key with a huge score changes nothing, its
// probability is an exact zero (no NaN from -Inf arithmetic), and it gets no gradient
// from earlier queries.
func TestAttentionCausalMaskIsExact(t *testing.T) {
	const T, D = 70, 4
	r := rand.New(rand.NewPCG(3, 3))
	for _, dt := range []DType{Float32, BFloat16, Float64} {
		q, k, v := randSlice(r, T*D, 1), randSlice(r, T*D, 1), randSlice(r, T*D, 1)
		for i := range q {
			q[i] = math.Abs(q[i]) + 1
		}
		run := func(k []float64) ([]float64, []float64, []float64) {
			c := NewContext()
			defer c.Close()
			qt := FromSlice(q, Shape{1, T, D}, WithContext(c), WithDType(dt), WithGrad())
			kt := FromSlice(k, Shape{1, T, D}, WithContext(c), WithDType(dt), WithGrad())
			vt := FromSlice(v, Shape{1, T, D}, WithContext(c), WithDType(dt), WithGrad())
			y := ScaledDotProductAttention(qt, kt, vt, AttentionOptions{Causal: true})
			// Only query 0 enters the loss: every other key and value gets no gradient.
			y.Slice(1, 0, 1, 1).Cast(Float64).Sum().Backward()
			return y.Float64s(), kt.Grad().Float64s(), vt.Grad().Float64s()
		}
		y0, _, _ := run(k)
		big := append([]float64(nil), k...)
		for i := D; i < len(big); i++ {
			big[i] = 1e4 // scores of ~1e4·D on every future key
		}
		y1, gk, gv := run(big)
		require.Equal(t, y0[:D], y1[:D], "%s: future keys changed query 0's output", dt)
		// Query 0 sees key 0 alone: its output is v_0 exactly.
		for c := 0; c < D; c++ {
			require.Equal(t, attnRound(v[c:c+1], dt)[0], y1[c], dt)
		}
		for i := D; i < T*D; i++ {
			require.Zero(t, gk[i], "%s: dk[%d]", dt, i)
			require.Zero(t, gv[i], "%s: dv[%d]", dt, i)
		}
		for i, x := range y1 {
			require.False(t, math.IsNaN(x) || math.IsInf(x, 0), "%s: output %d is %g", dt, i, x)
		}
	}
}

// Under autocast the op runs in the low dtype, as PyTorch's SDPA.
func TestAttentionAutocastsToLowPrecision(t *testing.T) {
	op, ok := LookupOp("scaled_dot_product_attention")
	require.True(t, ok)
	require.Equal(t, LowerPrecision, op.Category())
}

func TestAttentionMisuse(t *testing.T) {
	a := Zeros(Shape{2, 4, 3})
	defer a.Release()
	b := Zeros(Shape{2, 4, 2})
	defer b.Release()
	i := Zeros(Shape{2, 4, 3}, WithDType(Int64))
	defer i.Release()
	requireOpError(t, func() { ScaledDotProductAttention(a, b, a, AttentionOptions{}) })
	requireOpError(t, func() { ScaledDotProductAttention(i, i, i, AttentionOptions{}) })
	requireOpError(t, func() { ScaledDotProductAttention(a, a, a, AttentionOptions{Scale: -1}) })
}

// attnPeak is the allocator's peak above the starting point over one forward and
// backward of attention on [1, 2, T, 16] inputs. It runs on a CPU device of its own:
// on the shared one, the GC cleanups of other tests' tensors free memory while it
// measures (they run on their own goroutine, after runtime.GC returns), which lowered
// the peak by up to 4× under -race.
func attnPeak(t *testing.T, T int, f func(q, k, v *Tensor, o AttentionOptions) *Tensor) int64 {
	dev := CPUDevice(63)
	b := backend.MustGet(dev)
	c := NewContext()
	defer c.Close()
	r := rand.New(rand.NewPCG(1, 1))
	shape := Shape{1, 2, T, 16}
	var in [3]*Tensor
	for i := range in {
		in[i] = FromSlice(randSlice(r, shape.Numel(), 1), shape, WithContext(c), WithDevice(dev), WithDType(Float32), WithGrad())
	}
	runtime.GC() // this device holds no other test's tensors; collect our own earlier ones
	base := b.MemoryStats().Allocated
	b.ResetPeak()
	f(in[0], in[1], in[2], AttentionOptions{Causal: true}).Sum().Backward()
	return b.MemoryStats().PeakAllocated - base
}

// The fused op's memory grows linearly with the context, the composed ops'
// quadratically (the [T, T] scores, probabilities and their gradients), measured by the
// CPU allocator at T = 256, 512 and 1024.
func TestAttentionMemoryGrowsLinearly(t *testing.T) {
	var fused, composed []int64
	for _, T := range []int{256, 512, 1024} {
		fused = append(fused, attnPeak(t, T, ScaledDotProductAttention))
		composed = append(composed, attnPeak(t, T, ComposedAttention))
	}
	t.Logf("peak bytes at T=256/512/1024: fused %v, composed %v", fused, composed)
	// Quadrupling T: ×4 for linear growth, ×16 for quadratic.
	fr := float64(fused[2]) / float64(fused[0])
	cr := float64(composed[2]) / float64(composed[0])
	require.True(t, fr > 3 && fr < 5, "fused peak grew ×%.2f from T=256 to 1024; linear growth is ×4", fr)
	require.Greater(t, cr, 12.0, "composed peak grew ×%.2f from T=256 to 1024; quadratic growth is ×16", cr)
	require.Less(t, fused[2]*10, composed[2], "at T=1024 the fused op should need a small fraction of the composed ops' memory")
}

// chooserBackend is the CPU backend with a fused-attention chooser that says yes up to
// maxT rows per head and records what it was asked.
type chooserBackend struct {
	backend.Backend
	maxT  int
	asked [][4]int
}

func (c *chooserBackend) Attention(a backend.AttentionArgs) {
	c.Backend.(backend.Attention).Attention(a)
}

func (c *chooserBackend) AttentionBackward(a backend.AttentionArgs) {
	c.Backend.(backend.Attention).AttentionBackward(a)
}

func (c *chooserBackend) FusedAttention(dt backend.DType, bh, t, d int) bool {
	c.asked = append(c.asked, [4]int{int(dt), bh, t, d})
	return t <= c.maxT
}

// A backend.AttentionChooser decides per shape whether the fused kernel runs; a
// backend.Attention without one runs every shape fused, and a backend without the
// kernel none.
func TestFusedAttentionAsksTheChooser(t *testing.T) {
	cpu, err := backend.Get(CPU)
	require.NoError(t, err)
	ch := &chooserBackend{Backend: cpu, maxT: 64}
	f, ok := fusedAttention(ch, Float16, 12, 64, 32)
	require.True(t, ok)
	require.Same(t, ch, f.(*chooserBackend))
	_, ok = fusedAttention(ch, BFloat16, 12, 65, 32)
	require.False(t, ok)
	require.Equal(t, [][4]int{{int(Float16), 12, 64, 32}, {int(BFloat16), 12, 65, 32}}, ch.asked)
	_, ok = fusedAttention(cpu, Float32, 1, 1<<20, 1<<10)
	require.True(t, ok, "the CPU backend has the kernel and no chooser: always fused")
	_, ok = fusedAttention(struct{ backend.Backend }{cpu}, Float32, 1, 1, 1)
	require.False(t, ok, "a backend without the kernel")
}
