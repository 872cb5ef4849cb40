package tensor

import (
	"errors"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// --- the gradcheck table shared by ops_core_test.go, ops_nn_test.go and ops_index_test.go

// gradInput builds one input of a gradcheck case from r: a float64 leaf that requires
// grad, or a constant (labels, masks) that does not.
type gradInput func(r *rand.Rand) *Tensor

// gradCase is one gradcheck row: op is the registry name the row covers (the test
// checks that f really records it), name tells the rows of one op apart.
type gradCase struct {
	op, name string
	in       []gradInput
	f        func(xs []*Tensor) *Tensor
	opts     GradCheckOptions
}

// gFrom is a float64 leaf requiring grad whose elements are drawn by gen.
func gFrom(gen func(r *rand.Rand) float64, shape ...int) gradInput {
	return func(r *rand.Rand) *Tensor {
		s := Shape(shape)
		v := make([]float64, s.Numel())
		for i := range v {
			v[i] = gen(r)
		}
		return FromSlice(v, s, WithGrad())
	}
}

// gN draws standard normal elements.
func gN(shape ...int) gradInput {
	return gFrom(func(r *rand.Rand) float64 { return r.NormFloat64() }, shape...)
}

// gU draws uniform elements in [lo, hi).
func gU(lo, hi float64, shape ...int) gradInput {
	return gFrom(func(r *rand.Rand) float64 { return lo + (hi-lo)*r.Float64() }, shape...)
}

// gAway draws elements with |x| in [gap, gap+1) and a random sign: away from the kink
// of relu, abs and 1/x at 0.
func gAway(gap float64, shape ...int) gradInput {
	return gFrom(func(r *rand.Rand) float64 {
		v := gap + r.Float64()
		if r.IntN(2) == 0 {
			return -v
		}
		return v
	}, shape...)
}

// gGrid draws elements in [2k+lo, 2k+hi) for a random k in [-2, 2]: two inputs drawn
// with disjoint [lo, hi) never tie (maximum/minimum).
func gGrid(lo, hi float64, shape ...int) gradInput {
	return gFrom(func(r *rand.Rand) float64 { return float64(2*(r.IntN(5)-2)) + lo + (hi-lo)*r.Float64() }, shape...)
}

// gConst is a constant input (no gradient), made fresh for every case.
func gConst(mk func() *Tensor) gradInput { return func(*rand.Rand) *Tensor { return mk() } }

func caseSeed(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// recordsOp reports whether the graph behind y has a node of the named op.
func recordsOp(y *Tensor, op string) bool {
	for _, t := range topoOrder(y) {
		if t.node.op.Name() == op {
			return true
		}
	}
	return false
}

func runGradCases(t *testing.T, cases []gradCase) {
	t.Helper()
	for _, gc := range cases {
		t.Run(gc.op+"/"+gc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(caseSeed(gc.op+"/"+gc.name), 1))
			xs := make([]*Tensor, len(gc.in))
			for i, mk := range gc.in {
				xs[i] = mk(r)
			}
			defer func() {
				for _, x := range xs {
					x.Release()
				}
			}()
			// The row must exercise the op it claims to cover.
			c := NewContext()
			bound := make([]*Tensor, len(xs))
			for i, x := range xs {
				bound[i] = c.Bind(x)
			}
			y := gc.f(bound)
			require.True(t, recordsOp(y, gc.op), "the function does not record op %q", gc.op)
			c.Close()
			require.NoError(t, GradCheck(gc.f, xs, gc.opts))
		})
	}
}

// requireOpError runs f and requires it to panic with an *OpError; it returns it.
func requireOpError(t *testing.T, f func()) *OpError {
	t.Helper()
	var got any
	func() {
		defer func() { got = recover() }()
		f()
	}()
	require.NotNil(t, got, "expected a panic with *OpError")
	err, ok := got.(error)
	require.True(t, ok, "panic value %v (%T) is not an error", got, got)
	var oe *OpError
	require.True(t, errors.As(err, &oe), "panic %v (%T) is not an *OpError", err, err)
	return oe
}

