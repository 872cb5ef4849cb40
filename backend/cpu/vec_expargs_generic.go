//go:build !amd64 || purego

package cpu

// No vector loop here: vecAVX512OK is false and this is never called.

func vecExpArgsF64Run(e, a *float64, n int) { panic("cpu: no vector loops") }
