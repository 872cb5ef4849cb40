package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// TestIm2ColCol2ImExact compares Im2Col and Col2Im in float32 with the definition,
// bit for bit (Col2Im adding in the kernel's order: kernel position, then output
// position), on geometries that take the shifted path (unit stride, OW = W) and ones
// that do not, with signed zeros, infinities and NaNs among the values.
func TestIm2ColCol2ImExact(t *testing.T) {
	b, _ := New(0)
	rng := rand.New(rand.NewPCG(41, 42))
	geoms := []backend.ConvArgs{
		{N: 2, C: 3, H: 28, W: 28, KH: 5, KW: 5, StrideH: 1, StrideW: 1, PadH: 2, PadW: 2, DilationH: 1, DilationW: 1},
		{N: 1, C: 2, H: 7, W: 9, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadH: 1, PadW: 1, DilationH: 1, DilationW: 1},
		{N: 1, C: 2, H: 9, W: 8, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadH: 2, PadW: 2, DilationH: 2, DilationW: 2},
		{N: 1, C: 1, H: 2, W: 3, KH: 5, KW: 7, StrideH: 1, StrideW: 1, PadH: 3, PadW: 3, DilationH: 1, DilationW: 1},
		{N: 1, C: 2, H: 6, W: 6, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadH: 0, PadW: 0, DilationH: 1, DilationW: 1},
		{N: 2, C: 2, H: 11, W: 10, KH: 3, KW: 3, StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, DilationH: 1, DilationW: 1},
	}
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.NaN())}
	for _, a := range geoms {
		a.OH = convOut(a.H, a.KH, a.StrideH, a.PadH, a.DilationH)
		a.OW = convOut(a.W, a.KW, a.StrideW, a.PadW, a.DilationW)
		kk, hw, ohw := a.KH*a.KW, a.H*a.W, a.OH*a.OW
		img := make([]float32, a.N*a.C*hw)
		cols := make([]float32, a.N*a.C*kk*ohw)
		for _, v := range [][]float32{img, cols} {
			for i := range v {
				if rng.IntN(20) == 0 {
					v[i] = special[rng.IntN(len(special))]
				} else {
					v[i] = float32(rng.NormFloat64())
				}
			}
		}
		wantCols := make([]float32, len(cols))
		wantImg := make([]float32, len(img))
		for p := range a.N * a.C {
			for ki := range a.KH {
				for kj := range a.KW {
					for oh := range a.OH {
						for ow := range a.OW {
							ih := oh*a.StrideH - a.PadH + ki*a.DilationH
							iw := ow*a.StrideW - a.PadW + kj*a.DilationW
							c := p*kk*ohw + (ki*a.KW+kj)*ohw + oh*a.OW + ow
							if ih >= 0 && ih < a.H && iw >= 0 && iw < a.W {
								wantCols[c] = img[p*hw+ih*a.W+iw]
								wantImg[p*hw+ih*a.W+iw] += cols[c]
							}
						}
					}
				}
			}
		}
		is, _ := b.Alloc(backend.Float32, len(img))
		cs, _ := b.Alloc(backend.Float32, len(cols))
		copy(st(is).f32(), img)
		b.Im2Col(cs, is, a)
		for i, v := range st(cs).f32() {
			if !sameBits(v, wantCols[i]) {
				t.Fatalf("%+v: Im2Col [%d] = %v, want %v", a, i, v, wantCols[i])
			}
		}
		copy(st(cs).f32(), cols)
		b.Col2Im(is, cs, a)
		for i, v := range st(is).f32() {
			if !sameBits(v, wantImg[i]) {
				t.Fatalf("%+v: Col2Im [%d] = %v, want %v", a, i, v, wantImg[i])
			}
		}
	}
}
