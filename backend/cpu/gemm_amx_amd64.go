//go:build amd64 && !purego

package cpu

import (
	"syscall"

	"golang.org/x/sys/cpu"
)

// gemmAMXKernel32x32 computes the 32×32 float32 tile of C at c (row stride
// ldc bytes) from kt k tiles of an AMX-layout A panel at a (row stride lda
// bytes) and B panel at b (row stride 128 bytes) with TDPBF16PS, tile
// configuration cfg; it equals gemmAMXKernelGo(32, 32, 16*kt, ...) with add
// unset, NaN payloads aside. It loads the tile configuration, computes and
// releases the tiles (TILERELEASE) before it returns.
//
//go:noescape
func gemmAMXKernel32x32(kt int, a *uint32, lda int, b *uint32, c *float32, ldc int, cfg *[64]byte)

// amxXCR0 returns the XCR0 register (XGETBV with ECX = 0): which register
// states the OS saves on a context switch.
func amxXCR0() uint64

// amxUsable reports whether this process may run AMX-BF16: the CPU has it
// (CPUID leaf 7 EDX bits 22 and 24), the OS saves its state (XCR0 bits 17,
// XTILECFG, and 18, XTILEDATA) and granted this process the tile data
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): without it the first
// tile instruction raises SIGILL). AVX-512 is required as well, for the
// packing and conversion loops around the kernel and so that
// GODEBUG=cpu.avx512f=off turns the whole wide path off.
var amxUsable = func() bool {
	if !cpu.X86.HasAMXTile || !cpu.X86.HasAMXBF16 || !cpu.X86.HasAVX512F || !cpu.X86.HasOSXSAVE {
		return false
	}
	const xtile = 1<<17 | 1<<18
	if amxXCR0()&xtile != xtile {
		return false
	}
	const archReqXcompPerm, xfeatureXtiledata = 0x1023, 18
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0)
	return errno == 0
}()

// gemmAMXKernel32x32Fn is gemmAMXKernel32x32 as a gemmBF16Kernel fn: kc2
// pair steps (a multiple of amxTileK), panels as slices, C row stride in
// elements, and add adding the tile to C instead of storing it.
func gemmAMXKernel32x32Fn(kc2 int, a, b []uint32, c []float32, ldc int, add bool) {
	if kc2%amxTileK != 0 {
		panic("cpu: gemmAMXKernel32x32Fn: kc2 is not a multiple of the k tile")
	}
	var ap, bp *uint32
	if kc2 > 0 {
		ap, bp = &a[:amxMR*kc2][0], &b[:amxNR*kc2][0]
	}
	if !add {
		_ = c[(amxMR-1)*ldc+amxNR-1]
		gemmAMXKernel32x32(kc2/amxTileK, ap, 4*kc2, bp, &c[0], 4*ldc, &amxTileConfig)
		return
	}
	var t [amxMR * amxNR]float32
	gemmAMXKernel32x32(kc2/amxTileK, ap, 4*kc2, bp, &t[0], 4*amxNR, &amxTileConfig)
	for i := range amxMR {
		row := c[i*ldc:][:amxNR]
		for j, v := range t[i*amxNR:][:amxNR] {
			row[j] += v
		}
	}
}

// gemmAMXKernel is the AMX-BF16 micro-kernel, twin gemmAMXKernelGo32x32.
var gemmAMXKernel = newAMXKernel("amx-32x32", gemmAMXKernel32x32Fn)
