package cpu

import (
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

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

// Float32 arithmetic on half data without conversion buffers: the pure-Go twins of
// the AVX-512 loops vecHalfOp and vecHalfScaleFinite, and the functions that run loop
// and twin. The generic path (load to float32, vecOp, store) gives the same bits.

// halfWord widens the word v of format f to float32, exactly.
func halfWord(f halfFmt, v uint16) float32 {
	if f == bf16Fmt {
		return half.BFloat16(v).Float32()
	}
	return half.Float16(v).Float32()
}

// halfRoundWord rounds x to format f, to nearest even (a NaN quieted).
func halfRoundWord(f halfFmt, x float32) uint16 {
	if f == bf16Fmt {
		return uint16(half.BFloat16FromFloat32(x))
	}
	return uint16(half.Float16FromFloat32(x))
}

// halfOpGo sets dst[i] to op of the widened a[i] and b[i] (op vecAdd … vecDiv) or s
// (vecAddS … vecRDivS, b unused), in float32, rounded to format f. dst may be a or b.
func halfOpGo(f halfFmt, op vecOp, dst, a, b []uint16, s float32) {
	var x, y, z [1]float32
	bs := []float32{s} // the scalar operations' second operand
	if op.binary() {
		bs = y[:]
	}
	for i := range dst {
		x[0] = halfWord(f, a[i])
		if op.binary() {
			y[0] = halfWord(f, b[i])
		}
		vecOpGo(op, z[:], x[:], bs)
		dst[i] = halfRoundWord(f, z[0])
	}
}

// halfScaleFiniteGo sets x[i] to float32(x[i])·k rounded to format f and reports
// whether every result is finite.
func halfScaleFiniteGo(f halfFmt, x []uint16, k float32) bool {
	ok := true
	for i, v := range x {
		r := halfRoundWord(f, halfWord(f, v)*k)
		x[i] = r
		ok = ok && r&f.inf != f.inf
	}
	return ok
}

// halfOp is halfOpGo on the vector loop where the CPU has it.
func halfOp(f halfFmt, op vecOp, dst, a, b []uint16, s float32) {
	a = a[:len(dst)]
	if op.binary() {
		b = b[:len(dst)]
	}
	m := 0
	if vecAVX512OK() {
		if m = len(dst) &^ 15; m > 0 {
			bp := &a[0] // never read by the scalar operations
			if op.binary() {
				bp = &b[0]
			}
			vecHalfOpRun(f == f16Fmt, op, &dst[0], &a[0], bp, s, m)
		}
	}
	var bt []uint16
	if op.binary() {
		bt = b[m:]
	}
	halfOpGo(f, op, dst[m:], a[m:], bt, s)
}

// halfScaleFinite is halfScaleFiniteGo on the vector loop where the CPU has it.
func halfScaleFinite(f halfFmt, x []uint16, k float32) bool {
	m := 0
	ok := true
	if vecAVX512OK() {
		if m = len(x) &^ 15; m > 0 {
			ok = vecHalfScaleFiniteRun(f == f16Fmt, &x[0], k, m)
		}
	}
	return halfScaleFiniteGo(f, x[m:], k) && ok
}
