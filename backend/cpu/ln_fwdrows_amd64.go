//go:build amd64 && !purego

package cpu

import "unsafe"

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
