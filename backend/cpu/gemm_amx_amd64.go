//go:build amd64 && !purego

package cpu

import (
	"unsafe"

	"github.com/gamp-ml/gamp/half"
	"golang.org/x/sys/cpu"
)

// gemmAMXKernel32x32 computes the 32×32 float32 tile of C at c (row stride
// ldc bytes) from kt k tiles of A at a and of an AMX B panel at b with
// TDPBF16PS, tile configuration cfg, starting from zero or, with add, from
// C. Row i of k tile t of A (16 pairs, 64 bytes) is at a + i·aRow + t·aStep
// bytes: aRow = 64, aStep = 2048 for a packed AMX panel, aRow = 2·lda,
// aStep = 64 for a row-major bf16 A read in place. With a packed panel it
// equals gemmAMXKernelGo(32, 32, 16*kt, ...), NaN payloads aside. It loads
// the tile configuration, computes and releases the tiles (TILERELEASE)
// before it returns.
//
//go:noescape
func gemmAMXKernel32x32(kt int, a *uint32, aRow, aStep int, b *uint32, c *float32, ldc int, cfg *[64]byte, add bool)

// gemmAMXKernel32x32BF16 computes n tiles of C, tile r from A panel r (at
// a + r·aPanel bytes, rows and k tiles as for gemmAMXKernel32x32) and B
// panel r (at b + r·bPanel bytes), from zero into a scratch t of its frame,
// and stores each to the bf16 C at c + r·cPanel (row stride ldc bytes) as
// bf16Out does: a column of tiles (bPanel 0) or a row (aPanel 0). With a
// bias (not nil, beta then 1) tile r reads the 32 bias values at bias +
// r·biasPanel bytes where it would read a row of C: the bits of copying them
// into each row of C first, without the copy. The rounding is
// VCVTNE2PS2BF16, the same bits as half.BFloat16FromFloat32 on every value
// but float32 denormals, which it reads as zero: when alpha is 1, beta 0
// and no bias (a tile never holds a denormal: AMX flushes them), and for
// every row of 32 values with no denormal otherwise; the rest takes the
// AVX-512 rounding of gemmBF16Kernel12x32StoreAVX512. One tile
// configuration serves the n tiles (LDTILECFG and TILERELEASE cost about as
// much as 4 k tiles). For each r < n it equals
//
//	var t [32 * 32]float32
//	gemmAMXKernel32x32(kt, a+r·aPanel, aRow, aStep, b+r·bPanel, &t[0], 128, cfg, false)
//	for i := 0; i < 32; i++ {
//		for j := 0; j < 32; j++ {
//			old := C_r[i*ldc+j] // bias_r[j] with a bias
//			C_r[i*ldc+j] = bf16Out(alpha, beta, t[i*32+j], old)
//		}
//	}
//
//go:noescape
func gemmAMXKernel32x32BF16(kt int, a *uint32, aRow, aStep, aPanel int, b *uint32, bPanel int, c *half.BFloat16, ldc, cPanel, n int, cfg *[64]byte, alpha, beta float32, bias *half.BFloat16, biasPanel int)

// amxXCR0 returns the XCR0 register (XGETBV with ECX = 0): which register
// states the OS saves on a context switch.
func amxXCR0() uint64

// amxUsable reports whether this process may run AMX-BF16: the CPU has it
// (CPUID leaf 7 EDX bits 22 and 24), the OS saves its state (XCR0 bits 17,
// XTILECFG, and 18, XTILEDATA) and granted this process the tile data
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): without it the first
// tile instruction raises SIGILL). AVX-512 (and its BF16 conversions) is
// required as well, for the packing and conversion loops around the kernel
// and so that GODEBUG=cpu.avx512f=off turns the whole wide path off.
var amxUsable = func() bool {
	if !cpu.X86.HasAMXTile || !cpu.X86.HasAMXBF16 || !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BF16 || !cpu.X86.HasOSXSAVE {
		return false
	}
	const xtile = 1<<17 | 1<<18
	if amxXCR0()&xtile != xtile {
		return false
	}
	return amxRequestPermission()
}()

