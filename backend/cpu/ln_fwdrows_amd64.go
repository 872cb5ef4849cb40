//go:build amd64 && !purego

package cpu

// lnFwdRowsAVX512 equals lnFwdRowsGo on rows rows of width n, a positive multiple of
// 16, bit for bit (vecgen's lnFwdRows): row r at x + r·n and y + r·n (y may be x),
// its float32 mean and invstd stored in ms[r] and is[r].
//
//go:noescape
func lnFwdRowsAVX512(y, x, w, b, ms, is *float32, eps float64, n, rows int)

// lnFwdRowsRun runs lnFwdRowsAVX512 where the vector layer is AVX-512 and reports
// whether it did.
func lnFwdRowsRun(y, x, w, b, ms, is *float32, eps float64, n, rows int) bool {
	if vec != vecAVX512 {
		return false
	}
	lnFwdRowsAVX512(y, x, w, b, ms, is, eps, n, rows)
	return true
}
