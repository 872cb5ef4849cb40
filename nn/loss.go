package nn

import "github.com/gamp-ml/gamp/tensor"

// Loss is a criterion: it compares a prediction with a target and returns the loss
// (a scalar unless its reduction is tensor.ReductionNone). Losses have no parameters,
// so they are values rather than Modules; every loss runs in float32 under autocast.
// The functional forms are tensor.CrossEntropy, tensor.MSELoss and
// tensor.BCEWithLogits.
type Loss interface {
	Loss(pred, target *tensor.Tensor) *tensor.Tensor
}

// LossFunc adapts a function to the Loss interface.
type LossFunc func(pred, target *tensor.Tensor) *tensor.Tensor

// Loss calls f.
func (f LossFunc) Loss(pred, target *tensor.Tensor) *tensor.Tensor { return f(pred, target) }

// CrossEntropyLoss is torch.nn.CrossEntropyLoss with class-index targets: logits
// [N, C] (or [N, C, d…]) against Int32/Int64 labels [N] (or [N, d…]). Smoothing is
// label_smoothing in [0, 1]. With Ignore set, labels equal to IgnoreIndex count for
// nothing (PyTorch's ignore_index; tensor.DefaultIgnoreIndex is its default, -100).
// The zero value is the plain mean cross entropy that ignores no label.
type CrossEntropyLoss struct {
	Smoothing   float64
	Reduction   tensor.Reduction
	Ignore      bool
	IgnoreIndex int64
}

// Loss returns the cross entropy of logits against labels.
func (l CrossEntropyLoss) Loss(logits, labels *tensor.Tensor) *tensor.Tensor {
	return tensor.CrossEntropyWith(logits, labels, tensor.CrossEntropyOptions{
		Smoothing: l.Smoothing, Reduction: l.Reduction, Ignore: l.Ignore, IgnoreIndex: l.IgnoreIndex})
}

// MSELoss is torch.nn.MSELoss: the mean squared error (or as Reduction says).
type MSELoss struct {
	Reduction tensor.Reduction
}

// Loss returns the squared error of pred against target (same shape).
func (l MSELoss) Loss(pred, target *tensor.Tensor) *tensor.Tensor {
	return tensor.MSELossWith(pred, target, tensor.LossOptions{Reduction: l.Reduction})
}

// BCEWithLogitsLoss is torch.nn.BCEWithLogitsLoss: binary cross entropy on logits, in
// the form that neither overflows nor loses precision at large |x| (prefer it to a
// Sigmoid layer followed by a log).
type BCEWithLogitsLoss struct {
	Reduction tensor.Reduction
}

// Loss returns the binary cross entropy of logits against targets in [0, 1].
func (l BCEWithLogitsLoss) Loss(logits, targets *tensor.Tensor) *tensor.Tensor {
	return tensor.BCEWithLogitsWith(logits, targets, tensor.LossOptions{Reduction: l.Reduction})
}
