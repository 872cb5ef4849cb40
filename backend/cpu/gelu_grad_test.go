package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// geluGradSpecials are x and gy values the GELU-with-factor tests mix in: ±0, ±Inf,
// NaNs with payloads of both signs (quiet and signalling), subnormals, huge values and
// the erf pieces' bounds (in x and in x/√2) with their neighbours.
var geluGradSpecials = func() []float32 {
	sp := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(0x7fc01234), math.Float32frombits(0xffc0abcd), math.Float32frombits(0x7f800001),
		math.Float32frombits(0xff812345), math.Float32frombits(1), -math.Float32frombits(1),
		math.Float32frombits(0x7fffff), 1e-38, -1e-30, math.MaxFloat32, -math.MaxFloat32, 1e20, -1e20,
		13.1, -13.1, 13.2, -13.2, 86, -86, 4e9}
	for _, b := range []float64{float64(erfA), float64(erfB), float64(erfC)} {
		for _, s := range []float64{1, math.Sqrt2} {
			v := float32(b * s)
			sp = append(sp, v, -v, math.Nextafter32(v, 0), -math.Nextafter32(v, 0), math.Nextafter32(v, 100), -math.Nextafter32(v, 100))
		}
	}
	return sp
}()

// geluGradMix returns n values N(0, σ²), a third of them (when special) replaced by
// geluGradSpecials.
func geluGradMix(rng *rand.Rand, n int, sigma float64, special bool) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * sigma)
		if special && rng.IntN(3) == 0 {
			x[i] = geluGradSpecials[rng.IntN(len(geluGradSpecials))]
		}
	}
	return x
}

// geluGradCheckAll runs vecGeluGrad and geluGradGo on x and checks, bit for bit and
// NaN payloads included: y against vecGelu's forward; gx = geluGradMul(t, gy) against
// vecGelu's backward (both for every gy given); the twin's y and t against
// vecGeluGrad's (NaNs as NaNs: the twins' payloads are Go's); and y computed in place
// over a copy of x.
func geluGradCheckAll(t *testing.T, what string, x []float32, gys ...[]float32) {
	t.Helper()
	n := len(x)
	y, tt := make([]float32, n), make([]float32, n)
	vecGeluGrad(y, tt, x)
	want := make([]float32, n)
	vecGelu(want, x, nil)
	in := append([]float32(nil), x...)
	tin := make([]float32, n)
	vecGeluGrad(in, tin, in)
	yg, tg := make([]float32, n), make([]float32, n)
	geluGradGo(yg, tg, x)
	for i := range want {
		if math.Float32bits(y[i]) != math.Float32bits(want[i]) || math.Float32bits(in[i]) != math.Float32bits(want[i]) ||
			math.Float32bits(tin[i]) != math.Float32bits(tt[i]) {
			t.Fatalf("%s n=%d: y[%d] x=%v (%#08x): %v (%#08x; in place %#08x, t %#08x/%#08x), vecGelu %v (%#08x)",
				what, n, i, x[i], math.Float32bits(x[i]), y[i], math.Float32bits(y[i]), math.Float32bits(in[i]),
				math.Float32bits(tt[i]), math.Float32bits(tin[i]), want[i], math.Float32bits(want[i]))
		}
		if !sameBits(yg[i], y[i]) || !sameBits(tg[i], tt[i]) {
			t.Fatalf("%s n=%d: [%d] x=%v (%#08x): twin y %v t %v, vecGeluGrad y %v t %v", what, n, i, x[i], math.Float32bits(x[i]), yg[i], tg[i], y[i], tt[i])
		}
	}
	for _, gy := range gys {
		old, gx := make([]float32, n), make([]float32, n)
		vecGelu(old, x, gy)
		geluGradMul(gx, tt, gy)
		gin := append([]float32(nil), gy...)
		geluGradMul(gin, tt, gin)
		for i := range old {
			if math.Float32bits(gx[i]) != math.Float32bits(old[i]) || math.Float32bits(gin[i]) != math.Float32bits(old[i]) {
				t.Fatalf("%s n=%d: gx[%d] x=%v (%#08x) gy=%v (%#08x) t=%#08x: %v (%#08x; in place %#08x), vecGelu %v (%#08x)",
					what, n, i, x[i], math.Float32bits(x[i]), gy[i], math.Float32bits(gy[i]), math.Float32bits(tt[i]),
					gx[i], math.Float32bits(gx[i]), math.Float32bits(gin[i]), old[i], math.Float32bits(old[i]))
			}
		}
	}
}

