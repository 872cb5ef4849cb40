//go:build !amd64 || purego

package cpu

// lnFwdRowsRun reports false: there is no fused rows loop without AVX-512.
func lnFwdRowsRun(y, x, w, b, ms, is *float32, eps float64, n, rows int) bool { return false }
