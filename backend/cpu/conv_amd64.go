//go:build amd64 && !purego

package cpu

import (
	"math"
	"unsafe"

	"github.com/gamp-ml/gamp/half"
	"golang.org/x/sys/cpu"
)

//go:generate go run ./internal/convgen -o conv_amd64.s

// convKernel12x32AVX512 is gemmKernel12x32AVX512 reading the B row of k step p in
// place at b + offs[p] bytes (a tap's run of the padded image) instead of from a
// packed panel. It equals this Go loop with every multiply-add fused (VFMADD231PS),
// which convKernelGo(12, 32, ...) is where the compiler fuses x·y+z:
//
//	for i := 0; i < 12; i++ {
//		for j := 0; j < 32; j++ {
//			var acc float32
//			for p := 0; p < kc; p++ {
//				acc = fma(a[p*12+i], b[offs[p]/4+j], acc)
//			}
//			c[i*ldc+j] += acc
//		}
//	}
//
//go:noescape
func convKernel12x32AVX512(kc int, a []float32, b *float32, offs []int, c []float32, ldc int)

// convKernel16x16AVX512 is convKernel12x32AVX512 for a 16×16 tile: the same loop
// with 16 and 16 for 12 and 32 (convKernelGo(16, 16, ...)).
//
//go:noescape
func convKernel16x16AVX512(kc int, a []float32, b *float32, offs []int, c []float32, ldc int)

// convKernel8x32AVX512 is convKernel12x32AVX512 for an 8×32 tile: the same loop
// with 8 for 12 (convKernelGo(8, 32, ...)).
//
//go:noescape
func convKernel8x32AVX512(kc int, a []float32, b *float32, offs []int, c []float32, ldc int)

// convDirectF32 and convDirectF32x16 are the float32 direct kernels (see
// convOps.direct): the in-place AVX-512 kernels where Gemm runs the 12×32 AVX-512
// one, else none.
var (
	convDirectF32    = convDirect(12, 32, convKernel12x32AVX512)
	convDirectF32x16 = convDirect(16, 16, convKernel16x16AVX512)
	convDirectF32x8  = convDirect(8, 32, convKernel8x32AVX512)
)

// convDirect wraps an in-place kernel of an mr×nr tile with the bounds checks the
// assembly does not make. The offsets are checked once per call of the
// convolution (convOffsets), not per kernel call: maxOff is their checked maximum.
func convDirect(mr, nr int, kern func(kc int, a []float32, b *float32, offs []int, c []float32, ldc int)) func(steps int, a, b []float32, offs []int, maxOff int, c []float32, ldc int) {
	if gemmKernel32 != gemmKernelAVX512 {
		return nil
	}
	return convDirectOf(mr, nr, kern)
}

// convDirectOf is convDirect's wrapper for float32 elements or bf16 pairs.
func convDirectOf[P float32 | uint32](mr, nr int, kern func(kc int, a []P, b *P, offs []int, c []float32, ldc int)) func(steps int, a, b []P, offs []int, maxOff int, c []float32, ldc int) {
	return func(steps int, a, b []P, offs []int, maxOff int, c []float32, ldc int) {
		if steps == 0 {
			return
		}
		_ = a[steps*mr-1]
		_ = c[(mr-1)*ldc+nr-1]
		offs = offs[:steps]
		if maxOff/4+nr > len(b) {
			panic("cpu: convDirect: B row out of range")
		}
		kern(steps, a, &b[0], offs, c, ldc)
	}
}

// convPairKernel12x32AVX512 is convKernel12x32AVX512 on bf16 pairs: A the packed
// weight pairs, the B row of pair step p read in place at b + offs[p] bytes (nr
// words of the pair-interleaved image, convInterleave), VPBROADCASTD and
// VDPBF16PS for VBROADCASTSS and VFMADD231PS. It equals, NaN payloads aside,
// gemmBF16KernelGo(12, 32, ...) with add set on the panel
// b'[p*32+j] = b[offs[p]/4+j], which convPairKernelGo computes.
//
//go:noescape
func convPairKernel12x32AVX512(kc int, a []uint32, b *uint32, offs []int, c []float32, ldc int)

