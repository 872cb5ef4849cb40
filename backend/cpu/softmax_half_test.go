package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// TestSoftmaxHalfRoundsOnce checks that softmax, log-softmax and their backward passes
// round each float64 result to a half destination once: against a reference that
// computes every row's float64 results with the kernels' own steps (vecMaxF32,
// vecExpF64, vecSumF64, vecDotF64 and the expressions of vecNarrowGo) and stores them
// with storeF64, on rows long enough (and enough of them) that rounding through
// float32 to nearest first would land on some half-way points and differ.
func TestSoftmaxHalfRoundsOnce(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	const outer, n = 256, 1000 // 256000 results of each kind
	rng := rand.New(rand.NewPCG(41, 42))
	for _, dt := range []backend.DType{backend.BFloat16, backend.Float16} {
		x, gy := geluTableStorage(t, b, dt, outer*n), geluTableStorage(t, b, dt, outer*n)
		xf, gf := make([]float32, outer*n), make([]float32, outer*n)
		for i := range xf {
			xf[i], gf[i] = float32(rng.NormFloat64()*2), float32(rng.NormFloat64())
		}
		x.storeF32(0, xf)
		gy.storeF32(0, gf)
		x.loadF32(xf, 0)
		gy.loadF32(gf, 0)
		for _, log := range []bool{false, true} {
			what := fmt.Sprintf("%s log=%v", dt, log)
			y, want := geluTableStorage(t, b, dt, outer*n), geluTableStorage(t, b, dt, outer*n)
			b.Softmax(y, x, outer, n, log)
			ref := make([]float64, n)
			for r := range outer {
				row := xf[r*n : (r+1)*n]
				mf := float64(vecMaxF32(row))
				sum := vecExpF64(ref, row, mf)
				for i, v := range row {
					if log {
						ref[i] = (float64(v) - mf) - math.Log(sum)
					} else {
						ref[i] /= sum
					}
				}
				want.storeF64(r*n, ref)
			}
			softmaxCompare(t, what, y, want, outer*n)

			gx := geluTableStorage(t, b, dt, outer*n)
			b.SoftmaxBackward(gx, gy, y, outer, n, log)
			yf := make([]float32, outer*n)
			y.loadF32(yf, 0)
			for r := range outer {
				g, yv := gf[r*n:(r+1)*n], yf[r*n:(r+1)*n]
				var dot float64
				if log {
					dot = vecSumF64(g)
					vecExpF64(ref, yv, 0)
				} else {
					dot = vecDotF64(g, yv)
				}
				for i := range ref {
					if log {
						ref[i] = float64(g[i]) - float64(ref[i]*dot)
					} else {
						ref[i] = float64(yv[i]) * (float64(g[i]) - dot)
					}
				}
				want.storeF64(r*n, ref)
			}
			softmaxCompare(t, what+" backward", gx, want, outer*n)
		}
	}
}
