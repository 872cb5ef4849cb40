package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// halfArithWords returns n words of a half format: mostly values in a range where
// products and sums stay finite, then specials (±0, ±Inf, NaNs, subnormals, the
// largest finite) and random bit patterns.
func halfArithWords(rng *rand.Rand, f halfFmt, n int) []uint16 {
	special := []uint16{0, 0x8000, f.inf, f.inf | 0x8000, f.inf | 1, f.inf | f.quiet | 0x8000, 1, 0x8001, f.inf - 1, 0x8000 | (f.inf - 1)}
	w := make([]uint16, n)
	for i := range w {
		switch r := rng.IntN(8); {
		case r == 0:
			w[i] = special[rng.IntN(len(special))]
		case r == 1:
			w[i] = uint16(rng.Uint32())
		default:
			w[i] = halfRoundWord(f, float32(rng.NormFloat64()*4))
		}
	}
	return w
}

// halfArithRef is the buffered path halfOp replaces: widen a and b to float32, the
// float32 operation (vecOpGo), round to f.
func halfArithRef(f halfFmt, op vecOp, a, b []uint16, s float32) []uint16 {
	x, y := make([]float32, len(a)), make([]float32, len(a))
	for i := range a {
		x[i] = halfWord(f, a[i])
		if op.binary() {
			y[i] = halfWord(f, b[i])
		}
	}
	z := make([]float32, len(a))
	if !op.binary() {
		y = []float32{s}
	}
	vecOpGo(op, z, x, y)
	out := make([]uint16, len(a))
	for i, v := range z {
		out[i] = halfRoundWord(f, v)
	}
	return out
}

// halfWordsSame reports whether a and b are the same word of f, any two NaNs counting as
// equal (x86 and Go pick NaN payloads by operand order).
func halfWordsSame(f halfFmt, a, b uint16) bool {
	return a == b || a&0x7fff > f.inf && b&0x7fff > f.inf
}

// TestHalfOp checks halfOp (the AVX-512 loop where the CPU has it, and its Go twin on the
// tail) against the widen–compute–round path for every arithmetic operation, both
// formats, lengths around the loop's 16 and 32 words, out of place and in place.
func TestHalfOp(t *testing.T) {
	for _, ne := range halfOpNESettings() {
		t.Run(fmt.Sprintf("ne=%v", ne), func(t *testing.T) {
			defer setHalfOpNE(ne)()
			testHalfOp(t)
		})
	}
}

func testHalfOp(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	scalars := []float32{1.5, -3, 0x1p-20, 6e4, float32(math.Inf(1)), float32(math.NaN()), 0}
	for _, f := range []halfFmt{bf16Fmt, f16Fmt} {
		for op := vecAdd; op <= vecRDivS; op++ {
			for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 48, 100, 1000} {
				a, b := halfArithWords(rng, f, n), halfArithWords(rng, f, n)
				s := scalars[rng.IntN(len(scalars))]
				want := halfArithRef(f, op, a, b, s)
				what := fmt.Sprintf("%v op %d n=%d s=%v", f, op, n, s)
				got := make([]uint16, n)
				halfOp(f, op, got, a, b, s)
				twin := make([]uint16, n)
				halfOpGo(f, op, twin, a, b, s)
				for i := range want {
					if !halfWordsSame(f, got[i], want[i]) || !halfWordsSame(f, twin[i], want[i]) {
						t.Fatalf("%s: [%d] (%#04x, %#04x) = %#04x, twin %#04x, want %#04x", what, i, a[i], b[i], got[i], twin[i], want[i])
					}
				}
				halfOp(f, op, a, a, b, s) // in place
				for i := range want {
					if !halfWordsSame(f, a[i], want[i]) {
						t.Fatalf("%s in place: [%d] = %#04x, want %#04x", what, i, a[i], want[i])
					}
				}
			}
		}
	}
}

// halfScaleFiniteRef is the buffered UnscaleCheck the fused loop replaced: widen, scale
// (vecScalar), round back, then check the stored words' exponent fields.
func halfScaleFiniteRef(f halfFmt, x []uint16, k float32) bool {
	buf := make([]float32, len(x))
	for i, v := range x {
		buf[i] = halfWord(f, v)
	}
	vecScalar(vecMulS, buf, buf, k)
	ok := true
	for i, v := range buf {
		x[i] = halfRoundWord(f, v)
		ok = ok && x[i]&f.inf != f.inf
	}
	return ok
}

