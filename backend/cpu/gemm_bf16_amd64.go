//go:build amd64 && !purego

package cpu

import (
	"math"
	"unsafe"

	"github.com/gamp-ml/gamp/half"
	"golang.org/x/sys/cpu"
)

//go:generate go run ./internal/asmgen -o gemm_bf16_amd64.s

// gemmBF16Kernel12x32AVX512 computes a 12×32 float32 tile from a packed
// 12-row A micro-panel and a packed 32-column B micro-panel of bf16 pairs
// with VDPBF16PS (AVX512_BF16), and stores it to c (row stride ldc) or adds
// it there when add is set. It equals gemmBF16KernelGo(12, 32, ...) bit for
// bit, NaN payloads aside:
//
//	for i := 0; i < 12; i++ {
//		for j := 0; j < 32; j++ {
//			var acc float32
//			for p := 0; p < kc2; p++ {
//				x, y := a[p*12+i], b[p*32+j]
//				acc = bf16FMA(acc, bf16Lane(x>>16), bf16Lane(y>>16))
//				acc = bf16FMA(acc, bf16Lane(x&0xffff), bf16Lane(y&0xffff))
//			}
//			if add {
//				c[i*ldc+j] += acc
//			} else {
//				c[i*ldc+j] = acc
//			}
//		}
//	}
//
//go:noescape
func gemmBF16Kernel12x32AVX512(kc2 int, a, b []uint32, c []float32, ldc int, add bool)

// gemmBF16Kernel12x32StoreAVX512 is gemmBF16Kernel12x32AVX512 ending with
// a bf16 store instead of a float32 one. It equals
//
//	var t [12 * 32]float32
//	gemmBF16Kernel12x32AVX512(kc2, a, b, t[:], 32, false)
//	for i := 0; i < 12; i++ {
//		for j := 0; j < 32; j++ {
//			c[i*ldc+j] = bf16Out(alpha, beta, t[i*32+j], c[i*ldc+j])
//		}
//	}
//
//go:noescape
func gemmBF16Kernel12x32StoreAVX512(kc2 int, a, b []uint32, c []half.BFloat16, ldc int, alpha, beta float32)

// gemmBF16Kernel12x32DirectAVX512 is gemmBF16Kernel12x32StoreAVX512 reading A in
// place: the word of row i at pair step p is the pair of a[i*lda+2p] and
// a[i*lda+2p+1] (the even k in the low half), where the packed panel would hold
// it. It equals gemmBF16KernelGo12x32.direct bit for bit, NaN payloads aside.
//
// A bias that is not nil holds the tile's 32 columns' bias, which every row
// starts from instead of C (beta then ignored): the bits of copying it into
// each row of C first and running with beta 1.
//
//go:noescape
func gemmBF16Kernel12x32DirectAVX512(kc2 int, a *half.BFloat16, lda int, b *uint32, bias, c *half.BFloat16, ldc int, alpha, beta float32)

var gemmBF16KernelAVX512 = &gemmBF16Kernel{name: "avx512bf16-12x32", mr: 12, nr: 32, tileK: 1,
	fn: gemmBF16Kernel12x32AVX512, store: gemmBF16Kernel12x32StoreAVX512,
	direct: func(kc2 int, a []half.BFloat16, lda int, b []uint32, c []half.BFloat16, ldc int, alpha, beta float32) {
		gemmBF16Direct12x32N(1, kc2, a, lda, b, nil, c, ldc, alpha, beta)
	},
	directN: gemmBF16Direct12x32N,
	fnDirect: func(kc2 int, a []half.BFloat16, lda int, b []uint32, c []float32, ldc int, add bool) {
		if kc2 <= 0 {
			panic("cpu: gemmBF16Kernel12x32DirectF32: no pair steps")
		}
		_ = a[11*lda+2*kc2-1]
		_ = b[kc2*32-1]
		_ = c[11*ldc+31]
		gemmBF16Kernel12x32DirectF32AVX512(kc2, &a[0], lda, &b[0], &c[0], ldc, add)
	}}

// gemmBF16Kernel12x32DirectF32AVX512 is gemmBF16Kernel12x32AVX512 reading A in
// place as gemmBF16Kernel12x32DirectAVX512 does: it equals packing the 12 rows
// (packPairs, side by side) and running gemmBF16KernelGo12x32's fn, bit for bit,
// NaN payloads aside.
//
//go:noescape
func gemmBF16Kernel12x32DirectF32AVX512(kc2 int, a *half.BFloat16, lda int, b *uint32, c *float32, ldc int, add bool)

// gemmBF16Direct12x32N is gemmBF16Kernel12x32DirectAVX512 on n tiles down a
// column of C from n row panels of A in place (directN), with the bounds checks
// the assembly does not make.
func gemmBF16Direct12x32N(n, kc2 int, a []half.BFloat16, lda int, b []uint32, bias, c []half.BFloat16, ldc int, alpha, beta float32) {
	if kc2 <= 0 || n <= 0 {
		panic("cpu: gemmBF16Direct12x32N: no tiles or no pair steps")
	}
	_ = a[(12*n-1)*lda+2*kc2-1]
	_ = b[kc2*32-1]
	_ = c[(12*n-1)*ldc+31]
	var bp *half.BFloat16
	if bias != nil {
		_ = bias[31]
		bp = &bias[0]
	}
	for r := range n {
		gemmBF16Kernel12x32DirectAVX512(kc2, &a[r*12*lda], lda, &b[0], bp, &c[r*12*ldc], ldc, alpha, beta)
	}
}

