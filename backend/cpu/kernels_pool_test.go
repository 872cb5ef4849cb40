package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// TestMaxPlane2x2 compares the 2×2 stride-2 max-pool loop with the general one, values
// and indices, on planes with ties, infinities and NaNs, odd sizes dropping the last
// row or column.
func TestMaxPlane2x2(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	special := []float32{float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN()), 0, 1}
	for _, hw := range [][2]int{{2, 2}, {4, 6}, {5, 7}, {28, 28}, {14, 14}, {3, 9}, {6, 64}, {9, 71}} {
		a := backend.PoolArgs{Kind: backend.MaxPool, N: 1, C: 1, H: hw[0], W: hw[1], KH: 2, KW: 2,
			StrideH: 2, StrideW: 2, OH: hw[0] / 2, OW: hw[1] / 2}
		for range 50 {
			in := make([]float32, a.H*a.W)
			for i := range in {
				if rng.IntN(3) == 0 {
					in[i] = special[rng.IntN(len(special))]
				} else {
					in[i] = float32(rng.IntN(5))
				}
			}
			got, want := make([]float32, a.OH*a.OW), make([]float32, a.OH*a.OW)
			gi, wi := make([]int64, len(got)), make([]int64, len(got))
			maxPlane(got, gi, in, &a)
			maxPlaneAny(want, wi, in, &a)
			for i := range got {
				if !sameBits(got[i], want[i]) || gi[i] != wi[i] {
					t.Fatalf("%dx%d: out %d = %v at %d, want %v at %d", a.H, a.W, i, got[i], gi[i], want[i], wi[i])
				}
			}
		}
	}
}

// TestVecMaxPool2x2 compares the vector max-pool loop and its wrapper with the twin,
// values and indices bit for bit, at every row length to 200 and misalignments.
func TestVecMaxPool2x2(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, n := range vecLens {
		for mis := range 3 {
			r0 := vecInputs(rng, 2*n+mis)[mis:]
			r1 := vecInputs(rng, 2*n+mis)[mis:]
			for i := range r0 { // ties
				if rng.IntN(4) == 0 {
					r0[i] = r1[i]
				}
			}
			base, w := rng.IntN(1000), 2*n+rng.IntN(5)
			want, got := make([]float32, n), make([]float32, n)
			wi, gi := make([]int64, n), make([]int64, n)
			maxRow2x2(want, wi, r0, r1, base, w)
			vecMaxRow2x2(got, gi, r0, r1, base, w)
			for j := range want {
				if !sameBits(got[j], want[j]) || gi[j] != wi[j] {
					t.Fatalf("n=%d: out %d = %v at %d, twin %v at %d", n, j, got[j], gi[j], want[j], wi[j])
				}
			}
			if m := n &^ 15; vecAVX512OK() && m > 0 {
				vecMaxPool2x2Run(&got[0], &gi[0], &r0[0], &r1[0], m, base, w)
				for j := range m {
					if !sameBits(got[j], want[j]) || gi[j] != wi[j] {
						t.Fatalf("vecMaxPool2x2AVX512 n=%d: out %d = %v at %d, twin %v at %d", m, j, got[j], gi[j], want[j], wi[j])
					}
				}
			}
		}
	}
}

// TestPoolPacked runs Backend.Pool on 2×2 stride-2 geometries that take the packed
// path (W = 2·OW) and on ones that do not, in float32 and bfloat16, against maxPlaneAny
// on the float32 values of the input.
func TestPoolPacked(t *testing.T) {
	b, _ := New(0)
	rng := rand.New(rand.NewPCG(35, 36))
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		for _, hw := range [][2]int{{28, 28}, {14, 14}, {7, 7}, {5, 8}, {40, 64}, {2, 34}} {
			a := backend.PoolArgs{Kind: backend.MaxPool, N: 2, C: 3, H: hw[0], W: hw[1], KH: 2, KW: 2,
				StrideH: 2, StrideW: 2, OH: hw[0] / 2, OW: hw[1] / 2}
			hwIn, ohw := a.H*a.W, a.OH*a.OW
			vals := make([]float32, a.N*a.C*hwIn)
			for i := range vals {
				vals[i] = float32(rng.IntN(7)) - 3
			}
			vals[rng.IntN(len(vals))] = float32(math.NaN())
			xs, _ := b.Alloc(dt, len(vals))
			st(xs).storeF32(0, vals)
			st(xs).loadF32(vals, 0) // the values as stored
			ys, _ := b.Alloc(dt, a.N*a.C*ohw)
			is, _ := b.Alloc(backend.Int64, a.N*a.C*ohw)
			b.Pool(ys, is, xs, a)
			got := make([]float32, a.N*a.C*ohw)
			st(ys).loadF32(got, 0)
			gi := st(is).i64()
			for p := range a.N * a.C {
				want, wi := make([]float32, ohw), make([]int64, ohw)
				maxPlaneAny(want, wi, vals[p*hwIn:(p+1)*hwIn], &a)
				for k := range want {
					if !sameBits(got[p*ohw+k], want[k]) || gi[p*ohw+k] != wi[k] {
						t.Fatalf("%s %dx%d plane %d: out %d = %v at %d, want %v at %d", dt, a.H, a.W, p, k, got[p*ohw+k], gi[p*ohw+k], want[k], wi[k])
					}
				}
			}
		}
	}
}