// convPairKernel16x16AVX512 is convPairKernel12x32AVX512 for a 16×16 tile.
//
//go:noescape
func convPairKernel16x16AVX512(kc int, a []uint32, b *uint32, offs []int, c []float32, ldc int)

// convPairKernel8x32AVX512 is convPairKernel12x32AVX512 for an 8×32 tile.
//
//go:noescape
func convPairKernel8x32AVX512(kc int, a []uint32, b *uint32, offs []int, c []float32, ldc int)

// convDirectPairs, convDirectPairsx16 and convDirectPairsx8 are the bf16 direct
// kernels (convOps.direct on the pair-interleaved image) where the convolution's
// bf16 kernel is the VDPBF16PS one, else nil.
var (
	convDirectPairs    = convDirectPairsOf(12, 32, convPairKernel12x32AVX512)
	convDirectPairsx16 = convDirectPairsOf(16, 16, convPairKernel16x16AVX512)
	convDirectPairsx8  = convDirectPairsOf(8, 32, convPairKernel8x32AVX512)
)

// convDirectPairsOf is convDirectOf where the convolution's bf16 kernel is the
// VDPBF16PS one, else nil.
func convDirectPairsOf(mr, nr int, kern func(kc int, a []uint32, b *uint32, offs []int, c []float32, ldc int)) func(steps int, a, b []uint32, offs []int, maxOff int, c []float32, ldc int) {
	if convBF16Kernel != gemmBF16KernelAVX512 {
		return nil
	}
	return convDirectOf(mr, nr, kern)
}

// convPairKernel12x32NarrowAVX512 is convPairKernel12x32AVX512 for a tile computed
// in one call: c (bf16, ldc elements a row) gets each element's sum from zero,
// plus init[i] for row i (added last, the sum the first operand, as the one-row
// kernel adds its tile to C), rounded to bf16 as convNarrowRowsCVT rounds
// (convPairKernelNarrowGo).
//
//go:noescape
func convPairKernel12x32NarrowAVX512(kc int, a []uint32, b *uint32, offs []int, c []half.BFloat16, ldc int, init *float32)

// convPairKernel16x16NarrowAVX512 is convPairKernel12x32NarrowAVX512 for a 16×16
// tile.
//
//go:noescape
func convPairKernel16x16NarrowAVX512(kc int, a []uint32, b *uint32, offs []int, c []half.BFloat16, ldc int, init *float32)

// convPairKernel8x32NarrowAVX512 is convPairKernel12x32NarrowAVX512 for an 8×32
// tile.
//
//go:noescape
func convPairKernel8x32NarrowAVX512(kc int, a []uint32, b *uint32, offs []int, c []half.BFloat16, ldc int, init *float32)

// The narrowing direct kernels (convOps.directNarrow) of the 12×32, 16×16 and 8×32
// bf16 tiles, nil where the matching direct kernel is.
var (
	convDirectPairsNarrow    = convDirectNarrowOf(convDirectPairs, 12, 32, convPairKernel12x32NarrowAVX512)
	convDirectPairsx16Narrow = convDirectNarrowOf(convDirectPairsx16, 16, 16, convPairKernel16x16NarrowAVX512)
	convDirectPairsx8Narrow  = convDirectNarrowOf(convDirectPairsx8, 8, 32, convPairKernel8x32NarrowAVX512)
)

// convDirectNarrowOf wraps a narrowing kernel of an mr×nr tile with the bounds
// checks the assembly does not make, where the tile's direct kernel one exists.
func convDirectNarrowOf(one func(steps int, a, b []uint32, offs []int, maxOff int, c []float32, ldc int), mr, nr int,
	kern func(kc int, a []uint32, b *uint32, offs []int, c []half.BFloat16, ldc int, init *float32)) func(steps int, a, b []uint32, offs []int, maxOff int, c []half.BFloat16, ldc int, init []float32) {
	if one == nil {
		return nil
	}
	return func(steps int, a, b []uint32, offs []int, maxOff int, c []half.BFloat16, ldc int, init []float32) {
		_ = init[mr-1]
		_ = c[(mr-1)*ldc+nr-1]
		offs = offs[:steps]
		if steps > 0 {
			_ = a[steps*mr-1]
			if maxOff/4+nr > len(b) {
				panic("cpu: convDirectNarrow: B row out of range")
			}
		}
		kern(steps, a, unsafe.SliceData(b), offs, c, ldc, &init[0])
	}
}

