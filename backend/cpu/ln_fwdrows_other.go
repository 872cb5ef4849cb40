//go:build !amd64 || purego

package cpu

// lnFwdRowsRun reports false: there is no fused rows loop without AVX-512.
func lnFwdRowsRun(y, x, w, b, ms, is *float32, eps float64, n, rows int) bool { return false }

// lnFwdRowsHalfRun does nothing: there is no fused rows loop without AVX-512.
func lnFwdRowsHalfRun(bf bool, y *uint16, x, w, b, ms, is *float32, eps float64, n, rows int) int {
	return 0
}

// lnHalfCVT is lnFwdRows2BF16NEAVX512's switch on amd64; it selects nothing here.
var lnHalfCVT = false
