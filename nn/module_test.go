package nn

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/tensor"
)

// net is a custom module with a named child, as users write them.
type net struct {
	Base
	stem  *Linear
	block *Sequential
	head  *Linear
	scale *Param
}

func newNet(g *tensor.Generator) *net {
	n := &net{}
	n.stem = NewLinear(4, 8, Init{Gen: g})
	n.block = NewSequential(NewLinear(8, 8, Init{Gen: g}), NewBatchNorm1d(8), NewReLU())
	n.head = NewLinear(8, 2, Init{Gen: g})
	n.AddModule("stem", n.stem)
	n.AddModule("block", n.block)
	n.AddModule("head", n.head)
	n.scale = n.AddParam("scale", tensor.Ones(tensor.Shape{2}))
	return n
}

func (n *net) Forward(x *tensor.Tensor) *tensor.Tensor {
	return n.head.Forward(n.block.Forward(n.stem.Forward(x))).Mul(n.scale.T)
}

func names(ps []*Param) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

func TestParameterNaming(t *testing.T) {
	for _, tc := range []struct {
		name    string
		build   func() Module
		params  []string
		buffers []string
	}{
		{
			"sequential",
			func() Module { return NewSequential(NewLinear(2, 3), NewReLU(), NewLinear(3, 1)) },
			[]string{"0.weight", "0.bias", "2.weight", "2.bias"}, []string{},
		},
		{
			"nested sequential",
			func() Module {
				return NewSequential(NewSequential(NewLinear(2, 3), NewBatchNorm1d(3)), NewLinear(3, 1))
			},
			[]string{"0.0.weight", "0.0.bias", "0.1.weight", "0.1.bias", "1.weight", "1.bias"},
			[]string{"0.1.running_mean", "0.1.running_var", "0.1.num_batches_tracked"},
		},
		{
			"custom module",
			func() Module { return newNet(tensor.NewGenerator(1)) },
			[]string{"scale", "stem.weight", "stem.bias", "block.0.weight", "block.0.bias", "block.1.weight", "block.1.bias", "head.weight", "head.bias"},
			[]string{"block.1.running_mean", "block.1.running_var", "block.1.num_batches_tracked"},
		},
		{
			"append after nesting",
			func() Module {
				inner := NewSequential(NewLinear(2, 2))
				outer := NewSequential(NewReLU(), inner)
				inner.Append(NewLinear(2, 2, Init{NoBias: true}))
				return outer
			},
			[]string{"1.0.weight", "1.0.bias", "1.1.weight"}, []string{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.build()
			assert.Equal(t, tc.params, names(m.Params()))
			assert.Equal(t, tc.buffers, names(m.Buffers()))
			for _, p := range append(m.Params(), m.Buffers()...) {
				assert.Equal(t, p.Name, p.T.Name(), "the tensor carries the parameter's name")
			}
			assert.Len(t, State(m), len(tc.params)+len(tc.buffers))
		})
	}
}

func TestSharedModuleCountedOnce(t *testing.T) {
	shared := NewLinear(3, 3)
	m := NewSequential(shared, NewReLU(), shared)
	assert.Len(t, m.Params(), 2, "a module used twice has its parameters listed once")
	assert.Equal(t, 12, NumParams(m))
}

func TestRegistrationMisuse(t *testing.T) {
	var b Base
	b.AddParam("w", tensor.Zeros(tensor.Shape{1}))
	assert.Panics(t, func() { b.AddParam("w", tensor.Zeros(tensor.Shape{1})) }, "duplicate name")
	assert.Panics(t, func() { b.AddBuffer("w", tensor.Zeros(tensor.Shape{1})) }, "duplicate name across kinds")
	assert.Panics(t, func() { b.AddParam("a.b", tensor.Zeros(tensor.Shape{1})) }, "dotted name")
	assert.Panics(t, func() { b.AddParam("", tensor.Zeros(tensor.Shape{1})) }, "empty name")
	s := NewSequential(NewReLU())
	assert.Panics(t, func() { s.Append(s) }, "cycle")
}

func TestTrainEvalPropagation(t *testing.T) {
	m := newNet(tensor.NewGenerator(2))
	var modes func(m Module) []bool
	modes = func(m Module) []bool {
		out := []bool{m.Training()}
		_, kids := m.base().Children()
		for _, k := range kids {
			out = append(out, modes(k)...)
		}
		return out
	}
	for _, on := range modes(m) {
		assert.True(t, on, "modules start in training mode")
	}
	Eval(m)
	for _, on := range modes(m) {
		assert.False(t, on)
	}
	// Evaluation mode reaches the BatchNorm deep inside: running stats stay put.
	bn := m.block.At(1).(*BatchNorm1d)
	before := bn.RunningMean.T.Float64s()
	ctx := tensor.NewContext()
	m.Forward(input(ctx, wave(12, 3), 3, 4))
	ctx.Close()
	assert.Equal(t, before, bn.RunningMean.T.Float64s())
	Train(m.block)
	assert.False(t, m.Training())
	assert.True(t, bn.Training())
	ctx = tensor.NewContext()
	m.Forward(input(ctx, wave(12, 3), 3, 4))
	ctx.Close()
	assert.NotEqual(t, before, bn.RunningMean.T.Float64s())
}

