//go:build purego || !amd64

package half

// No assembly: the pure-Go twins do all the work.
var (
	f32ToF16Kernels  []kernel[Float16, float32]
	f16ToF32Kernels  []kernel[float32, Float16]
	f32ToBF16Kernels []kernel[BFloat16, float32]
	bf16ToF32Kernels []kernel[float32, BFloat16]
)
