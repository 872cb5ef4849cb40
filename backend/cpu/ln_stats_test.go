package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// lnStatsRef is lnStatsGo on the pure-Go lane loops only.
func lnStatsRef(x []float32) (mean, sq float64) {
	var s, d [16]float64
	vecSumF64Go(&s, x)
	mean = vecFold(&s) / float64(len(x))
	vecDevSqF64Go(&d, x, mean)
	return mean, vecFold(&d)
}

// TestLnStats checks lnStats (the AVX-512 routine where it runs) and lnStatsGo
// against the pure-Go lane loops bit for bit, on rows of multiples of 16 and other
// lengths (lnStats declines those), with large offsets, NaN and ±Inf.
func TestLnStats(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	same := func(a, b float64) bool {
		return math.Float64bits(a) == math.Float64bits(b) || (math.IsNaN(a) && math.IsNaN(b))
	}
	for _, n := range []int{1, 7, 15, 16, 17, 32, 48, 100, 128, 144, 768, 4096} {
		for trial := range 12 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64()*float64(1+trial) + float64(trial*trial*100))
			}
			switch trial {
			case 9:
				x[rng.IntN(n)] = float32(math.NaN())
			case 10:
				x[rng.IntN(n)] = float32(math.Inf(1))
			case 11:
				x[rng.IntN(n)] = float32(math.Inf(-1))
				x[rng.IntN(n)] = float32(math.Inf(1))
			}
			wm, ws := lnStatsRef(x)
			if m, s := lnStatsGo(x); !same(m, wm) || !same(s, ws) {
				t.Fatalf("n=%d trial %d: lnStatsGo = %v, %v, want %v, %v", n, trial, m, s, wm, ws)
			}
			m, s, ok := lnStats(x)
			if want := n%16 == 0 && vecAVX512OK(); ok != want {
				t.Fatalf("n=%d: lnStats ok = %v, want %v", n, ok, want)
			}
			if ok && (!same(m, wm) || !same(s, ws)) {
				t.Fatalf("n=%d trial %d: lnStats = %v, %v, want %v, %v", n, trial, m, s, wm, ws)
			}
		}
	}
}
