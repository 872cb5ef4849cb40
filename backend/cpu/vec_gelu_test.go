package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// geluInputs returns vecInputs widened to ±12 (erfF64's last pieces) with values next
// to the pieces' bounds mixed in.
func geluInputs(rng *rand.Rand, n int) []float32 {
	x := vecInputs(rng, n)
	for i := range x {
		switch rng.IntN(4) {
		case 0:
			x[i] *= 3
		case 1:
			b := []float64{erfA, erfB, erfC, erfD}[rng.IntN(4)] * math.Sqrt2
			v := math.Nextafter32(float32(b), float32(math.Inf(1-2*rng.IntN(2))))
			if rng.IntN(2) == 0 {
				v = -v
			}
			x[i] = v
		}
	}
	return x
}

// TestVecGelu compares vecGelu and the vector loop with the twin, bit for bit, forward
// and backward, at every length to 200 and misalignments, in place too.
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
				if !vecAVX512OK() || m == 0 {
					continue
				}
				got = make([]float32, m)
				var gp *float32
				if bwd {
					gp = &gy[0]
				}
				vecGeluRun(&got[0], &x[0], gp, m)
				for i := range got {
					if !sameBits(got[i], want[i]) {
						t.Fatalf("vecGeluAVX512 n=%d bwd=%v: [%d] x=%v: %v, twin %v", m, bwd, i, x[i], got[i], want[i])
					}
				}
			}
		}
	}
}

// TestErfF64 checks erfF64 against math.Erf: within 4 ulp everywhere (its pieces are
// math.Erf's; FMA steps and expF64 move the last bits), exact at the special values.
func TestErfF64(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	worst := 0.0
	for range 1_000_000 {
		x := (rng.Float64()*2 - 1) * []float64{1e-9, 1, 2, 4, 7}[rng.IntN(5)]
		got, want := erfF64(x), math.Erf(x)
		ulp := math.Abs(got-want) / (math.Nextafter(math.Abs(want), math.Inf(1)) - math.Abs(want))
		worst = max(worst, ulp)
		if ulp > 4 {
			t.Fatalf("erfF64(%v) = %v, math.Erf %v: %.1f ulp apart", x, got, want, ulp)
		}
	}
	t.Logf("worst: %.2f ulp", worst)
	for _, x := range []float64{0, math.Copysign(0, -1), 6, -6, 1e300, math.Inf(1), math.Inf(-1), 5e-324} {
		if got, want := erfF64(x), math.Erf(x); !sameBits64(got, want) {
			t.Errorf("erfF64(%v) = %v, want %v", x, got, want)
		}
	}
	if got := erfF64(math.NaN()); got == got {
		t.Errorf("erfF64(NaN) = %v", got)
	}
}

// TestVecGeluMatchesMath compares the float32 GELU with the math.Erf formulas it
// replaced (gelu, and the backward of unaryGrad before it), over a sweep of float32
// inputs in ±10: a difference can only come from a float64 result within a few ulp of
// a float32 rounding boundary, and there is none in the sweep.
func TestVecGeluMatchesMath(t *testing.T) {
	const n = 1 << 20
	if testing.Short() {
		t.Skip("a million GELUs")
	}
	x := make([]float32, n)
	gy := make([]float32, n)
	rng := rand.New(rand.NewPCG(25, 26))
	for i := range x {
		x[i] = float32(-10 + 20*float64(i)/n)
		gy[i] = float32(rng.Float64()*4 - 2)
	}
	fwd, bwd := make([]float32, n), make([]float32, n)
	vecGelu(fwd, x, nil)
	vecGelu(bwd, x, gy)
	badF, badB := 0, 0
	for i, v := range x {
		f := float64(v)
		if fwd[i] != float32(gelu(f)) {
			badF++
			t.Logf("forward x=%v: %v, math %v", v, fwd[i], float32(gelu(f)))
		}
		cdf := 0.5 * (1 + math.Erf(f/math.Sqrt2))
		pdf := invSqrt2Pi * math.Exp(-0.5*f*f)
		if w := float32(float64(gy[i]) * (cdf + f*pdf)); bwd[i] != w {
			badB++
			if badB < 10 {
				t.Logf("backward x=%v gy=%v: %v, math %v", v, gy[i], bwd[i], w)
			}
		}
	}
	if badF+badB > 0 {
		t.Errorf("%d forward and %d backward results differ from the math.Erf formula", badF, badB)
	}
}

func BenchmarkGelu(b *testing.B) {
	x := geluInputs(rand.New(rand.NewPCG(1, 2)), 4096)
	gy := vecInputs(rand.New(rand.NewPCG(3, 4)), 4096)
	y := make([]float32, 4096)
	b.Run("fwd", func(b *testing.B) {
		for b.Loop() {
			vecGelu(y, x, nil)
		}
	})
	b.Run("bwd", func(b *testing.B) {
		for b.Loop() {
			vecGelu(y, x, gy)
		}
	})
	b.Run("math", func(b *testing.B) {
		for b.Loop() {
			for i, v := range x {
				y[i] = float32(gelu(float64(v)))
			}
		}
	})
}
