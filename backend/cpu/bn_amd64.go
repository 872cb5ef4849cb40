//go:build amd64 && !purego

package cpu

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
