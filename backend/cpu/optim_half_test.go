package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// TestSplitBitsRoundTrip checks that the 16+16 pair is the float32 bit for bit, for
// every high half with low halves at and around the tie, and for random patterns; and
// that the high half is the nearest bfloat16 (round to nearest even except at a tie).
func TestSplitBitsRoundTrip(t *testing.T) {
	check := func(b uint32) {
		x := math.Float32frombits(b)
		hi, lo := splitBits(x)
		if x != x {
			if y := splitValue(hi, lo); y == y {
				t.Fatalf("NaN %#08x decoded to %v", b, y)
			}
			return
		}
		if got := math.Float32bits(splitValue(hi, lo)); got != b {
			t.Fatalf("%#08x split into %#04x,%#04x decodes to %#08x", b, hi, lo, got)
		}
		rne := half.BFloat16FromFloat32(x).Bits()
		if b&0xffff == 0x8000 {
			// A tie: hi is one of the two neighbours, the one below in magnitude.
			if hi != uint16(b>>16) {
				t.Fatalf("tie %#08x: hi %#04x, want the lower neighbour %#04x", b, hi, b>>16)
			}
			return
		}
		if hi != rne {
			t.Fatalf("%#08x: hi %#04x, round to nearest even gives %#04x", b, hi, rne)
		}
	}
	for top := uint32(0); top < 1<<16; top++ {
		for _, low := range []uint32{0, 1, 0x7fff, 0x8000, 0x8001, 0xffff} {
			check(top<<16 | low)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		check(rng.Uint32())
	}
}

// TestRoundStochasticUnbiased rounds one value many times with fresh counters: the
// mean approaches the value (its error is far below a bfloat16 ulp), both neighbours
// occur, and the same counters give the same bits (replayable).
func TestRoundStochasticUnbiased(t *testing.T) {
	const n = 1 << 16
	for _, x := range []float32{1.00390625 + 0.3*0.0078125, -3.14159, 1e-3, 12345.678, 0.1} {
		w := make([]float32, n)
		for i := range w {
			w[i] = x
		}
		r := backend.RNG{Seed: 7, Offset: 1000}
		a, b := make([]uint16, n), make([]uint16, n)
		roundStochastic(a, w, r, 0)
		roundStochastic(b, w, r, 0)
		var sum float64
		seen := map[uint16]bool{}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("x=%v: element %d rounds to %#04x then %#04x with the same counters", x, i, a[i], b[i])
			}
			seen[a[i]] = true
			sum += float64(half.BFloat16FromBits(a[i]).Float32())
		}
		lo := half.BFloat16FromBits(uint16(math.Float32bits(x) >> 16)).Float32()
		ulp := math.Abs(float64(half.BFloat16FromBits(uint16(math.Float32bits(x)>>16)+1).Float32() - lo))
		mean := sum / n
		// The mean of n Bernoulli roundings has a standard deviation ≤ ulp/(2√n).
		if d := math.Abs(mean - float64(x)); d > 5*ulp/(2*math.Sqrt(n)) {
			t.Fatalf("x=%v: mean of %d stochastic roundings %v is %.3g ulp away", x, n, mean, d/ulp)
		}
		if len(seen) != 2 {
			t.Fatalf("x=%v: %d distinct roundings, want both neighbours", x, len(seen))
		}
		other := make([]uint16, n)
		roundStochastic(other, w, backend.RNG{Seed: 7, Offset: 1001}, 0)
		if other[0] != a[1] || other[n-2] != a[n-1] {
			t.Fatal("counter off+i is not element i's draw")
		}
	}
}

