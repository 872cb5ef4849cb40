// Package half provides the 16-bit floating-point storage types of gamp,
// IEEE 754 binary16 ([Float16]) and bfloat16 ([BFloat16]), and the bulk
// conversions between them and float32 that every mixed-precision step
// runs: casting master weights down, activations and gradients up.
//
// All conversions to a 16-bit type round to nearest, ties to even; they
// keep subnormals, overflow to ±Inf and keep NaN a (quiet) NaN. Float16
// conversion from float32 is bit-identical to github.com/x448/float16 and
// to the x86 VCVTPS2PH instruction. Conversions from float64 round once,
// directly from the float64 value.
//
// The slice functions run AVX-512 or F16C/AVX2 assembly on amd64 when the
// CPU has it and a pure-Go loop otherwise; the purego build tag forces the
// pure-Go loops.
//
// The happy path:
//
//	w := []float32{0.1, 1, 65504, 1e6}
//	h := make([]half.Float16, len(w))
//	half.Float32ToFloat16(h, w)  // round to fp16: 0.1, 1, 65504, +Inf
//	back := make([]float32, len(h))
//	half.Float16ToFloat32(back, h) // widen again, exactly
package half
