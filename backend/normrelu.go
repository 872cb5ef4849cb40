package backend

// BatchNormReLUer is implemented by backends that apply a ReLU in batch norm's output
// pass and mask its gradient inside batch norm's backward passes, so that BatchNorm
// followed by ReLU costs no pass of its own over memory. Results equal, bit for bit,
// BatchNorm then ReLU (and their backward calls) on the same backend.
type BatchNormReLUer interface {
	// BatchNormReLU is BatchNorm (see NormArgs) writing max(0, y) to Y.
	BatchNormReLU(a NormArgs)
	// BatchNormReLUBackward is BatchNormBackward with GY replaced by the ReLU's input
	// gradient: GY where Y (the output of BatchNormReLU, which it reads) is > 0, else 0.
	BatchNormReLUBackward(a NormArgs)
}