func TestEveryDifferentiableOpHasGradCheck(t *testing.T) {
	covered := map[string]bool{}
	for _, cs := range [][]gradCase{coreGradCases(), nnGradCases(), indexGradCases(), convGradCases(), normGradCases(), attentionGradCases(), selfAttentionGradCases()} {
		for _, c := range cs {
			covered[c.op] = true
		}
	}
	for _, op := range Ops() {
		if !op.Differentiable() || covered[op.Name()] {
			continue
		}
		t.Errorf("differentiable op %q has no gradcheck row; add one to the gradCase tables", op.Name())
	}
	for name := range covered {
		_, ok := LookupOp(name)
		require.True(t, ok, "gradcheck row for unknown op %q", name)
	}
}

// --- core ops

func coreGradCases() []gradCase {
	bin := func(f func(a, b *Tensor) *Tensor) func(xs []*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return f(xs[0], xs[1]) }
	}
	un := func(f func(x *Tensor) *Tensor) func(xs []*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return f(xs[0]) }
	}
	cases := []gradCase{
		{op: "bind", name: "derived context", in: []gradInput{gN(2, 3)}, f: func(xs []*Tensor) *Tensor {
			return xs[0].Context().WithGenerator(NewGenerator(1)).Bind(xs[0]).MulScalar(2)
		}},
		{op: "cast", name: "f64-f32-f64", in: []gradInput{gN(2, 3)}, f: func(xs []*Tensor) *Tensor {
			// Cast is linear, so a wide step measures it despite float32 rounding.
			return xs[0].Cast(Float32).Cast(Float64)
		}, opts: GradCheckOptions{Eps: 1e-2, ATol: 1e-4}},
		{op: "contiguous", name: "transposed", in: []gradInput{gN(3, 2)}, f: un(func(x *Tensor) *Tensor { return x.T().Contiguous() })},
		{op: "to", name: "cpu1 and back", in: []gradInput{gN(2, 3)}, f: un(func(x *Tensor) *Tensor {
			return x.To(CPUDevice(1)).MulScalar(3).To(CPU)
		})},

		{op: "add", name: "same shape", in: []gradInput{gN(2, 3), gN(2, 3)}, f: bin(Add)},
		{op: "add", name: "broadcast row", in: []gradInput{gN(2, 3), gN(3)}, f: bin(Add)},
		{op: "add", name: "broadcast both", in: []gradInput{gN(2, 1, 3), gN(4, 1)}, f: bin(Add)},
		{op: "add", name: "0-d", in: []gradInput{gN(), gN(2, 2)}, f: bin(Add)},
		{op: "add", name: "same input twice", in: []gradInput{gN(3)}, f: un(func(x *Tensor) *Tensor { return x.Add(x) })},
		{op: "sub", name: "same shape", in: []gradInput{gN(2, 3), gN(2, 3)}, f: bin(Sub)},
		{op: "sub", name: "broadcast", in: []gradInput{gN(3, 1), gN(1, 4)}, f: bin(Sub)},
		{op: "mul", name: "same shape", in: []gradInput{gN(2, 3), gN(2, 3)}, f: bin(Mul)},
		{op: "mul", name: "broadcast", in: []gradInput{gN(2, 3, 4), gN(3, 1)}, f: bin(Mul)},
		{op: "mul", name: "square by self", in: []gradInput{gN(4)}, f: un(func(x *Tensor) *Tensor { return x.Mul(x) })},
		{op: "div", name: "same shape", in: []gradInput{gN(2, 3), gAway(0.5, 2, 3)}, f: bin(Div)},
		{op: "div", name: "broadcast", in: []gradInput{gN(2, 3), gAway(0.5, 2, 1)}, f: bin(Div)},
		{op: "pow", name: "same shape", in: []gradInput{gU(0.5, 2, 2, 3), gN(2, 3)}, f: bin(Pow)},
		{op: "pow", name: "broadcast exponent", in: []gradInput{gU(0.5, 2, 2, 3), gN(3)}, f: bin(Pow)},
		{op: "maximum", name: "same shape", in: []gradInput{gGrid(0, 0.9, 3, 4), gGrid(1, 1.9, 3, 4)}, f: bin(Maximum)},
		{op: "maximum", name: "broadcast", in: []gradInput{gGrid(0, 0.9, 3, 4), gGrid(1, 1.9, 4)}, f: bin(Maximum)},
		{op: "minimum", name: "same shape", in: []gradInput{gGrid(0, 0.9, 3, 4), gGrid(1, 1.9, 3, 4)}, f: bin(Minimum)},
		{op: "minimum", name: "broadcast", in: []gradInput{gGrid(0, 0.9, 3, 1), gGrid(1, 1.9, 3, 4)}, f: bin(Minimum)},

		{op: "neg", name: "plain", in: []gradInput{gN(2, 3)}, f: un((*Tensor).Neg)},
		{op: "exp", name: "plain", in: []gradInput{gN(2, 3)}, f: un((*Tensor).Exp)},
		{op: "exp", name: "transposed input", in: []gradInput{gN(3, 2)}, f: un(func(x *Tensor) *Tensor { return x.T().Exp() })},
		{op: "log", name: "plain", in: []gradInput{gU(0.2, 3, 2, 3)}, f: un((*Tensor).Log)},
		{op: "sqrt", name: "plain", in: []gradInput{gU(0.2, 3, 2, 3)}, f: un((*Tensor).Sqrt)},
		{op: "rsqrt", name: "plain", in: []gradInput{gU(0.2, 3, 2, 3)}, f: un((*Tensor).Rsqrt)},
		{op: "abs", name: "plain", in: []gradInput{gAway(0.1, 2, 3)}, f: un((*Tensor).Abs)},
		{op: "relu", name: "plain", in: []gradInput{gAway(0.1, 2, 3)}, f: un((*Tensor).Relu)},
		{op: "gelu", name: "plain", in: []gradInput{gN(2, 3)}, f: un((*Tensor).Gelu)},
		{op: "gelu_tanh", name: "plain", in: []gradInput{gN(2, 3)}, f: un((*Tensor).GeluTanh)},
		{op: "tanh", name: "plain", in: []gradInput{gN(2, 3)}, f: un((*Tensor).Tanh)},
		{op: "sigmoid", name: "plain", in: []gradInput{gN(2, 3)}, f: un((*Tensor).Sigmoid)},
		{op: "square", name: "plain", in: []gradInput{gN(2, 3)}, f: un((*Tensor).Square)},
		{op: "reciprocal", name: "plain", in: []gradInput{gAway(0.5, 2, 3)}, f: un((*Tensor).Reciprocal)},
		{op: "add_scalar", name: "plain", in: []gradInput{gN(2, 3)}, f: un(func(x *Tensor) *Tensor { return x.AddScalar(1.5) })},
		{op: "mul_scalar", name: "plain", in: []gradInput{gN(2, 3)}, f: un(func(x *Tensor) *Tensor { return x.MulScalar(-2.5) })},
		{op: "mul_scalar", name: "div scalar", in: []gradInput{gN(2, 3)}, f: un(func(x *Tensor) *Tensor { return x.DivScalar(4) })},
		{op: "rsub_scalar", name: "plain", in: []gradInput{gN(2, 3)}, f: un(func(x *Tensor) *Tensor { return x.RSubScalar(1) })},
		{op: "pow_scalar", name: "fractional", in: []gradInput{gU(0.3, 2, 2, 3)}, f: un(func(x *Tensor) *Tensor { return x.PowScalar(2.5) })},
		{op: "pow_scalar", name: "integer negative base", in: []gradInput{gN(2, 3)}, f: un(func(x *Tensor) *Tensor { return x.PowScalar(3) })},
		{op: "clamp", name: "both bounds", in: []gradInput{gAway(0.1, 3, 4)}, f: un(func(x *Tensor) *Tensor {
			// |x| ≥ 0.1 and the bounds are ±0.05 away from every 0.1 step: no element sits
			// on a bound within the finite-difference step.
			return x.Clamp(-0.55, 0.75)
		})},
		{op: "clamp", name: "lower only", in: []gradInput{gAway(0.1, 3, 4)}, f: un(func(x *Tensor) *Tensor { return x.Clamp(0, math.Inf(1)) })},

		{op: "sum", name: "all", in: []gradInput{gN(2, 3, 4)}, f: un(func(x *Tensor) *Tensor { return x.Sum() })},
		{op: "sum", name: "dim 1", in: []gradInput{gN(2, 3, 4)}, f: un(func(x *Tensor) *Tensor { return x.Sum(1) })},
		{op: "sum", name: "dims 0 2", in: []gradInput{gN(2, 3, 4)}, f: un(func(x *Tensor) *Tensor { return x.Sum(0, 2) })},
		{op: "sum", name: "keep -1", in: []gradInput{gN(2, 3, 4)}, f: un(func(x *Tensor) *Tensor { return x.SumKeep(-1) })},
		{op: "sum", name: "keep 0 1", in: []gradInput{gN(2, 3, 4)}, f: un(func(x *Tensor) *Tensor { return x.SumKeep(0, 1) })},
		{op: "mean", name: "all", in: []gradInput{gN(2, 3, 4)}, f: un(func(x *Tensor) *Tensor { return x.Mean() })},
		{op: "mean", name: "dim 1", in: []gradInput{gN(2, 3, 4)}, f: un(func(x *Tensor) *Tensor { return x.Mean(1) })},
		{op: "mean", name: "dims 0 2", in: []gradInput{gN(2, 3, 4)}, f: un(func(x *Tensor) *Tensor { return x.Mean(0, 2) })},
		{op: "mean", name: "keep 0 2", in: []gradInput{gN(2, 3, 4)}, f: un(func(x *Tensor) *Tensor { return x.MeanKeep(0, 2) })},

		{op: "reshape", name: "contiguous", in: []gradInput{gN(2, 6)}, f: un(func(x *Tensor) *Tensor { return x.Reshape(3, -1) })},
		{op: "reshape", name: "transposed input", in: []gradInput{gN(3, 4)}, f: un(func(x *Tensor) *Tensor { return x.T().Reshape(2, 6) })},
		{op: "reshape", name: "flatten", in: []gradInput{gN(2, 3, 2)}, f: un(func(x *Tensor) *Tensor { return x.Flatten(1, 2) })},
		{op: "permute", name: "3-d", in: []gradInput{gN(2, 3, 4)}, f: un(func(x *Tensor) *Tensor { return x.Permute(2, 0, 1).MulScalar(1) })},
		{op: "permute", name: "transpose", in: []gradInput{gN(2, 3, 4)}, f: un(func(x *Tensor) *Tensor { return x.Transpose(0, 2) })},
		{op: "permute", name: "T", in: []gradInput{gN(3, 4)}, f: un((*Tensor).T)},
		{op: "expand", name: "leading and inner", in: []gradInput{gN(3, 1)}, f: un(func(x *Tensor) *Tensor { return x.Expand(2, 3, 4) })},
		{op: "expand", name: "keep -1", in: []gradInput{gN(1, 4)}, f: un(func(x *Tensor) *Tensor { return x.Expand(3, -1) })},
		{op: "squeeze", name: "middle", in: []gradInput{gN(2, 1, 3)}, f: un(func(x *Tensor) *Tensor { return x.Squeeze(1) })},
		{op: "unsqueeze", name: "last", in: []gradInput{gN(2, 3)}, f: un(func(x *Tensor) *Tensor { return x.Unsqueeze(-1) })},

		{op: "matmul", name: "2-d", in: []gradInput{gN(3, 4), gN(4, 2)}, f: bin(MatMul)},
		{op: "matmul", name: "batched", in: []gradInput{gN(2, 3, 4), gN(2, 4, 5)}, f: bin(MatMul)},
		{op: "matmul", name: "broadcast batch", in: []gradInput{gN(2, 1, 3, 4), gN(3, 4, 2)}, f: bin(MatMul)},
		{op: "matmul", name: "matrix times batch", in: []gradInput{gN(3, 4), gN(2, 4, 2)}, f: bin(MatMul)},
		{op: "matmul", name: "vector matrix", in: []gradInput{gN(4), gN(4, 3)}, f: bin(MatMul)},
		{op: "matmul", name: "matrix vector", in: []gradInput{gN(3, 4), gN(4)}, f: bin(MatMul)},
		{op: "matmul", name: "dot", in: []gradInput{gN(5), gN(5)}, f: bin(MatMul)},
		{op: "matmul", name: "transposed views", in: []gradInput{gN(4, 3), gN(2, 4)}, f: bin(func(a, b *Tensor) *Tensor { return a.T().MatMul(b.T()) })},
		{op: "matmul", name: "batched transposed b", in: []gradInput{gN(2, 3, 4), gN(2, 5, 4)}, f: bin(func(a, b *Tensor) *Tensor { return a.MatMul(b.Transpose(1, 2)) })},
		{op: "linear", name: "bias", in: []gradInput{gN(3, 4), gN(2, 4), gN(2)}, f: func(xs []*Tensor) *Tensor { return Linear(xs[0], xs[1], xs[2]) }},
		{op: "linear", name: "no bias", in: []gradInput{gN(3, 4), gN(2, 4)}, f: func(xs []*Tensor) *Tensor { return Linear(xs[0], xs[1], nil) }},
		{op: "linear", name: "3-d input", in: []gradInput{gN(2, 3, 4), gN(5, 4), gN(5)}, f: func(xs []*Tensor) *Tensor { return Linear(xs[0], xs[1], xs[2]) }},
		{op: "linear_relu", name: "bias", in: []gradInput{gN(3, 4), gN(2, 4), gN(2)}, f: func(xs []*Tensor) *Tensor { return LinearReLU(xs[0], xs[1], xs[2]) }},
		{op: "linear_relu", name: "no bias 3-d", in: []gradInput{gN(2, 3, 4), gN(5, 4)}, f: func(xs []*Tensor) *Tensor { return LinearReLU(xs[0], xs[1], nil) }},
		{op: "linear_gelu", name: "bias", in: []gradInput{gN(3, 4), gN(2, 4), gN(2)}, f: func(xs []*Tensor) *Tensor { return LinearGELU(xs[0], xs[1], xs[2]) }},
		// Float32: the CPU backend's forward saves the GELU's backward factor
		// (GeluWithGrad); 30 outputs reach both the vector loop and the Go tail.
		{op: "linear_gelu", name: "float32 no bias 3-d", in: []gradInput{gN(2, 3, 4), gN(5, 4)}, f: func(xs []*Tensor) *Tensor {
			return LinearGELU(xs[0].Cast(Float32), xs[1].Cast(Float32), nil).Cast(Float64)
		}, opts: GradCheckOptions{Eps: 1e-2, ATol: 1e-3, RTol: 1e-2}},
	}
	return cases
}

