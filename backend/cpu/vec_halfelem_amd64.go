//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// vecHalfElemOK reports whether the AVX-512BW loops on half words
// (vec_halfelem_amd64.s) can run.
func vecHalfElemOK() bool { return vecAVX512OK() && cpu.X86.HasAVX512BW }

// vecReluBF16AVX512 equals reluHalfGo(bf16Fmt, dst[:n], x[:n]) for n a multiple of 32,
// bit for bit: one zmm of words per iteration, the sign test a signed word compare with
// 0 (VPCMPGTW), the NaN test an unsigned compare of the magnitude with +Inf.
//
//go:noescape
func vecReluBF16AVX512(dst, x *uint16, n int)

// vecReluGradBF16AVX512 equals reluGradHalfGo(bf16Fmt, gx[:n], gy[:n], x[:n]) for n a
// multiple of 32, bit for bit.
//
//go:noescape
func vecReluGradBF16AVX512(gx, gy, x *uint16, n int)

// vecReluF16AVX512 is vecReluBF16AVX512 for float16 (f16Fmt).
//
//go:noescape
func vecReluF16AVX512(dst, x *uint16, n int)

// vecReluGradF16AVX512 is vecReluGradBF16AVX512 for float16 (f16Fmt).
//
//go:noescape
func vecReluGradF16AVX512(gx, gy, x *uint16, n int)

func vecReluHalfRun(f16 bool, dst, x *uint16, n int) {
	if f16 {
		vecReluF16AVX512(dst, x, n)
		return
	}
	vecReluBF16AVX512(dst, x, n)
}

func vecReluGradHalfRun(f16 bool, gx, gy, x *uint16, n int) {
	if f16 {
		vecReluGradF16AVX512(gx, gy, x, n)
		return
	}
	vecReluGradBF16AVX512(gx, gy, x, n)
}

// vecHalfOpBF16AVX512 equals halfOpGo(bf16Fmt, op, dst[:n], a[:n], b[:n], s) for op one
// of vecAdd … vecRDivS (b unused by the scalar operations) and n a multiple of 16, bit
// for bit up to NaN payloads (x86 picks one operand's, as vecOpAVX512 does): the
// float32 operation on the widened words in registers, narrowed with
// BFloat16FromFloat32's rounding.
//
//go:noescape
func vecHalfOpBF16AVX512(op vecOp, dst, a, b *uint16, s float32, n int)

// vecHalfOpBF16NEAVX512 is vecHalfOpBF16AVX512 rounding each 32 results with
// VCVTNE2PS2BF16 (AVX512_BF16), the same bits, unless one of them is a subnormal
// (VFPCLASSPS, AVX512DQ), which that instruction would flush: those 32 take the
// integer rounding.
//
//go:noescape
func vecHalfOpBF16NEAVX512(op vecOp, dst, a, b *uint16, s float32, n int)

// vecHalfOpNE says whether vecHalfOpBF16NEAVX512 can run.
var vecHalfOpNE = cpu.X86.HasAVX512BF16 && cpu.X86.HasAVX512DQ

// vecHalfOpF16AVX512 is vecHalfOpBF16AVX512 for float16 (VCVTPH2PS, VCVTPS2PH).
//
//go:noescape
func vecHalfOpF16AVX512(op vecOp, dst, a, b *uint16, s float32, n int)

// vecHalfScaleFiniteBF16AVX512 equals halfScaleFiniteGo(bf16Fmt, x[:n], k) for n a
// multiple of 16: x[i] rounded from float32(x[i])·k, reporting whether every stored
// word is finite.
//
//go:noescape
func vecHalfScaleFiniteBF16AVX512(x *uint16, k float32, n int) bool

// vecHalfScaleFiniteF16AVX512 is vecHalfScaleFiniteBF16AVX512 for float16.
//
//go:noescape
func vecHalfScaleFiniteF16AVX512(x *uint16, k float32, n int) bool

func vecHalfOpRun(f16 bool, op vecOp, dst, a, b *uint16, s float32, n int) {
	switch {
	case f16:
		vecHalfOpF16AVX512(op, dst, a, b, s, n)
	case vecHalfOpNE:
		vecHalfOpBF16NEAVX512(op, dst, a, b, s, n)
	default:
		vecHalfOpBF16AVX512(op, dst, a, b, s, n)
	}
}

func vecHalfScaleFiniteRun(f16 bool, x *uint16, k float32, n int) bool {
	if f16 {
		return vecHalfScaleFiniteF16AVX512(x, k, n)
	}
	return vecHalfScaleFiniteBF16AVX512(x, k, n)
}
