package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func indexGradCases() []gradCase {
	un := func(f func(x *Tensor) *Tensor) func(xs []*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return f(xs[0]) }
	}
	cat := func(dim int) func(xs []*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return Concat(xs, dim) }
	}
	stack := func(dim int) func(xs []*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return Stack(xs, dim) }
	}
	idx := func(v ...int64) gradInput { return gConst(func() *Tensor { return FromSlice(v, nil) }) }
	mask := func(v []bool, shape ...int) gradInput {
		return gConst(func() *Tensor { return FromSlice(v, Shape(shape)) })
	}
	return []gradCase{
		{op: "embedding", name: "2-d indices with repeats", in: []gradInput{gConst(func() *Tensor {
			return FromSlice([]int64{0, 4, 2, 4, 4, 1}, Shape{2, 3})
		}), gN(5, 3)}, f: func(xs []*Tensor) *Tensor { return Embedding(xs[0], xs[1]) }},
		{op: "embedding", name: "int32 indices", in: []gradInput{gConst(func() *Tensor {
			return FromSlice([]int32{3, 0, 3}, nil)
		}), gN(4, 2)}, f: func(xs []*Tensor) *Tensor { return Embedding(xs[0], xs[1]) }},
		{op: "index_select", name: "dim 0 with repeats", in: []gradInput{gN(4, 3), idx(3, 0, 3, 1)}, f: func(xs []*Tensor) *Tensor {
			return IndexSelect(xs[0], 0, xs[1])
		}},
		{op: "index_select", name: "middle dim", in: []gradInput{gN(2, 4, 3), idx(2, 2, 0)}, f: func(xs []*Tensor) *Tensor {
			return xs[0].IndexSelect(1, xs[1])
		}},
		{op: "index_select", name: "last dim of a view", in: []gradInput{gN(3, 4), idx(1, 0)}, f: func(xs []*Tensor) *Tensor {
			return xs[0].T().IndexSelect(-1, xs[1])
		}},
		{op: "where", name: "broadcast", in: []gradInput{mask([]bool{true, false, true, false, false, true}, 2, 1, 3), gN(2, 4, 3), gN(3)},
			f: func(xs []*Tensor) *Tensor { return Where(xs[0], xs[1], xs[2]) }},
		{op: "where", name: "same shape", in: []gradInput{mask([]bool{true, false, true, true}, 2, 2), gN(2, 2), gN(2, 2)},
			f: func(xs []*Tensor) *Tensor { return Where(xs[0], xs[1], xs[2]) }},
		{op: "masked_fill", name: "broadcast mask", in: []gradInput{gN(2, 3), mask([]bool{false, true, false}, 1, 3)},
			f: func(xs []*Tensor) *Tensor { return xs[0].MaskedFill(xs[1], -7) }},
		{op: "cat", name: "dim 0", in: []gradInput{gN(2, 3), gN(1, 3), gN(3, 3)}, f: cat(0)},
		{op: "cat", name: "dim 1", in: []gradInput{gN(2, 3), gN(2, 1)}, f: cat(1)},
		{op: "cat", name: "last of 3-d", in: []gradInput{gN(2, 2, 3), gN(2, 2, 2)}, f: cat(-1)},
		{op: "cat", name: "transposed input", in: []gradInput{gN(3, 2), gN(2, 2)}, f: func(xs []*Tensor) *Tensor {
			return Concat([]*Tensor{xs[0].T(), xs[1]}, 1)
		}},
		{op: "stack", name: "dim 0", in: []gradInput{gN(2, 3), gN(2, 3), gN(2, 3)}, f: stack(0)},
		{op: "stack", name: "new last dim", in: []gradInput{gN(2, 3), gN(2, 3)}, f: stack(2)},
		{op: "stack", name: "dim -2", in: []gradInput{gN(2, 3), gN(2, 3)}, f: stack(-2)},
		{op: "slice", name: "step 2", in: []gradInput{gN(3, 7)}, f: un(func(x *Tensor) *Tensor { return x.Slice(1, 1, 6, 2) })},
		{op: "slice", name: "negative start", in: []gradInput{gN(5, 2)}, f: un(func(x *Tensor) *Tensor { return x.Slice(0, -3, math.MaxInt, 1) })},
		{op: "slice", name: "of a transposed view", in: []gradInput{gN(4, 5)}, f: un(func(x *Tensor) *Tensor { return x.T().Slice(1, 0, 4, 3) })},
		{op: "slice", name: "narrow", in: []gradInput{gN(3, 5)}, f: un(func(x *Tensor) *Tensor { return x.Narrow(-1, 1, 3) })},
		{op: "slice", name: "select", in: []gradInput{gN(3, 4)}, f: un(func(x *Tensor) *Tensor { return x.Select(1, -1) })},
		{op: "max", name: "dim 1", in: []gradInput{gN(3, 4)}, f: un(func(x *Tensor) *Tensor { return x.Max(1) })},
		{op: "max", name: "keepdim 0 of 3-d", in: []gradInput{gN(3, 2, 4)}, f: un(func(x *Tensor) *Tensor { return x.MaxKeep(0) })},
		{op: "max", name: "0-d", in: []gradInput{gN()}, f: un(func(x *Tensor) *Tensor { return x.Max(0) })},
		{op: "min", name: "last dim", in: []gradInput{gN(2, 3, 4)}, f: un(func(x *Tensor) *Tensor { return x.Min(-1) })},
		{op: "min", name: "middle keepdim", in: []gradInput{gN(2, 3, 4)}, f: un(func(x *Tensor) *Tensor { return x.MinKeep(1) })},
	}
}

