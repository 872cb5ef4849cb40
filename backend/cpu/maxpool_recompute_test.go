package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// TestMaxPoolRecomputeMatchesIndex runs MaxPool and MaxPoolBackward, which find the
// window maxima again in the input, against Pool and PoolBackward with the Int64
// index, outputs and input gradients bit for bit, in every floating dtype, on packed
// 2×2, other 2×2, overlapping, padded and strided geometries, with ties, infinities
// and NaNs.
func TestMaxPoolRecomputeMatchesIndex(t *testing.T) {
	b, _ := New(0)
	rng := rand.New(rand.NewPCG(41, 42))
	special := []float32{float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN()), 0, float32(math.Copysign(0, -1))}
	geoms := []backend.PoolArgs{
		{H: 28, W: 28, KH: 2, KW: 2, StrideH: 2, StrideW: 2},
		{H: 7, W: 9, KH: 2, KW: 2, StrideH: 2, StrideW: 2},
		{H: 9, W: 8, KH: 3, KW: 3, StrideH: 2, StrideW: 2, PadH: 1, PadW: 1},
		{H: 6, W: 11, KH: 3, KW: 2, StrideH: 1, StrideW: 3, PadH: 1},
		{H: 5, W: 5, KH: 5, KW: 5, StrideH: 1, StrideW: 1, PadH: 2, PadW: 2},
	}
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16, backend.Float16, backend.Float64} {
		for _, a := range geoms {
			a.Kind, a.N, a.C = backend.MaxPool, 2, 3
			a.OH = (a.H+2*a.PadH-a.KH)/a.StrideH + 1
			a.OW = (a.W+2*a.PadW-a.KW)/a.StrideW + 1
			nIn, nOut := a.N*a.C*a.H*a.W, a.N*a.C*a.OH*a.OW
			vals, gvals := make([]float32, nIn), make([]float32, nOut)
			for i := range vals {
				if rng.IntN(8) == 0 {
					vals[i] = special[rng.IntN(len(special))]
				} else {
					vals[i] = float32(rng.IntN(5)) - 2 // ties
				}
			}
			for i := range gvals {
				gvals[i] = float32(rng.NormFloat64())
			}
			alloc := func(dt backend.DType, n int, v []float32) backend.Storage {
				s, err := b.Alloc(dt, n)
				if err != nil {
					t.Fatal(err)
				}
				if v != nil {
					st(s).storeF32(0, v)
				}
				return s
			}
			x, gy := alloc(dt, nIn, vals), alloc(dt, nOut, gvals)
			y1, y2 := alloc(dt, nOut, nil), alloc(dt, nOut, nil)
			gx1, gx2 := alloc(dt, nIn, nil), alloc(dt, nIn, nil)
			idx := alloc(backend.Int64, nOut, nil)
			b.Pool(y1, idx, x, a)
			b.PoolBackward(gx1, gy, idx, a)
			b.MaxPool(y2, x, a)
			b.MaxPoolBackward(gx2, gy, x, a)
			for _, p := range [][2]backend.Storage{{y1, y2}, {gx1, gx2}} {
				n := st(p[0]).n
				want, got := make([]float64, n), make([]float64, n)
				st(p[0]).loadF64(want, 0)
				st(p[1]).loadF64(got, 0)
				for i := range want {
					if math.Float64bits(want[i]) != math.Float64bits(got[i]) {
						t.Fatalf("%s %+v: element %d of %d: index path %v, recomputed %v", dt, a, i, n, want[i], got[i])
					}
				}
			}
		}
	}
}
