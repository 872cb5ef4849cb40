package backend

import (
	"fmt"
	"time"
)

// Storage is a block of device memory holding Len elements of one DType. It is owned by
// the backend that allocated it and released with Backend.Free, never by the GC.
type Storage interface {
	Device() Device
	DType() DType
	Len() int
}

// View is a strided window on a Storage: element (i0, i1, …) lives at
// Offset + Σ i_k·Strides[k]. A stride of 0 broadcasts a dimension.
type View struct {
	S       Storage
	Offset  int
	Shape   []int
	Strides []int
}

// Numel is the number of elements the view covers.
func (v View) Numel() int {
	n := 1
	for _, d := range v.Shape {
		n *= d
	}
	return n
}

// Contiguous reports whether the view is dense and row-major.
func (v View) Contiguous() bool {
	s := 1
	for i := len(v.Shape) - 1; i >= 0; i-- {
		if v.Shape[i] != 1 && v.Strides[i] != s {
			return false
		}
		s *= v.Shape[i]
	}
	return true
}

// Dense returns a contiguous row-major view of s with the given shape at offset off.
func Dense(s Storage, off int, shape ...int) View {
	st := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= shape[i]
	}
	return View{S: s, Offset: off, Shape: shape, Strides: st}
}

// RNG is the state of a counter-based generator: element i of a draw uses the pair
// (Seed, Offset+i), so any backend produces the same numbers and a draw can be replayed
// (checkpoint recompute) by restoring the state.
type RNG struct {
	Seed   uint64
	Offset uint64
}

// UnaryOp selects an elementwise function of one input. P0 and P1 are its scalar
// parameters where it has some.
type UnaryOp uint8

// Unary operations. Half inputs are computed in float32 and rounded once on store.
const (
	Neg        UnaryOp = iota // -x
	Exp                       // e^x
	Log                       // ln x
	Sqrt                      // √x
	Rsqrt                     // 1/√x
	Abs                       // |x|
	Sign                      // -1, 0, +1
	Relu                      // max(x, 0)
	Gelu                      // x·Φ(x), exact (erf) form, as PyTorch's default
	GeluTanh                  // tanh approximation of GELU
	Tanh                      // tanh x
	Sigmoid                   // 1/(1+e^-x)
	Square                    // x²
	Recip                     // 1/x
	AddScalar                 // x + P0
	MulScalar                 // x · P0
	PowScalar                 // x ^ P0
	Clamp                     // min(max(x, P0), P1); use ±Inf for a missing bound
	RSubScalar                // P0 - x
	numUnaryOps
)

// NumUnaryOps is the number of unary operations.
const NumUnaryOps = int(numUnaryOps)

// BinaryOp selects an elementwise function of two inputs.
type BinaryOp uint8

// Binary operations. Comparisons write Bool.
const (
	Add BinaryOp = iota
	Sub
	Mul
	Div
	Pow
	Maximum
	Minimum
	Eq
	Ne
	Lt
	Le
	Gt
	Ge
	numBinaryOps
)

// NumBinaryOps is the number of binary operations.
const NumBinaryOps = int(numBinaryOps)

// IsComparison reports whether the op writes Bool.
func (op BinaryOp) IsComparison() bool { return op >= Eq && op <= Ge }

// ReduceOp selects a reduction over one axis.
type ReduceOp uint8

// Reductions. Sums accumulate in float64 for float32/float64 inputs and in float32 at
// least for half inputs; ArgMax/ArgMin write Int64 and return the first index of the
// extreme value (NaN counts as the extreme, as in PyTorch).
const (
	Sum ReduceOp = iota
	Mean
	Max
	Min
	ArgMax
	ArgMin
	numReduceOps
)

