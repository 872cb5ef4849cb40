//go:build !amd64 || purego

package cpu

// vecGeluGradCompact is the AVX-512 lane-compacting GELU with its factor
// (gelu_grad_amd64.go); without it vecGeluGrad keeps geluGradVec.
func vecGeluGradCompact(y, t, x []float32, m int) bool { return false }
