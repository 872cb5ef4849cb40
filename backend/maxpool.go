package backend

// MaxPoolRecomputer is implemented by backends whose max-pool backward finds each
// window's maximum again in the forward input, as cuDNN's does, so that the forward
// keeps no Int64 index: 8 bytes per output, four times a bfloat16 output, for an input
// the graph holds anyway (it is the previous op's output). The positions are those
// Pool's index would name, so the results equal Pool's and PoolBackward's bit for bit.
type MaxPoolRecomputer interface {
	// MaxPool is Pool for a MaxPool geometry, without the index.
	MaxPool(dst, src Storage, a PoolArgs)
	// MaxPoolBackward computes gx (overwritten) from gy and x, the src of the MaxPool
	// call: PoolBackward with the index Pool would have written for x.
	MaxPoolBackward(gx, gy, x Storage, a PoolArgs)
}
