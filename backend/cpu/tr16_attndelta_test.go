package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/half"
)

// TestAttnDeltaBF16 pins attnDeltaBF16 to attnDotBF16 row by row, bit for bit, on
// widths with and without a tail of 1–3, row strides beyond the width, and rows with
// zeros, signed zeros, infinities and values whose products overflow or vanish.
func TestAttnDeltaBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(75, 76))
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), 3e38, -3e38, 1e-38, -1e-38}
	val := func() half.BFloat16 {
		if rng.IntN(16) == 0 {
			return half.BFloat16FromFloat32(specials[rng.IntN(len(specials))])
		}
		return half.BFloat16FromFloat32(float32(rng.NormFloat64() * math.Exp2(float64(rng.IntN(40)-20))))
	}
	for _, d := range []int{1, 3, 4, 8, 16, 30, 32, 64, 68} {
		for _, rows := range []int{1, 2, 7, 64} {
			lg, lo := d+rng.IntN(9), d+rng.IntN(9)
			g := make([]half.BFloat16, (rows-1)*lg+d)
			o := make([]half.BFloat16, (rows-1)*lo+d)
			for i := range g {
				g[i] = val()
			}
			for i := range o {
				o[i] = val()
			}
			got := make([]float32, rows)
			attnDeltaBF16(got, g, lg, o, lo, rows, d)
			for i := range rows {
				want := attnDotBF16(g[i*lg:][:d], o[i*lo:][:d])
				if want != want && got[i] != got[i] {
					continue // NaN payloads may differ
				}
				if math.Float32bits(got[i]) != math.Float32bits(want) {
					t.Fatalf("d=%d rows=%d: delta[%d] = %v (%#x), attnDotBF16 %v (%#x)", d, rows, i, got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
				}
			}
		}
	}
}