// MatMulArgs describes C[b] = Alpha·op(A[b])·op(B[b]) + Beta·C[b] for b < Batch, with
// row-major matrices. op(A) is M×K, op(B) is K×N, C is M×N. LDA/LDB/LDC are the row
// strides of the stored matrices (0: packed). StrideA/StrideB/StrideC are the element
// distances between batch items (0 broadcasts one matrix to every batch item). A, B, C
// share one floating dtype; half inputs accumulate in float32.
type MatMulArgs struct {
	A, B, C                   Storage
	OffA, OffB, OffC          int
	Batch, M, N, K            int
	TransA, TransB            bool
	LDA, LDB, LDC             int
	StrideA, StrideB, StrideC int
	Alpha, Beta               float32
	// Bias, where not nil, is a row of N values in C's dtype, from element OffBias,
	// added to every row of every C[b]: the result has the bits of copying Bias into
	// each row of C and running with Beta 1 (a linear layer's bias, with no pass of its
	// own). Beta must then be 0. Only backends implementing GemmBias (and saying yes)
	// accept it.
	Bias    Storage
	OffBias int
	// ReLU, where set, makes every element of C max(0, v) of the value v computed
	// above, as Unary's Relu (NaN kept, -0 to +0): the bits of MatMul then Unary Relu,
	// without a pass of its own (a linear layer followed by a ReLU). Only backends
	// implementing GemmReLU (and saying yes for C's dtype) accept it.
	ReLU bool
}

// GemmBias is implemented by backends whose MatMul accepts MatMulArgs.Bias where
// GemmBias reports true.
type GemmBias interface {
	GemmBias() bool
}

// GemmReLU is implemented by backends whose MatMul accepts MatMulArgs.ReLU for the
// dtypes where GemmReLU reports true.
type GemmReLU interface {
	GemmReLU(dt DType) bool
}

// LeadingDims returns LDA, LDB and LDC with 0 (packed) replaced by the packed row
// stride of each stored matrix.
func (a MatMulArgs) LeadingDims() (lda, ldb, ldc int) {
	lda, ldb, ldc = a.LDA, a.LDB, a.LDC
	if lda == 0 {
		lda = a.K
		if a.TransA {
			lda = a.M
		}
	}
	if ldb == 0 {
		ldb = a.N
		if a.TransB {
			ldb = a.K
		}
	}
	if ldc == 0 {
		ldc = a.N
	}
	return lda, ldb, ldc
}

// CheckBounds reports an error when the geometry is negative or an operand's last
// element (over every batch item) lies outside its storage of lenA, lenB or lenC
// elements, or a leading dimension is shorter than its rows.
func (a MatMulArgs) CheckBounds(lenA, lenB, lenC int) error {
	if a.Batch < 1 || a.M < 0 || a.N < 0 || a.K < 0 {
		return fmt.Errorf("MatMul with batch %d, M=%d N=%d K=%d", a.Batch, a.M, a.N, a.K)
	}
	lda, ldb, ldc := a.LeadingDims()
	rowsA, colsA := a.M, a.K
	if a.TransA {
		rowsA, colsA = a.K, a.M
	}
	rowsB, colsB := a.K, a.N
	if a.TransB {
		rowsB, colsB = a.N, a.K
	}
	for _, o := range []struct {
		name                           string
		n, off, rows, cols, ld, stride int
	}{
		{"A", lenA, a.OffA, rowsA, colsA, lda, a.StrideA},
		{"B", lenB, a.OffB, rowsB, colsB, ldb, a.StrideB},
		{"C", lenC, a.OffC, a.M, a.N, ldc, a.StrideC},
	} {
		if o.rows == 0 || o.cols == 0 {
			continue
		}
		last := o.off + (a.Batch-1)*o.stride + (o.rows-1)*o.ld + o.cols - 1
		if o.ld < o.cols || o.off < 0 || o.stride < 0 || last >= o.n {
			return fmt.Errorf("MatMul operand %s (%d×%d, ld %d, offset %d, batch stride %d ×%d) exceeds its storage of %d", o.name, o.rows, o.cols, o.ld, o.off, o.stride, a.Batch, o.n)
		}
	}
	return nil
}

