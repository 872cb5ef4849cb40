package half

import (
	"fmt"
	"math"
)

// LengthError is the panic value of a bulk conversion whose destination is
// shorter than its source.
type LengthError struct {
	Op       string // the function called, e.g. "Float32ToFloat16"
	Dst, Src int    // the two lengths
}

func (e LengthError) Error() string {
	return fmt.Sprintf("half.%s: destination has %d elements, source %d: make dst at least as long as src", e.Op, e.Dst, e.Src)
}

func checkLen(op string, dst, src int) {
	if dst < src {
		panic(LengthError{op, dst, src})
	}
}

// Float32ToFloat16 sets dst[i] = Float16FromFloat32(src[i]) for every i in
// src, bit for bit, with SIMD where the CPU has it. It panics with a
// LengthError if len(dst) < len(src); dst[len(src):] is left alone.
func Float32ToFloat16(dst []Float16, src []float32) {
	checkLen("Float32ToFloat16", len(dst), len(src))
	n := bulkLen(f32ToF16, len(src))
	if n > 0 {
		f32ToF16Run(&dst[0], &src[0], n)
	}
	float32ToFloat16Go(dst[n:len(src)], src[n:])
}

// Float16ToFloat32 sets dst[i] = src[i].Float32() for every i in src. It
// panics with a LengthError if len(dst) < len(src).
func Float16ToFloat32(dst []float32, src []Float16) {
	checkLen("Float16ToFloat32", len(dst), len(src))
	n := bulkLen(f16ToF32, len(src))
	if n > 0 {
		f16ToF32Run(&dst[0], &src[0], n)
	}
	float16ToFloat32Go(dst[n:len(src)], src[n:])
}

// Float32ToBFloat16 sets dst[i] = BFloat16FromFloat32(src[i]) for every i
// in src. It panics with a LengthError if len(dst) < len(src).
func Float32ToBFloat16(dst []BFloat16, src []float32) {
	checkLen("Float32ToBFloat16", len(dst), len(src))
	n := bulkLen(f32ToBF16, len(src))
	if n > 0 {
		f32ToBF16Run(&dst[0], &src[0], n)
	}
	float32ToBFloat16Go(dst[n:len(src)], src[n:])
}

// BFloat16ToFloat32 sets dst[i] = src[i].Float32() for every i in src. It
// panics with a LengthError if len(dst) < len(src).
func BFloat16ToFloat32(dst []float32, src []BFloat16) {
	checkLen("BFloat16ToFloat32", len(dst), len(src))
	n := bulkLen(bf16ToF32, len(src))
	if n > 0 {
		bf16ToF32Run(&dst[0], &src[0], n)
	}
	bfloat16ToFloat32Go(dst[n:len(src)], src[n:])
}

// Float64ToFloat16 sets dst[i] = Float16FromFloat64(src[i]) for every i in
// src. It panics with a LengthError if len(dst) < len(src).
func Float64ToFloat16(dst []Float16, src []float64) {
	checkLen("Float64ToFloat16", len(dst), len(src))
	n := 0
	if f64ToF32Odd.fn != nil && f32ToF16.fn != nil {
		// Rounded to odd in float32 first, then to nearest even: one rounding
		// (see OddFloat32). Blocks of the stack buffer, in whole lanes of both
		// kernels (their lane counts divide one another).
		var buf [oddBlock]float32
		for {
			m := bulkLen(f32ToF16, bulkLen(f64ToF32Odd, min(oddBlock, len(src)-n)))
			if m == 0 {
				break
			}
			f64ToF32OddRun(&buf[0], &src[n], m)
			f32ToF16Run(&dst[n], &buf[0], m)
			n += m
		}
	}
	dst = dst[:len(src)]
	for i := n; i < len(src); i++ {
		dst[i] = Float16FromFloat64(src[i])
	}
}

// Float16ToFloat64 sets dst[i] = src[i].Float64() for every i in src. It
// panics with a LengthError if len(dst) < len(src).
func Float16ToFloat64(dst []float64, src []Float16) {
	checkLen("Float16ToFloat64", len(dst), len(src))
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = h.Float64()
	}
}

