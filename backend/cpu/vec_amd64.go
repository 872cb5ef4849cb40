//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// vecOpAVX512 computes n elements (a multiple of 16) of operation op with zmm
// registers. It equals vecOpGo(op, dst[:n], a[:n], b[:n]) for the vector operations
// and vecOpGo(op, dst[:n], a[:n], b[:1]) for the scalar ones, bit for bit, NaN payloads
// aside; for vecAdd, for instance,
//
//	for i := 0; i < n; i++ {
//		dst[i] = a[i] + b[i]
//	}
//
// and for vecRelu (a compare with the unordered predicate !(a <= 0), then a zeroing
// masked move)
//
//	for i := 0; i < n; i++ {
//		if v := a[i]; v <= 0 {
//			dst[i] = 0
//		} else {
//			dst[i] = v
//		}
//	}
//
//go:noescape
func vecOpAVX512(op vecOp, dst, a, b *float32, n int)

// vecOpAVX2 is vecOpAVX512 with ymm registers; compares make lane masks that are
// ANDed with the value.
//
//go:noescape
func vecOpAVX2(op vecOp, dst, a, b *float32, n int)

// vecScaleFiniteAVX512 scales n elements (a multiple of 16) in place. It equals
//
//	ok := true
//	for i := 0; i < n; i++ {
//		x[i] *= k
//		ok = ok && !math.IsInf(float64(x[i]), 0) && x[i] == x[i]
//	}
//	return ok
//
// by keeping four running sums of x[i]·0 (VFMADD231PS), which become NaN from the
// first Inf or NaN on.
//
//go:noescape
func vecScaleFiniteAVX512(x *float32, k float32, n int) bool

// vecScaleFiniteAVX2 is vecScaleFiniteAVX512 with ymm registers (and FMA).
//
//go:noescape
func vecScaleFiniteAVX2(x *float32, k float32, n int) bool

// vecSumF64AVX512 widens n float32s (a multiple of 16) and adds them into sixteen
// float64 lanes held in two zmm registers. It equals
//
//	for i := 0; i < n; i++ {
//		s[i%16] += float64(x[i])
//	}
//
//go:noescape
func vecSumF64AVX512(s *[16]float64, x *float32, n int)

// vecSumF64AVX2 is vecSumF64AVX512 with the lanes in four ymm registers.
//
//go:noescape
func vecSumF64AVX2(s *[16]float64, x *float32, n int)

// vecAccF64AVX512 equals
//
//	for i := 0; i < n; i++ {
//		acc[i] += float64(x[i])
//	}
//
// for n a multiple of 16.
//
//go:noescape
func vecAccF64AVX512(acc *float64, x *float32, n int)

// vecAccF64AVX2 is vecAccF64AVX512 with ymm registers.
//
//go:noescape
func vecAccF64AVX2(acc *float64, x *float32, n int)

// vecDotF64AVX512 equals
//
//	for i := 0; i < n; i++ {
//		s[i%16] += float64(x[i]) * float64(y[i])
//	}
//
// for n a multiple of 16 (VFMADD231PD: the product is exact, so fusing changes nothing).
//
//go:noescape
func vecDotF64AVX512(s *[16]float64, x, y *float32, n int)

// vecDotF64AVX2 is vecDotF64AVX512 with ymm registers (and FMA).
//
//go:noescape
func vecDotF64AVX2(s *[16]float64, x, y *float32, n int)

// vecMaxF32AVX512 equals vecMaxF32Go(s, x[:n]) for n a multiple of 16 (VMAXPS):
//
//	for i := 0; i < n; i++ {
//		s[i%16] = vecMax(s[i%16], x[i])
//	}
//
//go:noescape
func vecMaxF32AVX512(s *[16]float32, x *float32, n int)

// vecMaxF32AVX2 is vecMaxF32AVX512 with ymm registers.
//
//go:noescape
func vecMaxF32AVX2(s *[16]float32, x *float32, n int)

// vecExpF64AVX512 equals vecExpF64Go(s, e[:n], x[:n], shift) for n a multiple of 16,
// NaN payloads aside:
//
//	for i := 0; i < n; i++ {
//		e[i] = expF64(float64(x[i]) - shift)
//		s[i%16] += e[i]
//	}
//
// with expF64's steps as VRNDSCALEPD, VFNMADD231PD, VFMADD213PD, an integer 2^k and
// masked moves for the clamped ranges.
//
//go:noescape
func vecExpF64AVX512(s *[16]float64, e *float64, x *float32, shift float64, n int)

// vecExpF64AVX2 is vecExpF64AVX512 with ymm registers (VROUNDPD, FMA, VBLENDVPD).
//
//go:noescape
func vecExpF64AVX2(s *[16]float64, e *float64, x *float32, shift float64, n int)

// vecNarrowAVX512 equals vecNarrowGo(op, dst[:n], e, x, y, c0, c1) for n a multiple of
// 16 (VCVTPD2PS rounds to nearest even, as the float32 conversion does); for narrowDiv
//
//	for i := 0; i < n; i++ {
//		dst[i] = float32(e[i] / c0)
//	}
//
//go:noescape
func vecNarrowAVX512(op narrowOp, dst *float32, e *float64, x, y *float32, c0, c1 float64, n int)