// ConvArgs describes a 2-D convolution geometry for Im2Col/Col2Im, NCHW layout.
type ConvArgs struct {
	N, C, H, W           int // input
	KH, KW               int // kernel
	StrideH, StrideW     int
	PadH, PadW           int
	DilationH, DilationW int
	OH, OW               int // output spatial size (from the others)
}

// PoolKind selects max or average pooling.
type PoolKind uint8

// Pooling kinds.
const (
	MaxPool PoolKind = iota
	AvgPool
)

// PoolArgs describes 2-D pooling over an NCHW input. For MaxPool, Index (Int64, same
// shape as the output) receives the flat h·W+w position of each maximum. For AvgPool,
// CountIncludePad selects PyTorch's count_include_pad.
type PoolArgs struct {
	Kind             PoolKind
	N, C, H, W       int
	KH, KW           int
	StrideH, StrideW int
	PadH, PadW       int
	OH, OW           int
	CountIncludePad  bool
}

// NormArgs describes batch-norm (X viewed as [N, C, S], statistics per channel C) or
// layer-norm (X viewed as [Outer, C], statistics per row over C). Weight, Bias,
// RunningMean, RunningVar, SaveMean and SaveInvStd are Float32 (statistics are always
// FP32); Weight/Bias may be nil (affine off). X, Y, and the gradients of X/Y share a dtype.
type NormArgs struct {
	X, Y                    Storage
	Weight, Bias            Storage
	RunningMean, RunningVar Storage // batch norm only; nil: no running statistics
	SaveMean, SaveInvStd    Storage // [C] for batch norm, [Outer] for layer norm
	N, C, S                 int     // batch norm geometry; layer norm uses N as Outer and C as the row length
	Training                bool    // batch norm: use batch statistics and update running ones
	Momentum, Eps           float64
	GY, GX, GWeight, GBias  Storage // backward only; GWeight/GBias may be nil
}

