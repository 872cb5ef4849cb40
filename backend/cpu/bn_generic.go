//go:build !amd64 || purego

package cpu

// No batch-norm vector loops here: vecAVX512OK is false, the callers run the twins.

func bnAffineRun(o, v, m, s, b *float32, n int, relu bool) { panic("cpu: no vector loops") }

func bnGradRun(o, gv, x, ea, eb, ec, em *float32, n int) { panic("cpu: no vector loops") }

func bnSumsRun(o *float32, acc1, acc2 *float64, gv, y, x *float32, m *float64, n int) {
	panic("cpu: no vector loops")
}