// gemmAMXKernel32x32Fn is gemmAMXKernel32x32 as a gemmBF16Kernel fn: kc2
// pair steps (a multiple of amxTileK), panels as slices, C row stride in
// elements.
func gemmAMXKernel32x32Fn(kc2 int, a, b []uint32, c []float32, ldc int, add bool) {
	ap, bp := amxPanels(kc2, a, b)
	_ = c[(amxMR-1)*ldc+amxNR-1]
	gemmAMXKernel32x32(kc2/amxTileK, ap, 4*amxTileK, 4*amxTileK*amxMR, bp, &c[0], 4*ldc, &amxTileConfig, add)
}

// gemmAMXKernel32x32Store is gemmAMXKernel32x32BF16 as a gemmBF16Kernel
// store.
func gemmAMXKernel32x32Store(kc2 int, a, b []uint32, c []half.BFloat16, ldc int, alpha, beta float32) {
	gemmAMXKernel32x32StoreN(1, kc2, a, b, nil, c, ldc, alpha, beta)
}

// gemmAMXKernel32x32StoreN is gemmAMXKernel32x32BF16 as a gemmBF16Kernel
// storeN: n consecutive packed A panels.
func gemmAMXKernel32x32StoreN(n, kc2 int, a, b []uint32, bias, c []half.BFloat16, ldc int, alpha, beta float32) {
	if n <= 0 {
		return
	}
	ap, bp := amxPanels(kc2, a[:n*amxMR*kc2], b)
	_ = c[(n*amxMR-1)*ldc+amxNR-1]
	bs, beta := amxBias(bias, amxNR, beta)
	gemmAMXKernel32x32BF16(kc2/amxTileK, ap, 4*amxTileK, 4*amxTileK*amxMR, 4*amxMR*kc2, bp, 0, &c[0], 2*ldc, 2*amxMR*ldc, n, &amxTileConfig, alpha, beta, bs, 0)
}

// amxBias checks that bias, if not nil, holds the cols columns of a call
// and returns its first value (nil without one) and the beta the kernel
// runs with: 1 with a bias.
func amxBias(bias []half.BFloat16, cols int, beta float32) (*half.BFloat16, float32) {
	if bias == nil {
		return nil, beta
	}
	return &bias[:cols][0], 1
}

// gemmAMXKernel32x32Direct is gemmAMXKernel32x32Store reading the 32 rows
// of A in place (row stride lda, 2·kc2 values each) instead of from a
// packed panel.
func gemmAMXKernel32x32Direct(kc2 int, a []half.BFloat16, lda int, b []uint32, c []half.BFloat16, ldc int, alpha, beta float32) {
	gemmAMXKernel32x32DirectN(1, kc2, a, lda, b, nil, c, ldc, alpha, beta)
}

// gemmAMXKernel32x32DirectN is gemmAMXKernel32x32Direct for n row panels
// of A in place, 32 rows apart, and the n tiles of C below one another: a
// gemmBF16Kernel directN.
func gemmAMXKernel32x32DirectN(n, kc2 int, a []half.BFloat16, lda int, b []uint32, bias, c []half.BFloat16, ldc int, alpha, beta float32) {
	if kc2 == 0 || kc2%amxTileK != 0 {
		panic("cpu: gemmAMXKernel32x32Direct: kc2 is not a positive multiple of the k tile")
	}
	if n <= 0 {
		return
	}
	_ = a[(n*amxMR-1)*lda+2*kc2-1]
	_ = b[amxNR*kc2-1]
	_ = c[(n*amxMR-1)*ldc+amxNR-1]
	bs, beta := amxBias(bias, amxNR, beta)
	gemmAMXKernel32x32BF16(kc2/amxTileK, (*uint32)(unsafe.Pointer(&a[0])), 2*lda, 4*amxTileK, 2*amxMR*lda, &b[0], 0, &c[0], 2*ldc, 2*amxMR*ldc, n, &amxTileConfig, alpha, beta, bs, 0)
}