// Backend is what every device implements: allocation with statistics, copies, and the
// kernels the tensor ops need. Kernels take contiguous Storages unless they take Views.
// Every floating kernel supports Float32, Float64, Float16 and BFloat16; half data is
// computed in float32 and rounded once on store.
//
// Kernels are called from one goroutine per device at a time only on devices that need
// it (CUDA); the CPU backend is safe for concurrent use.
type Backend interface {
	Device() Device
	// Name is a human-readable description ("cpu (2 workers, avx512)").
	Name() string

	// Alloc returns zeroed storage of n elements, or an error wrapping ErrOutOfMemory.
	Alloc(dt DType, n int) (Storage, error)
	// Free returns s to the allocator. Freeing twice panics.
	Free(s Storage)
	// Memory statistics and controls.
	MemoryStats() MemoryStats
	ResetPeak()
	// EmptyCache returns cached, unused blocks to the system.
	EmptyCache()
	// SetMemoryLimit caps allocated bytes (0: no cap). Allocations past the cap fail
	// with ErrOutOfMemory.
	SetMemoryLimit(bytes int64)
	// Synchronize waits until all queued work on the device is done.
	Synchronize() error

	// Upload copies host data into dst starting at element off. src is a slice whose
	// element type matches dst's dtype: []float32, []float64, []uint16 (raw half bits),
	// []int32, []int64 or []bool.
	Upload(dst Storage, off int, src any)
	// Download copies len(dst) elements from src starting at element off into dst,
	// a slice of the same kind Upload takes.
	Download(dst any, src Storage, off int)

	// Copy copies src into dst element by element (shapes equal), converting the dtype
	// when they differ (round to nearest even). Views may be strided; src may broadcast.
	Copy(dst, src View)
	// Fill sets every element of dst to v (converted to dst's dtype).
	Fill(dst View, v float64)
	// Arange writes start, start+step, … into the first n elements of dst.
	Arange(dst Storage, n int, start, step float64)
	// RandUniform writes n uniform draws in [lo, hi); RandNormal n normal draws.
	RandUniform(dst Storage, n int, rng RNG, lo, hi float64)
	RandNormal(dst Storage, n int, rng RNG, mean, std float64)
	// Bernoulli writes scale where a uniform draw u ≥ p, else 0 (a dropout mask).
	Bernoulli(dst Storage, n int, rng RNG, p, scale float64)

	// Unary computes dst[i] = op(src[i]) for n contiguous elements.
	Unary(op UnaryOp, dst, src Storage, n int, p0, p1 float64)
	// UnaryBackward computes gx[i] = gy[i]·op'(x[i]) using x (the input) and y (the
	// output) as the op needs; either may be nil for ops that do not use it.
	UnaryBackward(op UnaryOp, gx, gy, x, y Storage, n int, p0, p1 float64)
	// Binary computes dst = op(a, b); dst is contiguous, a and b are views with dst's
	// shape (broadcast by zero strides).
	Binary(op BinaryOp, dst View, a, b View)
	// Where computes dst = cond ? a : b with the same broadcasting rules; cond is Bool.
	Where(dst View, cond, a, b View)
	// Reduce reduces src viewed as [outer, n, inner] over the middle axis into dst
	// viewed as [outer, inner]. ArgMax/ArgMin write Int64.
	Reduce(op ReduceOp, dst, src Storage, outer, n, inner int)

	// MatMul runs a (batched, strided) matrix product.
	MatMul(a MatMulArgs)
	// Softmax computes softmax (or log-softmax) of src viewed as [outer, n] over n.
	Softmax(dst, src Storage, outer, n int, log bool)
	// SoftmaxBackward computes gx from the forward output y and gy.
	SoftmaxBackward(gx, gy, y Storage, outer, n int, log bool)
	// OneHot writes dst[i, labels[i]] = on and off elsewhere, dst viewed as [n, classes];
	// labels are Int32 or Int64. A label outside [0, classes) panics.
	OneHot(dst, labels Storage, n, classes int, on, off float64)

	// Im2Col unfolds an NCHW input into dst [N, C·KH·KW, OH·OW]; Col2Im folds back,
	// accumulating overlaps into dst (which it overwrites first).
	Im2Col(dst, src Storage, a ConvArgs)
	Col2Im(dst, src Storage, a ConvArgs)
	// Pool runs 2-D pooling; index is used by MaxPool only.
	Pool(dst, index, src Storage, a PoolArgs)
	// PoolBackward computes gx (overwritten) from gy.
	PoolBackward(gx, gy, index Storage, a PoolArgs)

	// BatchNorm and LayerNorm forward and backward (see NormArgs).
	BatchNorm(a NormArgs)
	BatchNormBackward(a NormArgs)
	LayerNorm(a NormArgs)
	LayerNormBackward(a NormArgs)

	// IndexSelect gathers dst [outer, m, inner] = src [outer, idx[j], inner] with src
	// viewed as [outer, n, inner] and m = len(idx); idx is Int32 or Int64. An index out
	// of range panics.
	IndexSelect(dst, src, idx Storage, outer, n, inner, m int)
	// IndexAdd scatters back: dst [outer, idx[j], inner] += src [outer, j, inner].
	IndexAdd(dst, src, idx Storage, outer, n, inner, m int)

	// UnscaleCheck multiplies n elements of g in place by inv and reports whether any
	// element (before or after scaling) is Inf or NaN. One pass: the scaler's hot path.
	UnscaleCheck(g Storage, n int, inv float32) (nonFinite bool)
	// CountNonFinite counts Inf and NaN elements and reports the largest finite |x|.
	CountNonFinite(src Storage, n int) (inf, nan int, maxAbs float64)
}

