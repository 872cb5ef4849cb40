package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// TestVecExpArgsF64 pits vecExpArgsF64 (the AVX-512 loop where there is one) against
// its twin, expF64 element by element, bit for bit (NaNs included), at every length of
// vecLens and misaligned starts, on arguments that include ±Inf, NaN, ±0 and the edges
// of the range where expF64 gives 0 or +Inf.
func TestVecExpArgsF64(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	special := []float64{math.Inf(-1), math.Inf(1), math.NaN(), -math.NaN(), 0, math.Copysign(0, -1),
		-708, -708.0000001, -707.9, 709, 709.0000001, 709.7, -745.2, 1e-300, -1e-300, 0.5 * math.Ln2}
	for _, n := range vecLens {
		for mis := range 3 {
			a := make([]float64, n+mis)[mis:]
			for i := range a {
				if rng.IntN(8) == 0 {
					a[i] = special[rng.IntN(len(special))]
				} else {
					a[i] = rng.Float64()*60 - 50
				}
			}
			got, want := make([]float64, n+mis)[mis:], make([]float64, n)
			vecExpArgsF64(got, a)
			vecExpArgsF64Go(want, a)
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("vecExpArgsF64 n=%d mis=%d: e[%d] = exp(%v) = %v (%#x), twin %v (%#x)", n, mis, i, a[i], got[i], math.Float64bits(got[i]), want[i], math.Float64bits(want[i]))
				}
			}
		}
	}
}

// TestSoftmaxShortRows checks softmaxShortRows against softmaxF32, the per-row path it
// replaces for rows under 16 elements, bit for bit: every n < 16, row counts that cross
// its blocks, softmax and log-softmax, float32 and half sources and destinations, in
// place too, with rows holding -Inf (masked classes), +Inf, NaN and large values.
func TestSoftmaxShortRows(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(23, 24))
	value := func() float32 {
		switch rng.IntN(40) {
		case 0:
			return float32(math.Inf(-1))
		case 1:
			return float32(math.Inf(1))
		case 2:
			return float32(math.NaN())
		case 3:
			return float32(rng.NormFloat64() * 1e4)
		}
		return float32(rng.NormFloat64() * 3)
	}
	pairs := []struct{ src, dst backend.DType }{
		{backend.Float32, backend.Float32}, {backend.BFloat16, backend.BFloat16}, {backend.Float16, backend.Float16},
		{backend.BFloat16, backend.Float32}, {backend.Float32, backend.BFloat16},
	}
	for n := 1; n < 16; n++ {
		for _, outer := range []int{1, 3, 256, 1024/n + 1, 2*(1024/n) + 5, 5000} {
			for _, p := range pairs {
				for _, log := range []bool{false, true} {
					x := geluTableStorage(t, b, backend.Float32, outer*n)
					for i := range x.f32() {
						x.f32()[i] = value()
					}
					for r := range outer {
						switch r % 17 {
						case 5: // every class masked but one
							for i := range n {
								x.f32()[r*n+i] = float32(math.Inf(-1))
							}
							x.f32()[r*n+n/2] = 1.5
						case 9: // every class masked
							for i := range n {
								x.f32()[r*n+i] = float32(math.Inf(-1))
							}
						}
					}
					src := x
					if p.src != backend.Float32 {
						src = geluTableStorage(t, b, p.src, outer*n)
						src.storeF32(0, x.f32())
					}
					got, want := geluTableStorage(t, b, p.dst, outer*n), geluTableStorage(t, b, p.dst, outer*n)
					softmaxF32(want, src, outer, n, log)
					softmaxShortRows(got, src, outer, n, log)
					what := fmt.Sprintf("n=%d outer=%d %s→%s log=%v", n, outer, p.src, p.dst, log)
					softmaxCompare(t, what, got, want, outer*n)
					if p.src == p.dst {
						softmaxShortRows(src, src, outer, n, log)
						softmaxCompare(t, what+" in place", src, want, outer*n)
					}
				}
			}
		}
	}
}

// softmaxCompare fails unless got and want (of one dtype) hold the same bits.
func softmaxCompare(t *testing.T, what string, got, want *storage, n int) {
	t.Helper()
	for i := range n {
		if g, w := geluTableBits(got, i), geluTableBits(want, i); g != w {
			t.Fatalf("%s: element %d is %#x, want %#x (softmaxF32)", what, i, g, w)
		}
	}
}

// TestVecMaxShort compares vecMaxShort with vecMaxF32 bit for bit on rows of
// 0–16 values drawn from NaNs (two payloads), ±Inf, ±0, denormals and
// ordinary values, ties included.
func TestVecMaxShort(t *testing.T) {
	rng := rand.New(rand.NewPCG(227, 228))
	vals := []float32{float32(math.NaN()), math.Float32frombits(0xffc00123), float32(math.Inf(1)), float32(math.Inf(-1)),
		0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1, -1, 3.5, -2}
	for range 200000 {
		x := make([]float32, rng.IntN(17))
		for i := range x {
			if rng.IntN(3) == 0 {
				x[i] = vals[rng.IntN(len(vals))]
			} else {
				x[i] = float32(rng.NormFloat64())
			}
		}
		if got, want := vecMaxShort(x), vecMaxF32(x); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("%v: vecMaxShort %v (%#x), vecMaxF32 %v (%#x)", x, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}

// BenchmarkVecMaxShort times the maximum of 256 rows of 10 values (the MLP's
// logits): vecMaxShort against vecMaxF32.
func BenchmarkVecMaxShort(b *testing.B) {
	rng := rand.New(rand.NewPCG(229, 230))
	x := make([]float32, 2560)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for _, f := range []struct {
		name string
		fn   func([]float32) float32
	}{{"short", vecMaxShort}, {"vec", vecMaxF32}} {
		b.Run(f.name, func(b *testing.B) {
			var s float32
			for b.Loop() {
				for r := 0; r < len(x); r += 10 {
					s += f.fn(x[r : r+10])
				}
			}
			_ = s
		})
	}
}