// gemmAMXKernel32x32DirectRow is gemmAMXKernel32x32Direct for n tiles
// across a row of C (c[q*amxNR:]) from one row panel of A in place and n
// consecutive B panels (b[q*amxNR*kc2:]): a gemmBF16Kernel directRow.
func gemmAMXKernel32x32DirectRow(n, kc2 int, a []half.BFloat16, lda int, b []uint32, bias, c []half.BFloat16, ldc int, alpha, beta float32) {
	if kc2 == 0 || kc2%amxTileK != 0 {
		panic("cpu: gemmAMXKernel32x32DirectRow: kc2 is not a positive multiple of the k tile")
	}
	if n <= 0 {
		return
	}
	_ = a[(amxMR-1)*lda+2*kc2-1]
	_ = b[n*amxNR*kc2-1]
	_ = c[(amxMR-1)*ldc+n*amxNR-1]
	bs, beta := amxBias(bias, n*amxNR, beta)
	gemmAMXKernel32x32BF16(kc2/amxTileK, (*uint32)(unsafe.Pointer(&a[0])), 2*lda, 4*amxTileK, 0, &b[0], 4*amxNR*kc2, &c[0], 2*ldc, 2*amxNR, n, &amxTileConfig, alpha, beta, bs, 2*amxNR)
}

// amxPanels checks kc2 and the panels' lengths and returns their first
// words (nil when kc2 is 0: the kernels read nothing then).
func amxPanels(kc2 int, a, b []uint32) (ap, bp *uint32) {
	if kc2%amxTileK != 0 {
		panic("cpu: AMX kernel: kc2 is not a multiple of the k tile")
	}
	if kc2 == 0 {
		return nil, nil
	}
	return &a[:amxMR*kc2][0], &b[:amxNR*kc2][0]
}

// gemmAMXKernel is the AMX-BF16 micro-kernel, twin gemmAMXKernelGo32x32.
var gemmAMXKernel = &gemmBF16Kernel{name: "amx-32x32", mr: amxMR, nr: amxNR, tileK: amxTileK, rowsA: true,
	fn: gemmAMXKernel32x32Fn, store: gemmAMXKernel32x32Store, direct: gemmAMXKernel32x32Direct,
	storeN: gemmAMXKernel32x32StoreN, directN: gemmAMXKernel32x32DirectN, directRow: gemmAMXKernel32x32DirectRow}

// gemmAMXPackTrans packs steps pair steps of a transposed op(A) into an AMX
// A panel whose tiles it does not clear first: for p < steps and lanes j
// enabled by the masks (load0 for j < 16, load1 for j−16 ≥ 0, as in
// gemmBF16PackPairs)
//
//	dst[p/16*512 + j*16 + p%16] = pair(src[2p*ld+j], src[(2p+1)*ld+j])
//
// with zero-extending masked loads and VPSCATTERDD.
//
//go:noescape
func gemmAMXPackTrans(dst *uint32, src *half.BFloat16, ld, steps int, load0, load1 uint16)

// gemmAMXPackTransTiles is gemmAMXPackTrans for tiles whole k tiles (16
// pair steps each), which it writes whole, masked-off lanes as zeros: the
// pairs of each half panel (16 lanes) are transposed 16×16 with shuffles
// instead of scattered. Generated by internal/asmgen.
//
//go:noescape
func gemmAMXPackTransTiles(dst *uint32, src *half.BFloat16, ld, tiles int, load0, load1 uint16)

// packAMXATrans is packAMXAGo for a transposed op(A) (sideBySide false)
// with AVX-512, reporting false where the CPU lacks it.
func packAMXATrans(dst []uint32, src []half.BFloat16, ld, kc, kc2, lanes int) bool {
	if !cpu.X86.HasAVX512F || lanes <= 0 || lanes > amxMR || kc > 2*kc2 {
		return false
	}
	dst = dst[:amxMR*kc2]
	steps := kc / 2
	mask := func(n int) uint16 { return uint16(1<<min(max(n, 0), 16) - 1) }
	if steps > 0 {
		_ = src[(2*steps-1)*ld+lanes-1]
	}
	// Whole k tiles are written whole; the rest is cleared, then scattered.
	tiles := steps / amxTileK
	if tiles > 0 {
		gemmAMXPackTransTiles(&dst[0], unsafe.SliceData(src), ld, tiles, mask(lanes), mask(lanes-16))
	}
	packAMXATransTail(dst, src, ld, kc, lanes, tiles)
	return true
}