// GeluWithGrad is implemented by backends whose exact GELU forward can also write the
// factor its backward multiplies gy by, T = Φ(x) + x·φ(x), for the dtypes where
// GeluWithGrad reports true: tensor.LinearGELU then saves T instead of x, and the
// backward is one multiply. GeluForwardGrad's y has the bits of Unary(Gelu, y, x, n,
// 0, 0), and GeluBackwardGrad(gx, gy, t, n) those of UnaryBackward(Gelu, gx, gy, x,
// nil, n, 0, 0) for the x that t came from. y may be x, t must not overlap x or y; gx
// may be gy or t.
type GeluWithGrad interface {
	GeluWithGrad(dt DType) bool
	GeluForwardGrad(y, t, x Storage, n int)
	GeluBackwardGrad(gx, gy, t Storage, n int)
}

// LayerNormHalfIO is implemented by backends whose LayerNorm accepts a Y of a half
// dtype dt when X is Float32, rounding each float32 result once as it stores it (the
// bits of a Float32 Y then Copy to dt), and whose LayerNormBackward accepts a GY of
// dtype dt with Float32 X and GX, widening it exactly as it reads it (the bits of
// Copying GY to Float32 first), for the dtypes where LayerNormHalfIO reports true.
// tensor.LayerNormAs uses it: a layer norm feeding a Linear that autocast runs in dt
// then writes the Linear's input itself, with no float32 output and no cast passes.
type LayerNormHalfIO interface {
	LayerNormHalfIO(dt DType) bool
}

// DeviceCopier is implemented by backends that copy directly from the storage of
// another device of the same kind (CUDA peer copies), so moving a tensor between two
// GPUs does not go through host memory. tensor.To uses it when the destination's
// backend has it and the source is a device of the same kind.
type DeviceCopier interface {
	CopyFromDevice(dst Storage, dstOff int, src Storage, srcOff, n int) error
}

// EventTimer is implemented by backends whose ops run asynchronously on the device
// (CUDA): TimingEvent records a timing event on the compute stream without waiting, so
// a profiler measures the time an op ran on the device rather than the time it took to
// queue (torch.cuda.Event(enable_timing=True).record()).
type EventTimer interface {
	TimingEvent() (TimingEvent, error)
}

// TimingEvent is a recorded device timing event.
type TimingEvent interface {
	// Since returns the device time from start (an event of the same device) to this
	// event, waiting for this event to happen.
	Since(start TimingEvent) (time.Duration, error)
	// Close releases the event.
	Close() error
}

// MultiUnscaler is implemented by backends that unscale many gradients with no wait
// between them (the CUDA multi-tensor kernel): found[i] reports gs[i] as UnscaleCheck
// would. Package scaler uses it for its multi-tensor unscale.
type MultiUnscaler interface {
	UnscaleCheckMulti(gs []Storage, ns []int, inv float32) (found []bool)
}

// SGDArgs is one fused SGD update of N elements (see FusedOptimizer). W, G and Buf are
// the float32 (or float64) master weights, gradient and momentum buffer (Buf nil when
// Momentum is 0); Half, when not nil, is the float16/bfloat16 parameter that receives
// the updated W rounded, in the same pass. First marks a new momentum buffer (it is set
// to the step's direction).
type SGDArgs struct {
	W, G, Buf, Half                      Storage
	N                                    int
	LR, Momentum, Dampening, WeightDecay float64
	Nesterov, Maximize, First            bool
	HalfWeights
}

// HalfWeights selects an update of half weights that have no FP32 master (see
// HalfRounding): W is then nil, Half (bfloat16; float16 with RoundNearest or RoundStochastic) is read as
// the weight and receives the updated one, and G and the state are float32. The zero
// value is the usual update of FP32 masters.
type HalfWeights struct {
	Rounding HalfRounding
	// Lo holds, with RoundSplit, the low 16 bits of each FP32 master (a BFloat16
	// storage used as a 16-bit container, never read as numbers); Half holds the high
	// bits, so the pair is the master exactly.
	Lo Storage
	// RNG gives RoundStochastic its random bits: element i uses the top 16 bits of the
	// counter-based generator's hash of (RNG.Seed, RNG.Offset+i).
	RNG RNG
}

