//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// vecAVX512VL reports whether the AVX-512 loops that use ymm registers with EVEX
// encodings (vecColSumBF16AVX512) can run.
func vecAVX512VL() bool { return vecAVX512OK() && cpu.X86.HasAVX512VL }

// vecColSumF32AVX512 equals colSumGo(dst[:w], x, stride, rows, add != 0) for w a
// multiple of 8, bit for bit:
//
//	for c := 0; c < w; c++ {
//		s := 0.0
//		for j := 0; j < rows; j++ {
//			s += float64(x[j*stride+c])
//		}
//		if add != 0 {
//			s = dst[c] + s
//		}
//		dst[c] = s
//	}
//
// with the columns in strips of 64 (eight zmm accumulators) and then 8, each strip
// walking every row.
//
//go:noescape
func vecColSumF32AVX512(dst *float64, x *float32, stride, rows, w, add int)

// vecColSumBF16AVX512 is vecColSumF32AVX512 over bfloat16 bits, each widened exactly to
// float32 (VPSLLD $16 for the even columns and VPANDD with 0xffff0000 for the odd ones
// in strips of 64, VPMOVZXWD and VPSLLD $16 in strips of 8) and then to float64. It
// needs AVX512VL (vecAVX512VL).
//
//go:noescape
func vecColSumBF16AVX512(dst *float64, x *uint16, stride, rows, w, add int)

// vecSGDAVX512 equals sgdGo(mode, w[:n], gr[:n], buf[:n], wd, mom, damp, lr) for n a
// multiple of 16, bit for bit, NaN payloads aside: one loop per mode, each float32
// operation of sgdGo one instruction rounded on its own (no FMA).
//
//go:noescape
func vecSGDAVX512(mode sgdMode, w, gr, buf *float32, wd, mom, damp, lr float32, n int)

// vecSGDBF16AVX512 is vecSGDAVX512 with a bfloat16 gradient (its bits), each element
// widened exactly to float32 as it is loaded (VPMOVZXWD, VPSLLD $16): it equals
// sgdGoBF16(mode, w[:n], gr[:n], buf[:n], wd, mom, damp, lr) for n a multiple of 16,
// bit for bit, NaN payloads aside.
//
//go:noescape
func vecSGDBF16AVX512(mode sgdMode, w *float32, gr *uint16, buf *float32, wd, mom, damp, lr float32, n int)

func vecSGDBF16Run(mode sgdMode, w *float32, gr *uint16, buf *float32, wd, mom, damp, lr float32, n int) {
	vecSGDBF16AVX512(mode, w, gr, buf, wd, mom, damp, lr, n)
}

func vecColSumF32Run(dst *float64, x *float32, stride, rows, w int, add int) {
	vecColSumF32AVX512(dst, x, stride, rows, w, add)
}

func vecColSumBF16Run(dst *float64, x *uint16, stride, rows, w int, add int) {
	vecColSumBF16AVX512(dst, x, stride, rows, w, add)
}

func vecSGDRun(mode sgdMode, w, gr, buf *float32, wd, mom, damp, lr float32, n int) {
	vecSGDAVX512(mode, w, gr, buf, wd, mom, damp, lr, n)
}

// vecAdamAVX512 equals adamGo(mode, w[:n], gr[:n], m[:n], v[:n], c) for n a multiple
// of 16, bit for bit, NaN payloads aside: one loop per mode, each float32 operation of
// adamGo one instruction rounded on its own (no FMA; VSQRTPS rounds once).
//
//go:noescape
func vecAdamAVX512(mode adamMode, w, gr, m, v *float32, c *[8]float32, n int)

func vecAdamRun(mode adamMode, w, gr, m, v *float32, c *[8]float32, n int) {
	vecAdamAVX512(mode, w, gr, m, v, c, n)
}