func TestGradCheckCoreOps(t *testing.T) { runGradCases(t, coreGradCases()) }

// --- forward values of core ops in half precision

// halfTol is the relative tolerance a half-precision result is held to against float64.
func halfTol(dt DType) float64 {
	if dt == BFloat16 {
		return 2e-2
	}
	return 2e-3
}

// requireClose compares got with want elementwise within rtol·max(1, |want|).
func requireClose(t *testing.T, want, got []float64, rtol float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		tol := rtol * math.Max(1, math.Abs(want[i]))
		require.InDelta(t, want[i], got[i], tol, "%s: element %d", msg, i)
	}
}

// randVals returns n normal draws scaled by s from a fixed seed.
func randVals(seed uint64, n int, s float64) []float64 {
	r := rand.New(rand.NewPCG(seed, 2))
	v := make([]float64, n)
	for i := range v {
		v[i] = s * r.NormFloat64()
	}
	return v
}

// roundTo returns v rounded to dt (so references start from the same inputs).
func roundTo(v []float64, dt DType) []float64 {
	t := FromSlice(v, nil, WithDType(dt))
	defer t.Release()
	return t.Float64s()
}

func TestHalfPrecisionCoreOps(t *testing.T) {
	for _, dt := range []DType{Float16, BFloat16} {
		t.Run(dt.String(), func(t *testing.T) {
			c := NewContext()
			defer c.Close()
			a := roundTo(randVals(1, 8*16, 1), dt)
			b := roundTo(randVals(2, 16*8, 1), dt)
			bias := roundTo(randVals(3, 16, 1), dt)
			mk := func(v []float64, s Shape, d DType) *Tensor { return FromSlice(v, s, WithDType(d), WithContext(c)) }
			for _, tc := range []struct {
				name string
				f    func(d DType) *Tensor
			}{
				{"add", func(d DType) *Tensor { return Add(mk(a, Shape{8, 16}, d), mk(b, Shape{8, 16}, d)) }},
				{"matmul", func(d DType) *Tensor { return MatMul(mk(a, Shape{8, 16}, d), mk(b, Shape{16, 8}, d)) }},
				{"linear", func(d DType) *Tensor {
					return Linear(mk(a, Shape{16, 8}, d), mk(b, Shape{8, 16}, d).T(), mk(bias, Shape{16}, d))
				}},
			} {
				want := tc.f(Float64).Float64s()
				got := tc.f(dt)
				require.Equal(t, dt, got.DType(), tc.name)
				requireClose(t, want, got.Float64s(), 2*halfTol(dt), tc.name)
			}
		})
	}
}