// HalfRounding is how an update without an FP32 master writes the new weight w
// (computed in float32) into the half weight.
type HalfRounding uint8

// The roundings of HalfWeights.
const (
	// RoundMaster is the usual update: W holds FP32 masters.
	RoundMaster HalfRounding = iota
	// RoundNearest rounds w to nearest even (what O2's write-back does, without a master:
	// updates smaller than half an ulp of the weight are lost).
	RoundNearest
	// RoundStochastic rounds w up (in magnitude) with probability equal to the fraction
	// of an ulp it lies above the neighbour toward zero, so the rounding is unbiased in
	// expectation: on bfloat16 by adding 16 random bits below the kept ones; on float16
	// by comparing the fraction with the 16 random bits (see backend/cpu's
	// stochasticF16; past the largest finite float16 it rounds to nearest).
	RoundStochastic
	// RoundSplit keeps the FP32 master as two 16-bit halves ("16+16"): Half holds w rounded
	// to nearest (at an exact tie, toward the neighbour that keeps the pair exact) and Lo
	// the difference, so decoding the pair gives w bit for bit.
	RoundSplit
)

// AdamArgs is one fused Adam/AdamW update of N elements; Step is the step number
// after this update (1 for the first). VMax is used with AMSGrad only.
type AdamArgs struct {
	W, G, M, V, VMax, Half             Storage
	N                                  int
	LR, Beta1, Beta2, Eps, WeightDecay float64
	Step                               int64
	Decoupled, AMSGrad, Maximize       bool
	HalfWeights
}

// HalfGradSGD is implemented by FusedOptimizer backends whose SGDStep, for float32
// master weights (RoundMaster), also accepts G as a float16/bfloat16 storage, with or
// without Half (O1's deferred gradients of float32 parameters; O2's half parameters,
// whose own gradient updates the master that Half then receives): each element is
// widened to float32 (exactly) as it is read, so the update is bit for bit the one
// from the widened gradient, without a float32 copy of it in memory. Backends that do
// not implement it (or answer false) must be given float32 gradients.
type HalfGradSGD interface {
	SGDHalfGrads() bool
}

// HalfGradAdam is HalfGradSGD for AdamStep: a FusedOptimizer backend implementing it
// (and answering true) accepts, for float32 master weights (RoundMaster), G as a
// float16/bfloat16 storage, with or without Half (O1's deferred gradients of float32
// parameters; O2's half parameters, whose own gradient updates the master that Half
// then receives). Each element is widened to float32 (exactly) as it is read, so W,
// M, V, VMax and Half end bit for bit as AdamStep leaves them from the widened
// gradient, for Adam and AdamW (Decoupled), with or without weight decay, AMSGrad
// and Maximize, without a float32 copy of the gradient in memory. Backends that do
// not implement it (or answer false) must be given float32 gradients.
type HalfGradAdam interface {
	AdamHalfGrads() bool
}

// FusedOptimizer is implemented by backends with one-pass optimizer updates. The result
// equals, bit for bit, what package optim computes by composing tensor ops (each op
// rounded to the masters' dtype), so using it changes speed, not numbers.
type FusedOptimizer interface {
	SGDStep(a SGDArgs)
	AdamStep(a AdamArgs)
}