// gemmBF16PackPairs is gemmBF16PackPairRowsGo with AVX-512 (zero-extending
// masked loads, shift, or, masked stores), the masks giving the loaded
// (w) and stored (stride) lanes of each half of a destination row:
// load0 = 1<<min(w, 16) - 1, load1 = 1<<max(w-16, 0) - 1, likewise for
// stride. Masked-off lanes are neither read nor written.
//
//go:noescape
func gemmBF16PackPairs(dst *uint32, src *half.BFloat16, ld, steps int, load0, load1, store0, store1 uint16)

// gemmBF16PackPairRows is gemmBF16PackPairRowsGo, with AVX-512 where the CPU
// has it.
func gemmBF16PackPairRows(dst []uint32, src []half.BFloat16, ld, steps, w, stride int) {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasPOPCNT || steps == 0 || stride == 0 {
		gemmBF16PackPairRowsGo(dst, src, ld, steps, w, stride)
		return
	}
	if w < 0 || w > stride || stride > 32 {
		panic("cpu: gemmBF16PackPairRows: bad width")
	}
	_ = dst[steps*stride-1]
	if w > 0 {
		_ = src[(2*steps-1)*ld+w-1]
	}
	mask := func(n int) uint16 { return uint16(1<<min(max(n, 0), 16) - 1) }
	gemmBF16PackPairs(&dst[0], unsafe.SliceData(src), ld, steps, mask(w), mask(w-16), mask(stride), mask(stride-16))
}

// gemmBF16KernelBest is the bf16 micro-kernel GemmBF16 uses, and
// gemmBF16Native whether it is an instruction of this CPU rather than the
// pure-Go twin.
var (
	gemmBF16KernelBest = gemmBF16Kernels()[0]
	gemmBF16Native     = gemmBF16KernelBest != gemmBF16KernelGo12x32
)

// gemmBF16Kernels lists every bf16 micro-kernel this CPU can run, best
// first. x/sys/cpu reports AVX-512 features only where the OS saves the zmm
// state.
func gemmBF16Kernels() []*gemmBF16Kernel {
	var ks []*gemmBF16Kernel
	if amxUsable {
		ks = append(ks, gemmAMXKernel)
	}
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512BF16 {
		ks = append(ks, gemmBF16KernelAVX512)
	}
	return append(ks, gemmBF16KernelGo12x32)
}

// gemmBF16PackGather is gemmBF16PackGatherRowsGo with AVX-512 gathers:
// idx[i] is the byte offset of stored row i, and the masks are those of
// gemmBF16PackPairs. Masked-off lanes are neither read nor written.
//
//go:noescape
func gemmBF16PackGather(dst *uint32, src *half.BFloat16, idx *[32]int32, steps int, load0, load1, store0, store1 uint16)

// gemmBF16PackGatherRows is gemmBF16PackGatherRowsGo, with AVX-512 where the
// CPU has it and the row offsets fit the gather's 32-bit indices.
func gemmBF16PackGatherRows(dst []uint32, src []half.BFloat16, ld, steps, w, stride int) {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasPOPCNT || steps == 0 || stride == 0 || 2*w*ld > math.MaxInt32 {
		gemmBF16PackGatherRowsGo(dst, src, ld, steps, w, stride)
		return
	}
	if w < 0 || w > stride || stride > 32 {
		panic("cpu: gemmBF16PackGatherRows: bad width")
	}
	_ = dst[steps*stride-1]
	if w > 0 {
		_ = src[(w-1)*ld+2*steps-1]
	}
	if w == 32 && stride == 32 && steps >= 16 {
		// Whole panels: transpose 16 pair steps at a time with shuffles,
		// gather the rest.
		blocks := steps / 16
		gemmPackTrans32(&dst[0], unsafe.Pointer(&src[0]), 2*ld, blocks)
		if steps -= 16 * blocks; steps == 0 {
			return
		}
		dst, src = dst[16*blocks*32:], src[32*blocks:]
	}
	var idx [32]int32
	for i := range w {
		idx[i] = int32(2 * i * ld)
	}
	mask := func(n int) uint16 { return uint16(1<<min(max(n, 0), 16) - 1) }
	gemmBF16PackGather(&dst[0], unsafe.SliceData(src), &idx, steps, mask(w), mask(w-16), mask(stride), mask(stride-16))
}

// gemmBF16PackPairsWide is gemmBF16PackPairs for panels whole 32-column
// panels side by side (panel q's stored columns at src + 64q bytes, its
// destination at dst + q·panel bytes), row by row: for each q,
//
//	gemmBF16PackPairRowsGo(dst[q*panel/4:], src[32*q:], ld, steps, 32, 32)
//
// Generated by internal/asmgen.
//
//go:noescape
func gemmBF16PackPairsWide(dst *uint32, src *half.BFloat16, ld, steps, panels, panel int)

// gemmBF16PackPairPanels packs panels whole 32-column B micro-panels from
// an op(B) that is not transposed, panel q to dst[q*stride:] from
// src[32*q:], steps pair steps each (gemmBF16PackPairRowsGo with w ==
// stride == 32 per panel), reporting false where the CPU lacks AVX-512.
func gemmBF16PackPairPanels(dst []uint32, src []half.BFloat16, ld, steps, panels, stride int) bool {
	if !cpu.X86.HasAVX512F || steps <= 0 || panels <= 0 {
		return false
	}
	_ = dst[(panels-1)*stride+steps*32-1]
	_ = src[(2*steps-1)*ld+32*panels-1]
	gemmBF16PackPairsWide(&dst[0], &src[0], ld, steps, panels, 4*stride)
	return true
}
