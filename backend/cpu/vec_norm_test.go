package cpu

import (
	"math/rand/v2"
	"testing"
)

// TestVecDevSqF64 compares the devSq loops and vecDevSqF64 with the twin, bit for bit.
func TestVecDevSqF64(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	for _, n := range vecLens {
		for mis := range 3 {
			x := vecInputs(rng, n+mis)[mis:]
			mean := rng.Float64()*2 - 1
			var w [16]float64
			vecDevSqF64Go(&w, x, mean)
			if got, want := vecDevSqF64(x, mean), vecFold(&w); !sameBits64(got, want) {
				t.Fatalf("vecDevSqF64 n=%d: %v, twin %v", n, got, want)
			}
			m := n &^ 15
			for _, impl := range vecImpls {
				if m == 0 {
					break
				}
				var s, w [16]float64
				impl.devSq(&s, &x[0], mean, m)
				vecDevSqF64Go(&w, x[:m], mean)
				for k := range s {
					if !sameBits64(s[k], w[k]) {
						t.Fatalf("%s devSq n=%d lane %d: %v, twin %v", impl.name, m, k, s[k], w[k])
					}
				}
			}
		}
	}
}

// TestVecLnRow compares the lnRow loops and vecLnRow with the twin, bit for bit: the
// lane sums and the per-column accumulators.
func TestVecLnRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 54))
	for _, n := range vecLens {
		for mis := range 3 {
			g := vecInputs(rng, n+mis)[mis:]
			gy := vecInputs(rng, n+mis)[mis:]
			x := vecInputs(rng, n+mis)[mis:]
			mean, inv := rng.Float64()*2-1, rng.Float64()*3
			gw0, gb0 := make([]float64, n), make([]float64, n)
			for i := range gw0 {
				gw0[i], gb0[i] = rng.NormFloat64(), rng.NormFloat64()
			}
			wgw, wgb := append([]float64(nil), gw0...), append([]float64(nil), gb0...)
			var w [32]float64
			vecLnRowGo(&w, wgw, wgb, g, gy, x, mean, inv)
			ggw, ggb := append([]float64(nil), gw0...), append([]float64(nil), gb0...)
			s1, s2 := vecLnRow(ggw, ggb, g, gy, x, mean, inv)
			if w1, w2 := vecFold((*[16]float64)(w[:16])), vecFold((*[16]float64)(w[16:])); !sameBits64(s1, w1) || !sameBits64(s2, w2) {
				t.Fatalf("vecLnRow n=%d: sums %v %v, twin %v %v", n, s1, s2, w1, w2)
			}
			for i := range wgw {
				if !sameBits64(ggw[i], wgw[i]) || !sameBits64(ggb[i], wgb[i]) {
					t.Fatalf("vecLnRow n=%d: [%d] gw %v gb %v, twin %v %v", n, i, ggw[i], ggb[i], wgw[i], wgb[i])
				}
			}
			m := n &^ 15
			for _, impl := range vecImpls {
				if m == 0 {
					break
				}
				var s, w [32]float64
				agw, agb := append([]float64(nil), gw0[:m]...), append([]float64(nil), gb0[:m]...)
				tgw, tgb := append([]float64(nil), gw0[:m]...), append([]float64(nil), gb0[:m]...)
				impl.lnRow(&s, &agw[0], &agb[0], &g[0], &gy[0], &x[0], mean, inv, m)
				vecLnRowGo(&w, tgw, tgb, g[:m], gy[:m], x[:m], mean, inv)
				for k := range s {
					if !sameBits64(s[k], w[k]) {
						t.Fatalf("%s lnRow n=%d lane %d: %v, twin %v", impl.name, m, k, s[k], w[k])
					}
				}
				for i := range agw {
					if !sameBits64(agw[i], tgw[i]) || !sameBits64(agb[i], tgb[i]) {
						t.Fatalf("%s lnRow n=%d: [%d] gw %v gb %v, twin %v %v", impl.name, m, i, agw[i], agb[i], tgw[i], tgb[i])
					}
				}
			}
		}
	}
}

// TestVecLnFwdBwd compares the lnFwd and lnBwd loops and their wrappers with the twins,
// and the twins with the passes of vecScalar and vecBinary they replace in LayerNorm,
// bit for bit.
func TestVecLnFwdBwd(t *testing.T) {
	rng := rand.New(rand.NewPCG(55, 56))
	same := func(what string, n int, got, want []float32) {
		t.Helper()
		for i := range want {
			if !sameBits(got[i], want[i]) {
				t.Fatalf("%s n=%d: [%d] = %v, want %v", what, n, i, got[i], want[i])
			}
		}
	}
	for _, n := range vecLens {
		for mis := range 3 {
			x := vecInputs(rng, n+mis)[mis:]
			w := vecInputs(rng, n+mis)[mis:]
			b := vecInputs(rng, n+mis)[mis:]
			g0 := vecInputs(rng, n+mis)[mis:]
			m, is := float32(rng.NormFloat64()), float32(rng.Float64()*3)
			cb, cc := float32(rng.NormFloat64()), float32(rng.NormFloat64())

			// The forward: the passes LayerNorm made, the twin, the wrapper.
			want := append([]float32(nil), x...)
			vecScalar(vecSubS, want, want, m)
			vecScalar(vecMulS, want, want, is)
			vecBinary(vecMul, want, want, w)
			vecBinary(vecAdd, want, want, b)
			twin := make([]float32, n)
			vecLnFwdGo(twin, x, w, b, m, is)
			same("vecLnFwdGo", n, twin, want)
			got := make([]float32, n)
			vecLnFwd(got, x, w, b, m, is)
			same("vecLnFwd", n, got, want)

			// The backward.
			xr := append([]float32(nil), x...)
			wantG := append([]float32(nil), g0...)
			vecScalar(vecSubS, xr, xr, m)
			vecScalar(vecMulS, xr, xr, cb)
			vecScalar(vecMulS, wantG, wantG, is)
			vecBinary(vecAdd, wantG, wantG, xr)
			vecScalar(vecAddS, wantG, wantG, cc)
			twinG := append([]float32(nil), g0...)
			vecLnBwdGo(twinG, x, is, m, cb, cc)
			same("vecLnBwdGo", n, twinG, wantG)
			gotG := append([]float32(nil), g0...)
			vecLnBwd(gotG, x, is, m, cb, cc)
			same("vecLnBwd", n, gotG, wantG)

			k := n &^ 15
			if k == 0 {
				continue
			}
			for _, impl := range vecImpls {
				y := make([]float32, k)
				impl.lnFwd(&y[0], &x[0], &w[0], &b[0], m, is, k)
				same(impl.name+" lnFwd", k, y, want[:k])
				gg := append([]float32(nil), g0[:k]...)
				impl.lnBwd(&gg[0], &x[0], is, m, cb, cc, k)
				same(impl.name+" lnBwd", k, gg, wantG[:k])
			}
		}
	}
}