// packAMXATransTail is packAMXATrans after its first tiles whole k tiles
// (all of them) were packed: it clears the rest of the panel and scatters
// the remaining pair steps and an odd last k value.
func packAMXATransTail(dst []uint32, src []half.BFloat16, ld, kc, lanes, tiles int) {
	steps := kc / 2
	mask := func(n int) uint16 { return uint16(1<<min(max(n, 0), 16) - 1) }
	if kc > 0 {
		_ = src[(kc-1)*ld+lanes-1]
	}
	clear(dst[tiles*amxMR*amxTileK:])
	if rest := steps - tiles*amxTileK; rest > 0 {
		gemmAMXPackTrans(&dst[tiles*amxMR*amxTileK], &src[2*amxTileK*tiles*ld], ld, rest, mask(lanes), mask(lanes-16))
	}
	if kc%2 == 1 {
		p := kc / 2
		d := dst[p/amxTileK*amxMR*amxTileK+p%amxTileK:]
		for j, v := range src[(kc-1)*ld:][:lanes] {
			d[j*amxTileK] = uint32(v)
		}
	}
}

// amxPackTransChunk is the number of k tiles (32 stored rows each) that
// packAMXATransPanels packs for one panel before it moves to the next:
// the panels' 64-byte pieces of a stored row are read close together in
// time, one page walk and one prefetch stream for all of them.
const amxPackTransChunk = 4

// packAMXATransPanels packs rows lanes of a transposed op(A) (rows ≥ 0,
// lane r at src[r], k at stride ld) into consecutive AMX A panels of kc2
// pair steps (panel q at dst[q*amxMR*kc2:], lanes [32q, 32q+32)): the bits
// of packAMXA on each panel, whole panels chunk by chunk of k across all of
// them, reporting false where the CPU lacks AVX-512.
func packAMXATransPanels(dst []uint32, src []half.BFloat16, ld, kc, kc2, rows int) bool {
	if !cpu.X86.HasAVX512F || rows <= 0 || kc > 2*kc2 {
		return false
	}
	full := rows / amxMR
	tiles := kc / 2 / amxTileK
	if full >= 2 && tiles > 0 {
		_ = src[(2*amxTileK*tiles-1)*ld+full*amxMR-1]
		_ = dst[full*amxMR*kc2-1]
		for t0 := 0; t0 < tiles; t0 += amxPackTransChunk {
			nt := min(amxPackTransChunk, tiles-t0)
			s := src[2*amxTileK*t0*ld:]
			for q := range full {
				gemmAMXPackTransTiles(&dst[q*amxMR*kc2+t0*amxMR*amxTileK], &s[q*amxMR], ld, nt, 0xffff, 0xffff)
			}
		}
		for q := range full {
			packAMXATransTail(dst[q*amxMR*kc2:][:amxMR*kc2], src[q*amxMR:], ld, kc, amxMR, tiles)
		}
		dst, src, rows = dst[full*amxMR*kc2:], src[full*amxMR:], rows-full*amxMR
	}
	for q := 0; q*amxMR < rows; q++ {
		packAMXA(dst[q*amxMR*kc2:][:amxMR*kc2], src[q*amxMR:], ld, kc, kc2, min(amxMR, rows-q*amxMR), false)
	}
	return true
}

// gemmAMXPackRows packs tiles k tiles of lanes stored rows (row stride ld)
// of an op(A) that is not transposed into an AMX A panel: row j's k tile t
// (32 bf16 from src[j*ld+32t]) to dst[t*512+j*16:][:16] as pairs, the last
// tile's values beyond the mask last (bit i for value i) as zeros, unread.
// Generated by internal/asmgen.
//
//go:noescape
func gemmAMXPackRows(dst *uint32, src *half.BFloat16, ld, lanes, tiles int, last uint32)

// packAMXARows is packAMXAGo for an op(A) that is not transposed
// (sideBySide) with AVX-512, reporting false where the CPU lacks it.
func packAMXARows(dst []uint32, src []half.BFloat16, ld, kc, kc2, lanes int) bool {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BW || lanes <= 0 || lanes > amxMR || kc <= 0 || kc > 2*kc2 {
		return false
	}
	const tile = amxMR * amxTileK
	dst = dst[:amxMR*kc2]
	tiles := gemmCeilDiv(kc, 2*amxTileK)
	_ = src[(lanes-1)*ld+kc-1]
	n := kc - 2*amxTileK*(tiles-1) // values in the last tile, 1 to 32
	gemmAMXPackRows(&dst[0], &src[0], ld, lanes, tiles, uint32(1<<n-1))
	if lanes < amxMR {
		for t := range tiles {
			clear(dst[t*tile+lanes*amxTileK:][:tile-lanes*amxTileK])
		}
	}
	clear(dst[tiles*tile:])
	return true
}
