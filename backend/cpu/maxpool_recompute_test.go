package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
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
		{H: 5, W: 8, KH: 2, KW: 2, StrideH: 2, StrideW: 2},
		{H: 2, W: 34, KH: 2, KW: 2, StrideH: 2, StrideW: 2},
		{H: 14, W: 14, KH: 2, KW: 2, StrideH: 2, StrideW: 2},
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
				if rng.IntN(10) == 0 {
					gvals[i] = special[2+rng.IntN(3)] // NaN, +0, -0
				}
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
			// The recomputing kernels' outputs start as garbage: they must write every
			// element (the float32 planes are written in place).
			garbage := func(n int) []float32 {
				v := make([]float32, n)
				for i := range v {
					v[i] = 12345.5
				}
				return v
			}
			x, gy := alloc(dt, nIn, vals), alloc(dt, nOut, gvals)
			y1, y2 := alloc(dt, nOut, nil), alloc(dt, nOut, garbage(nOut))
			gx1, gx2 := alloc(dt, nIn, nil), alloc(dt, nIn, garbage(nIn))
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

// TestVecMaxPool2x2Rows compares the row-pair max-pool loops (values, and gradient
// without index) with their twins bit for bit, and the twins with maxRow2x2 and
// PoolBackward's accumulation at its index, for row lengths of every remainder
// modulo 16, with ties, NaNs and signed zeros in the rows and the gradient.
func TestVecMaxPool2x2Rows(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	for _, ow := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 14, 15, 16, 17, 31, 32, 33, 47, 50} {
		for _, rows := range []int{1, 2, 5, 14} {
			w := 2 * ow
			x := vecInputs(rng, 2*rows*w+1)[1:] // misaligned
			for i := range x {
				if rng.IntN(4) == 0 && i >= w {
					x[i] = x[i-w] // ties
				}
			}
			gy := vecInputs(rng, rows*ow)
			for i := range gy {
				switch rng.IntN(8) {
				case 0:
					gy[i] = float32(math.Copysign(0, -1))
				case 1:
					gy[i] = float32(math.NaN())
				}
			}
			// The reference: maxRow2x2 per row pair and a zeroed accumulator.
			wantOut, wantG := make([]float32, rows*ow), make([]float32, 2*rows*w)
			idx := make([]int64, ow)
			for i := range rows {
				maxRow2x2(wantOut[i*ow:(i+1)*ow], idx, x[2*i*w:], x[(2*i+1)*w:], 2*i*w, w)
				for j, k := range idx {
					wantG[k] += gy[i*ow+j]
				}
			}
			twinOut, twinG := make([]float32, rows*ow), make([]float32, 2*rows*w)
			maxRows2x2(twinOut, x, ow, w)
			maxRows2x2Grad(twinG, x, gy, ow, w)
			vOut, vG := make([]float32, rows*ow+1), make([]float32, 2*rows*w+1)
			vOut[rows*ow], vG[2*rows*w] = 7, 7 // past the end: must stay
			vecMaxRows2x2(vOut[:rows*ow], x, ow, w)
			vecMaxRows2x2Grad(vG[:2*rows*w], x, gy, ow, w)
			if vOut[rows*ow] != 7 || vG[2*rows*w] != 7 {
				t.Fatalf("ow=%d rows=%d: a vector loop wrote past its output", ow, rows)
			}
			for _, c := range []struct {
				what            string
				want, twin, got []float32
			}{{"values", wantOut, twinOut, vOut}, {"gradient", wantG, twinG, vG}} {
				for i := range c.want {
					if !sameBits(c.twin[i], c.want[i]) || !sameBits(c.got[i], c.want[i]) {
						t.Fatalf("ow=%d rows=%d %s %d: reference %v, twin %v, vector %v", ow, rows, c.what, i, c.want[i], c.twin[i], c.got[i])
					}
				}
			}
		}
	}
}