// Float64ToBFloat16 sets dst[i] = BFloat16FromFloat64(src[i]) for every i
// in src. It panics with a LengthError if len(dst) < len(src).
func Float64ToBFloat16(dst []BFloat16, src []float64) {
	checkLen("Float64ToBFloat16", len(dst), len(src))
	n := 0
	if f64ToF32Odd.fn != nil && f32ToBF16.fn != nil {
		// As in Float64ToFloat16: rounded to odd in float32, then to nearest even.
		var buf [oddBlock]float32
		for {
			m := bulkLen(f32ToBF16, bulkLen(f64ToF32Odd, min(oddBlock, len(src)-n)))
			if m == 0 {
				break
			}
			f64ToF32OddRun(&buf[0], &src[n], m)
			f32ToBF16Run(&dst[n], &buf[0], m)
			n += m
		}
	}
	dst = dst[:len(src)]
	for i := n; i < len(src); i++ {
		dst[i] = BFloat16FromFloat64(src[i])
	}
}

// oddBlock is how many elements Float64ToFloat16 and Float64ToBFloat16 narrow at
// most at a time through their float32 buffer (whole lanes of both kernels: a
// shorter run, or the tail, takes the scalar conversion).
const oddBlock = 256

// OddFloat32 rounds f to float32 "to odd": toward zero, then, if that was
// inexact, with the lowest significand bit set; a NaN converts as float32(f).
// Rounding the result to nearest even in a format of at most 22 significand
// bits (Float16, BFloat16, their subnormals included: float32's exponent range
// covers theirs) gives what rounding f to nearest even directly gives — the
// odd bit stands for everything below float32's last bit, so no tie is created
// or lost. Overflow past float32's range becomes the largest float32, odd,
// which both formats round to Inf.
func OddFloat32(f float64) float32 {
	r := float32(f) // to nearest even
	if float64(r) == f || f != f {
		return r
	}
	u := math.Float32bits(r)
	if math.Abs(float64(r)) > math.Abs(f) {
		u-- // rounded away from zero (possibly to Inf): step back toward it
	}
	return math.Float32frombits(u | 1)
}

// BFloat16ToFloat64 sets dst[i] = src[i].Float64() for every i in src. It
// panics with a LengthError if len(dst) < len(src).
func BFloat16ToFloat64(dst []float64, src []BFloat16) {
	checkLen("BFloat16ToFloat64", len(dst), len(src))
	dst = dst[:len(src)]
	for i, b := range src {
		dst[i] = b.Float64()
	}
}

// The pure-Go twins of the assembly kernels: each kernel must give the same
// bits as its twin. They also convert the tails the kernels leave and run
// everything under the purego tag or off amd64. They expect len(dst) >=
// len(src).

func float32ToFloat16Go(dst []Float16, src []float32) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = Float16FromFloat32(f)
	}
}

func float16ToFloat32Go(dst []float32, src []Float16) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = h.Float32()
	}
}

func float32ToBFloat16Go(dst []BFloat16, src []float32) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = BFloat16FromFloat32(f)
	}
}

func bfloat16ToFloat32Go(dst []float32, src []BFloat16) {
	dst = dst[:len(src)]
	for i, b := range src {
		dst[i] = b.Float32()
	}
}

func float64ToFloat32OddGo(dst []float32, src []float64) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = OddFloat32(f)
	}
}

// A kernel is one vectorised conversion loop: fn converts n elements, n a
// positive multiple of lanes. The kernel tables (fastest first) come from
// the per-architecture files; ok says whether this CPU can run the kernel.
type kernel[D, S any] struct {
	name  string
	lanes int
	ok    bool
	fn    func(dst *D, src *S, n int)
}

// The kernels in use, picked once at init.
var (
	f32ToF16  = best(f32ToF16Kernels)
	f16ToF32  = best(f16ToF32Kernels)
	f32ToBF16 = best(f32ToBF16Kernels)
	bf16ToF32 = best(bf16ToF32Kernels)

	f64ToF32Odd = best(f64ToF32OddKernels)
)

// best returns the first kernel this CPU can run, or the zero kernel, which
// leaves all the work to the pure-Go twin.
func best[D, S any](ks []kernel[D, S]) kernel[D, S] {
	for _, k := range ks {
		if k.ok {
			return k
		}
	}
	return kernel[D, S]{}
}

// bulkLen is how many of n elements kernel k converts: the longest multiple of
// its lane count, or none when there is no kernel.
//
// The exported functions run the kernel in use through the per-architecture
// run functions (f32ToF16Run, …), which call it directly, and not through
// kernel.fn: a call through a func value makes escape analysis move the
// caller's buffers to the heap, and callers convert scratch buffers a chunk at
// a time.
func bulkLen[D, S any](k kernel[D, S], n int) int {
	if k.fn == nil {
		return 0
	}
	return n - n%k.lanes
}
