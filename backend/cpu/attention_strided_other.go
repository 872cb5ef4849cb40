//go:build !amd64 || purego

package cpu

// attnStridedFor returns nil: this build has no strided kernel, and mulF32 packs a
// transposed A (attnPackT).
func attnStridedFor(kern *gemmKernel[float32]) func(rows, kc int, a []float32, lda, astep int, b, c []float32, ldc int, start []float32) {
	return nil
}
