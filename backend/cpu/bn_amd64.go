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
