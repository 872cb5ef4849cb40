//go:build amd64 && !purego

package cpu

//go:generate go run ./internal/gelugen -o gelu_f32_amd64.s

// geluBlock is the most elements geluCompactAVX512 takes in one call (block in
// internal/gelugen).
const geluBlock = 1024

// geluCompactAVX512 equals vecGeluAVX512(dst, x, gy, n) for n a multiple of 16 in
// (0, geluBlock], bit for bit, when no x is NaN; it then returns true. With a NaN in x
// it returns false and leaves dst alone. A first pass sorts out the lanes of geluParts'
// second and third pieces (a ≥ 0.84375), packed into scratch in its frame with
// VCOMPRESSPS; each of those pieces runs over its own packed lanes; the last pass runs
// the first piece over every lane and expands the others' results over it (VEXPANDPS)
// under their masks. Each lane gets the instructions vecGeluAVX512 gives a lane of its
// piece; see internal/gelugen.
//
//go:noescape
func geluCompactAVX512(dst, x, gy *float32, n int) bool

// geluCompactMin is the least length that vecGelu gives geluCompactAVX512: on
// N(0, 0.58²) activations it is 0.82× vecGeluAVX512's speed at 64 elements, 0.94× at
// 256, 1.05× at 512 (N(0, 1): 1.08×, 1.8×, 2.2×).
const geluCompactMin = 512

// vecGeluCompact runs vecGelu's vector part, m elements (a multiple of 16), by blocks
// of geluCompactAVX512, a block with a NaN or a short last one by vecGeluAVX512. It
// reports false, doing nothing, where the CPU lacks AVX-512 or m is short.
func vecGeluCompact(dst, x, gy []float32, m int) bool {
	if !vecAVX512OK() || m < geluCompactMin {
		return false
	}
	var gp *float32
	for i := 0; i < m; i += geluBlock {
		k := min(geluBlock, m-i)
		if gy != nil {
			gp = &gy[i]
		}
		if k < geluCompactMin || !geluCompactAVX512(&dst[i], &x[i], gp, k) {
			vecGeluAVX512(&dst[i], &x[i], gp, k)
		}
	}
	return true
}
