//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

//go:generate go run ./internal/bngen -o bn_amd64.s

// bnAffineAVX512 computes n elements (a multiple of 16) of batch norm's output pass,
// the three vecOp passes of bnAffine in one. It equals, bit for bit (NaN payloads
// aside),
//
//	for i := 0; i < n; i++ {
//		o[i] = ((v[i] - m[i]) * s[i]) + b[i]
//	}
//
//go:noescape
func bnAffineAVX512(o, v, m, s, b *float32, n int)

// bnAffineReLUAVX512 is bnAffineAVX512 then vecOp's ReLU (+0 where o ≤ 0, NaN kept).
//
//go:noescape
func bnAffineReLUAVX512(o, v, m, s, b *float32, n int)

// bnGradAVX512 computes n elements (a multiple of 16) of batch norm's gradient pass,
// the five vecOp passes of bnGrad in one, in their operand order. It equals, bit for
// bit (NaN payloads aside),
//
//	for i := 0; i < n; i++ {
//		t := eb[i] * (x[i] - em[i])
//		o[i] = ((ea[i] * g[i]) + t) + ec[i]
//	}
//
//go:noescape
func bnGradAVX512(o, gv, x, ea, eb, ec, em *float32, n int)

// bnSumsAVX512 computes n elements (a multiple of 16) of batch norm's backward sums,
// accAdd and accDev's product form in one pass. It equals, bit for bit (NaN payloads
// aside),
//
//	for i := 0; i < n; i++ {
//		acc1[i] += float64(gv[i])
//		acc2[i] = math.FMA(float64(gv[i]), float64(x[i])-m[i], acc2[i])
//	}
//
//go:noescape
func bnSumsAVX512(acc1, acc2 *float64, gv, x *float32, m *float64, n int)

// bnSumsMaskAVX512 is bnSumsAVX512 of gv masked by a ReLU output y (vecOp's mask: gv
// where 0 < y, +0 elsewhere, NaN y included), which it also stores in o (o may be gv).
//
//go:noescape
func bnSumsMaskAVX512(o *float32, acc1, acc2 *float64, gv, y, x *float32, m *float64, n int)

// bnSumsRun runs bnSumsMaskAVX512 when y is not nil, else bnSumsAVX512 (AVX-512 only).
func bnSumsRun(o *float32, acc1, acc2 *float64, gv, y, x *float32, m *float64, n int) {
	if y != nil {
		bnSumsMaskAVX512(o, acc1, acc2, gv, y, x, m, n)
		return
	}
	bnSumsAVX512(acc1, acc2, gv, x, m, n)
}

// bnAffineRun runs bnAffineAVX512, or bnAffineReLUAVX512 with relu (AVX-512 only).
func bnAffineRun(o, v, m, s, b *float32, n int, relu bool) {
	if relu {
		bnAffineReLUAVX512(o, v, m, s, b, n)
		return
	}
	bnAffineAVX512(o, v, m, s, b, n)
}

// bnGradRun runs bnGradAVX512 (AVX-512 only).
func bnGradRun(o, gv, x, ea, eb, ec, em *float32, n int) { bnGradAVX512(o, gv, x, ea, eb, ec, em, n) }

// The half loops below are the loops above with their x, y, v, gv operands and their
// output o in a 16-bit format, bfloat16 (BF16) or float16 (F16): each equals its
// float32 loop on the operands widened (exactly: a shift, VCVTPH2PS) with the output
// rounded as package half's bulk conversions round it (to nearest even, NaN lanes
// quieted; bn_half.go has the twins). Unlike the loops above they take any n ≥ 0:
// the last n mod 16 elements run under masks, which keep the lanes past n from being
// read (no fault) or written.

// bnAccF64BF16AVX512 equals acc[i] += float64(x[i]) for i < n (vecAccF64AVX512). It
// prefetches x's lines pf bytes ahead (the next sample's tile) into L1 as it goes.
//
//go:noescape
func bnAccF64BF16AVX512(acc *float64, x *uint16, n, pf int)

