package backend

// Conv2dArgs is one 2-D convolution for a Convolver: X [N, C, H, W], weight
// [O, C/Groups, KH, KW] and Y [N, O, OH, OW], dense, in one floating dtype.
type Conv2dArgs struct {
	ConvArgs
	O, Groups int
}

// Convolver is implemented by backends with convolution kernels that read the image
// in place, with no unfolded copy of it; tensor.Conv2d uses them when the backend has
// them and Im2Col with MatMul otherwise. Half data accumulates in float32 and is rounded
// once on store. Each method reports false, writing nothing, for a geometry or dtype it
// has no kernel for (the caller then takes the Im2Col path), so a backend may cover only
// the shapes people train.
type Convolver interface {
	// Conv2d writes y = x ⋆ w + bias (bias nil: none).
	Conv2d(y, x, w, bias Storage, a Conv2dArgs) bool
	// Conv2dInputGrad overwrites gx [N, C, H, W] with the gradient of x from gy.
	Conv2dInputGrad(gx, gy, w Storage, a Conv2dArgs) bool
	// Conv2dWeightGrad overwrites gw [O, C/Groups, KH, KW] with the gradient of the
	// weight, summed over the batch in float32 in an order that depends on the shapes
	// alone (not on the number of workers).
	Conv2dWeightGrad(gw, x, gy Storage, a Conv2dArgs) bool
}
