//go:build !amd64 || purego

package cpu

// No vector loops here: vecHalfElemOK is false and these are never called.

func vecHalfElemOK() bool { return false }

func vecReluHalfRun(f16 bool, dst, x *uint16, n int) { panic("cpu: no vector loops") }

func vecReluGradHalfRun(f16 bool, gx, gy, x *uint16, n int) { panic("cpu: no vector loops") }
