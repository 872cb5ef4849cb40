package tensorhook

// LowGrad is set by package tensor. t is a *tensor.Tensor; LowGrad returns t's
// deferred half gradient (a *tensor.Tensor: the gradient a cast's backward handed the
// float32 leaf t, not yet widened; see tensor.Tensor.Grad), or nil when t has none.
var LowGrad func(t any) any
