//go:build amd64 && !purego

package cpu

import (
	"unsafe"

	"github.com/gamp-ml/gamp/half"
	"golang.org/x/sys/cpu"
)

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

// attnAMXDirectOK reports whether kern is the AMX kernel, whose A attnAMXDirect reads
// in place.
func attnAMXDirectOK(kern *gemmBF16Kernel) bool { return kern == gemmAMXKernel }

// attnAMXDirect is the AMX kernel's fn reading its 32 rows of A in place (row stride
// lda, 2·kc2 values each, kc2 a positive multiple of amxTileK) instead of from a packed
// panel: the same tiles, so the same result.
func attnAMXDirect(kc2 int, a []half.BFloat16, lda int, b []uint32, c []float32, ldc int, add bool) {
	_ = a[(amxMR-1)*lda+2*kc2-1]
	_ = b[amxNR*kc2-1]
	_ = c[(amxMR-1)*ldc+amxNR-1]
	gemmAMXKernel32x32(kc2/amxTileK, (*uint32)(unsafe.Pointer(&a[0])), 2*lda, 4*amxTileK, &b[0], &c[0], 4*ldc, &amxTileConfig, add)
}