// TestHalfWeightsMatchMasters runs the fused SGD and Adam updates three ways from the
// same start: with FP32 masters (the reference), with 16+16 split weights, and (for a
// master that is a bfloat16) rounding to nearest without a master. The split pair must
// decode to the master bit for bit and its high half equal the master path's rounded
// copy except at exact ties; round-to-nearest must equal the master path's copy.
func TestHalfWeightsMatchMasters(t *testing.T) {
	b, _ := New(0)
	rng := rand.New(rand.NewPCG(3, 4))
	alloc := func(dt backend.DType, n int) backend.Storage {
		s, err := b.Alloc(dt, n)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, n := range []int{1, 17, 1000, 70000} {
		for _, kind := range []string{"sgd", "sgd-momentum", "adam", "adamw-amsgrad"} {
			master := alloc(backend.Float32, n)
			hiM, hiS, lo := alloc(backend.BFloat16, n), alloc(backend.BFloat16, n), alloc(backend.BFloat16, n)
			for i := range st(master).f32() {
				x := float32(rng.NormFloat64())
				if kind == "adam" {
					x = half.BFloat16FromFloat32(x).Float32() // a master with zero low bits
				}
				st(master).f32()[i] = x
				st(hiS).u16()[i], st(lo).u16()[i] = splitBits(x)
			}
			st(hiM).storeF32(0, st(master).f32())
			hiN := alloc(backend.BFloat16, n)
			copy(st(hiN).u16(), st(hiM).u16())
			states := func() []backend.Storage {
				out := make([]backend.Storage, 3)
				for k := range out {
					out[k] = alloc(backend.Float32, n)
				}
				return out
			}
			sM, sS, sN := states(), states(), states()
			g := alloc(backend.Float32, n)
			ties := 0
			for step := int64(1); step <= 5; step++ {
				for i := range st(g).f32() {
					st(g).f32()[i] = float32(rng.NormFloat64() * 0.1)
				}
				for _, c := range []struct {
					s  []backend.Storage
					w  backend.Storage
					h  backend.Storage
					hw backend.HalfWeights
				}{{sM, master, hiM, backend.HalfWeights{}}, {sS, nil, hiS, backend.HalfWeights{Rounding: backend.RoundSplit, Lo: lo}}, {sN, nil, hiN, backend.HalfWeights{Rounding: backend.RoundNearest}}} {
					switch kind {
					case "sgd", "sgd-momentum":
						a := backend.SGDArgs{W: c.w, G: g, Half: c.h, N: n, LR: 0.05, WeightDecay: 0.01, First: step == 1, HalfWeights: c.hw}
						if kind == "sgd-momentum" {
							a.Buf, a.Momentum, a.Nesterov = c.s[0], 0.9, true
						}
						b.SGDStep(a)
					default:
						b.AdamStep(backend.AdamArgs{W: c.w, G: g, M: c.s[0], V: c.s[1], VMax: c.s[2], Half: c.h, N: n, LR: 1e-2,
							Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Step: step,
							Decoupled: kind != "adam", AMSGrad: kind == "adamw-amsgrad", HalfWeights: c.hw})
					}
				}
				for i, x := range st(master).f32() {
					hs, ls := st(hiS).u16()[i], st(lo).u16()[i]
					if got := splitValue(hs, ls); math.Float32bits(got) != math.Float32bits(x) {
						t.Fatalf("%s n=%d step %d: split pair %d decodes to %v, master %v", kind, n, step, i, got, x)
					}
					if hs != st(hiM).u16()[i] {
						if math.Float32bits(x)&0xffff != 0x8000 {
							t.Fatalf("%s n=%d step %d: split weight %d is %#04x, master path %#04x", kind, n, step, i, hs, st(hiM).u16()[i])
						}
						ties++
					}
				}
				for k := range sM {
					for i, x := range st(sM[k]).f32() {
						if math.Float32bits(x) != math.Float32bits(st(sS[k]).f32()[i]) {
							t.Fatalf("%s n=%d step %d: state %d[%d] differs", kind, n, step, k, i)
						}
					}
				}
				if step == 1 && kind == "adam" {
					// The master started as a bfloat16, so one nearest-rounded update is the
					// master path's write-back.
					for i, h := range st(hiN).u16() {
						if h != st(hiM).u16()[i] {
							t.Fatalf("%s n=%d: round-to-nearest weight %d is %#04x, master path %#04x", kind, n, i, h, st(hiM).u16()[i])
						}
					}
				}
			}
			if ties > n/1000+3 {
				t.Fatalf("%s n=%d: %d tie differences, more than chance", kind, n, ties)
			}
		}
	}
}

// TestHalfWeightsStochasticReplay: the fused Adam update with stochastic rounding gives
// the same weights for the same counters and different ones for others, and the
// rounding never leaves the two bfloat16 neighbours of the float32 update.
func TestHalfWeightsStochasticReplay(t *testing.T) {
	b, _ := New(0)
	const n = 5000
	run := func(r backend.RNG) ([]uint16, []float32) {
		h, _ := b.Alloc(backend.BFloat16, n)
		w := make([]float32, n)
		for i := range w {
			w[i] = half.BFloat16FromFloat32(float32(math.Sin(float64(i)))).Float32()
		}
		st(h).storeF32(0, w)
		ss := make([]backend.Storage, 3)
		for k := range ss {
			ss[k], _ = b.Alloc(backend.Float32, n)
		}
		for i := range n {
			st(ss[0]).f32()[i] = float32(math.Cos(float64(i))) * 1e-2
		}
		master, _ := b.Alloc(backend.Float32, n)
		copy(st(master).f32(), w)
		m2, _ := b.Alloc(backend.Float32, n)
		v2, _ := b.Alloc(backend.Float32, n)
		ref := backend.AdamArgs{W: master, G: ss[0], M: m2, V: v2, N: n, LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1}
		b.AdamStep(ref)
		a := ref
		a.W, a.M, a.V, a.Half = nil, ss[1], ss[2], h
		a.HalfWeights = backend.HalfWeights{Rounding: backend.RoundStochastic, RNG: r}
		b.AdamStep(a)
		return append([]uint16(nil), st(h).u16()...), append([]float32(nil), st(master).f32()...)
	}
	a, exact := run(backend.RNG{Seed: 1, Offset: 10})
	again, _ := run(backend.RNG{Seed: 1, Offset: 10})
	other, _ := run(backend.RNG{Seed: 2, Offset: 10})
	diff := 0
	for i := range a {
		if a[i] != again[i] {
			t.Fatalf("element %d: %#04x then %#04x from the same counters", i, a[i], again[i])
		}
		if a[i] != other[i] {
			diff++
		}
		down := uint16(math.Float32bits(exact[i]) >> 16)
		if a[i] != down && a[i] != down+1 {
			t.Fatalf("element %d: %#04x is not a neighbour of %v", i, a[i], exact[i])
		}
	}
	if diff == 0 {
		t.Fatal("another seed rounds every element the same way")
	}
}

// BenchmarkAdamStepHalfWeights times the fused AdamW step over 2²⁰ bfloat16 weights
// with FP32 masters (writing the half copy) and with each half-weights rounding.
func BenchmarkAdamStepHalfWeights(b *testing.B) {
	be, _ := New(0)
	const n = 1 << 20
	var ss [4]backend.Storage
	for k := range ss {
		ss[k], _ = be.Alloc(backend.Float32, n)
		be.Fill(backend.Dense(ss[k], 0, n), 0.5)
	}
	h, _ := be.Alloc(backend.BFloat16, n)
	lo, _ := be.Alloc(backend.BFloat16, n)
	for _, c := range []struct {
		name string
		hw   backend.HalfWeights
	}{{"masters", backend.HalfWeights{}}, {"nearest", backend.HalfWeights{Rounding: backend.RoundNearest}},
		{"stochastic", backend.HalfWeights{Rounding: backend.RoundStochastic}}, {"split", backend.HalfWeights{Rounding: backend.RoundSplit, Lo: lo}}} {
		b.Run(c.name, func(b *testing.B) {
			a := backend.AdamArgs{W: ss[0], G: ss[1], M: ss[2], V: ss[3], Half: h, N: n, LR: 1e-3,
				Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 3, Decoupled: true, HalfWeights: c.hw}
			if c.hw.Rounding != backend.RoundMaster {
				a.W = nil
			}
			for b.Loop() {
				be.AdamStep(a)
			}
		})
	}
}

// TestStochasticF16 checks the float16 stochastic rounding on every r for values across
// the float16 range: each result is one of x's two float16 neighbours; on normal
// float16s the mean over all 2¹⁶ draws is x exactly (the fraction has at most 13 bits),
// on subnormals within 2⁻¹⁶ ulp; past 65504 it rounds to nearest or stays at 65504;
// signs, zeros, Inf and NaN behave as the nearest conversion.
func TestStochasticF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	xs := []float32{0, 1, 1.0009766, 0x1p-14, 0x1p-24, 0x1.8p-24, 0x1p-25, 0x1.ffcp-15, 65504, 1e-7, 0.1, 3.14159, 2047.5, 65519, 65520, 65535, 1e6}
	for range 300 {
		// Random magnitudes from 2⁻³⁰ to 2¹⁶.
		xs = append(xs, float32(math.Ldexp(1+rng.Float64(), rng.IntN(46)-30)))
	}
	for _, x0 := range xs {
		for _, x := range []float32{x0, -x0} {
			rn := half.Float16FromFloat32(x)
			var sum float64
			ups := 0
			var lo, hi float32
			for r := range uint32(1 << 16) {
				h := stochasticF16(x, r)
				v := half.Float16FromBits(h).Float32()
				if math.Signbit(float64(v)) != math.Signbit(float64(x)) {
					t.Fatalf("x=%v r=%d: %v has the wrong sign", x, r, v)
				}
				a, av := abs32(x), abs32(v)
				if a >= 65504 {
					if v != 65504*sign32(x) && h != rn.Bits() {
						t.Fatalf("x=%v r=%d: %v, want ±65504 or round-to-nearest %v", x, r, v, rn.Float32())
					}
					continue
				}
				// The float16 neighbours of a: lo ≤ a < hi.
				if r == 0 {
					lo, hi = av, av
				}
				lo, hi = min(lo, av), max(hi, av)
				sum += float64(v)
				if av > a {
					ups++
				}
			}
			a := abs32(x)
			if a >= 65504 {
				continue
			}
			// lo must be the neighbour toward zero and hi the next float16 (or lo itself
			// when x is a float16).
			loH := half.Float16FromFloat32(lo)
			if loH.Float32() != lo || lo > a || (hi != lo && half.Float16FromBits(loH.Bits()+1).Float32() != hi) || (hi == lo && lo != a) || hi < a {
				t.Fatalf("x=%v: results span [%v, %v], not x's float16 neighbours", x, lo, hi)
			}
			ulp := float64(half.Float16FromBits(loH.Bits()+1).Float32() - lo)
			mean := sum / (1 << 16)
			tol := 0.0
			if a < 0x1p-14 {
				tol = ulp / (1 << 16)
			}
			if d := math.Abs(mean - float64(x)); d > tol {
				t.Fatalf("x=%v: mean over every draw %v is %.3g ulp away (%d of 65536 up)", x, mean, d/ulp, ups)
			}
		}
	}
	if h := stochasticF16(float32(math.Inf(-1)), 123); h != 0xfc00 {
		t.Fatalf("-Inf rounds to %#04x", h)
	}
	if h := stochasticF16(float32(math.NaN()), 0); !half.Float16FromBits(h).IsNaN() {
		t.Fatalf("NaN rounds to %#04x", h)
	}
}

func sign32(x float32) float32 {
	if math.Signbit(float64(x)) {
		return -1
	}
	return 1
}
