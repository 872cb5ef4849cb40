package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// TestReLUGradColSumBits checks ReLUGradColSum against UnaryBackward's Relu (reading
// Y for X) then Reduce(Sum) over the rows, bit for bit, the gradient and the column
// sums, with NaN, ±Inf and -0 in GY and Y: one and several blocks of rows (blocks of
// redBlock/min(cols, chunk) rows), strips narrowed for the workers, columns over
// chunk, and a last partial strip; and that it declines what it does not take.
func TestReLUGradColSumBits(t *testing.T) {
	be, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	if !vecAVX512OK() {
		if be.ReLUGradColSum(nil, nil, nil, nil, 0, 0) {
			t.Fatal("took operands without AVX-512")
		}
		t.Skip("no AVX-512: ReLUGradColSum declines")
	}
	rng := rand.New(rand.NewPCG(31, 32))
	alloc := func(dt backend.DType, v []float64) backend.Storage {
		s, err := be.Alloc(dt, len(v))
		if err != nil {
			t.Fatal(err)
		}
		st(s).storeF64(0, v)
		return s
	}
	for _, sh := range [][2]int{{1, 2}, {7, 45}, {256, 1024}, {300, 70}, {33, 2000}, {130, 130}, {5, 9}, {400, 200}, {17, 1030}} {
		rows, cols := sh[0], sh[1]
		t.Run(fmt.Sprint(sh), func(t *testing.T) {
			// GY: a few specials (most column sums stay finite); Y: many (the mask).
			gyv := reluTestValues[float64](rng, rows*cols, false)
			yv := reluTestValues[float64](rng, rows*cols, true)
			// ±2^60 in rows 0 and 20, unmasked: they cancel, and which of the
			// small values the float64 sums lose beside them depends on the
			// blocks of rows.
			for c := range min(cols, 8) {
				for _, p := range [][2]int{{0, 1}, {min(rows-1, 20), -1}} {
					gyv[p[0]*cols+c] = float64(p[1]) * 0x1p60
					yv[p[0]*cols+c] = 1
				}
			}
			for i, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)} {
				gyv[(i*7919)%len(gyv)] = v
			}
			gy, y := alloc(backend.Float32, gyv), alloc(backend.Float32, yv)
			wantGX, gotGX := alloc(backend.Float32, make([]float64, rows*cols)), alloc(backend.Float32, make([]float64, rows*cols))
			wantGB, gotGB := alloc(backend.Float32, make([]float64, cols)), alloc(backend.Float32, make([]float64, cols))
			be.UnaryBackward(backend.Relu, wantGX, gy, y, nil, rows*cols, 0, 0)
			be.Reduce(backend.Sum, wantGB, wantGX, 1, rows, cols)
			if !be.ReLUGradColSum(gotGX, gy, y, gotGB, rows, cols) {
				t.Fatal("declined float32 operands")
			}
			for _, p := range [][2]backend.Storage{{wantGX, gotGX}, {wantGB, gotGB}} {
				w, g := st(p[0]).f32(), st(p[1]).f32()
				for i := range w {
					if math.Float32bits(w[i]) != math.Float32bits(g[i]) {
						t.Fatalf("element %d of %d: %v, want %v", i, len(w), g[i], w[i])
					}
				}
			}
		})
	}
	f32 := func(n int) backend.Storage { return alloc(backend.Float32, make([]float64, n)) }
	if be.ReLUGradColSum(f32(4), f32(4), f32(4), f32(1), 4, 1) {
		t.Error("took one column (Reduce sums it as a row)")
	}
	bf := alloc(backend.BFloat16, make([]float64, 4))
	if be.ReLUGradColSum(bf, bf, bf, bf, 2, 2) {
		t.Error("took bfloat16 operands")
	}
}
