package nn

import (
	"fmt"

	"github.com/gamp-ml/gamp/tensor"
)

// NormOptions configures BatchNorm and LayerNorm layers. The zero value gives
// PyTorch's defaults.
type NormOptions struct {
	// Momentum weighs the new batch in the running statistics:
	// running = (1-Momentum)·running + Momentum·batch. Zero means 0.1. BatchNorm only.
	Momentum float64
	// Eps is added to the variance before the square root. Zero means 1e-5.
	Eps float64
	// NoAffine leaves out the learnable weight and bias (affine=False /
	// elementwise_affine=False).
	NoAffine bool
	// NoRunningStats makes BatchNorm normalise with batch statistics in evaluation
	// too and keep no buffers (track_running_stats=False). BatchNorm only.
	NoRunningStats bool
}

func (o NormOptions) withDefaults() NormOptions {
	if o.Momentum == 0 {
		o.Momentum = 0.1
	}
	if o.Eps == 0 {
		o.Eps = 1e-5
	}
	return o
}

func normOptionsOf(layer string, opts []NormOptions) NormOptions {
	if len(opts) > 1 {
		panic(fmt.Sprintf("nn: %s takes at most one NormOptions, got %d", layer, len(opts)))
	}
	var o NormOptions
	if len(opts) == 1 {
		o = opts[0]
	}
	o = o.withDefaults()
	if !(o.Momentum >= 0 && o.Momentum <= 1) || !(o.Eps > 0) {
		panic(fmt.Sprintf("nn: %s: momentum %g must lie in [0, 1] and eps %g be positive", layer, o.Momentum, o.Eps))
	}
	return o
}

// BatchNorm normalises each channel of an input [N, C, ...] with the batch's mean and
// (biased) variance in training, and with the running statistics in evaluation
// (torch.nn.BatchNorm*d). Training updates the running statistics with the unbiased
// variance, as PyTorch.
//
// BatchNorm stays FP32 under mixed precision: its parameters and running statistics
// are float32 and marked KeepFP32, so Cast leaves them alone. A half (float16 or
// bfloat16) input goes to tensor.BatchNorm as it is: the kernel reads it, normalises
// and keeps its statistics in float32, and writes the output in the input's dtype —
// the boundary casts fused, as cuDNN's batch norm does for PyTorch AMP — so statistics
// of activations whose variance exceeds the float16 range (65504) stay finite, the
// next layer runs in the compute dtype, and backward keeps the half input rather than
// a float32 copy. The results are those of casting the input to float32, normalising
// and casting back, bit for bit. A BatchNorm cast to half anyway (CastAll, pure-FP16
// "O3") runs in half and keeps half statistics: in general Forward computes in the
// dtype of its parameters.
type BatchNorm struct {
	Base
	Features      int
	Momentum, Eps float64
	Weight, Bias  *Param // [Features]; nil without affine
	// RunningMean and RunningVar are buffers [Features]; nil without running stats.
	RunningMean, RunningVar *Param
	// NumBatchesTracked is an Int64 0-d buffer counting training steps, kept for
	// state-dict compatibility with PyTorch.
	NumBatchesTracked *Param

	layer string
}

// BatchNorm1d is BatchNorm over inputs [N, C] or [N, C, L].
type BatchNorm1d struct{ BatchNorm }

// BatchNorm2d is BatchNorm over inputs [N, C, H, W].
type BatchNorm2d struct{ BatchNorm }

// NewBatchNorm returns a BatchNorm over [N, features, ...] inputs of any rank ≥ 2:
// weight 1, bias 0, running mean 0, running variance 1.
func NewBatchNorm(features int, opts ...NormOptions) *BatchNorm {
	b := &BatchNorm{}
	b.setup("nn.BatchNorm", features, opts)
	return b
}

// NewBatchNorm1d returns a BatchNorm over [N, features] or [N, features, L] inputs.
func NewBatchNorm1d(features int, opts ...NormOptions) *BatchNorm1d {
	b := &BatchNorm1d{}
	b.setup("nn.BatchNorm1d", features, opts)
	return b
}

