//go:build !amd64 || purego

package cpu

// vecGeluCompact is the AVX-512 lane-compacting GELU (gelu_f32_amd64.go); without it
// vecGelu keeps vecGeluRun.
func vecGeluCompact(dst, x, gy []float32, m int) bool { return false }
