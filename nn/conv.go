package nn

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/tensor"
)

// Pair returns [2]int{n, n}, for square kernels, strides and paddings.
func Pair(n int) [2]int { return [2]int{n, n} }

// Conv2d is a 2-D convolution over NCHW inputs (torch.nn.Conv2d). Under autocast it
// runs in the low-precision dtype.
type Conv2d struct {
	Base
	In, Out int
	Kernel  [2]int
	// Options holds stride, padding, dilation and groups, with zero values already
	// replaced by their defaults (1, 0, 1, 1).
	Options tensor.ConvOptions
	Weight  *Param // [Out, In/Groups, KH, KW]
	Bias    *Param // [Out]; nil without bias
}

// NewConv2d returns a convolution from in to out channels with the given kernel and
// geometry (zero fields of o mean stride 1, padding 0, dilation 1, groups 1),
// initialised as PyTorch does: Kaiming-uniform weights with a = √5 and a U(±1/√fanIn)
// bias, fanIn = In/Groups·KH·KW.
//
//	conv := nn.NewConv2d(3, 16, nn.Pair(3), tensor.ConvOptions{Padding: nn.Pair(1)}, nn.Init{Gen: g})
func NewConv2d(in, out int, kernel [2]int, o tensor.ConvOptions, init ...Init) *Conv2d {
	o = convDefaults(o)
	if in <= 0 || out <= 0 || kernel[0] <= 0 || kernel[1] <= 0 {
		panic(fmt.Sprintf("nn: NewConv2d(%d, %d, %v): channels and kernel must be positive", in, out, kernel))
	}
	if in%o.Groups != 0 || out%o.Groups != 0 {
		panic(fmt.Sprintf("nn: NewConv2d: %d groups must divide both %d input and %d output channels", o.Groups, in, out))
	}
	for i := 0; i < 2; i++ {
		if o.Stride[i] <= 0 || o.Dilation[i] <= 0 || o.Padding[i] < 0 {
			panic(fmt.Sprintf("nn: NewConv2d: stride %v and dilation %v must be positive, padding %v not negative", o.Stride, o.Dilation, o.Padding))
		}
	}
	ini := initOf("NewConv2d", init)
	c := &Conv2d{In: in, Out: out, Kernel: kernel, Options: o}
	c.Weight = c.AddParam("weight", zerosParam(out, in/o.Groups, kernel[0], kernel[1]))
	KaimingUniform(c.Weight, math.Sqrt(5), FanIn, ini.Gen)
	if !ini.NoBias {
		c.Bias = c.AddParam("bias", zerosParam(out))
		initBias(c.Bias, c.Weight, ini.Gen)
	}
	return c
}

func convDefaults(o tensor.ConvOptions) tensor.ConvOptions {
	for i := 0; i < 2; i++ {
		if o.Stride[i] == 0 {
			o.Stride[i] = 1
		}
		if o.Dilation[i] == 0 {
			o.Dilation[i] = 1
		}
	}
	if o.Groups == 0 {
		o.Groups = 1
	}
	return o
}

// Forward maps x [N, In, H, W] to [N, Out, OH, OW].
func (c *Conv2d) Forward(x *tensor.Tensor) *tensor.Tensor {
	if x.Dim() != 4 || x.Size(1) != c.In {
		misuse("nn.Conv2d", x, "want input [N, %d, H, W]", c.In)
	}
	return tensor.Conv2d(x, c.Weight.T, optional(c.Bias), c.Options)
}

// MaxPool2d takes the maximum over windows of NCHW inputs (torch.nn.MaxPool2d).
type MaxPool2d struct {
	Base
	Kernel, Stride, Padding [2]int // a zero stride means the kernel size
}

// NewMaxPool2d returns a max-pooling layer; a zero stride means the kernel size.
func NewMaxPool2d(kernel, stride, padding [2]int) *MaxPool2d {
	return &MaxPool2d{Kernel: kernel, Stride: stride, Padding: padding}
}

// Forward pools x [N, C, H, W].
func (p *MaxPool2d) Forward(x *tensor.Tensor) *tensor.Tensor {
	if x.Dim() != 4 {
		misuse("nn.MaxPool2d", x, "want input [N, C, H, W]")
	}
	return tensor.MaxPool2d(x, p.Kernel, p.Stride, p.Padding)
}

// AvgPool2d averages over windows of NCHW inputs (torch.nn.AvgPool2d).
// CountIncludePad counts padded zeros in the divisor (PyTorch's default is true).
type AvgPool2d struct {
	Base
	Kernel, Stride, Padding [2]int // a zero stride means the kernel size
	CountIncludePad         bool
}

// NewAvgPool2d returns an average-pooling layer; a zero stride means the kernel size.
func NewAvgPool2d(kernel, stride, padding [2]int, countIncludePad bool) *AvgPool2d {
	return &AvgPool2d{Kernel: kernel, Stride: stride, Padding: padding, CountIncludePad: countIncludePad}
}

// Forward pools x [N, C, H, W].
func (p *AvgPool2d) Forward(x *tensor.Tensor) *tensor.Tensor {
	if x.Dim() != 4 {
		misuse("nn.AvgPool2d", x, "want input [N, C, H, W]")
	}
	return tensor.AvgPool2d(x, p.Kernel, p.Stride, p.Padding, p.CountIncludePad)
}
