//go:build !amd64 || purego

package cpu

// No vector loops here: vecHalfElemOK is false and these are never called.

func vecHalfElemOK() bool { return false }

func vecReluBF16Run(dst, x *uint16, n int) { panic("cpu: no vector loops") }

func vecReluGradBF16Run(gx, gy, x *uint16, n int) { panic("cpu: no vector loops") }
