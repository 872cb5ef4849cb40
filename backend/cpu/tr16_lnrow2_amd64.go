//go:build amd64 && !purego

package cpu

// vecLnRow2AVX512 equals vecLnRowAVX512(s[:32], gw, gb, g0, gy0, x0, m0, is0, n)
// followed by vecLnRowAVX512(s[32:], gw, gb, g1, gy1, x1, m1, is1, n), bit for bit, for
// n a multiple of 16: each gw[i] and gb[i] adds row 0's term, then row 1's, but is
// loaded and stored once.
//
//go:noescape
func vecLnRow2AVX512(s *[64]float64, gw, gb *float64, g0, gy0, x0, g1, gy1, x1 *float32, m0, is0, m1, is1 float64, n int)

// vecLnRow2Run runs vecLnRow2AVX512 where the vector layer is AVX-512 and reports
// whether it did.
func vecLnRow2Run(s *[64]float64, gw, gb *float64, g0, gy0, x0, g1, gy1, x1 *float32, m0, is0, m1, is1 float64, n int) bool {
	if vec != vecAVX512 {
		return false
	}
	vecLnRow2AVX512(s, gw, gb, g0, gy0, x0, g1, gy1, x1, m0, is0, m1, is1, n)
	return true
}

// vecLnRow2WAVX512 sets g0[i] = gy0[i]·w[i] and g1[i] = gy1[i]·w[i] for i < n (float32
// products) and then equals vecLnRow2AVX512 on those rows, bit for bit, for n a
// multiple of 16.
//
//go:noescape
func vecLnRow2WAVX512(s *[64]float64, gw, gb *float64, w, g0, gy0, x0, g1, gy1, x1 *float32, m0, is0, m1, is1 float64, n int)

// vecLnRow2WRun runs vecLnRow2WAVX512 where the vector layer is AVX-512 and reports
// whether it did.
func vecLnRow2WRun(s *[64]float64, gw, gb *float64, w, g0, gy0, x0, g1, gy1, x1 *float32, m0, is0, m1, is1 float64, n int) bool {
	if vec != vecAVX512 {
		return false
	}
	vecLnRow2WAVX512(s, gw, gb, w, g0, gy0, x0, g1, gy1, x1, m0, is0, m1, is1, n)
	return true
}