func TestGradCheckIndexOps(t *testing.T) { runGradCases(t, indexGradCases()) }

func TestEmbeddingForward(t *testing.T) {
	c := NewContext()
	defer c.Close()
	w := Arange(0, 12, 1, WithDType(Float64), WithContext(c)).Reshape(4, 3).Detach().SetRequiresGrad(true)
	idx := FromSlice([]int64{0, 3, 3, 1}, Shape{2, 2}, WithContext(c))
	y := Embedding(idx, w)
	require.Equal(t, Shape{2, 2, 3}, y.Shape())
	require.Equal(t, []float64{0, 1, 2, 9, 10, 11, 9, 10, 11, 3, 4, 5}, y.Float64s())
	y.Sum().Backward()
	require.Equal(t, []float64{1, 1, 1, 1, 1, 1, 0, 0, 0, 2, 2, 2}, w.Grad().Float64s(), "repeated rows add up")

	e := requireOpError(t, func() { Embedding(FromSlice([]int32{1, 4}, nil, WithContext(c)), w) })
	require.Equal(t, "embedding", e.Op)
	require.Contains(t, e.Error(), "index 4")
	requireOpError(t, func() { Embedding(FromSlice([]float32{1}, nil, WithContext(c)), w) })
	requireOpError(t, func() { Embedding(idx, w.Reshape(12)) })
}

func TestIndexSelectForward(t *testing.T) {
	c := NewContext()
	defer c.Close()
	x := Arange(0, 12, 1, WithContext(c)).Reshape(3, 4)
	i := FromSlice([]int64{3, 0, 3}, nil, WithContext(c))
	y := x.IndexSelect(1, i)
	require.Equal(t, Shape{3, 3}, y.Shape())
	require.Equal(t, []float32{3, 0, 3, 7, 4, 7, 11, 8, 11}, y.Float32s())
	require.Equal(t, []float32{8, 9, 10, 11}, x.IndexSelect(0, FromSlice([]int32{2}, nil, WithContext(c))).Float32s())
	e := requireOpError(t, func() { x.IndexSelect(0, i) })
	require.Equal(t, "index_select", e.Op)
	require.Contains(t, e.Error(), "index 3")
	requireOpError(t, func() { x.IndexSelect(0, FromSlice([]int64{0, 1}, Shape{1, 2}, WithContext(c))) })
	requireOpError(t, func() { x.IndexSelect(2, i) })
}

