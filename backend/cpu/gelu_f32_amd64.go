//go:build amd64 && !purego

package cpu

//go:generate go run ./internal/gelugen -o gelu_f32_amd64.s

// geluBlock is the most elements geluCompactAVX512 takes in one call (block in
// internal/gelugen).
const geluBlock = 1024

// geluScratch is geluCompactAVX512's working memory, read only by the assembly: the
// x values of each of the three pieces, packed (then their results, in place), at 0,
// geluBlock+16 and 2·(geluBlock+16) (16 lanes of slack each), then the three 16-bit
// lane masks of every vector.
type geluScratch [3*(geluBlock+16) + geluBlock/16*3/2]float32

// geluCompactAVX512 equals vecGeluAVX512(dst, x, gy, n) for n a multiple of 16 in
// (0, geluBlock], bit for bit, when no x is NaN; it then returns true. With a NaN in x
// it returns false and leaves dst alone. It sorts the lanes by piece of geluParts
// (VCOMPRESSPS into buf), runs each piece over its own packed lanes with the
// instructions vecGeluAVX512 gives a lane of that piece, and merges the results back
// in order (VEXPANDPS); see internal/gelugen.
//
//go:noescape
func geluCompactAVX512(dst, x, gy *float32, n int, buf *geluScratch) bool

// geluCompactMin is the least length that vecGelu gives geluCompactAVX512: below it,
// zeroing buf (12.7 KB) costs about what the compaction saves.
const geluCompactMin = 256

// vecGeluCompact runs vecGelu's vector part, m elements (a multiple of 16), by blocks
// of geluCompactAVX512, a block with a NaN by vecGeluAVX512. It reports false, doing
// nothing, where the CPU lacks AVX-512 or m is short.
func vecGeluCompact(dst, x, gy []float32, m int) bool {
	if !vecAVX512OK() || m < geluCompactMin {
		return false
	}
	var buf geluScratch
	var gp *float32
	for i := 0; i < m; i += geluBlock {
		k := min(geluBlock, m-i)
		if gy != nil {
			gp = &gy[i]
		}
		if !geluCompactAVX512(&dst[i], &x[i], gp, k, &buf) {
			vecGeluAVX512(&dst[i], &x[i], gp, k)
		}
	}
	return true
}
