package cpu

import (
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// TestExpF32 checks the float32 Exp (vecExpF32, through Unary) against
// float32(math.Exp(x)) bit for bit: every 251st float32 bit pattern (both signs, every
// exponent), every pattern near where exp leaves float32's normal range, overflows or
// rounds to 1, and NaNs with their payloads, ±Inf, ±0 and subnormals. An exhaustive run
// over all 2³² patterns found no difference (docs/decisions.md).
func TestExpF32(t *testing.T) {
	var xs []float32
	for b := uint64(0); b < 1<<32; b += 251 {
		xs = append(xs, math.Float32frombits(uint32(b)))
	}
	for _, c := range []float32{88.72284, -87.33655, -103.27893, -103.97208, 0x1p-24, -0x1p-25, 1e-7, 709, -709, -745} {
		cb := math.Float32bits(c)
		for d := uint32(0); d < 4096; d++ {
			xs = append(xs, math.Float32frombits(cb-2048+d))
		}
	}
	for _, b := range []uint32{0x7fc00000, 0x7f800001, 0xffc12345, 0x7fbfffff, 0x7f800000, 0xff800000, 0, 0x80000000, 1, 0x807fffff} {
		xs = append(xs, math.Float32frombits(b))
	}
	be, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	n := len(xs)
	x, y := geluTableStorage(t, be, backend.Float32, n), geluTableStorage(t, be, backend.Float32, n)
	copy(st(x).f32(), xs)
	be.Unary(backend.Exp, y, x, n, 0, 0)
	got := st(y).f32()[:n]
	for i, v := range xs {
		want := float32(math.Exp(float64(v)))
		if math.Float32bits(got[i]) != math.Float32bits(want) {
			t.Fatalf("exp(%v) (bits %#x) = %v (bits %#x), math.Exp gives %v (bits %#x)",
				v, math.Float32bits(v), got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
		}
	}
	// In place, and a length that leaves a scalar tail.
	m := 1000 + 13
	be.Unary(backend.Exp, x, x, m, 0, 0)
	for i, v := range st(x).f32()[:m] {
		if want := float32(math.Exp(float64(xs[i]))); math.Float32bits(v) != math.Float32bits(want) {
			t.Fatalf("in place: exp(%v) = %v, math.Exp gives %v", xs[i], v, want)
		}
	}
}
