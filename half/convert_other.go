//go:build purego || !amd64

package half

// No assembly: the pure-Go twins do all the work.
var (
	f32ToF16Kernels  []kernel[Float16, float32]
	f16ToF32Kernels  []kernel[float32, Float16]
	f32ToBF16Kernels []kernel[BFloat16, float32]
	bf16ToF32Kernels []kernel[float32, BFloat16]

	f64ToF32OddKernels []kernel[float32, float64]
)

// The run functions are never called: bulkLen is 0 without kernels.

func f32ToF16Run(*Float16, *float32, int)   { panic("half: no conversion kernel") }
func f16ToF32Run(*float32, *Float16, int)   { panic("half: no conversion kernel") }
func f32ToBF16Run(*BFloat16, *float32, int) { panic("half: no conversion kernel") }
func bf16ToF32Run(*float32, *BFloat16, int) { panic("half: no conversion kernel") }

func f64ToF32OddRun(*float32, *float64, int) { panic("half: no conversion kernel") }