// convPairKernelNarrowGo is the pure-Go twin of convPairKernel<mr>x<nr>NarrowAVX512:
// convPairKernelGo on a float32 tile holding init, then rounded as convNarrowGo
// rounds.
func convPairKernelNarrowGo(mr, nr, steps int, a, b []uint32, offs []int, c []half.BFloat16, ldc int, init []float32) {
	t := make([]float32, mr*nr)
	for i := range mr {
		for j := range nr {
			t[i*nr+j] = init[i]
		}
	}
	convPairKernelGo(mr, nr, steps, a, b, offs, t, nr)
	convNarrowGo(c, ldc, t, nr, nr, mr)
}

// convPairKernelRows8x32AVX512 is convKernelRows8x32AVX512 on bf16: row i's word at
// pair step p is the pair of elements at x + offs[i] + 4p bytes (two consecutive
// elements of a tap's run, the first in the low half), B a packed panel of pairs,
// VDPBF16PS: c[i*ldc+j] += the VDPBF16PS dot product of row i and column j,
// accumulated from zero in ascending p (convPairKernelRowsGo; offs in bytes).
//
//go:noescape
func convPairKernelRows8x32AVX512(kc int, x *uint16, offs *[8]int, b *uint32, c *float32, ldc int)

// convPairKernelRows8x16AVX512 is convPairKernelRows8x32AVX512 for 16 columns.
//
//go:noescape
func convPairKernelRows8x16AVX512(kc int, x *uint16, offs *[8]int, b *uint32, c *float32, ldc int)

// convRowsPairs32 and convRowsPairs16 are the bf16 in-place-rows kernels (see
// convOps.rowsIn) where the convolution's bf16 kernel is the VDPBF16PS one, else
// nil.
var (
	convRowsPairs32 = convRowsPairsOf(32, convPairKernelRows8x32AVX512)
	convRowsPairs16 = convRowsPairsOf(16, convPairKernelRows8x16AVX512)
)

// convRowsPairsOf wraps an in-place bf16 rows kernel of nr columns with the bounds
// checks the assembly does not make. Rows past len(offs) read the last tap again.
func convRowsPairsOf(nr int, kern func(kc int, x *uint16, offs *[8]int, b *uint32, c *float32, ldc int)) func(steps int, x []half.BFloat16, offs []int, b []uint32, c []float32, ldc int) {
	if convBF16Kernel != gemmBF16KernelAVX512 {
		return nil
	}
	return func(steps int, x []half.BFloat16, offs []int, b []uint32, c []float32, ldc int) {
		if steps == 0 {
			return
		}
		_ = b[steps*nr-1]
		_ = c[(convRowsMR-1)*ldc+nr-1]
		var ob [convRowsMR]int
		for i := range ob {
			o := offs[min(i, len(offs)-1)]
			if o < 0 || o+2*steps > len(x) {
				panic("cpu: convRowsPairs: A row out of range")
			}
			ob[i] = 2 * o
		}
		kern(steps, (*uint16)(unsafe.Pointer(&x[0])), &ob, &b[0], &c[0], ldc)
	}
}

// convInterleavePairs sets dst[i] = lo[i] | hi[i]<<16 for i < n (AVX-512, BMI2).
//
//go:noescape
func convInterleavePairs(dst *uint32, lo, hi *uint16, n int)

