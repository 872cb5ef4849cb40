//go:build !amd64 || purego

package cpu

// No vector loops here: vecAVX512OK is false and these are never called.

func vecAVX512VL() bool { return false }

func vecColSumF32Run(dst *float64, x *float32, stride, rows, w int, add int) {
	panic("cpu: no vector loops")
}

func vecColSumBF16Run(dst *float64, x *uint16, stride, rows, w int, add int) {
	panic("cpu: no vector loops")
}

func vecSGDRun(mode sgdMode, w, gr, buf *float32, wd, mom, damp, lr float32, n int) {
	panic("cpu: no vector loops")
}

func vecSGDBF16Run(mode sgdMode, w *float32, gr *uint16, buf *float32, wd, mom, damp, lr float32, n int) {
	panic("cpu: no vector loops")
}

func vecAdamRun(mode adamMode, w, gr, m, v *float32, c *[8]float32, n int) {
	panic("cpu: no vector loops")
}