func TestWhereAndMaskedFill(t *testing.T) {
	c := NewContext()
	defer c.Close()
	cond := FromSlice([]bool{true, false, true}, nil, WithContext(c))
	a := FromSlice([]float32{1, 2, 3, 4, 5, 6}, Shape{2, 3}, WithContext(c))
	b := FromSlice([]float32{-1}, Shape{1}, WithContext(c))
	require.Equal(t, []float32{1, -1, 3, 4, -1, 6}, Where(cond, a, b).Float32s())
	// Mixed dtypes compute in the wider one.
	w := Where(cond, a.Cast(Float16), b)
	require.Equal(t, Float32, w.DType())
	require.Equal(t, []float32{1, -1, 3, 4, -1, 6}, w.Float32s())
	e := requireOpError(t, func() { Where(a, a, b) })
	require.Equal(t, "where", e.Op)
	require.Contains(t, e.Error(), "Bool")
	requireOpError(t, func() { Where(cond, a, Ones(Shape{2}, WithContext(c))) })

	m := Gt(a, Full(Shape{}, 3.5, WithContext(c)))
	require.Equal(t, []float32{1, 2, 3, 0, 0, 0}, a.MaskedFill(m, 0).Float32s())
	// The attention-mask idiom: -inf before softmax gives exact zeros.
	causal := FromSlice([]bool{false, true, true, false, false, true, false, false, false}, Shape{3, 3}, WithContext(c))
	s := Zeros(Shape{3, 3}, WithContext(c)).MaskedFill(causal, math.Inf(-1)).Softmax(-1)
	require.Equal(t, []float32{1, 0, 0, 0.5, 0.5, 0, 1. / 3, 1. / 3, 1. / 3}, s.Float32s())
	requireOpError(t, func() { a.MaskedFill(FromSlice([]bool{true, false}, nil, WithContext(c)), 0) })
	requireOpError(t, func() { a.MaskedFill(a, 0) })
	requireOpError(t, func() { a.MaskedFill(FromSlice([]bool{true}, Shape{1, 1, 1}, WithContext(c)), 0) })
}

func TestConcatAndStack(t *testing.T) {
	c := NewContext()
	defer c.Close()
	a := FromSlice([]float32{1, 2, 3, 4}, Shape{2, 2}, WithContext(c))
	b := FromSlice([]float32{5, 6}, Shape{1, 2}, WithContext(c))
	require.Equal(t, []float32{1, 2, 3, 4, 5, 6}, Concat([]*Tensor{a, b}, 0).Float32s())
	y := Concat([]*Tensor{a, a.T()}, 1)
	require.Equal(t, Shape{2, 4}, y.Shape())
	require.Equal(t, []float32{1, 2, 1, 3, 3, 4, 2, 4}, y.Float32s())
	s := Stack([]*Tensor{a, a.MulScalar(10)}, -1)
	require.Equal(t, Shape{2, 2, 2}, s.Shape())
	require.Equal(t, []float32{1, 10, 2, 20, 3, 30, 4, 40}, s.Float32s())
	require.Equal(t, Shape{2, 2, 2}, Stack([]*Tensor{a, a}, 0).Shape())
	require.Equal(t, Shape{3}, Stack([]*Tensor{Scalar(1, WithContext(c)), Scalar(2, WithContext(c)), Scalar(3, WithContext(c))}, 0).Shape())

	// Promotion to the widest dtype.
	for _, tc := range []struct {
		a, b, want DType
	}{{Float16, Float32, Float32}, {Float16, BFloat16, Float32}, {Int32, Float16, Float16}, {Int32, Int64, Int64}, {Int64, Int64, Int64}} {
		out := Concat([]*Tensor{a.Cast(tc.a), b.Cast(tc.b)}, 0)
		require.Equal(t, tc.want, out.DType(), "%s with %s", tc.a, tc.b)
		require.Equal(t, []float64{1, 2, 3, 4, 5, 6}, out.Float64s())
	}
	// The gradient of a promoted input comes back in its own dtype.
	h := Ones(Shape{2}, WithDType(Float16), WithGrad(), WithContext(c))
	Concat([]*Tensor{h, Ones(Shape{3}, WithContext(c))}, 0).Sum().Backward()
	require.Equal(t, Float16, h.Grad().DType())
	require.Equal(t, []float64{1, 1}, h.Grad().Float64s())

	require.Equal(t, "cat", requireOpError(t, func() { Concat(nil, 0) }).Op)
	requireOpError(t, func() { Concat([]*Tensor{a, b}, 1) })
	requireOpError(t, func() { Concat([]*Tensor{a, b.Reshape(2)}, 0) })
	requireOpError(t, func() { Concat([]*Tensor{Scalar(1), Scalar(2)}, 0) })
	require.Equal(t, "stack", requireOpError(t, func() { Stack([]*Tensor{a, b}, 0) }).Op)
	requireOpError(t, func() { Stack([]*Tensor{a, a}, 3) })
	requireOpError(t, func() { Concat([]*Tensor{a, Ones(Shape{1, 2}, WithDevice(CPUDevice(1)))}, 0) })
}