// TestHalfScaleFinite checks halfScaleFinite against the buffered path: the words and
// the finiteness report, for scales that underflow, overflow, keep and poison the data,
// with one non-finite word placed in the vector part, in the tail, or nowhere.
func TestHalfScaleFinite(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(33, 34))
	for _, f := range []halfFmt{bf16Fmt, f16Fmt} {
		for _, k := range []float32{0x1p-16, 0.5, 3, 0x1p20, 1e30, float32(math.Inf(1)), float32(math.NaN()), 0} {
			for _, n := range []int{0, 1, 16, 17, 40, 48, 1000} {
				// Nowhere, first, last, in the second half of a 32-word round, in a
				// last 16-word block (n = 48).
				for _, bad := range []int{-1, 0, n - 1, 19, 40} {
					x := make([]uint16, n)
					for i := range x {
						x[i] = halfRoundWord(f, float32(rng.NormFloat64()))
					}
					if bad >= 0 && bad < n {
						x[bad] = f.inf | f.quiet
					}
					want := append([]uint16(nil), x...)
					wantOK := halfScaleFiniteRef(f, want, k)
					got := append([]uint16(nil), x...)
					gotOK := halfScaleFinite(f, got, k)
					what := fmt.Sprintf("%v k=%v n=%d bad=%d", f, k, n, bad)
					if gotOK != wantOK {
						t.Fatalf("%s: finite %v, want %v", what, gotOK, wantOK)
					}
					for i := range want {
						if !halfWordsSame(f, got[i], want[i]) {
							t.Fatalf("%s: [%d] = %#04x, want %#04x", what, i, got[i], want[i])
						}
					}
					// UnscaleCheck, on whichever path this CPU takes, reports
					// non-finite where halfScaleFinite reports not finite.
					dt := backend.BFloat16
					if f == f16Fmt {
						dt = backend.Float16
					}
					if n > 0 {
						st := geluTableStorage(t, b, dt, n)
						copy(st.u16(), x)
						if bad := b.UnscaleCheck(st, n, k); bad == wantOK {
							t.Fatalf("%s: UnscaleCheck non-finite %v, want %v", what, bad, !wantOK)
						}
						for i := range want {
							if !halfWordsSame(f, st.u16()[i], want[i]) {
								t.Fatalf("%s: UnscaleCheck [%d] = %#04x, want %#04x", what, i, st.u16()[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

// TestHalfBinaryUnaryBackend checks Binary and Unary on half storage, which now run
// halfOp on the words, against the generic float32 row loops (binaryRows, unaryKernel):
// contiguous rows, a broadcast row (bias add), a broadcast scalar on either side, dst
// aliasing an operand, and the scalar unary operations.
func TestHalfBinaryUnaryBackend(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(35, 36))
	const rows, cols = 9, 70
	for _, dt := range []backend.DType{backend.BFloat16, backend.Float16} {
		f, _ := halfFmtOf(dt)
		fill := func(n int) *storage {
			s := geluTableStorage(t, b, dt, n)
			copy(s.u16(), halfArithWords(rng, f, n))
			return s
		}
		x, y, bias := fill(rows*cols), fill(rows*cols), fill(cols)
		dense := func(s *storage) backend.View { return backend.Dense(s, 0, rows, cols) }
		cases := []struct {
			name string
			x, y backend.View
		}{
			{"dense", dense(x), dense(y)},
			{"row broadcast", dense(x), backend.View{S: bias, Shape: []int{rows, cols}, Strides: []int{0, 1}}},
			{"scalar second", dense(x), backend.View{S: bias, Offset: 3, Shape: []int{rows, cols}, Strides: []int{0, 0}}},
			{"scalar first", backend.View{S: bias, Offset: 5, Shape: []int{rows, cols}, Strides: []int{0, 0}}, dense(y)},
		}
		for _, op := range []backend.BinaryOp{backend.Add, backend.Sub, backend.Mul, backend.Div} {
			for _, c := range cases {
				what := fmt.Sprintf("%s %v %s", dt, op, c.name)
				want, got := geluTableStorage(t, b, dt, rows*cols), geluTableStorage(t, b, dt, rows*cols)
				binaryRows[float32](op, []backend.View{dense(want), c.x, c.y}, want, st(c.x.S), st(c.y.S))
				b.Binary(op, dense(got), c.x, c.y)
				halfStorageSame(t, what, f, got, want)
				if c.x.S == x { // in place into the first operand
					in := fill(rows * cols)
					copy(in.u16(), x.u16())
					b.Binary(op, dense(in), dense(in), c.y)
					halfStorageSame(t, what+" in place", f, in, want)
				}
			}
		}
		for _, u := range []struct {
			op backend.UnaryOp
			p0 float64
		}{{backend.AddScalar, 0.75}, {backend.MulScalar, -3.5}, {backend.RSubScalar, 2}, {backend.Recip, 0},
			{backend.Square, 0}, {backend.PowScalar, 2}} {
			what := fmt.Sprintf("%s unary %v %v", dt, u.op, u.p0)
			want, got := geluTableStorage(t, b, dt, rows*cols), geluTableStorage(t, b, dt, rows*cols)
			unaryKernel[float32](u.op, want, x, rows*cols, u.p0, 0)
			b.Unary(u.op, got, x, rows*cols, u.p0, 0)
			halfStorageSame(t, what, f, got, want)
		}
	}
}

// halfStorageSame fails unless got and want hold the same words (NaNs as equal).
func halfStorageSame(t *testing.T, what string, f halfFmt, got, want *storage) {
	t.Helper()
	for i, w := range want.u16() {
		if g := got.u16()[i]; !halfWordsSame(f, g, w) {
			t.Fatalf("%s: element %d is %#04x, want %#04x", what, i, g, w)
		}
	}
}
