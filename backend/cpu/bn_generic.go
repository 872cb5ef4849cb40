//go:build !amd64 || purego

package cpu

// No batch-norm vector loops here: vecAVX512OK is false, the callers run the twins.

func bnAffineRun(o, v, m, s, b *float32, n int, relu bool) { panic("cpu: no vector loops") }

func bnGradRun(o, gv, x, ea, eb, ec, em *float32, n int) { panic("cpu: no vector loops") }

func bnSumsRun(o *float32, acc1, acc2 *float64, gv, y, x *float32, m *float64, n int) {
	panic("cpu: no vector loops")
}

func bnAccHalfRun(bf bool, acc *float64, x *uint16, n, pf int) { panic("cpu: no vector loops") }

func bnDevSqHalfRun(bf bool, acc *float64, x *uint16, m *float64, n int) {
	panic("cpu: no vector loops")
}

func bnAffineHalfRun(bf bool, o, v *uint16, m, s, b *float32, n int, relu bool) {
	panic("cpu: no vector loops")
}

func bnSumsHalfRun(bf bool, acc1, acc2 *float64, gv, y, x *uint16, m *float64, n, pf int) {
	panic("cpu: no vector loops")
}

func bnGradHalfRun(bf bool, o, gv, y, x *uint16, ea, eb, ec, em *float32, n int) {
	panic("cpu: no vector loops")
}

// bnCVT is false: no VCVTNEPS2BF16 loops here.
var bnCVT = false