// pySlice is Python's list slicing of [0, n).
func pySlice(n, start, end, step int) []float64 {
	norm := func(i int) int {
		if i < 0 {
			i = max(i+n, 0)
		}
		return min(i, n)
	}
	out := []float64{}
	for i := norm(start); i < norm(end); i += step {
		out = append(out, float64(i))
	}
	return out
}

func TestSliceAndNarrow(t *testing.T) {
	c := NewContext()
	defer c.Close()
	x := Arange(0, 10, 1, WithDType(Float64), WithContext(c))
	for _, s := range [][3]int{{2, 8, 3}, {-3, math.MaxInt, 1}, {-100, 3, 1}, {5, 2, 1}, {0, 10, 4}, {8, -1, 1}, {10, 20, 1}, {-1, -1, 1}, {3, 4, 7}} {
		y := x.Slice(0, s[0], s[1], s[2])
		require.Equal(t, pySlice(10, s[0], s[1], s[2]), y.Float64s(), "x[%d:%d:%d]", s[0], s[1], s[2])
	}
	// A slice is a view: it sees writes to its base.
	m := Arange(0, 12, 1, WithContext(c)).Reshape(3, 4).Detach()
	v := m.Slice(1, 1, 4, 2)
	require.Equal(t, Shape{3, 2}, v.Shape())
	require.Equal(t, []float32{1, 3, 5, 7, 9, 11}, v.Float32s())
	m.AddInPlace(Ones(Shape{}, WithContext(c)))
	require.Equal(t, []float32{2, 4, 6, 8, 10, 12}, v.Float32s())
	require.Equal(t, []float32{10, 12}, v.Slice(0, 2, 3, 1).Reshape(2).Float32s(), "slice of a slice")
	require.Equal(t, []float32{5, 6, 7, 8}, m.Narrow(0, -2, 1).Reshape(4).Float32s())
	require.Equal(t, []float32{4, 8, 12}, m.Select(1, 3).Float32s())
	require.Equal(t, Shape{4}, m.Select(0, 0).Shape())

	e := requireOpError(t, func() { x.Slice(0, 0, 5, 0) })
	require.Equal(t, "slice", e.Op)
	require.Equal(t, "narrow", requireOpError(t, func() { x.Narrow(0, 8, 3) }).Op)
	requireOpError(t, func() { x.Narrow(0, -11, 1) })
	requireOpError(t, func() { x.Slice(1, 0, 1, 1) })

	// The gradient of a strided slice lands on the sliced positions only.
	w := Zeros(Shape{6}, WithDType(Float64), WithGrad(), WithContext(c))
	w.Slice(0, 1, 6, 2).MulScalar(2).Sum().Backward()
	require.Equal(t, []float64{0, 2, 0, 2, 0, 2}, w.Grad().Float64s())
}

