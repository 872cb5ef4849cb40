package cpu

import (
	"flag"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

var geluStride = flag.Int("gelu.stride", 61, "TestGeluUlp tries every gelu.stride-th float32 in [-10, 10] (1: all of them)")

// geluInputs returns vecInputs widened to ±12 with values next to the erf pieces'
// bounds and exp32's cut mixed in.
func geluInputs(rng *rand.Rand, n int) []float32 {
	x := vecInputs(rng, n)
	for i := range x {
		switch rng.IntN(4) {
		case 0:
			x[i] *= 3.5
		case 1:
			b := []float64{float64(erfA), float64(erfB), float64(erfC), 13.115}[rng.IntN(4)] * math.Sqrt2
			v := math.Nextafter32(float32(b), float32(math.Inf(1-2*rng.IntN(2))))
			if rng.IntN(2) == 0 {
				v = -v
			}
			x[i] = v
		}
	}
	return x
}

// TestFMA32 checks fma32 against a·b + c computed exactly (math/big) and rounded once,
// on random operands and on double-rounding cases, where float32(math.FMA(…)) errs.
func TestFMA32(t *testing.T) {
	exact := func(a, b, c float32) float32 {
		p := new(big.Float).SetPrec(400).Mul(big.NewFloat(float64(a)), big.NewFloat(float64(b)))
		f, _ := p.Add(p, big.NewFloat(float64(c))).Float32()
		return f
	}
	one := float32(1 + 0x1p-12)
	// (1+2^-12)² = 1 + 2^-11 + 2^-24, halfway between two float32s; c breaks the tie.
	cases := [][3]float32{{one, one, 0x1p-80}, {one, one, -0x1p-80}, {-one, one, 0x1p-80}, {one, one, 0}}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 200_000 {
		a, b := math.Float32frombits(rng.Uint32()), math.Float32frombits(rng.Uint32())
		c := float32(rng.NormFloat64()) * a * b * float32(math.Ldexp(1, rng.IntN(60)-30))
		if rng.IntN(4) == 0 {
			a, b, c = float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64()*0x1p-40)
		}
		if isFinite32(a) && isFinite32(b) && isFinite32(c) && isFinite32(a*b) {
			cases = append(cases, [3]float32{a, b, c})
		}
	}
	naive := 0
	for _, k := range cases {
		got, want := fma32(k[0], k[1], k[2]), exact(k[0], k[1], k[2])
		if !sameBits(got, want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", k[0], k[1], k[2], got, want)
		}
		if float32(math.FMA(float64(k[0]), float64(k[1]), float64(k[2]))) != want {
			naive++
		}
	}
	if naive == 0 {
		t.Errorf("no case where float32(math.FMA(…)) double-rounds")
	}
	t.Logf("%d cases; float32(math.FMA(…)) wrong in %d", len(cases), naive)
}

func isFinite32(v float32) bool { return !math.IsInf(float64(v), 0) && v == v }

