//go:build !amd64 || purego

package cpu

// vecLnRow2Run reports false: there is no two-row loop without AVX-512.
func vecLnRow2Run(s *[64]float64, gw, gb *float64, g0, gy0, x0, g1, gy1, x1 *float32, m0, is0, m1, is1 float64, n int) bool {
	return false
}

// vecLnRow2WRun reports false: there is no fused two-row loop without AVX-512.
func vecLnRow2WRun(s *[64]float64, gw, gb *float64, w, g0, gy0, x0, g1, gy1, x1 *float32, m0, is0, m1, is1 float64, n int) bool {
	return false
}
