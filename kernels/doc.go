// Package kernels holds gamp's CUDA kernel sources, embedded with go:embed, and the Go
// table a launcher needs to call them safely: every kernel's name, source file,
// parameters (name, kind, C type, size) and launch geometry, plus the Go mirrors of the
// structs kernels take by value and the code that packs arguments. The CUDA backend
// compiles each source with NVRTC for the device's sm_XY and launches from this table.
//
// A launch, in five lines:
//
//	k, _ := kernels.Lookup(kernels.Name("unary", backend.Float16))   // "unary_f16"
//	args, err := k.Pack(yPtr, xPtr, int64(n), int32(backend.Gelu), 0.0, 0.0)
//	grid, block := k.Grid(int64(n))
//	// pin args (args.Pin), then cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, stream,
//	//     &args.Pointers()[0], nil)
//
// # Compiling
//
// Sources maps file names to sources; each #includes Header under HeaderName
// ("common.cuh"), which NVRTC receives as an in-memory header. Compile every source as
// its own program with CompileOptions plus --gpu-architecture=sm_XY (sm_60 or newer;
// bfloat16 conversions use cvt.rn.bf16.f32 from sm_80 on and integer rounding before).
// The sources need no CUDA header: half values are unsigned short storage computed in
// float, converted by inline PTX that is fixed up to round exactly like package half
// (round to nearest even, subnormals kept, overflow to ±Inf, a NaN stays a NaN with
// its sign and top payload bits). float64 to half rounds once, in integer arithmetic.
// --fmad=false is required: a fused multiply-add would round once where the CPU backend
// rounds twice.
//
// # Naming
//
// A kernel is its family followed by one suffix per dtype it is instantiated for:
// f32, f16, bf16, f64, i32, i64 and b8 (bool). Name builds it: Name("copy", dst, src)
// is "copy_f16_f32" (destination first), Name("one_hot", dst, labels),
// Name("index_select", data, index). The optimizer kernels are named by the
// parameter's dtype: adam_f16 updates float32 master weights and state and writes the
// float16 parameter in the same pass.
//
// # Launch geometry
//
// No kernel uses dynamic shared memory (sharedMemBytes is 0). Kernel.Launch is one of
//
//	GridStride  a grid-stride loop over Kernel.Work elements: any grid and block are
//	            correct; Grid gives block BlockSize (256) and enough blocks, at most
//	            MaxGrid. No shared memory, no barriers (the tests check the PTX).
//	PerRow      one block per row (rows blockIdx.x, blockIdx.x+gridDim.x, …) reducing
//	            through static shared memory: block must be exactly RowBlock (256)
//	            threads; Grid gives one block per row, at most MaxGrid.
//
// Per row: reduce_rows (outer rows; use it when inner == 1), softmax and
// softmax_backward (outer), layer_norm and layer_norm_backward (rows), batch_norm and
// batch_norm_backward (one block per channel c). Everything else is grid-stride; Work
// names the count in the kernel's parameter names ("n", "outer*inner", "n*c*h*w", …).
// reduce_cols needs inner > 1. unscale_check loops over its count tensors inside each
// thread: size the grid for the largest. Kernels that write counters or flags
// (unscale_check's found, count_nonfinite's out, the bad flags) only raise or add:
// zero them first (cuMemsetD32Async).
//
// # Strided views
//
// copy, fill, binary, compare and where take a Layout per operand by value (struct
// Layout in common.cuh: ndim, offset, shape[8], stride[8], in elements; 144 bytes).
// NewLayouts builds them from backend.Views sharing one shape: it drops dimensions of
// size 1 and merges dimensions contiguous in every operand, so a dense call runs with
// ndim 1 (a fast path without divisions); more than MaxDims dimensions left is an
// error. A zero stride broadcasts. Conv and pool geometry travel as Conv2d and Pool2d,
// mirrors of backend.ConvArgs and backend.PoolArgs.
//
// # Semantics
//
// Kernels compute what backend/cpu computes, with the same formulas and roundings:
// half data in float32 rounded once on store; float64, int32 and int64 in double;
// exp, log, sqrt, tanh, erf, pow and cos in double, rounded once. Under the tests' g++
// shim this is bit-identical to the CPU backend for every kernel but the
// transcendentals (glibc against Go's math: float32 and half results within 1 ulp, in
// the tests always equal; float64 ones within a few ulp) and the tree-ordered sums of
// softmax, layer norm and batch norm (float32 and half within 2 ulp, in the tests
// always equal; float64 within rounding of the sums). Reductions reproduce the CPU's summation
// order exactly. Where the CPU backend panics (an index or label out of range) a
// kernel sets its bad flag instead. Float-to-integer conversion of NaN or out-of-range
// values is unspecified. The launcher keeps the CPU backend's dispatch rules: a
// same-dtype contiguous Copy is a memcpy (copy_T_T converts through the compute type,
// as the CPU's strided copy does), mixed-dtype Unary/Binary operands are first cast
// with copy (exact: every widening is exact and the CPU computes in the wider type),
// and reductions over n = 0 of max/min/arg ops are refused.
//
// # Op codes
//
// The op parameters take backend.UnaryOp, backend.BinaryOp and backend.ReduceOp
// values unchanged (UOP_*, BOP_*, ROP_* in common.cuh; a test keeps them equal). The
// optimizer flags are FlagDecoupled, FlagAMSGrad, FlagMaximize, FlagNesterov and
// FlagFirst; pool kinds are backend.PoolKind.
//
// # Random numbers
//
// rand_uniform, rand_normal and bernoulli use the CPU backend's counter-based
// generator: element i hashes (seed, offset+i) with SplitMix64's finaliser (normal
// draws use 2i and 2i+1, Box–Muller), so the GPU draws the CPU's numbers and a
// backend.RNG state replays a draw (dropout in checkpoint recompute).
//
// # Packing
//
// Pack checks every Go value against the table (an int32 where long long is declared
// is an error, not garbage on the device) and lays the values out at CUDA's parameter
// offsets (ArgOffsets, the figures cuFuncGetParamInfo reports). Device pointers are
// uint64 (CUdeviceptr); a null pointer is 0.
package kernels
