package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func selfAttentionGradCases() []gradCase {
	att := func(heads int, o AttentionOptions) func(xs []*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return SelfAttention(xs[0], heads, o) }
	}
	return []gradCase{
		{op: "self_attention", name: "causal", in: []gradInput{gN(2, 5, 12)}, f: att(2, AttentionOptions{Causal: true})},
		{op: "self_attention", name: "full one head", in: []gradInput{gN(1, 4, 6)}, f: att(1, AttentionOptions{Scale: 0.7})},
		// A strided input: the packed projection read through a transpose.
		{op: "self_attention", name: "strided", in: []gradInput{gN(3, 2, 9)}, f: func(xs []*Tensor) *Tensor {
			return SelfAttention(xs[0].Transpose(0, 1), 3, AttentionOptions{})
		}},
		// Features not contiguous: the kernel's Layout cannot place them, so the op
		// copies the heads out (the path of backends without backend.AttentionLayouts).
		{op: "self_attention", name: "features strided", in: []gradInput{gN(2, 9, 4)}, f: func(xs []*Tensor) *Tensor {
			return SelfAttention(xs[0].Transpose(1, 2), 3, AttentionOptions{Causal: true})
		}},
	}
}

func TestGradCheckSelfAttention(t *testing.T) { runGradCases(t, selfAttentionGradCases()) }

// selfAttnRun runs f on a fresh leaf qkv of dtype dt and returns the output and the
// gradient of Σ output·w, as float64 bits-preserving values.
func selfAttnRun(f func(x *Tensor) *Tensor, dt DType, qkv []float64, w []float64, shape, oshape Shape) (out, grad []float64) {
	c := NewContext()
	defer c.Close()
	x := FromSlice(qkv, shape, WithContext(c), WithDType(dt), WithGrad())
	y := f(x)
	y.Mul(FromSlice(w, oshape, WithContext(c), WithDType(dt))).Cast(Float64).Sum().Backward()
	return y.Float64s(), x.Grad().Float64s()
}

// The packed op gives the bits of ScaledDotProductAttention on the split views, forward
// and backward, in every floating dtype (the same kernel sees the same operands; only
// the copies around it differ).
func TestSelfAttentionMatchesSplitViews(t *testing.T) {
	for _, dt := range []DType{Float32, BFloat16, Float16, Float64} {
		for _, causal := range []bool{true, false} {
			for _, sz := range []struct{ n, t, heads, dh int }{{2, 7, 3, 5}, {1, 70, 2, 16}, {3, 1, 1, 4}} {
				t.Run(fmt.Sprintf("%s/causal=%v/%v", dt, causal, sz), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(sz.n*sz.t), 9))
					d := sz.heads * sz.dh
					shape, oshape := Shape{sz.n, sz.t, 3 * d}, Shape{sz.n, sz.t, d}
					qkv := attnRound(randSlice(r, shape.Numel(), 1), dt)
					w := attnRound(randSlice(r, oshape.Numel(), 1), dt)
					o := AttentionOptions{Causal: causal}
					want, wantG := selfAttnRun(func(x *Tensor) *Tensor { return selfAttentionComposed(x, sz.heads, o) }, dt, qkv, w, shape, oshape)
					// The same values as a dense tensor, batch-strided (read in place
					// through the kernel's Layout) and feature-strided (copied into heads).
					for name, lay := range map[string]func(x *Tensor) *Tensor{
						"dense":           func(x *Tensor) *Tensor { return x },
						"batch-strided":   func(x *Tensor) *Tensor { return x.Transpose(0, 1).Contiguous().Transpose(0, 1) },
						"feature-strided": func(x *Tensor) *Tensor { return x.Transpose(1, 2).Contiguous().Transpose(1, 2) },
					} {
						got, gotG := selfAttnRun(func(x *Tensor) *Tensor { return SelfAttention(lay(x), sz.heads, o) }, dt, qkv, w, shape, oshape)
						requireSameBits(t, name+" output", want, got)
						requireSameBits(t, name+" grad", wantG, gotG)
					}
				})
			}
		}
	}
}

// requireSameBits compares two float64 slices bit for bit, except that a zero of either
// sign matches a zero: the composed path sums the three parts' gradients into zeros
// (-0 + 0 = +0), the packed op stores each as the kernel wrote it.
func requireSameBits(t *testing.T, what string, want, got []float64) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		if want[i] == 0 && got[i] == 0 {
			continue
		}
		if math.Float64bits(want[i]) != math.Float64bits(got[i]) {
			t.Fatalf("%s[%d]: got %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestSelfAttentionMisuse(t *testing.T) {
	c := NewContext()
	defer c.Close()
	x := Zeros(Shape{2, 3, 12}, WithContext(c))
	require.Panics(t, func() { SelfAttention(x, 5, AttentionOptions{}) })                // 12 is not 3·5·k
	require.Panics(t, func() { SelfAttention(x.Reshape(6, 12), 2, AttentionOptions{}) }) // not [N, T, 3D]
	require.Panics(t, func() { SelfAttention(x, 2, AttentionOptions{Scale: -1}) })
	require.Panics(t, func() { SelfAttention(x.Cast(Int64), 2, AttentionOptions{}) })
}
