package nn

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/tensor"
)

// Init says how a constructor draws the initial values of its parameters. The zero
// value draws from the default generator of the default device (reseeded by
// tensor.ManualSeed); give each model its own generator for runs that do not depend on
// what else drew random numbers before.
//
//	g := tensor.NewGenerator(42)
//	l1 := nn.NewLinear(784, 128, nn.Init{Gen: g}) // draws weight, then bias
//	l2 := nn.NewLinear(128, 10, nn.Init{Gen: g})  // continues the same stream
//
// Parameters are created as float32 on tensor.DefaultDevice(); use Cast and To to
// change that.
type Init struct {
	Gen *tensor.Generator // nil: tensor.DefaultGenerator(tensor.DefaultDevice())
	// NoBias leaves out the bias of Linear and Conv2d (PyTorch's bias=False).
	NoBias bool
}

// Seeded returns an Init drawing from a fresh generator seeded with seed.
func Seeded(seed uint64) Init { return Init{Gen: tensor.NewGenerator(seed)} }

// initOf returns the single optional Init of a constructor.
func initOf(layer string, in []Init) Init {
	switch len(in) {
	case 0:
		return Init{}
	case 1:
		return in[0]
	}
	panic(fmt.Sprintf("nn: %s takes at most one Init, got %d", layer, len(in)))
}

// FanMode selects which fan Kaiming initialisation preserves the variance of.
type FanMode uint8

// Fan modes.
const (
	// FanIn preserves the variance of activations in the forward pass (the default).
	FanIn FanMode = iota
	// FanOut preserves the variance of gradients in the backward pass.
	FanOut
)

// Fans returns the fan-in and fan-out of a weight of the given shape, as PyTorch's
// _calculate_fan_in_and_fan_out: for [out, in, k...] fan-in is in·∏k and fan-out
// out·∏k. Shapes with fewer than two dimensions have no fans and panic.
func Fans(shape tensor.Shape) (fanIn, fanOut int) {
	if len(shape) < 2 {
		panic(fmt.Sprintf("nn: fan in and fan out need a weight with at least 2 dimensions, got shape %v", shape))
	}
	field := 1
	for _, d := range shape[2:] {
		field *= d
	}
	return shape[1] * field, shape[0] * field
}

// KaimingUniform fills p with U(-b, b), b = gain·√(3/fan), gain = √(2/(1+a²)): He
// initialisation for layers followed by a leaky ReLU of slope a (0 for ReLU), as
// torch.nn.init.kaiming_uniform_ with nonlinearity "leaky_relu". g nil draws from the
// default generator of p's device.
func KaimingUniform(p *Param, a float64, mode FanMode, g *tensor.Generator) {
	bound := math.Sqrt(3) * kaimingStd(p, a, mode)
	Uniform(p, -bound, bound, g)
}

// KaimingNormal fills p with N(0, std²), std = gain/√fan, gain = √(2/(1+a²)), as
// torch.nn.init.kaiming_normal_.
func KaimingNormal(p *Param, a float64, mode FanMode, g *tensor.Generator) {
	Normal(p, 0, kaimingStd(p, a, mode), g)
}

func kaimingStd(p *Param, a float64, mode FanMode) float64 {
	in, out := Fans(p.T.Shape())
	fan := in
	if mode == FanOut {
		fan = out
	}
	if fan == 0 {
		panic(fmt.Sprintf("nn: Kaiming initialisation of %q: shape %v has a zero fan", p.Name, p.T.Shape()))
	}
	gain := math.Sqrt(2 / (1 + a*a))
	return gain / math.Sqrt(float64(fan))
}

// XavierUniform fills p with U(-b, b), b = gain·√(6/(fanIn+fanOut)) (Glorot), as
// torch.nn.init.xavier_uniform_.
func XavierUniform(p *Param, gain float64, g *tensor.Generator) {
	bound := math.Sqrt(3) * xavierStd(p, gain)
	Uniform(p, -bound, bound, g)
}

// XavierNormal fills p with N(0, std²), std = gain·√(2/(fanIn+fanOut)), as
// torch.nn.init.xavier_normal_.
func XavierNormal(p *Param, gain float64, g *tensor.Generator) {
	Normal(p, 0, xavierStd(p, gain), g)
}

func xavierStd(p *Param, gain float64) float64 {
	in, out := Fans(p.T.Shape())
	if in+out == 0 {
		panic(fmt.Sprintf("nn: Xavier initialisation of %q: shape %v has zero fans", p.Name, p.T.Shape()))
	}
	return gain * math.Sqrt(2/float64(in+out))
}

// Uniform fills p with draws from U(lo, hi). The draws are made in float32 (float64
// for a float64 parameter) and rounded into p's dtype.
func Uniform(p *Param, lo, hi float64, g *tensor.Generator) {
	fill(p, g, func(opts []tensor.Option) *tensor.Tensor {
		return tensor.Rand(p.T.Shape(), opts...).MulScalar(hi - lo).AddScalar(lo)
	})
}

// Normal fills p with draws from N(mean, std²).
func Normal(p *Param, mean, std float64, g *tensor.Generator) {
	fill(p, g, func(opts []tensor.Option) *tensor.Tensor {
		return tensor.Randn(p.T.Shape(), opts...).MulScalar(std).AddScalar(mean)
	})
}

// Zeros fills p with 0.
func Zeros(p *Param) { p.T.FillInPlace(0) }

// Ones fills p with 1.
func Ones(p *Param) { p.T.FillInPlace(1) }

// Constant fills p with v.
func Constant(p *Param, v float64) { p.T.FillInPlace(v) }

// fill draws values with gen in a scratch no-grad Context and copies them into p in
// place, so p keeps its identity (and its gradient, if any).
func fill(p *Param, g *tensor.Generator, gen func(opts []tensor.Option) *tensor.Tensor) {
	if !p.T.DType().IsFloat() {
		panic(fmt.Sprintf("nn: cannot fill %q: random initialisation needs a floating dtype, it is %s", p.Name, p.T.DType()))
	}
	root := tensor.NewContext()
	defer root.Close()
	c := root.NoGrad()
	if g != nil {
		c = c.WithGenerator(g)
	}
	dt := tensor.Float32
	if p.T.DType() == tensor.Float64 {
		dt = tensor.Float64
	}
	v := gen([]tensor.Option{tensor.WithContext(c), tensor.WithDType(dt), tensor.WithDevice(p.T.Device())})
	p.T.CopyFrom(v)
}
