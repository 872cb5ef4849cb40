//go:build !amd64 || purego

package cpu

// attnExpRowAsm reports false: this build has no assembly, attnExpRowGo runs.
func attnExpRowAsm(s *[16]float32, row []float32, scale, shift float32) bool { return false }
