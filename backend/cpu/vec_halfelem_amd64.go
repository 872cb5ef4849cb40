//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// vecHalfElemOK reports whether the AVX-512BW loops on bfloat16 words
// (vec_halfelem_amd64.s) can run.
func vecHalfElemOK() bool { return vecAVX512OK() && cpu.X86.HasAVX512BW }

// vecReluBF16AVX512 equals reluBF16Go(dst[:n], x[:n]) for n a multiple of 32, bit for
// bit: one zmm of words per iteration, the sign test a signed word compare with 0
// (VPCMPGTW), the NaN test an unsigned compare of the magnitude with 0x7f80.
//
//go:noescape
func vecReluBF16AVX512(dst, x *uint16, n int)

// vecReluGradBF16AVX512 equals reluGradBF16Go(gx[:n], gy[:n], x[:n]) for n a multiple
// of 32, bit for bit.
//
//go:noescape
func vecReluGradBF16AVX512(gx, gy, x *uint16, n int)

func vecReluBF16Run(dst, x *uint16, n int) { vecReluBF16AVX512(dst, x, n) }

func vecReluGradBF16Run(gx, gy, x *uint16, n int) { vecReluGradBF16AVX512(gx, gy, x, n) }