// TestVecGelu compares vecGelu and every vector loop with the twin, bit for bit,
// forward and backward, at every length to 200 and misalignments, in place too.
func TestVecGelu(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, n := range vecLens {
		for mis := range 3 {
			x := geluInputs(rng, n+mis)[mis:]
			gy := vecInputs(rng, n+mis)[mis:]
			for _, bwd := range []bool{false, true} {
				g := gy
				if !bwd {
					g = nil
				}
				want := make([]float32, n)
				geluGo(want, x, g)
				got := make([]float32, n)
				vecGelu(got, x, g)
				in := append([]float32(nil), x...)
				vecGelu(in, in, g)
				for i := range want {
					if !sameBits(got[i], want[i]) || !sameBits(in[i], want[i]) {
						t.Fatalf("vecGelu n=%d bwd=%v: [%d] x=%v: %v (in place %v), twin %v", n, bwd, i, x[i], got[i], in[i], want[i])
					}
				}
				m := n &^ 15
				if m == 0 {
					continue
				}
				for _, impl := range vecImpls {
					got = make([]float32, m)
					var gp *float32
					if bwd {
						gp = &gy[0]
					}
					impl.gelu(&got[0], &x[0], gp, m)
					for i := range got {
						if !sameBits(got[i], want[i]) {
							t.Fatalf("%s gelu n=%d bwd=%v: [%d] x=%v: %v, twin %v", impl.name, m, bwd, i, x[i], got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestVecGeluSweep compares every vector loop with the twin, bit for bit, on a dense
// sweep of float32s (every 1021st bit pattern: all exponents, NaNs and infinities).
func TestVecGeluSweep(t *testing.T) {
	const step = 1021
	x := make([]float32, 0, 1<<22/step*4+16)
	for b := uint64(0); b < 1<<32; b += step {
		x = append(x, math.Float32frombits(uint32(b)))
	}
	x = x[:len(x)&^15]
	gy := make([]float32, len(x))
	for i := range gy {
		gy[i] = float32(i%7) - 2.5
	}
	for _, g := range [][]float32{nil, gy} {
		want := make([]float32, len(x))
		geluGo(want, x, g)
		for _, impl := range vecImpls {
			got := make([]float32, len(x))
			var gp *float32
			if g != nil {
				gp = &g[0]
			}
			impl.gelu(&got[0], &x[0], gp, len(x))
			for i := range got {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("%s gelu bwd=%v x=%v (%#08x): %v, twin %v", impl.name, g != nil, x[i], math.Float32bits(x[i]), got[i], want[i])
				}
			}
		}
	}
}

// ulp32 is the spacing of the float32s at |v|.
func ulp32(v float64) float64 {
	f := float32(math.Abs(v))
	if math.IsInf(float64(f), 0) {
		return math.Ldexp(1, 104)
	}
	return float64(math.Nextafter32(f, float32(math.Inf(1))) - f)
}

// geluRef64 returns x·Φ(x) and Φ(x) + x·φ(x) in float64 (Φ through math.Erfc, which
// does not cancel for x < 0).
func geluRef64(x float64) (y, d float64) {
	cdf := 0.5 * math.Erfc(-x/math.Sqrt2)
	pdf := math.Exp(-0.5*x*x) / math.Sqrt(2*math.Pi)
	return x * cdf, cdf + x*pdf
}

// TestGeluUlp measures vecGelu against the float64 formulas over the float32s in
// [-10, 10] (every gelu.stride-th; -gelu.stride=1 tries all 2.2 billion), and asserts
// the bounds of vec_gelu.go: forward geluFwdUlp ulp of y, backward geluBwdUlp ulp of
// gy·(Φ + |x|φ).
func TestGeluUlp(t *testing.T) {
	stride := uint32(*geluStride)
	if testing.Short() {
		stride = 4099
	}
	const chunk = 4096
	x := make([]float32, 0, chunk)
	gy := make([]float32, chunk)
	for i := range gy {
		gy[i] = []float32{1, -1.75, 0.3}[i%3]
	}
	y, gx := make([]float32, chunk), make([]float32, chunk)
	var worstF, worstB float64
	var atF, atB float32
	check := func() {
		vecGelu(y[:len(x)], x, nil)
		vecGelu(gx[:len(x)], x, gy[:len(x)])
		for i, v := range x {
			f := float64(v)
			wy, wd := geluRef64(f)
			if e := math.Abs(float64(y[i])-wy) / ulp32(wy); !(e <= worstF) {
				worstF, atF = e, v
			}
			g := float64(gy[i])
			cdf := 0.5 * math.Erfc(-f/math.Sqrt2)
			size := g * (cdf + math.Abs(f)*math.Exp(-0.5*f*f)/math.Sqrt(2*math.Pi))
			if e := math.Abs(float64(gx[i])-g*wd) / ulp32(size); !(e <= worstB) {
				worstB, atB = e, v
			}
		}
		x = x[:0]
	}
	top := math.Float32bits(10)
	for _, sign := range []uint32{0, 1 << 31} {
		for b := uint32(0); b <= top; b += stride {
			x = append(x, math.Float32frombits(b|sign))
			if len(x) == chunk {
				check()
			}
		}
	}
	check()
	t.Logf("every %d-th float32 in [-10, 10]: forward within %.3f ulp (x = %v), backward %.3f ulp of gy·(Φ + |x|φ) (x = %v)", stride, worstF, atF, worstB, atB)
	if worstF > geluFwdUlp || worstB > geluBwdUlp {
		t.Errorf("beyond the stated bounds: forward %.3f ulp (x = %v, bound %g), backward %.3f (x = %v, bound %g)", worstF, atF, geluFwdUlp, worstB, atB, geluBwdUlp)
	}
}

// TestGeluSpecial checks the values at ±0, ±Inf, NaN, huge and tiny inputs and in the
// far tails against the float64 formulas' conventions.
func TestGeluSpecial(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negz := float32(math.Copysign(0, -1))
	tiny := float32(1e-40)
	cases := []struct{ x, y, d float32 }{
		{0, 0, 0.5}, {negz, negz, 0.5}, {inf, inf, nan}, {-inf, nan, nan}, {nan, nan, nan},
		{3e38, 3e38, 1}, {-3e38, negz, 0}, {tiny, tiny * 0.5, 0.5}, {-tiny, -tiny * 0.5, 0.5},
		{20, 20, 1}, {-20, negz, 0}, {1e10, 1e10, 1},
	}
	for _, c := range cases {
		for _, n := range []int{1, 16, 33} {
			x, g := make([]float32, n), make([]float32, n)
			for i := range x {
				x[i], g[i] = c.x, 1
			}
			y, d := make([]float32, n), make([]float32, n)
			vecGelu(y, x, nil)
			vecGelu(d, x, g)
			for i := range y {
				if !sameBits(y[i], c.y) || !sameBits(d[i], c.d) {
					t.Errorf("n=%d x=%v: y %v (want %v), derivative %v (want %v)", n, c.x, y[i], c.y, d[i], c.d)
					break
				}
			}
		}
	}
	// The far negative tail: exp32 flushes below x ≈ -13.1, where |y| < 2^-125.
	for x := float32(-10); x > -30; x -= 0.01 {
		y := make([]float32, 1)
		vecGelu(y, []float32{x}, nil)
		want, _ := geluRef64(float64(x))
		if math.Abs(float64(y[0])-want) > math.Max(4*ulp32(want), 0x1p-125) {
			t.Fatalf("x=%v: %v, want %v", x, y[0], want)
		}
	}
}

// BenchmarkGelu times vecGelu on activations drawn from N(0, 1.5²), in ns per element.
// (Subnormal inputs, as vecInputs has, cost microcode assists on Intel CPUs.)
func BenchmarkGelu(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	x, gy, y := make([]float32, 4096), make([]float32, 4096), make([]float32, 4096)
	for i := range x {
		x[i], gy[i] = float32(rng.NormFloat64()*1.5), float32(rng.NormFloat64())
	}
	b.Run("fwd", func(b *testing.B) {
		for b.Loop() {
			vecGelu(y, x, nil)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4096, "ns/elem")
	})
	b.Run("bwd", func(b *testing.B) {
		for b.Loop() {
			vecGelu(y, x, gy)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4096, "ns/elem")
	})
	b.Run("twin", func(b *testing.B) {
		for b.Loop() {
			geluGo(y, x, nil)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4096, "ns/elem")
	})
}
