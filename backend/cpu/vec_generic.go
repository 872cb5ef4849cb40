//go:build !amd64 || purego

package cpu

// vecImpls is empty: the pure-Go twins do all the work.
var vecImpls []*vecImpl

// The run functions are never called: vec is nil.

func vecOpRun(vecOp, *float32, *float32, *float32, int)           { panic("cpu: no vector loops") }
func vecScaleFiniteRun(*float32, float32, int) bool               { panic("cpu: no vector loops") }
func vecSumF64Run(*[16]float64, *float32, int)                    { panic("cpu: no vector loops") }
func vecAccF64Run(*float64, *float32, int)                        { panic("cpu: no vector loops") }
func vecDotF64Run(*[16]float64, *float32, *float32, int)          { panic("cpu: no vector loops") }
func vecMaxF32Run(*[16]float32, *float32, int)                    { panic("cpu: no vector loops") }
func vecExpF64Run(*[16]float64, *float64, *float32, float64, int) { panic("cpu: no vector loops") }
func vecNarrowRun(narrowOp, *float32, *float64, *float32, *float32, float64, float64, int) {
	panic("cpu: no vector loops")
}
func vecAccDevF64Run(accDevOp, *float64, *float32, *float32, *float64, int) {
	panic("cpu: no vector loops")
}

func vecAVX512OK() bool                            { return false }
func vecGeluRun(*float32, *float32, *float32, int) { panic("cpu: no vector loops") }
func vecMaxPool2x2Run(*float32, *int64, *float32, *float32, int, int, int) {
	panic("cpu: no vector loops")
}
func vecDevSqF64Run(*[16]float64, *float32, float64, int) { panic("cpu: no vector loops") }
func vecLnRowRun(*[32]float64, *float64, *float64, *float32, *float32, *float32, float64, float64, int) {
	panic("cpu: no vector loops")
}
