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