// TestVecMaxPool2x2RowsBF16 checks the bfloat16 row-pair max-pool loops
// (vecMaxRows2x2BF16, vecMaxRows2x2GradBF16) against their twins (the float32
// loops' twins on the planes widened, rounded back) bit for bit, for widths
// around 16 windows, with ties, NaNs (signalling ones too, which both quiet),
// infinities and signed zeros in the rows and the gradient, and nothing written
// past the outputs.
func TestVecMaxPool2x2RowsBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	special := []half.BFloat16{0x8000, 0x0000, 0x7fc0, 0x7f81, 0xff80, 0x7f80, 0x0001}
	for _, ow := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 14, 15, 16, 17, 31, 32, 33, 47, 50} {
		for _, rows := range []int{1, 2, 5, 14} {
			w := 2 * ow
			x32 := vecInputs(rng, 2*rows*w+1)
			x := make([]half.BFloat16, len(x32))
			half.Float32ToBFloat16(x, x32)
			x = x[1:] // misaligned
			for i := range x {
				switch {
				case rng.IntN(4) == 0 && i >= w:
					x[i] = x[i-w] // ties
				case rng.IntN(16) == 0:
					x[i] = special[rng.IntN(len(special))]
				}
			}
			gy := make([]half.BFloat16, rows*ow)
			for i := range gy {
				gy[i] = half.BFloat16FromFloat32(float32(rng.NormFloat64()))
				if rng.IntN(6) == 0 {
					gy[i] = special[rng.IntN(len(special))]
				}
			}
			twinOut, twinG := make([]half.BFloat16, rows*ow), make([]half.BFloat16, 2*rows*w)
			maxRows2x2BF16(twinOut, x, ow, w)
			maxRows2x2GradBF16(twinG, x, gy, ow, w)
			vOut, vG := make([]half.BFloat16, rows*ow+1), make([]half.BFloat16, 2*rows*w+1)
			vOut[rows*ow], vG[2*rows*w] = 7, 7 // past the end: must stay
			vecMaxRows2x2BF16(vOut[:rows*ow], x, ow, w)
			vecMaxRows2x2GradBF16(vG[:2*rows*w], x, gy, ow, w)
			if vOut[rows*ow] != 7 || vG[2*rows*w] != 7 {
				t.Fatalf("ow=%d rows=%d: a vector loop wrote past its output", ow, rows)
			}
			if !slices.Equal(vOut[:rows*ow], twinOut) {
				t.Fatalf("ow=%d rows=%d: maxima %x, twin %x", ow, rows, vOut[:rows*ow], twinOut)
			}
			if !slices.Equal(vG[:2*rows*w], twinG) {
				t.Fatalf("ow=%d rows=%d: gradient %x, twin %x", ow, rows, vG[:2*rows*w], twinG)
			}
		}
	}
}

// BenchmarkMaxPool2x2Rows times the row-pair max-pool loops on the Fashion CNN's two
// pooled shapes (128·16 planes of 28×28, 128·32 of 14×14), float32 and bfloat16,
// forward (vecMaxRows2x2*) and backward (vecMaxRows2x2Grad*), plane by plane on one
// thread, in ns per input element.
func BenchmarkMaxPool2x2Rows(b *testing.B) {
	for _, sh := range []struct{ planes, hw int }{{128 * 16, 28}, {128 * 32, 14}} {
		hw, ow := sh.hw, sh.hw/2
		n, on := sh.planes*hw*hw, sh.planes*ow*ow
		rng := rand.New(rand.NewPCG(uint64(hw), 1))
		x, gy := vecInputs(rng, n), vecInputs(rng, on)
		xb, gyb := make([]half.BFloat16, n), make([]half.BFloat16, on)
		half.Float32ToBFloat16(xb, x)
		half.Float32ToBFloat16(gyb, gy)
		o, ob := make([]float32, on), make([]half.BFloat16, on)
		g, gb := make([]float32, n), make([]half.BFloat16, n)
		pl, opl := hw*hw, ow*ow
		for _, c := range []struct {
			name  string
			plane func(p int)
		}{
			{"fwd/f32", func(p int) { vecMaxRows2x2(o[p*opl:][:opl], x[p*pl:][:pl], ow, hw) }},
			{"fwd/bf16", func(p int) { vecMaxRows2x2BF16(ob[p*opl:][:opl], xb[p*pl:][:pl], ow, hw) }},
			{"bwd/f32", func(p int) { vecMaxRows2x2Grad(g[p*pl:][:pl], x[p*pl:][:pl], gy[p*opl:][:opl], ow, hw) }},
			{"bwd/bf16", func(p int) { vecMaxRows2x2GradBF16(gb[p*pl:][:pl], xb[p*pl:][:pl], gyb[p*opl:][:opl], ow, hw) }},
		} {
			b.Run(fmt.Sprintf("%dx%d/%s", hw, hw, c.name), func(b *testing.B) {
				for b.Loop() {
					for p := range sh.planes {
						c.plane(p)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
			})
		}
	}
}