// TestGeluGradSweep runs every float32 in a band around each erf piece's bound (in
// x/√2 and in x) and exp32's cut, both signs, with normal and special gy.
func TestGeluGradSweep(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, b := range []float64{float64(erfA), float64(erfB), float64(erfC)} {
		for _, c := range []float32{float32(b * math.Sqrt2), float32(b), 13.115, 1} {
			for _, sign := range []float32{1, -1} {
				const w = 1 << 14
				x := make([]float32, 0, 2*w)
				base := math.Float32bits(c)
				for d := uint32(0); d < 2*w; d++ {
					x = append(x, sign*math.Float32frombits(base-w+d))
				}
				geluGradCheckAll(t, "sweep", x, geluGradMix(rng, len(x), 1, false), geluGradMix(rng, len(x), 1, true))
			}
		}
	}
}

// TestGeluGradLengths runs activations at several scales with special values mixed in
// (x and gy, so NaN blocks and NaN·NaN products occur), every length to 100 and a few
// large ones, at unaligned offsets.
func TestGeluGradLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	lens := []int{511, 512, 1023, 1024, 1025, 2048 + 48, 5000}
	for n := range 101 {
		lens = append(lens, n)
	}
	for _, sigma := range []float64{0.58, 3, 30} {
		for _, special := range []bool{false, true} {
			for _, n := range lens {
				for mis := range 3 {
					x := geluGradMix(rng, n+mis, sigma, special)
					gy := geluGradMix(rng, n+mis, 1, special)
					geluGradCheckAll(t, "lengths", x[mis:], gy[mis:])
				}
			}
		}
	}
}

// TestGeluGradBackend pits the backend's GeluForwardGrad and GeluBackwardGrad against
// Unary and UnaryBackward of Gelu, bit for bit, on lengths that run one chunk, several
// and several parallel ranges, with special values in x and gy, apart and in place (y
// over x, gx over t, as tensor.LinearGELU runs them).
func TestGeluGradBackend(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	if !b.GeluWithGrad(backend.Float32) || b.GeluWithGrad(backend.BFloat16) || b.GeluWithGrad(backend.Float64) {
		t.Fatal("GeluWithGrad: want Float32 only")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for _, n := range []int{1, 37, 1024 + 5, 3*grainElems + 4099} {
		for _, special := range []bool{false, true} {
			x, gy := geluGradMix(rng, n, 0.58, special), geluGradMix(rng, n, 1, special)
			s := func(v []float32) backend.Storage {
				st, err := b.Alloc(backend.Float32, n)
				if err != nil {
					t.Fatal(err)
				}
				if v != nil {
					b.Upload(st, 0, v)
				}
				return st
			}
			xs, gys, y0, y1, ts, g0, g1 := s(x), s(gy), s(nil), s(nil), s(nil), s(nil), s(nil)
			yin, tin := s(x), s(nil) // y over x, then gx over t: in place
			b.Unary(backend.Gelu, y0, xs, n, 0, 0)
			b.GeluForwardGrad(y1, ts, xs, n)
			b.GeluForwardGrad(yin, tin, yin, n)
			b.UnaryBackward(backend.Gelu, g0, gys, xs, nil, n, 0, 0)
			b.GeluBackwardGrad(g1, gys, ts, n)
			b.GeluBackwardGrad(tin, gys, tin, n)
			get := func(st backend.Storage) []float32 {
				v := make([]float32, n)
				b.Download(v, st, 0)
				return v
			}
			for _, p := range [][2][]float32{{get(y0), get(y1)}, {get(g0), get(g1)}, {get(y0), get(yin)}, {get(g0), get(tin)}} {
				for i := range p[0] {
					if math.Float32bits(p[0][i]) != math.Float32bits(p[1][i]) {
						t.Fatalf("n=%d special=%v [%d] x=%#08x gy=%#08x: Unary/UnaryBackward %#08x, with grad %#08x",
							n, special, i, math.Float32bits(x[i]), math.Float32bits(gy[i]), math.Float32bits(p[0][i]), math.Float32bits(p[1][i]))
					}
				}
			}
			for _, st := range []backend.Storage{xs, gys, y0, y1, ts, g0, g1, yin, tin} {
				b.Free(st)
			}
		}
	}
}
