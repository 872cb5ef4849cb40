package cpu

import "github.com/gamp-ml/gamp/backend"

// ReLU forward and backward on bfloat16 and float16 data, straight on the 16-bit
// words: the pure-Go twins of the AVX-512BW loops in vec_halfelem_amd64.s (generated
// by internal/vecgen, halfelem.go) and the functions that run loop and twin.
//
// The generic path widens each element to float32 (exactly), applies the float32 ReLU
// (x where !(x <= 0), else +0; the gradient gy where x > 0, else +0) and rounds the
// result back. Every value it keeps is a widened half, so the rounding is exact,
// except for a NaN: the narrowing (BFloat16FromFloat32, Float16FromFloat32) sets its
// quiet bit. The word loops below give those bits without the round trip: the element
// (with the quiet bit set when it is a NaN) or +0.

// halfFmt is the bits of a 16-bit float format the word loops need: +Inf (a magnitude
// above it is a NaN) and the quiet bit the float32 round trip sets in a NaN.
type halfFmt struct{ inf, quiet uint16 }

var (
	bf16Fmt = halfFmt{inf: 0x7f80, quiet: 0x0040}
	f16Fmt  = halfFmt{inf: 0x7c00, quiet: 0x0200}
)

// halfFmtOf returns the format of dt and whether dt is a half dtype.
func halfFmtOf(dt backend.DType) (halfFmt, bool) {
	switch dt {
	case backend.BFloat16:
		return bf16Fmt, true
	case backend.Float16:
		return f16Fmt, true
	}
	return halfFmt{}, false
}

// reluHalfGo sets dst[i] to the ReLU of x[i] in format f: x[i] quieted when it is a
// NaN, x[i] when it is > 0 (positive and not ±0), else +0. dst may alias x.
func reluHalfGo(f halfFmt, dst, x []uint16) {
	x = x[:len(dst)]
	for i, v := range x {
		switch {
		case v&0x7fff > f.inf:
			dst[i] = v | f.quiet
		case int16(v) > 0:
			dst[i] = v
		default:
			dst[i] = 0
		}
	}
}

// reluGradHalfGo sets gx[i] to gy[i] (quieted when it is a NaN) where x[i] > 0 (0 <
// x[i] ≤ +Inf, NaN not), else +0, in format f. gx may alias gy or x.
func reluGradHalfGo(f halfFmt, gx, gy, x []uint16) {
	gy, x = gy[:len(gx)], x[:len(gx)]
	for i, g := range gy {
		if g&0x7fff > f.inf {
			g |= f.quiet
		}
		if v := x[i]; v-1 < f.inf {
			gx[i] = g
		} else {
			gx[i] = 0
		}
	}
}

// reluHalf is reluHalfGo on the vector loop where the CPU has it.
func reluHalf(f halfFmt, dst, x []uint16) {
	m := 0
	if vecHalfElemOK() {
		if m = len(dst) &^ 31; m > 0 {
			vecReluHalfRun(f == f16Fmt, &dst[0], &x[0], m)
		}
	}
	reluHalfGo(f, dst[m:], x[m:len(dst)])
}

// reluGradHalf is reluGradHalfGo on the vector loop where the CPU has it.
func reluGradHalf(f halfFmt, gx, gy, x []uint16) {
	m := 0
	if vecHalfElemOK() {
		if m = len(gx) &^ 31; m > 0 {
			vecReluGradHalfRun(f == f16Fmt, &gx[0], &gy[0], &x[0], m)
		}
	}
	reluGradHalfGo(f, gx[m:], gy[m:len(gx)], x[m:len(gx)])
}
