//go:build !amd64 || purego

package cpu

// No vector loops here: vecHalfElemOK is false and these are never called.

func vecHalfElemOK() bool { return false }

func vecReluHalfRun(f16 bool, dst, x *uint16, n int) { panic("cpu: no vector loops") }

func vecReluGradHalfRun(f16 bool, gx, gy, x *uint16, n int) { panic("cpu: no vector loops") }

func vecHalfOpRun(f16 bool, op vecOp, dst, a, b *uint16, s float32, n int) {
	panic("cpu: no vector loops")
}

func vecHalfScaleFiniteRun(f16 bool, x *uint16, k float32, n int) bool {
	panic("cpu: no vector loops")
}