// convInterleave writes the pairs of the planes lo and hi into dst (lo in the low
// halves): convInterleavePairs where the CPU has AVX-512 (F, BW) and BMI2, else
// convInterleaveGo.
func convInterleave(dst []uint32, lo, hi []half.BFloat16) {
	n := len(dst)
	if n == 0 {
		return
	}
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BW || !cpu.X86.HasBMI2 {
		convInterleaveGo(dst, lo, hi)
		return
	}
	_, _ = lo[n-1], hi[n-1]
	convInterleavePairs(&dst[0], (*uint16)(unsafe.Pointer(&lo[0])), (*uint16)(unsafe.Pointer(&hi[0])), n)
}

// convBF16Kernel is the bf16 micro-kernel of the direct convolution: AMX where
// this process may use it, else VDPBF16PS where the CPU has it, else none.
var convBF16Kernel = func() *gemmBF16Kernel {
	switch {
	case amxUsable:
		return gemmAMXKernel
	case cpu.X86.HasAVX512F && cpu.X86.HasAVX512BF16:
		return gemmBF16KernelAVX512
	}
	return nil
}()

// convGatherPairs is convGatherPairsGo on the AVX-512 loops of convGatherWords, where
// the CPU has them and the offsets fit their 32-bit byte indices.
func convGatherPairs(dst []uint32, src []half.BFloat16, offs []int, steps, w, stride int) {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasPOPCNT || steps == 0 || w == 0 || stride > 32 || w > stride {
		convGatherPairsGo(dst, src, offs, steps, w, stride)
		return
	}
	_ = dst[steps*stride-1]
	var idx [32]int32
	for i, o := range offs[:w] {
		_ = src[o+2*steps-1]
		if 2*o > math.MaxInt32 {
			convGatherPairsGo(dst, src, offs, steps, w, stride)
			return
		}
		idx[i] = int32(2 * o)
	}
	convGatherWords(dst, unsafe.Pointer(unsafe.SliceData(src)), &idx, steps, w, stride)
}

// convGatherF32 is convGatherF32Go on the same loops: a bf16 pair and a float32 are
// both 32-bit words, so gathering pairs at byte offsets 4·offs[i] moves the float32
// elements bit for bit.
func convGatherF32(dst, src []float32, offs []int, steps, w, stride int) {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasPOPCNT || steps == 0 || w == 0 || stride > 32 || w > stride {
		convGatherF32Go(dst, src, offs, steps, w, stride)
		return
	}
	_ = dst[steps*stride-1]
	var idx [32]int32
	for i, o := range offs[:w] {
		_ = src[o+steps-1]
		if 4*o > math.MaxInt32 {
			convGatherF32Go(dst, src, offs, steps, w, stride)
			return
		}
		idx[i] = int32(4 * o)
	}
	convGatherWords(unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), len(dst)), unsafe.Pointer(unsafe.SliceData(src)), &idx, steps, w, stride)
}

// convGatherWords sets row p of dst (stride words, p < steps) to word p of the w runs
// of 32-bit words at byte offsets idx[:w] from base, the rest of each row zero. Runs
// equally far apart that fill whole rows of 16 or 32 words (the weight gradient's
// B panels: the output channels of gy, one run each) go 16 words at a time through
// the shuffle transposes (gemmPackTrans16, gemmPackTrans32), which move the same
// words several times faster than a gather; the rest through gemmBF16PackGather.
func convGatherWords(dst []uint32, base unsafe.Pointer, idx *[32]int32, steps, w, stride int) {
	if blocks := steps / 16; blocks > 0 && w == stride && (w == 16 || w == 32) && convSpaced(idx[:w]) {
		src, ld := unsafe.Add(base, idx[0]), int(idx[1]-idx[0])
		if w == 32 {
			gemmPackTrans32(&dst[0], src, ld, blocks)
		} else {
			gemmPackTrans16(&dst[0], src, ld, blocks)
		}
		if steps -= 16 * blocks; steps == 0 {
			return
		}
		dst, base = dst[16*blocks*stride:], unsafe.Add(base, 64*blocks)
	}
	mask := func(n int) uint16 { return uint16(1<<min(max(n, 0), 16) - 1) }
	gemmBF16PackGather(&dst[0], (*half.BFloat16)(base), idx, steps, mask(w), mask(w-16), mask(stride), mask(stride-16))
}

