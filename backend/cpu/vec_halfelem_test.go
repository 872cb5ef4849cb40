package cpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// reluHalfCompare fails unless got equals want bit for bit (NaNs included).
func reluHalfCompare(t *testing.T, what string, got, want []uint16, input func(i int) string) {
	t.Helper()
	bad := 0
	for i := range want {
		if got[i] != want[i] {
			if bad++; bad <= 10 {
				t.Errorf("%s: %s: got %#04x, want %#04x (float32 path)", what, input(i), got[i], want[i])
			}
		}
	}
	if bad > 10 {
		t.Errorf("%s: %d mismatches in all", what, bad)
	}
}

// TestReluHalfForwardOldPath checks the bfloat16 and float16 ReLU on the words (Unary)
// against the float32 path it replaces (unaryKernel: widen, ReLU, round back) on every
// bit pattern, NaNs and ±0 included, out of place and in place.
func TestReluHalfForwardOldPath(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1<<16 + 7 // every pattern, and a ragged tail
	for _, dt := range []backend.DType{backend.BFloat16, backend.Float16} {
		x, y, want := geluTableStorage(t, b, dt, n), geluTableStorage(t, b, dt, n), geluTableStorage(t, b, dt, n)
		for i := range n {
			x.u16()[i] = uint16(i)
		}
		unaryKernel[float32](backend.Relu, want, x, n, 0, 0)
		b.Unary(backend.Relu, y, x, n, 0, 0)
		in := func(i int) string { return fmt.Sprintf("x = %#04x", uint16(i)) }
		reluHalfCompare(t, dt.String()+" forward", y.u16(), want.u16(), in)
		b.Unary(backend.Relu, x, x, n, 0, 0)
		reluHalfCompare(t, dt.String()+" forward in place", x.u16(), want.u16(), in)
	}
}

// TestReluHalfBackwardOldPath checks the bfloat16 and float16 ReLU backward on the words
// against the float32 path (unaryBackwardKernel): every x with each gy of
// geluTableSpecial (NaNs, ±0, ±Inf) and with random gy; out of place, into gy and into x.
func TestReluHalfBackwardOldPath(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	const m = 1 << 16
	for _, dt := range []backend.DType{backend.BFloat16, backend.Float16} {
		sp := geluTableSpecial[dt]
		n := m*(len(sp)+2) + 9
		x, gy := geluTableStorage(t, b, dt, n), geluTableStorage(t, b, dt, n)
		for i := range n {
			x.u16()[i] = uint16(i)
			if r := i / m; r < len(sp) {
				gy.u16()[i] = sp[r]
			} else {
				gy.u16()[i] = uint16(rng.Uint32())
			}
		}
		xs, gys := slices.Clone(x.u16()), slices.Clone(gy.u16())
		in := func(i int) string { return fmt.Sprintf("x = %#04x, gy = %#04x", xs[i], gys[i]) }
		want, gx := geluTableStorage(t, b, dt, n), geluTableStorage(t, b, dt, n)
		unaryBackwardKernel[float32](backend.Relu, want, gy, x, false, n, 0, 0)
		b.UnaryBackward(backend.Relu, gx, gy, x, nil, n, 0, 0)
		reluHalfCompare(t, dt.String()+" backward", gx.u16(), want.u16(), in)
		b.UnaryBackward(backend.Relu, gy, gy, x, nil, n, 0, 0)
		reluHalfCompare(t, dt.String()+" backward into gy", gy.u16(), want.u16(), in)
		copy(gy.u16(), gys)
		b.UnaryBackward(backend.Relu, x, gy, x, nil, n, 0, 0)
		reluHalfCompare(t, dt.String()+" backward into x", x.u16(), want.u16(), in)
	}
}

// TestReluHalfVecTwin pits the vector loops against their pure-Go twins over lengths
// 0…200 at misaligned starts, on words that are mostly NaNs, infinities, zeros and
// values near them, in both formats.
func TestReluHalfVecTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, f := range []halfFmt{bf16Fmt, f16Fmt} {
		special := []uint16{0, 0x8000, 1, 0x8001, f.inf, f.inf | 0x8000, f.inf - 1, (f.inf - 1) | 0x8000,
			f.inf + 1, (f.inf + 1) | 0x8000, f.inf | f.quiet, 0xffff, 0x7fff, 0x3c00, 0xbf80}
		word := func() uint16 {
			if rng.IntN(2) == 0 {
				return special[rng.IntN(len(special))]
			}
			return uint16(rng.Uint32())
		}
		for n := range 201 {
			for off := range 3 {
				x, gy := make([]uint16, n+off), make([]uint16, n+off)
				for i := range x {
					x[i], gy[i] = word(), word()
				}
				got, want := make([]uint16, n+off), make([]uint16, n+off)
				reluHalf(f, got[off:], x[off:])
				reluHalfGo(f, want[off:], x[off:])
				if !slices.Equal(got, want) {
					t.Fatalf("reluHalf %+v n=%d off=%d: got %#04x, want %#04x (x %#04x)", f, n, off, got, want, x)
				}
				reluGradHalf(f, got[off:], gy[off:], x[off:])
				reluGradHalfGo(f, want[off:], gy[off:], x[off:])
				if !slices.Equal(got, want) {
					t.Fatalf("reluGradHalf %+v n=%d off=%d: got %#04x, want %#04x (gy %#04x, x %#04x)", f, n, off, got, want, gy, x)
				}
			}
		}
	}
}