func TestMaxMinArgMax(t *testing.T) {
	c := NewContext()
	defer c.Close()
	v := randVals(41, 2*3*4, 1)
	x := FromSlice(v, Shape{2, 3, 4}, WithContext(c))
	for d, split := range [][3]int{{1, 2, 12}, {2, 3, 4}, {6, 4, 1}} {
		outer, n, inner := split[0], split[1], split[2]
		wantMax := make([]float64, outer*inner)
		wantMin := make([]float64, outer*inner)
		wantArg := make([]int64, outer*inner)
		wantArgMin := make([]int64, outer*inner)
		for o := 0; o < outer; o++ {
			for i := 0; i < inner; i++ {
				k := o*inner + i
				wantMax[k], wantMin[k] = math.Inf(-1), math.Inf(1)
				for j := 0; j < n; j++ {
					e := v[(o*n+j)*inner+i]
					if e > wantMax[k] {
						wantMax[k], wantArg[k] = e, int64(j)
					}
					if e < wantMin[k] {
						wantMin[k], wantArgMin[k] = e, int64(j)
					}
				}
			}
		}
		require.Equal(t, wantMax, x.Max(d).Float64s())
		require.Equal(t, wantMin, x.Min(d).Float64s())
		am := x.ArgMax(d)
		require.Equal(t, Int64, am.DType())
		require.Equal(t, wantArg, am.Int64s())
		require.Equal(t, wantArgMin, x.ArgMin(d).Int64s())
		keep := x.MaxKeep(d)
		require.Equal(t, 3, keep.Dim())
		require.Equal(t, 1, keep.Size(d))
		require.Equal(t, reducedShape(x.Shape(), []int{d}, false), x.ArgMax(d).Shape())
	}

	// Ties: the first position wins and takes the whole gradient, as PyTorch's max(dim).
	w := FromSlice([]float64{1, 3, 3, 2, 0, 0, -1, 0}, Shape{2, 4}, WithGrad(), WithContext(c))
	require.Equal(t, []int64{1, 0}, w.ArgMax(1).Int64s())
	require.Equal(t, []int64{0, 2}, w.ArgMin(1).Int64s())
	w.Max(1).Sum().Backward()
	require.Equal(t, []float64{0, 1, 0, 0, 1, 0, 0, 0}, w.Grad().Float64s())
	w.ZeroGrad()
	w.MinKeep(-1).Sum().Backward()
	require.Equal(t, []float64{1, 0, 0, 0, 0, 0, 1, 0}, w.Grad().Float64s())

	// A NaN is the extreme, and an infinite gradient stays where it belongs.
	nan := FromSlice([]float64{1, math.NaN(), 5}, nil, WithGrad(), WithContext(c))
	require.True(t, math.IsNaN(nan.Max(0).Item()))
	require.Equal(t, int64(1), nan.ArgMax(0).Int64s()[0])
	nan.Max(0).Backward(GradOutput(Scalar(math.Inf(1), WithDType(Float64), WithContext(c))))
	g := nan.Grad().Float64s()
	require.Equal(t, 0.0, g[0])
	require.True(t, math.IsInf(g[1], 1))
	require.Equal(t, 0.0, g[2])

	// Integers work; Bool and empty dims do not.
	i := FromSlice([]int64{4, -2, 9, 7}, Shape{2, 2}, WithContext(c))
	require.Equal(t, []int64{4, 9}, i.Max(1).Int64s())
	require.Equal(t, Int64, i.Min(0).DType())
	require.Equal(t, "argmax", requireOpError(t, func() { FromSlice([]bool{true}, nil).ArgMax(0) }).Op)
	requireOpError(t, func() { Zeros(Shape{2, 0}, WithContext(c)).Max(1) })
	requireOpError(t, func() { x.Max(3) })

	h := FromSlice(v, Shape{2, 3, 4}, WithDType(BFloat16), WithContext(c))
	require.Equal(t, BFloat16, h.Max(1).DType())
	require.Equal(t, x.ArgMax(2).Int64s(), FromSlice(roundTo(v, BFloat16), Shape{2, 3, 4}, WithContext(c)).ArgMax(2).Int64s())

	for _, name := range []string{"argmax", "argmin"} {
		op, ok := LookupOp(name)
		require.True(t, ok)
		require.False(t, op.Differentiable())
	}
	op, _ := LookupOp("cat")
	require.Equal(t, Promote, op.Category())
	op, _ = LookupOp("softmax")
	require.Equal(t, FP32, op.Category())
	op, _ = LookupOp("embedding")
	require.Equal(t, Passthrough, op.Category())
}