// convSpaced reports whether idx (two or more) is idx[0], idx[0]+d, idx[0]+2d, … for
// some d > 0.
func convSpaced(idx []int32) bool {
	if len(idx) < 2 {
		return false
	}
	d := idx[1] - idx[0]
	if d <= 0 {
		return false
	}
	for i := 2; i < len(idx); i++ {
		if idx[i]-idx[i-1] != d {
			return false
		}
	}
	return true
}

// convKernelGo is the pure-Go twin of convKernel12x32AVX512 for any mr×nr tile (nr
// a multiple of 4; the tests pit the assembly against it — builds without the
// assembly use the im2col path, so it lives beside the kernels it describes): for every i < mr and j < nr, c[i*ldc+j] += Σ_p a[p*mr+i] ·
// b[offs[p]/4+j], accumulated from zero in ascending p (fused where the compiler
// fuses x·y+z).
func convKernelGo(mr, nr, steps int, a, b []float32, offs []int, c []float32, ldc int) {
	a = a[:steps*mr]
	offs = offs[:steps]
	for i := range mr {
		crow := c[i*ldc:][:nr]
		for j := 0; j < nr; j += 4 {
			var s0, s1, s2, s3 float32
			for p, o := range offs {
				x := a[p*mr+i]
				bp := b[o/4+j:][:4]
				s0 += x * bp[0]
				s1 += x * bp[1]
				s2 += x * bp[2]
				s3 += x * bp[3]
			}
			crow[j] += s0
			crow[j+1] += s1
			crow[j+2] += s2
			crow[j+3] += s3
		}
	}
}

// convAMXKernel32x32 is convStackKernel in assembly (gemmAMXKernel32x32's tiles
// and instructions, add set), with byte strides, offs in words and the B tiles
// read at b + 4·offs[t]: it equals convAMXStackGo(gemmAMXKernelGo32x32), NaN
// payloads aside.
//
//go:noescape
func convAMXKernel32x32(np, kt int, a *uint32, aRow, aTile, aPanel int, b *uint32, offs *int, bStride, bPanel int, c *float32, ldc, cPanel int, cfg *[64]byte)

// convAMXStack returns, for the AMX kernel, convAMXKernel32x32 as a
// convStackKernel with the bounds checks the assembly does not make; nil for
// any other kernel.
func convAMXStack(k *gemmBF16Kernel) convStackKernel {
	if k != gemmAMXKernel {
		return nil
	}
	return func(np, kt int, a []uint32, aRow, aTile, aPanel int, b []uint32, offs []int, bStride, bPanel int, c []float32, ldc, cPanel int) {
		if np <= 0 || kt <= 0 {
			return
		}
		if min(aRow, aTile, aPanel, bStride, bPanel, ldc, cPanel) < 0 {
			panic("cpu: convAMXStack: negative stride")
		}
		_ = a[(np-1)*aPanel+(amxMR-1)*aRow+(kt-1)*aTile+amxTileK-1]
		_ = c[(np-1)*cPanel+(amxMR-1)*ldc+amxNR-1]
		last := (np-1)*bPanel + (amxTileK-1)*bStride + amxNR
		for _, o := range offs[:kt] {
			if o < 0 || o+last > len(b) {
				panic("cpu: convAMXStack: B tile out of range")
			}
		}
		convAMXKernel32x32(np, kt, &a[0], 4*aRow, 4*aTile, 4*aPanel, &b[0], &offs[0], 4*bStride, 4*bPanel, &c[0], 4*ldc, 4*cPanel, &amxTileConfig)
	}
}

// convKernelRows8x32AVX512 is the weight gradient's float32 kernel with the taps
// as rows read in place: for i < 8 and j < 32, c[i*ldc+j] += Σ_p x[offs[i]/4+p] ·
// b[p*32+j], accumulated from zero in ascending p with fused multiply-adds, then
// added to C (convKernelRowsGo; offs in bytes).
//
//go:noescape
func convKernelRows8x32AVX512(kc int, x *float32, offs *[8]int, b *float32, c *float32, ldc int)