// AttentionArgs is one fused scaled dot-product attention over BH independent heads:
// Q, K, V, O (and GO, GQ, GK, GV) are contiguous [BH, T, D] in one floating dtype; LSE is
// [BH, T], Float32 (Float64 with Float64 operands), and holds each query row's log Σ exp(scores), which the forward writes
// and the backward reads to recompute the probabilities block by block. With Causal,
// query i sees keys j ≤ i only: masked probabilities are exactly 0.
type AttentionArgs struct {
	Q, K, V, O, LSE Storage
	GO, GQ, GK, GV  Storage // backward only; all three gradients are overwritten
	BH, T, D        int
	Scale           float64 // multiplies Q·Kᵀ (1/√D for the usual attention)
	Causal          bool
	// Layout, where not nil, places the operands other than as contiguous [BH, T, D];
	// only backends implementing AttentionLayouts (and saying yes) accept it.
	Layout *AttentionLayout
}

// AttentionLayout places the operands of an AttentionArgs in their storages: with
// BH = N·Heads, feature c of row t of head h of batch n of an operand is element
// Off + n·Batch + h·Head + t·Row + c, by the operand's AttentionStride (strides ≥ 0).
// A transformer's packed projection [N, T, 3, Heads, D] gives Q, K and V (and their
// gradients) Off = 0, D·Heads, 2·D·Heads, Batch = T·Row, Head = D, Row = 3·D·Heads, so
// the heads are neither split out nor merged back by copies. The elements of the
// written operands (O; GQ, GK, GV) must not overlap one another or the read ones.
type AttentionLayout struct {
	Heads                      int
	Q, K, V, O, GO, GQ, GK, GV AttentionStride
}

// AttentionStride is one operand's place in an AttentionLayout.
type AttentionStride struct{ Off, Batch, Head, Row int }

// AttentionLayouts is implemented by backends whose Attention and AttentionBackward
// accept AttentionArgs.Layout where AttentionLayouts reports true.
type AttentionLayouts interface {
	AttentionLayouts() bool
}

// Attention is implemented by backends with a fused attention kernel that never
// materialises the T×T score matrix (online softmax, as FlashAttention). Half data is
// computed in float32. tensor.ScaledDotProductAttention uses it when the backend has
// it and composes matmul, mask and softmax otherwise.
type Attention interface {
	Attention(a AttentionArgs)
	AttentionBackward(a AttentionArgs)
}

// AttentionChooser is implemented by a backend whose fused attention kernel is the
// faster choice for some shapes only: FusedAttention reports whether BH heads of T rows
// of D features of dt should run fused; where it says no, the tensor package composes
// matmul, softmax and matmul (and keeps the scores) instead. A backend.Attention
// without it runs every shape fused.
type AttentionChooser interface {
	FusedAttention(dt DType, bh, t, d int) bool
}

// MemoryStats are the allocator's counters, in bytes unless named otherwise.
type MemoryStats struct {
	Allocated      int64 // in use by live storages
	PeakAllocated  int64 // highest Allocated since start or ResetPeak
	TotalAllocated int64 // sum of all allocations ever made
	Reserved       int64 // held by the allocator: in use plus cached
	PeakReserved   int64
	// Active counts the blocks in use at their allocated size: Allocated plus the
	// allocator's rounding (size classes, block granularity), without the cache. It is
	// what a memory cap must hold once the cache is emptied, so a planner that wants
	// to fit under a cap measures PeakActive.
	Active     int64
	PeakActive int64
	NumAllocs  int64
	NumFrees   int64
	NumOOMs    int64
	NumRetries int64 // allocations that succeeded after emptying the cache
	Limit      int64 // cap or device total; 0: none
	ByDType    [NumDTypes]DTypeStats
}

// ResetPeak sets the peak figures (total and per dtype) to the current ones; allocators
// call it under their lock.
func (s *MemoryStats) ResetPeak() {
	s.PeakAllocated = s.Allocated
	s.PeakReserved = s.Reserved
	s.PeakActive = s.Active
	for i := range s.ByDType {
		s.ByDType[i].PeakAllocated = s.ByDType[i].Allocated
	}
}

// DTypeStats are per-dtype counters.
type DTypeStats struct {
	Allocated, PeakAllocated int64
	NumAllocs                int64
}
