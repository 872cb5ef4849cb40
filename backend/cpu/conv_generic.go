//go:build !amd64 || purego

package cpu

import "github.com/gamp-ml/gamp/half"

// convBF16Kernel is nil: without VDPBF16PS bf16 convolutions take the Im2Col path.
var convBF16Kernel *gemmBF16Kernel

// convGatherPairs is convGatherPairsGo (no assembly in this build).
func convGatherPairs(dst []uint32, src []half.BFloat16, offs []int, steps, w, stride int) {
	convGatherPairsGo(dst, src, offs, steps, w, stride)
}

// convGatherF32 is convGatherF32Go (no assembly in this build).
func convGatherF32(dst, src []float32, offs []int, steps, w, stride int) {
	convGatherF32Go(dst, src, offs, steps, w, stride)
}

// convDirectF32 and convDirectF32x16 are nil: without assembly the forward packs B
// panels for Gemm's micro-kernel.
var convDirectF32, convDirectF32x16, convDirectF32x8 func(steps int, a, b []float32, offs []int, maxOff int, c []float32, ldc int)

// convAMXStack is nil: no AMX kernel in this build.
func convAMXStack(*gemmBF16Kernel) convStackKernel { return nil }

// convRowsF32x32 and convRowsF32x16 are nil: no assembly in this build.
var convRowsF32x32, convRowsF32x16 func(steps int, x []float32, offs []int, b []float32, c []float32, ldc int)

// convRows is convRowsGo (no assembly in this build).
func convRows[T float32 | half.BFloat16](dst []T, ld int, src []T, ls, n, rows int) {
	convRowsGo(dst, ld, src, ls, n, rows)
}

// convFill is convFillGo (no assembly in this build).
func convFill(dst []float32, ld int, v []float32, n, rows int) { convFillGo(dst, ld, v, n, rows) }

// convNarrowTo is convNarrowGo (no assembly in this build).
func convNarrowTo(dst []half.BFloat16, ld int, src []float32, ls, n, rows int) {
	convNarrowGo(dst, ld, src, ls, n, rows)
}

// convDirectPairs, convDirectPairsx16 and convDirectPairsx8 are nil: no assembly
// in this build.
var convDirectPairs, convDirectPairsx16, convDirectPairsx8 func(steps int, a, b []uint32, offs []int, maxOff int, c []float32, ldc int)

// The narrowing direct kernels are nil: no assembly in this build.
var convDirectPairsNarrow, convDirectPairsx16Narrow, convDirectPairsx8Narrow func(steps int, a, b []uint32, offs []int, maxOff int, c []half.BFloat16, ldc int, init []float32)

// convRowsPairs32 and convRowsPairs16 are nil: no assembly in this build.
var convRowsPairs32, convRowsPairs16 func(steps int, x []half.BFloat16, offs []int, b []uint32, c []float32, ldc int)

// convInterleave is convInterleaveGo (no assembly in this build).
func convInterleave(dst []uint32, lo, hi []half.BFloat16) { convInterleaveGo(dst, lo, hi) }