// convKernelRows8x16AVX512 is convKernelRows8x32AVX512 for 16 columns.
//
//go:noescape
func convKernelRows8x16AVX512(kc int, x *float32, offs *[8]int, b *float32, c *float32, ldc int)

// convRowsF32x32 and convRowsF32x16 are the in-place-rows kernels (see
// convOps.rowsIn) where Gemm runs the AVX-512 kernels, else nil.
var (
	convRowsF32x32 = convRowsIn(32, convKernelRows8x32AVX512)
	convRowsF32x16 = convRowsIn(16, convKernelRows8x16AVX512)
)

// convRowsIn wraps an in-place-rows kernel of nr columns with the bounds checks
// the assembly does not make. Rows past len(offs) read the last tap again: their C
// rows are padding.
func convRowsIn(nr int, kern func(kc int, x *float32, offs *[8]int, b *float32, c *float32, ldc int)) func(steps int, x []float32, offs []int, b []float32, c []float32, ldc int) {
	if gemmKernel32 != gemmKernelAVX512 {
		return nil
	}
	return func(steps int, x []float32, offs []int, b []float32, c []float32, ldc int) {
		if steps == 0 {
			return
		}
		_ = b[steps*nr-1]
		_ = c[(convRowsMR-1)*ldc+nr-1]
		var ob [convRowsMR]int
		for i := range ob {
			o := offs[min(i, len(offs)-1)]
			if o < 0 || o+steps > len(x) {
				panic("cpu: convRowsIn: A row out of range")
			}
			ob[i] = 4 * o
		}
		kern(steps, &x[0], &ob, &b[0], &c[0], ldc)
	}
}

// convCopyRows copies rows rows of n bytes from src to dst, rows srcStride and
// dstStride bytes apart, in ascending order (so a forward copy within one buffer,
// dst ≤ src, is safe): convCopyRowsGo's loop without a memmove call per row.
//
//go:noescape
func convCopyRows(dst, src *byte, n, rows, dstStride, srcStride int)

// convFillRows sets row r of dst (rows rows of n bytes, n a multiple of 4, stride
// bytes apart) to the float32 v[r] in every element: convFillGo's loop.
//
//go:noescape
func convFillRows(dst, v *float32, n, rows, stride int)

// convFill sets row r of dst (rows rows of n elements, ld apart) to v[r]:
// convFillRows where the CPU has AVX-512 (F, BW) and BMI2, else convFillGo.
func convFill(dst []float32, ld int, v []float32, n, rows int) {
	if rows <= 0 || n <= 0 {
		return
	}
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BW || !cpu.X86.HasBMI2 || ld < 0 {
		convFillGo(dst, ld, v, n, rows)
		return
	}
	_ = dst[(rows-1)*ld+n-1]
	_ = v[rows-1]
	convFillRows(&dst[0], &v[0], 4*n, rows, 4*ld)
}

// convNarrowRows rounds rows rows of n float32 (srcStride bytes apart) to bf16
// into dst, rows dstStride bytes apart: convNarrowGo's loop.
//
//go:noescape
func convNarrowRows(dst *uint16, src *float32, n, rows, srcStride, dstStride int)

// convNarrowTo rounds rows rows of n elements of src (row stride ls) to bf16 into
// dst (row stride ld): convNarrowRows where the CPU has AVX-512 (F, BW) and BMI2,
// else convNarrowGo.
func convNarrowTo(dst []half.BFloat16, ld int, src []float32, ls, n, rows int) {
	if rows <= 0 || n <= 0 {
		return
	}
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BW || !cpu.X86.HasBMI2 || ls < 0 || ld < 0 {
		convNarrowGo(dst, ld, src, ls, n, rows)
		return
	}
	_ = dst[(rows-1)*ld+n-1]
	_ = src[(rows-1)*ls+n-1]
	if convNarrowCVT {
		convNarrowRowsCVT((*uint16)(unsafe.Pointer(&dst[0])), &src[0], n, rows, 4*ls, 2*ld)
		return
	}
	convNarrowRows((*uint16)(unsafe.Pointer(&dst[0])), &src[0], n, rows, 4*ls, 2*ld)
}