// NewBatchNorm2d returns a BatchNorm over [N, features, H, W] inputs.
func NewBatchNorm2d(features int, opts ...NormOptions) *BatchNorm2d {
	b := &BatchNorm2d{}
	b.setup("nn.BatchNorm2d", features, opts)
	return b
}

func (b *BatchNorm) setup(layer string, features int, opts []NormOptions) {
	if features <= 0 {
		panic(fmt.Sprintf("nn: %s(%d): the number of features must be positive", layer, features))
	}
	o := normOptionsOf(layer, opts)
	b.layer, b.Features, b.Momentum, b.Eps = layer, features, o.Momentum, o.Eps
	if !o.NoAffine {
		b.Weight = b.AddParam("weight", tensor.Ones(tensor.Shape{features}))
		b.Bias = b.AddParam("bias", zerosParam(features))
		b.Weight.KeepFP32, b.Bias.KeepFP32 = true, true
	}
	if !o.NoRunningStats {
		b.RunningMean = b.AddBuffer("running_mean", zerosParam(features))
		b.RunningVar = b.AddBuffer("running_var", tensor.Ones(tensor.Shape{features}))
		b.RunningMean.KeepFP32, b.RunningVar.KeepFP32 = true, true
		b.NumBatchesTracked = b.AddBuffer("num_batches_tracked", tensor.Zeros(tensor.Shape{}, tensor.WithDType(tensor.Int64)))
	}
}

// ComputeDType is the dtype Forward normalises in: that of the parameters (float32
// unless the layer was cast with CastAll).
func (b *BatchNorm) ComputeDType() tensor.DType {
	for _, p := range []*Param{b.Weight, b.RunningMean} {
		if p != nil {
			return p.T.DType()
		}
	}
	return tensor.Float32
}

// Forward normalises x [N, Features, ...].
func (b *BatchNorm) Forward(x *tensor.Tensor) *tensor.Tensor { return b.forward(x, false) }

// forwardReLU is Forward followed by a ReLU, as one tensor.BatchNormReLU op. It
// declines (false, nothing done) when the op's output would be cast to a narrower
// dtype after it (reluFuses): the ReLU's gradient mask is the op's output, and a
// positive value that rounds to zero in the cast would keep its gradient where the
// composed ops (cast, then ReLU) drop it. A half input to a float32 layer needs no
// cast — the op writes half and masks with what it wrote — so it fuses.
func (b *BatchNorm) forwardReLU(x *tensor.Tensor) (*tensor.Tensor, bool) {
	if !reluFuses(x.DType(), b.ComputeDType()) {
		return nil, false
	}
	return b.forward(x, true), true
}

// reluFuses reports whether BatchNorm+ReLU on an input of dtype x in a layer computing
// in dt fuses: no cast of the output, or one that cannot round a positive value to
// zero (a widening one, or float16 to bfloat16, whose range holds float16's).
func reluFuses(x, dt tensor.DType) bool {
	switch {
	case x == dt || halfIO(x, dt):
		return true
	case x == tensor.BFloat16 && dt == tensor.Float16:
		return true
	}
	return x.Size() > dt.Size()
}

// halfIO reports whether a layer computing in dt takes an input of dtype x as it is:
// a half input to a float32 layer (the op computes in float32 and writes half).
func halfIO(x, dt tensor.DType) bool {
	return dt == tensor.Float32 && (x == tensor.Float16 || x == tensor.BFloat16)
}

// forward is Forward, with the ReLU fused when relu is set.
func (b *BatchNorm) forward(x *tensor.Tensor, relu bool) *tensor.Tensor {
	layer := b.layer
	if layer == "" {
		layer = "nn.BatchNorm"
	}
	if x.Dim() < 2 || x.Size(1) != b.Features {
		misuse(layer, x, "want input [N, %d, ...]", b.Features)
	}
	if !x.DType().IsFloat() {
		misuse(layer, x, "needs a floating-point input")
	}
	in := x
	if dt := b.ComputeDType(); x.DType() != dt && !halfIO(x.DType(), dt) {
		in = x.Cast(dt)
	}
	training := b.Training() || b.RunningMean == nil
	norm := tensor.BatchNorm
	if relu {
		norm = tensor.BatchNormReLU
	}
	y := norm(in, optional(b.Weight), optional(b.Bias), optional(b.RunningMean), optional(b.RunningVar), training, b.Momentum, b.Eps)
	if training && b.NumBatchesTracked != nil {
		t := b.NumBatchesTracked.T
		one := tensor.Ones(tensor.Shape{}, tensor.WithDType(t.DType()), tensor.WithDevice(t.Device()))
		t.AddInPlace(one)
		one.Release()
	}
	if y.DType() != x.DType() {
		y = y.Cast(x.DType())
	}
	return y
}

