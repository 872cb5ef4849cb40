//go:build amd64 && !purego

package cpu

// lnStatsAVX512 equals lnStatsGo(x[:n]) for n a positive multiple of 16, bit for bit
// (vecgen's lnStats).
//
//go:noescape
func lnStatsAVX512(x *float32, n int) (mean, sq float64)

// lnStats returns the mean of x and the sum of squared deviations from it as rowStats
// takes them (lnStatsGo), in one AVX-512 call when it can run and len(x) is a positive
// multiple of 16, ok false otherwise.
func lnStats(x []float32) (mean, sq float64, ok bool) {
	if len(x) == 0 || len(x)&15 != 0 || !vecAVX512OK() {
		return 0, 0, false
	}
	mean, sq = lnStatsAVX512(&x[0], len(x))
	return mean, sq, true
}