// bnAccF64F16AVX512 is bnAccF64BF16AVX512 for float16.
//
//go:noescape
func bnAccF64F16AVX512(acc *float64, x *uint16, n, pf int)

// bnDevSqF64BF16AVX512 equals, for i < n, with d = float64(x[i]) − m[i], acc[i] =
// math.FMA(d, d, acc[i]) (vecAccDevF64AVX512's accSq).
//
//go:noescape
func bnDevSqF64BF16AVX512(acc *float64, x *uint16, m *float64, n int)

// bnDevSqF64F16AVX512 is bnDevSqF64BF16AVX512 for float16.
//
//go:noescape
func bnDevSqF64F16AVX512(acc *float64, x *uint16, m *float64, n int)

// bnAffineBF16AVX512 is bnAffineAVX512 on bfloat16 v and o.
//
//go:noescape
func bnAffineBF16AVX512(o, v *uint16, m, s, b *float32, n int)

// bnAffineReLUBF16AVX512 is bnAffineReLUAVX512 on bfloat16 v and o.
//
//go:noescape
func bnAffineReLUBF16AVX512(o, v *uint16, m, s, b *float32, n int)

// bnAffineBF16CVT and bnAffineReLUBF16CVT are bnAffineBF16AVX512 and
// bnAffineReLUBF16AVX512 rounding o by VCVTNEPS2BF16 (AVX512_BF16), 16 lanes at a
// time, where the lanes hold no subnormal (VFPCLASSPS, AVX512DQ; one that does takes
// the integer rounding): the same bits.
//
//go:noescape
func bnAffineBF16CVT(o, v *uint16, m, s, b *float32, n int)

//go:noescape
func bnAffineReLUBF16CVT(o, v *uint16, m, s, b *float32, n int)

// bnAffineF16AVX512 is bnAffineAVX512 on float16 v and o.
//
//go:noescape
func bnAffineF16AVX512(o, v *uint16, m, s, b *float32, n int)

// bnAffineReLUF16AVX512 is bnAffineReLUAVX512 on float16 v and o.
//
//go:noescape
func bnAffineReLUF16AVX512(o, v *uint16, m, s, b *float32, n int)

// bnSumsBF16AVX512 is bnSumsAVX512 on bfloat16 gv and x. Like bnAccF64BF16AVX512 it
// prefetches its 16-bit operands pf bytes ahead.
//
//go:noescape
func bnSumsBF16AVX512(acc1, acc2 *float64, gv, x *uint16, m *float64, n, pf int)

// bnSumsMaskBF16AVX512 is bnSumsMaskAVX512 on bfloat16 gv, y and x, without storing
// the masked gv.
//
//go:noescape
func bnSumsMaskBF16AVX512(acc1, acc2 *float64, gv, y, x *uint16, m *float64, n, pf int)

// bnSumsF16AVX512 is bnSumsAVX512 on float16 gv and x.
//
//go:noescape
func bnSumsF16AVX512(acc1, acc2 *float64, gv, x *uint16, m *float64, n, pf int)

// bnSumsMaskF16AVX512 is bnSumsMaskBF16AVX512 for float16.
//
//go:noescape
func bnSumsMaskF16AVX512(acc1, acc2 *float64, gv, y, x *uint16, m *float64, n, pf int)

// bnGradBF16AVX512 is bnGradAVX512 on bfloat16 gv, x and o.
//
//go:noescape
func bnGradBF16AVX512(o, gv, x *uint16, ea, eb, ec, em *float32, n int)

// bnGradMaskBF16AVX512 is bnGradBF16AVX512 of gv masked by a ReLU output y as
// bnSumsMaskAVX512 masks it (gv where 0 < y, +0 elsewhere).
//
//go:noescape
func bnGradMaskBF16AVX512(o, gv, y, x *uint16, ea, eb, ec, em *float32, n int)

// bnGradBF16CVT and bnGradMaskBF16CVT are bnGradBF16AVX512 and bnGradMaskBF16AVX512
// rounding o as bnAffineBF16CVT does: the same bits.
//
//go:noescape
func bnGradBF16CVT(o, gv, x *uint16, ea, eb, ec, em *float32, n int)

