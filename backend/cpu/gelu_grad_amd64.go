//go:build amd64 && !purego

package cpu

// geluCompactGradAVX512 writes y = vecGeluAVX512's forward and t = the factor its
// backward multiplies gy by (Φ + x·φ, before that multiply), for n a multiple of 16 in
// (0, geluBlock], bit for bit, when no x is NaN; it then returns true. With a NaN in x
// it returns false and leaves y and t alone. Its passes are geluCompactAVX512's
// backward with both results stored (internal/gelugen/grad.go); y may be x, t must
// not overlap x or y.
//
//go:noescape
func geluCompactGradAVX512(y, t, x *float32, n int) bool

// vecGeluGradCompact runs vecGeluGrad's vector part, m elements (a multiple of 16), by
// blocks of geluCompactGradAVX512, a block with a NaN or a short last one by
// geluGradVec. It reports false, doing nothing, where the CPU lacks AVX-512 or m is
// short (vecGeluCompact's rule).
func vecGeluGradCompact(y, t, x []float32, m int) bool {
	if !vecAVX512OK() || m < geluCompactMin {
		return false
	}
	for i := 0; i < m; i += geluBlock {
		k := min(geluBlock, m-i)
		if k < geluCompactMin || !geluCompactGradAVX512(&y[i], &t[i], &x[i], k) {
			geluGradVec(y[i:i+k], t[i:i+k], x[i:i+k])
		}
	}
	return true
}