// vecNarrowAVX2 is vecNarrowAVX512 with ymm registers.
//
//go:noescape
func vecNarrowAVX2(op narrowOp, dst *float32, e *float64, x, y *float32, c0, c1 float64, n int)

// vecAccDevF64AVX512 equals vecAccDevF64Go(op, acc[:n], g, x[:n], m[:n]) for n a
// multiple of 16 (VFMADD231PD); for accSq
//
//	for i := 0; i < n; i++ {
//		d := float64(x[i]) - m[i]
//		acc[i] = math.FMA(d, d, acc[i])
//	}
//
//go:noescape
func vecAccDevF64AVX512(op accDevOp, acc *float64, gy, x *float32, m *float64, n int)

// vecAccDevF64AVX2 is vecAccDevF64AVX512 with ymm registers.
//
//go:noescape
func vecAccDevF64AVX2(op accDevOp, acc *float64, gy, x *float32, m *float64, n int)

// vecDevSqF64AVX512 equals vecDevSqF64Go(s, x[:n], mean) for n a multiple of 16:
//
//	for i := 0; i < n; i++ {
//		d := float64(x[i]) - mean
//		s[i%16] = math.FMA(d, d, s[i%16])
//	}
//
//go:noescape
func vecDevSqF64AVX512(s *[16]float64, x *float32, mean float64, n int)

// vecDevSqF64AVX2 is vecDevSqF64AVX512 with ymm registers.
//
//go:noescape
func vecDevSqF64AVX2(s *[16]float64, x *float32, mean float64, n int)

// vecLnRowAVX512 equals vecLnRowGo(s, gw[:n], gb[:n], gv[:n], gy[:n], x[:n], mean,
// invstd) for n a multiple of 16:
//
//	for i := 0; i < n; i++ {
//		xh := (float64(x[i]) - mean) * invstd
//		s[i%16] += float64(gv[i])
//		s[16+i%16] = math.FMA(float64(gv[i]), xh, s[16+i%16])
//		gw[i] += float64(float64(gy[i]) * xh)
//		gb[i] += float64(gy[i])
//	}
//
//go:noescape
func vecLnRowAVX512(s *[32]float64, gw, gb *float64, gv, gy, x *float32, mean, invstd float64, n int)

// vecLnRowAVX2 is vecLnRowAVX512 with ymm registers.
//
//go:noescape
func vecLnRowAVX2(s *[32]float64, gw, gb *float64, gv, gy, x *float32, mean, invstd float64, n int)

// vecLnFwdAVX512 equals vecLnFwdGo(y[:n], x[:n], w[:n], b[:n], m, is) for n a multiple
// of 16, bit for bit (subtract, multiply, multiply, add, each rounded: no FMA).
//
//go:noescape
func vecLnFwdAVX512(y, x, w, b *float32, m, is float32, n int)

// vecLnFwdAVX2 is vecLnFwdAVX512 with ymm registers.
//
//go:noescape
func vecLnFwdAVX2(y, x, w, b *float32, m, is float32, n int)

// vecLnBwdAVX512 equals vecLnBwdGo(gv[:n], x[:n], ca, cm, cb, cc) for n a multiple of
// 16, bit for bit (each step rounded: no FMA).
//
//go:noescape
func vecLnBwdAVX512(gv, x *float32, ca, cm, cb, cc float32, n int)

// vecLnBwdAVX2 is vecLnBwdAVX512 with ymm registers.
//
//go:noescape
func vecLnBwdAVX2(gv, x *float32, ca, cm, cb, cc float32, n int)

var (
	vecAVX512 = &vecImpl{"avx512", vecOpAVX512, vecScaleFiniteAVX512, vecSumF64AVX512, vecAccF64AVX512,
		vecDotF64AVX512, vecMaxF32AVX512, vecExpF64AVX512, vecNarrowAVX512, vecAccDevF64AVX512,
		vecDevSqF64AVX512, vecLnRowAVX512, vecGeluAVX512, vecLnFwdAVX512, vecLnBwdAVX512}
	vecAVX2 = &vecImpl{"avx2", vecOpAVX2, vecScaleFiniteAVX2, vecSumF64AVX2, vecAccF64AVX2,
		vecDotF64AVX2, vecMaxF32AVX2, vecExpF64AVX2, vecNarrowAVX2, vecAccDevF64AVX2,
		vecDevSqF64AVX2, vecLnRowAVX2, vecGeluAVX2, vecLnFwdAVX2, vecLnBwdAVX2}
)

// vecImpls lists the vector loops this CPU can run, best first. x/sys/cpu reports the
// AVX features only where the OS saves the ymm/zmm state.
var vecImpls = func() []*vecImpl {
	var is []*vecImpl
	if cpu.X86.HasAVX512F {
		is = append(is, vecAVX512)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		is = append(is, vecAVX2)
	}
	return is
}()