//go:noescape
func bnGradMaskBF16CVT(o, gv, y, x *uint16, ea, eb, ec, em *float32, n int)

// bnGradF16AVX512 is bnGradAVX512 on float16 gv, x and o.
//
//go:noescape
func bnGradF16AVX512(o, gv, x *uint16, ea, eb, ec, em *float32, n int)

// bnGradMaskF16AVX512 is bnGradMaskBF16AVX512 for float16.
//
//go:noescape
func bnGradMaskF16AVX512(o, gv, y, x *uint16, ea, eb, ec, em *float32, n int)

// bnAccHalfRun runs bnAccF64BF16AVX512 (bf) or bnAccF64F16AVX512 (AVX-512 only).
func bnAccHalfRun(bf bool, acc *float64, x *uint16, n, pf int) {
	if bf {
		bnAccF64BF16AVX512(acc, x, n, pf)
		return
	}
	bnAccF64F16AVX512(acc, x, n, pf)
}

// bnDevSqHalfRun runs bnDevSqF64BF16AVX512 (bf) or bnDevSqF64F16AVX512 (AVX-512 only).
func bnDevSqHalfRun(bf bool, acc *float64, x *uint16, m *float64, n int) {
	if bf {
		bnDevSqF64BF16AVX512(acc, x, m, n)
		return
	}
	bnDevSqF64F16AVX512(acc, x, m, n)
}

// bnCVT says whether the bfloat16 affine and gradient loops round by
// VCVTNEPS2BF16 (the CVT routines): where the CPU has AVX512_BF16 and AVX512DQ. A
// variable so that tests can run both.
var bnCVT = cpu.X86.HasAVX512BF16 && cpu.X86.HasAVX512DQ

// bnAffineHalfRun runs the half affine loop for bf and relu (AVX-512 only).
func bnAffineHalfRun(bf bool, o, v *uint16, m, s, b *float32, n int, relu bool) {
	switch {
	case bf && relu && bnCVT:
		bnAffineReLUBF16CVT(o, v, m, s, b, n)
	case bf && bnCVT:
		bnAffineBF16CVT(o, v, m, s, b, n)
	case bf && relu:
		bnAffineReLUBF16AVX512(o, v, m, s, b, n)
	case bf:
		bnAffineBF16AVX512(o, v, m, s, b, n)
	case relu:
		bnAffineReLUF16AVX512(o, v, m, s, b, n)
	default:
		bnAffineF16AVX512(o, v, m, s, b, n)
	}
}

// bnSumsHalfRun runs the half sums loop for bf, masked when y is not nil (AVX-512
// only).
func bnSumsHalfRun(bf bool, acc1, acc2 *float64, gv, y, x *uint16, m *float64, n, pf int) {
	switch {
	case bf && y != nil:
		bnSumsMaskBF16AVX512(acc1, acc2, gv, y, x, m, n, pf)
	case bf:
		bnSumsBF16AVX512(acc1, acc2, gv, x, m, n, pf)
	case y != nil:
		bnSumsMaskF16AVX512(acc1, acc2, gv, y, x, m, n, pf)
	default:
		bnSumsF16AVX512(acc1, acc2, gv, x, m, n, pf)
	}
}

// bnGradHalfRun runs the half gradient loop for bf, masked when y is not nil (AVX-512
// only).
func bnGradHalfRun(bf bool, o, gv, y, x *uint16, ea, eb, ec, em *float32, n int) {
	switch {
	case bf && y != nil && bnCVT:
		bnGradMaskBF16CVT(o, gv, y, x, ea, eb, ec, em, n)
	case bf && bnCVT:
		bnGradBF16CVT(o, gv, x, ea, eb, ec, em, n)
	case bf && y != nil:
		bnGradMaskBF16AVX512(o, gv, y, x, ea, eb, ec, em, n)
	case bf:
		bnGradBF16AVX512(o, gv, x, ea, eb, ec, em, n)
	case y != nil:
		bnGradMaskF16AVX512(o, gv, y, x, ea, eb, ec, em, n)
	default:
		bnGradF16AVX512(o, gv, x, ea, eb, ec, em, n)
	}
}