// Forward normalises x [N, C] or [N, C, L].
func (b *BatchNorm1d) Forward(x *tensor.Tensor) *tensor.Tensor {
	if x.Dim() != 2 && x.Dim() != 3 {
		misuse(b.layer, x, "want input [N, %d] or [N, %d, L]", b.Features, b.Features)
	}
	return b.BatchNorm.Forward(x)
}

func (b *BatchNorm1d) forwardReLU(x *tensor.Tensor) (*tensor.Tensor, bool) {
	if x.Dim() != 2 && x.Dim() != 3 {
		misuse(b.layer, x, "want input [N, %d] or [N, %d, L]", b.Features, b.Features)
	}
	return b.BatchNorm.forwardReLU(x)
}

// Forward normalises x [N, C, H, W].
func (b *BatchNorm2d) Forward(x *tensor.Tensor) *tensor.Tensor {
	if x.Dim() != 4 {
		misuse(b.layer, x, "want input [N, %d, H, W]", b.Features)
	}
	return b.BatchNorm.Forward(x)
}

func (b *BatchNorm2d) forwardReLU(x *tensor.Tensor) (*tensor.Tensor, bool) {
	if x.Dim() != 4 {
		misuse(b.layer, x, "want input [N, %d, H, W]", b.Features)
	}
	return b.BatchNorm.forwardReLU(x)
}

// LayerNorm normalises over the trailing dimensions Shape of its input, with a
// learnable elementwise weight and bias (torch.nn.LayerNorm). It computes in float32
// (tensor.LayerNorm is an FP32 op under autocast).
type LayerNorm struct {
	Base
	Shape        tensor.Shape
	Eps          float64
	Weight, Bias *Param // of shape Shape; nil without affine
}

// NewLayerNorm returns a LayerNorm over the trailing dimensions shape: weight 1, bias
// 0, eps 1e-5 unless opts say otherwise (Momentum and NoRunningStats do not apply).
func NewLayerNorm(shape tensor.Shape, opts ...NormOptions) *LayerNorm {
	if len(shape) == 0 || shape.Numel() <= 0 {
		panic(fmt.Sprintf("nn: NewLayerNorm(%v): the normalised shape must be non-empty", shape))
	}
	o := normOptionsOf("nn.LayerNorm", opts)
	l := &LayerNorm{Shape: shape.Clone(), Eps: o.Eps}
	if !o.NoAffine {
		l.Weight = l.AddParam("weight", tensor.Ones(shape))
		l.Bias = l.AddParam("bias", tensor.Zeros(shape))
	}
	return l
}

// Forward normalises x [..., Shape...].
func (l *LayerNorm) Forward(x *tensor.Tensor) *tensor.Tensor {
	l.check(x)
	return tensor.LayerNorm(x, l.Shape, optional(l.Weight), optional(l.Bias), l.Eps)
}

// forwardAs is Forward(x).Cast(dt) (tensor.LayerNormAs; see CallInto).
func (l *LayerNorm) forwardAs(x *tensor.Tensor, dt tensor.DType) *tensor.Tensor {
	l.check(x)
	return tensor.LayerNormAs(x, l.Shape, optional(l.Weight), optional(l.Bias), l.Eps, dt)
}

// check panics unless x ends in the normalized shape.
func (l *LayerNorm) check(x *tensor.Tensor) {
	k := len(l.Shape)
	if x.Dim() < k || !tensor.Shape(x.Shape()[x.Dim()-k:]).Equal(l.Shape) {
		misuse("nn.LayerNorm", x, "want input [..., %v]", l.Shape)
	}
}
