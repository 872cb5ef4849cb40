//go:build !purego

package half

import "golang.org/x/sys/cpu"

// CPU features the kernels need. x/sys/cpu sets the AVX flags only when the
// OS saves the ymm/zmm state.
var (
	hasAVX512 = cpu.X86.HasAVX512F
	hasF16C   = cpu.X86.HasF16C && cpu.X86.HasAVX
	hasAVX2   = cpu.X86.HasAVX2
	// hasAVX512BF16: VCVTNE2PS2BF16 (and VFPCLASSPS, AVX512DQ).
	hasAVX512BF16 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BF16 && cpu.X86.HasAVX512DQ
)

var (
	f32ToF16Kernels = []kernel[Float16, float32]{
		{"avx512", 16, hasAVX512, float32ToFloat16AVX512},
		{"f16c", 8, hasF16C, float32ToFloat16F16C},
	}
	f16ToF32Kernels = []kernel[float32, Float16]{
		{"avx512", 16, hasAVX512, float16ToFloat32AVX512},
		{"f16c", 8, hasF16C, float16ToFloat32F16C},
	}
	f32ToBF16Kernels = []kernel[BFloat16, float32]{
		{"avx512bf16", 32, hasAVX512BF16, float32ToBFloat16AVX512BF16},
		{"avx512", 16, hasAVX512, float32ToBFloat16AVX512},
		{"avx2", 16, hasAVX2, float32ToBFloat16AVX2},
	}
	bf16ToF32Kernels = []kernel[float32, BFloat16]{
		{"avx512", 16, hasAVX512, bfloat16ToFloat32AVX512},
		{"avx2", 8, hasAVX2, bfloat16ToFloat32AVX2},
	}
	f64ToF32OddKernels = []kernel[float32, float64]{
		{"avx512", 16, hasAVX512, float64ToFloat32OddAVX512},
	}
)

// float32ToFloat16AVX512 converts n float32s, n a positive multiple of 16,
// with VCVTPS2PH $0 (round to nearest even) on zmm registers. It equals
//
//	for i := range n {
//		dst[i] = Float16FromFloat32(src[i])
//	}
//
//go:noescape
func float32ToFloat16AVX512(dst *Float16, src *float32, n int)

// float32ToFloat16F16C is float32ToFloat16AVX512 on ymm registers (F16C),
// n a positive multiple of 8. It equals
//
//	for i := range n {
//		dst[i] = Float16FromFloat32(src[i])
//	}
//
//go:noescape
func float32ToFloat16F16C(dst *Float16, src *float32, n int)

// float16ToFloat32AVX512 converts n Float16s, n a positive multiple of 16,
// with VCVTPH2PS on zmm registers. It equals
//
//	for i := range n {
//		dst[i] = src[i].Float32()
//	}
//
//go:noescape
func float16ToFloat32AVX512(dst *float32, src *Float16, n int)

// float16ToFloat32F16C is float16ToFloat32AVX512 on ymm registers (F16C),
// n a positive multiple of 8. It equals
//
//	for i := range n {
//		dst[i] = src[i].Float32()
//	}
//
//go:noescape
func float16ToFloat32F16C(dst *float32, src *Float16, n int)

// float32ToBFloat16AVX512 converts n float32s, n a positive multiple of 16,
// rounding with AVX-512 integer arithmetic and patching NaN lanes (found by
// VCMPPS unordered) to quiet NaNs. VCVTNEPS2BF16 is not used: it flushes
// subnormal inputs and outputs to zero. It equals
//
//	for i := range n {
//		dst[i] = BFloat16FromFloat32(src[i])
//	}
//
//go:noescape
func float32ToBFloat16AVX512(dst *BFloat16, src *float32, n int)

// float32ToBFloat16AVX512BF16 is float32ToBFloat16AVX512 for n a positive
// multiple of 32, by VCVTNE2PS2BF16 where a block of 32 holds no subnormal (the
// instruction flushes those) and by float32ToBFloat16AVX512's integer rounding
// where one does. It equals
//
//	for i := range n {
//		dst[i] = BFloat16FromFloat32(src[i])
//	}
//
//go:noescape
func float32ToBFloat16AVX512BF16(dst *BFloat16, src *float32, n int)

// float32ToBFloat16AVX2 is float32ToBFloat16AVX512 on ymm registers, n a
// positive multiple of 16. It equals
//
//	for i := range n {
//		dst[i] = BFloat16FromFloat32(src[i])
//	}
//
//go:noescape
func float32ToBFloat16AVX2(dst *BFloat16, src *float32, n int)

// bfloat16ToFloat32AVX512 widens n BFloat16s, n a positive multiple of 16,
// by zero extension (VPMOVZXWD) and a 16-bit shift. It equals
//
//	for i := range n {
//		dst[i] = src[i].Float32()
//	}
//
//go:noescape
func bfloat16ToFloat32AVX512(dst *float32, src *BFloat16, n int)

// bfloat16ToFloat32AVX2 is bfloat16ToFloat32AVX512 on ymm registers, n a
// positive multiple of 8. It equals
//
//	for i := range n {
//		dst[i] = src[i].Float32()
//	}
//
//go:noescape
func bfloat16ToFloat32AVX2(dst *float32, src *BFloat16, n int)

// float64ToFloat32OddAVX512 narrows n float64s, n a positive multiple of 16,
// rounding to odd: VCVTPD2PS toward zero, then the lowest bit set in each
// lane whose result is inexact. It equals
//
//	for i := range n {
//		dst[i] = OddFloat32(src[i])
//	}
//
//go:noescape
func float64ToFloat32OddAVX512(dst *float32, src *float64, n int)

// The run functions call the kernel best picked from each table above (the
// first whose feature flag is set), directly; see bulkLen for why. They are
// called only when some kernel was picked.

func f32ToF16Run(dst *Float16, src *float32, n int) {
	if hasAVX512 {
		float32ToFloat16AVX512(dst, src, n)
	} else {
		float32ToFloat16F16C(dst, src, n)
	}
}

func f16ToF32Run(dst *float32, src *Float16, n int) {
	if hasAVX512 {
		float16ToFloat32AVX512(dst, src, n)
	} else {
		float16ToFloat32F16C(dst, src, n)
	}
}

func f32ToBF16Run(dst *BFloat16, src *float32, n int) {
	if hasAVX512BF16 {
		float32ToBFloat16AVX512BF16(dst, src, n)
	} else if hasAVX512 {
		float32ToBFloat16AVX512(dst, src, n)
	} else {
		float32ToBFloat16AVX2(dst, src, n)
	}
}

func bf16ToF32Run(dst *float32, src *BFloat16, n int) {
	if hasAVX512 {
		bfloat16ToFloat32AVX512(dst, src, n)
	} else {
		bfloat16ToFloat32AVX2(dst, src, n)
	}
}

func f64ToF32OddRun(dst *float32, src *float64, n int) { float64ToFloat32OddAVX512(dst, src, n) }