// convNarrowRowsCVT is convNarrowRows by VCVTNEPS2BF16 (AVX512_BF16), a chunk of
// 16 holding a subnormal (which the instruction would flush) by the integer
// rounding: the same bits.
//
//go:noescape
func convNarrowRowsCVT(dst *uint16, src *float32, n, rows, srcStride, dstStride int)

// convNarrowCVT selects convNarrowRowsCVT where the CPU has AVX512_BF16 and
// AVX512DQ (VFPCLASSPS); tests clear it to compare.
var convNarrowCVT = cpu.X86.HasAVX512BF16 && cpu.X86.HasAVX512DQ

// convRows copies rows rows of n elements from src (row stride ls) to dst (row
// stride ld), ascending: convCopyRows where the CPU has AVX-512 (F, BW) and BMI2.
func convRows[T float32 | half.BFloat16](dst []T, ld int, src []T, ls, n, rows int) {
	if rows <= 0 || n <= 0 {
		return
	}
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BW || !cpu.X86.HasBMI2 || ld < 0 || ls < 0 {
		convRowsGo(dst, ld, src, ls, n, rows)
		return
	}
	_ = dst[(rows-1)*ld+n-1]
	_ = src[(rows-1)*ls+n-1]
	size := int(unsafe.Sizeof(dst[0]))
	convCopyRows((*byte)(unsafe.Pointer(&dst[0])), (*byte)(unsafe.Pointer(&src[0])), size*n, rows, size*ld, size*ls)
}

// convKernelRowsGo is the pure-Go twin of convKernelRows8x<nr>AVX512 (element
// offsets, rows past len(offs) reading the last tap), which the tests pit against it
// (the portable build has no rows-in-place kernel, so the twin lives here): for i < mr
// and j < nr,
// c[i*ldc+j] += Σ_p x[offs[i]+p] · b[p*nr+j], accumulated from zero in ascending p
// (fused where the compiler fuses x·y+z).
func convKernelRowsGo(mr, nr, steps int, x []float32, offs []int, b, c []float32, ldc int) {
	b = b[:steps*nr]
	for i := range mr {
		xr := x[offs[min(i, len(offs)-1)]:][:steps]
		crow := c[i*ldc:][:nr]
		for j := range nr {
			var acc float32
			for p, v := range xr {
				acc += v * b[p*nr+j]
			}
			crow[j] += acc
		}
	}
}

// convPairKernelGo is the pure-Go twin of convPairKernel<mr>x<nr>AVX512: the B rows
// at b[offs[p]/4:] copied into a packed panel, then gemmBF16KernelGo adding the tile
// to C.
func convPairKernelGo(mr, nr, steps int, a, b []uint32, offs []int, c []float32, ldc int) {
	bp := make([]uint32, steps*nr)
	for p, o := range offs[:steps] {
		copy(bp[p*nr:][:nr], b[o/4:][:nr])
	}
	gemmBF16KernelGo(mr, nr, steps, a, bp, c, ldc, true)
}

// convPairKernelRowsGo is the pure-Go twin of convPairKernelRows8x<nr>AVX512
// (element offsets, rows past len(offs) reading the last tap): row i's pairs
// pair(x[offs[i]+2p], x[offs[i]+2p+1]) packed as an A panel, then
// gemmBF16KernelGo adding the tile to C.
func convPairKernelRowsGo(mr, nr, steps int, x []half.BFloat16, offs []int, b []uint32, c []float32, ldc int) {
	ap := make([]uint32, steps*mr)
	for i := range mr {
		xr := x[offs[min(i, len(offs)-1)]:][:2*steps]
		for p := range steps {
			ap[p*mr+i] = pair(xr[2*p], xr[2*p+1])
		}
	}
	gemmBF16KernelGo(mr, nr, steps, ap, b, c, ldc, true)
}
