//go:build !amd64 || purego

package cpu

import "github.com/gamp-ml/gamp/half"

// attnExpRowAsm reports false: this build has no assembly, attnExpRowGo runs.
func attnExpRowAsm(s *[16]float32, row []float32, scale, shift float32) bool { return false }

// attnAMXDirectOK reports false: no AMX kernel in this build.
func attnAMXDirectOK(kern *gemmBF16Kernel) bool { return false }

func attnAMXDirect(kc2 int, a []half.BFloat16, lda int, b []uint32, c []float32, ldc int, add bool) {
	panic("cpu: attnAMXDirect without AMX")
}
