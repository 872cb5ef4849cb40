//go:build amd64 && !purego

package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// lnFwdRowsAVX512 equals lnFwdRowsGo on rows rows of width n, a positive multiple of
// 16, bit for bit (vecgen's lnFwdRows): row r at x + r·n and y + r·n (y may be x),
// its float32 mean and invstd stored in ms[r] and is[r].
//
//go:noescape
func lnFwdRowsAVX512(y, x, w, b, ms, is *float32, eps float64, n, rows int)

// lnFwdRows2AVX512 equals lnFwdRowsAVX512 on 2·pairs rows, bit for bit, two rows at
// a time (vecgen's lnFwdRows2).
//
//go:noescape
func lnFwdRows2AVX512(y, x, w, b, ms, is *float32, eps float64, n, pairs int)

// lnFwdRowsRun runs lnFwdRowsAVX512's rows where the vector layer is AVX-512, the
// pairs in lnFwdRows2AVX512 and an odd last row alone, and reports whether it did.
func lnFwdRowsRun(y, x, w, b, ms, is *float32, eps float64, n, rows int) bool {
	if vec != vecAVX512 {
		return false
	}
	if pairs := rows / 2; pairs > 0 {
		lnFwdRows2AVX512(y, x, w, b, ms, is, eps, n, pairs)
	}
	if rows&1 != 0 {
		k := rows - 1
		lnFwdRowsAVX512((*float32)(unsafe.Add(unsafe.Pointer(y), 4*k*n)), (*float32)(unsafe.Add(unsafe.Pointer(x), 4*k*n)),
			w, b, (*float32)(unsafe.Add(unsafe.Pointer(ms), 4*k)), (*float32)(unsafe.Add(unsafe.Pointer(is), 4*k)), eps, n, 1)
	}
	return true
}

// lnFwdRows2BF16AVX512 and lnFwdRows2F16AVX512 equal lnFwdRows2AVX512 with y in
// bfloat16 or float16, each float32 result rounded as half.Float32ToBFloat16 or
// half.Float32ToFloat16 rounds it as it is stored (vecgen's lnFwdRows2 with a half
// format), bit for bit.
//
//go:noescape
func lnFwdRows2BF16AVX512(y *uint16, x, w, b, ms, is *float32, eps float64, n, pairs int)

//go:noescape
func lnFwdRows2F16AVX512(y *uint16, x, w, b, ms, is *float32, eps float64, n, pairs int)

// lnFwdRows2BF16NEAVX512 is lnFwdRows2BF16AVX512 rounding each two rows' 16 results
// with one VCVTNE2PS2BF16 (AVX512_BF16) unless one is subnormal, bit for bit the same.
//
//go:noescape
func lnFwdRows2BF16NEAVX512(y *uint16, x, w, b, ms, is *float32, eps float64, n, pairs int)

// lnHalfCVT selects lnFwdRows2BF16NEAVX512 for bfloat16 rows (AVX512_BF16 and DQ).
var lnHalfCVT = cpu.X86.HasAVX512BF16 && cpu.X86.HasAVX512DQ

// lnFwdRowsHalfRun runs the pairs among rows rows in lnFwdRows2BF16AVX512 (bf) or
// lnFwdRows2F16AVX512 where the vector layer is AVX-512, and returns how many rows it
// did.
func lnFwdRowsHalfRun(bf bool, y *uint16, x, w, b, ms, is *float32, eps float64, n, rows int) int {
	pairs := rows / 2
	if vec != vecAVX512 || pairs == 0 {
		return 0
	}
	switch {
	case bf && lnHalfCVT:
		lnFwdRows2BF16NEAVX512(y, x, w, b, ms, is, eps, n, pairs)
	case bf:
		lnFwdRows2BF16AVX512(y, x, w, b, ms, is, eps, n, pairs)
	default:
		lnFwdRows2F16AVX512(y, x, w, b, ms, is, eps, n, pairs)
	}
	return 2 * pairs
}