func TestFans(t *testing.T) {
	for _, tc := range []struct {
		shape   tensor.Shape
		in, out int
	}{
		{tensor.Shape{3, 5}, 5, 3},
		{tensor.Shape{8, 4, 3, 3}, 36, 72},
		{tensor.Shape{6, 2, 5}, 10, 30},
	} {
		in, out := Fans(tc.shape)
		assert.Equal(t, tc.in, in, "%v", tc.shape)
		assert.Equal(t, tc.out, out, "%v", tc.shape)
	}
	assert.Panics(t, func() { Fans(tensor.Shape{4}) })
}

func TestDefaultInitBoundsAndReproducibility(t *testing.T) {
	a := NewConv2d(4, 8, Pair(3), tensor.ConvOptions{Groups: 2}, Seeded(7))
	b := NewConv2d(4, 8, Pair(3), tensor.ConvOptions{Groups: 2}, Seeded(7))
	c := NewConv2d(4, 8, Pair(3), tensor.ConvOptions{Groups: 2}, Seeded(8))
	assert.Equal(t, a.Weight.T.Float32s(), b.Weight.T.Float32s(), "same seed, same weights")
	assert.Equal(t, a.Bias.T.Float32s(), b.Bias.T.Float32s())
	assert.NotEqual(t, a.Weight.T.Float32s(), c.Weight.T.Float32s())
	bound := 1 / math.Sqrt(2*3*3) // fan-in = C/groups·KH·KW
	for _, p := range a.Params() {
		vals := p.T.Float64s()
		lo, hi := 0.0, 0.0
		for _, v := range vals {
			require.LessOrEqual(t, math.Abs(v), bound, p.Name)
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		assert.Less(t, lo, -bound/3, "%s uses the range", p.Name)
		assert.Greater(t, hi, bound/3, "%s uses the range", p.Name)
	}

	// One generator feeds successive layers as one stream.
	g1, g2 := tensor.NewGenerator(3), tensor.NewGenerator(3)
	l1, l2 := NewLinear(5, 4, Init{Gen: g1}), NewLinear(5, 4, Init{Gen: g1})
	assert.NotEqual(t, l1.Weight.T.Float32s(), l2.Weight.T.Float32s())
	m1 := NewLinear(5, 4, Init{Gen: g2})
	assert.Equal(t, l1.Weight.T.Float32s(), m1.Weight.T.Float32s())
}

func TestInitializerStatistics(t *testing.T) {
	const out, in = 256, 128
	mk := func() *Param {
		var b Base
		return b.AddParam("w", tensor.Zeros(tensor.Shape{out, in}))
	}
	stats := func(p *Param) (mean, std, maxAbs float64) {
		v := p.T.Float64s()
		for _, x := range v {
			mean += x
			maxAbs = math.Max(maxAbs, math.Abs(x))
		}
		mean /= float64(len(v))
		for _, x := range v {
			std += (x - mean) * (x - mean)
		}
		return mean, math.Sqrt(std / float64(len(v))), maxAbs
	}
	g := tensor.NewGenerator(11)
	for _, tc := range []struct {
		name    string
		init    func(p *Param)
		std     float64
		uniform bool
	}{
		{"kaiming uniform fan in", func(p *Param) { KaimingUniform(p, 0, FanIn, g) }, math.Sqrt(2.0 / in), true},
		{"kaiming uniform fan out", func(p *Param) { KaimingUniform(p, 0, FanOut, g) }, math.Sqrt(2.0 / out), true},
		{"kaiming normal a=√5", func(p *Param) { KaimingNormal(p, math.Sqrt(5), FanIn, g) }, math.Sqrt(1.0/3) / math.Sqrt(in), false},
		{"xavier uniform", func(p *Param) { XavierUniform(p, 1, g) }, math.Sqrt(2.0 / (in + out)), true},
		{"xavier normal gain 2", func(p *Param) { XavierNormal(p, 2, g) }, 2 * math.Sqrt(2.0/(in+out)), false},
		{"uniform", func(p *Param) { Uniform(p, -0.5, 0.5, g) }, 1 / math.Sqrt(12), true},
		{"normal", func(p *Param) { Normal(p, 0, 0.02, g) }, 0.02, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mk()
			tc.init(p)
			mean, std, maxAbs := stats(p)
			assert.InDelta(t, 0, mean, 4*tc.std/math.Sqrt(out*in))
			assert.InDelta(t, tc.std, std, 0.03*tc.std)
			if tc.uniform {
				assert.LessOrEqual(t, maxAbs, math.Sqrt(3)*tc.std*(1+1e-6))
			}
		})
	}
	p := mk()
	Constant(p, 0.25)
	assert.Equal(t, 0.25, p.T.Float64s()[17])
	Ones(p)
	assert.Equal(t, 1.0, p.T.Float64s()[5])
	Zeros(p)
	assert.Equal(t, 0.0, p.T.Float64s()[9])

	// Initialisers write in place and keep the parameter's dtype.
	h := mk()
	h.T = h.T.Detach().Cast(tensor.BFloat16)
	before := h.T
	Normal(h, 1, 0.1, g)
	assert.Same(t, before, h.T)
	assert.Equal(t, tensor.BFloat16, h.T.DType())
	mean, _, _ := stats(h)
	assert.InDelta(t, 1, mean, 0.01)
}