// The run functions call vec's loops directly (see vec); they are called only when vec
// is not nil.

// vecGeluAVX512 equals geluGo(dst[:n], x[:n], gy[:n]) (gy nil: forward) for n a
// multiple of 16, bit for bit, NaN payloads aside; forward
//
//	for i := 0; i < n; i++ {
//		cdf, _ := geluParts(x[i])
//		dst[i] = x[i] * cdf
//	}
//
// with sixteen float32 lanes, every piece of geluParts computed in the lanes that need
// it (VFMADD213PS Horner steps, one VDIVPS for every piece's quotient, exp32 with
// VRNDSCALEPS) and merged under masks.
//
//go:noescape
func vecGeluAVX512(dst, x, gy *float32, n int)

// vecGeluAVX2 is vecGeluAVX512 with ymm registers (and FMA): compares make lane masks
// that VBLENDVPS merges with.
//
//go:noescape
func vecGeluAVX2(dst, x, gy *float32, n int)

// vecMaxPool2x2AVX512 equals maxRow2x2(out[:n], idx[:n], r0[:2n], r1[:2n], base, w)
// for n a multiple of 16, bit for bit:
//
//	for j := 0; j < n; j++ {
//		best, at := r0[2*j], 0
//		if v := r0[2*j+1]; v > best || v != v {
//			best, at = v, 1
//		}
//		… r1[2*j] (at w), r1[2*j+1] (at w+1) likewise
//		out[j], idx[j] = best, int64(base+2*j+at)
//	}
//
// with the even and odd columns split by VPERMI2PS and each comparison a GT_OQ and an
// UNORD compare ORed into a merge mask.
//
//go:noescape
func vecMaxPool2x2AVX512(out *float32, idx *int64, r0, r1 *float32, n, base, w int)

// vecMaxPool2x2RowsAVX512 equals maxRows2x2(out[:rows·ow], x[:2·rows·w], ow, w) for any
// rows, ow ≥ 0 and w = 2·ow, bit for bit: vecMaxPool2x2AVX512's comparisons on each
// row pair in place, sixteen windows at a time and the rest of a row under lane masks.
//
//go:noescape
func vecMaxPool2x2RowsAVX512(out, x *float32, rows, ow, w int)

// vecMaxPool2x2GradRowsAVX512 equals maxRows2x2Grad(gx[:2·rows·w], x[:2·rows·w],
// gy[:rows·ow], ow, w) for any rows, ow ≥ 0 and w = 2·ow, bit for bit: each window's
// winner (vecMaxPool2x2AVX512's comparisons) gets 0 + gy (VADDPS), the other three +0
// (zeroing masked moves), interleaved back into the rows by VPERMI2PS; the rest of a
// row runs under lane masks.
//
//go:noescape
func vecMaxPool2x2GradRowsAVX512(gx, x, gy *float32, rows, ow, w int)

// vecMaxPool2x2RowsBF16AVX512 is vecMaxPool2x2RowsAVX512 on bfloat16 planes: it
// equals maxRows2x2BF16, bit for bit. A window's two columns are one dword of its
// row, so sixteen windows are one load per row and no shuffle: the even elements
// widened by a 16-bit shift, the odd ones by clearing the low half (both exact),
// compared as the float32 loop compares them, each maximum stored as its high half,
// a NaN quieted as half.Float32ToBFloat16 quiets it.
//
//go:noescape
func vecMaxPool2x2RowsBF16AVX512(out, x *uint16, rows, ow, w int)

// vecMaxPool2x2GradRowsBF16AVX512 is vecMaxPool2x2GradRowsAVX512 on bfloat16 planes:
// it equals maxRows2x2GradBF16, bit for bit. The windows are found as in
// vecMaxPool2x2RowsBF16AVX512; the winner gets 0 + gy (VADDPS, narrowed as above)
// in the low or high half of its row's dword, every other element +0.
//
//go:noescape
func vecMaxPool2x2GradRowsBF16AVX512(gx, x, gy *uint16, rows, ow, w int)

// vecMaxPool2x2PlaneBF16AVX512 is vecMaxPool2x2RowsBF16AVX512 for short rows (ow ≤ 8,
// w = 2·ow, so the rows row pairs are contiguous): each round takes p = 32/(2·ow) row
// pairs in two registers and gathers the windows' two dwords of r0 and of r1 with
// VPERMI2D (idx: vecPoolPlaneIdx(ow)), so that it runs p·ow windows a round; the
// same comparisons, the same bits.
//
//go:noescape
func vecMaxPool2x2PlaneBF16AVX512(out, x *uint16, rows, ow int, idx *[64]int32)

// vecMaxPool2x2GradPlaneBF16AVX512 is vecMaxPool2x2GradRowsBF16AVX512 on the rounds
// of vecMaxPool2x2PlaneBF16AVX512, the gradient's dwords put back in the rows' order
// by VPERMI2D: the same bits.
//
//go:noescape
func vecMaxPool2x2GradPlaneBF16AVX512(gx, x, gy *uint16, rows, ow int, idx *[64]int32)
