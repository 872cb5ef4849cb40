//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// attnExpAVX512 is attnExpRowGo(s, x[:n], scale, shift) with zmm registers, n ≥ 1,
// sixteen elements a step and the last 1–16 under a lane mask; c is attnExpConsts.
//
//go:noescape
func attnExpAVX512(s *[16]float32, x *float32, n int, scale, shift float32, c *[12]float32)

// attnExpRowAsm runs attnExpAVX512 on a non-empty row where the CPU has AVX-512 and
// reports whether it did.
func attnExpRowAsm(s *[16]float32, row []float32, scale, shift float32) bool {
	if !cpu.X86.HasAVX512F {
		return false
	}
	attnExpAVX512(s, &row[0], len(row), scale, shift, &attnExpConsts)
	return true
}