// --- misuse

func TestCoreMisusePanicsWithOpError(t *testing.T) {
	c := NewContext()
	defer c.Close()
	a := Ones(Shape{2, 3}, WithContext(c))
	e := requireOpError(t, func() { MatMul(a, Ones(Shape{2, 3}, WithContext(c))) })
	require.Equal(t, "matmul", e.Op)
	require.Contains(t, e.Error(), "inner dimensions")
	require.Contains(t, e.Error(), "[2 3]")
	e = requireOpError(t, func() { Add(a, Ones(Shape{4}, WithContext(c))) })
	require.Equal(t, "add", e.Op)
	e = requireOpError(t, func() { Add(a, Ones(Shape{2, 3}, WithDevice(CPUDevice(1)), WithContext(c))) })
	require.Contains(t, e.Error(), "cpu:1")
	e = requireOpError(t, func() { MatMul(a, Ones(Shape{3, 2}, WithDevice(CPUDevice(1)), WithContext(c))) })
	require.Equal(t, "matmul", e.Op)
	requireOpError(t, func() { Linear(a, Ones(Shape{4, 2}, WithContext(c)), nil) })
	requireOpError(t, func() { a.Sum(2) })
	requireOpError(t, func() { a.Reshape(5) })
	requireOpError(t, func() { FromSlice([]int32{1}, nil).Exp() })
}

// TestAliasedGradientsStayIndependent: add hands the same gradient to both inputs;
// accumulating into one of them later must not change the other.
func TestAliasedGradientsStayIndependent(t *testing.T) {
	x := Ones(Shape{2}, WithDType(Float64), WithGrad())
	y := Ones(Shape{2}, WithDType(Float64), WithGrad())
	defer x.Release()
	defer y.Release()
	for i := 0; i < 2; i++ {
		c := NewContext()
		c.Bind(x).Add(c.Bind(y)).Sum().Backward()
		c.Close()
	}
	require.Equal(t, []float64{2, 2}, x.Grad().Float64s())
	require.Equal(t, []float64{2, 2}, y.Grad().Float64s())

	a := Ones(Shape{2}, WithDType(Float64), WithGrad())
	defer a.Release()
	c := NewContext()
	defer c.Close()
	ab := c.Bind(a)
	p, q := ab.MulScalar(2), ab.MulScalar(3)
	p.Add(q).Add(p).Sum().Backward()
	require.Equal(t, []float64{7, 7}, a.Grad().Float64s(), "d/da (2a + 3a + 2a)")
}
