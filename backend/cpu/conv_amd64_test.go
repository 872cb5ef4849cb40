//go:build amd64 && !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestConvKernelDirect checks convKernel12x32AVX512 and convKernel16x16AVX512 against the loop of its doc
// comment with an exactly fused multiply-add (gemmFMA32), bit for bit, and its
// pure-Go twin convKernelGo on the same operands within float32 rounding; B rows at
// scattered, overlapping offsets, C with a row stride wider than the tile.
func TestConvKernelDirect(t *testing.T) {
	if gemmKernel32 != gemmKernelAVX512 {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	const ldc = 40
	for _, k := range []struct {
		mr, nr int
		fn     func(kc int, a []float32, b *float32, offs []int, c []float32, ldc int)
	}{{12, 32, convKernel12x32AVX512}, {16, 16, convKernel16x16AVX512}} {
		for _, kc := range []int{1, 2, 25, 400, 513} {
			t.Run(fmt.Sprintf("%dx%d/kc=%d", k.mr, k.nr, kc), func(t *testing.T) {
				mr, nr := k.mr, k.nr
				a := make([]float32, kc*mr)
				b := make([]float32, 1000)
				for _, v := range [][]float32{a, b} {
					for i := range v {
						v[i] = rng.Float32()*2 - 1
					}
				}
				offs := make([]int, kc)
				for p := range offs {
					offs[p] = 4 * rng.IntN(len(b)-32)
				}
				c0 := make([]float32, mr*ldc)
				for i := range c0 {
					c0[i] = rng.Float32()
				}
				got, twin := append([]float32(nil), c0...), append([]float32(nil), c0...)
				k.fn(kc, a, &b[0], offs, got, ldc)
				convKernelGo(mr, nr, kc, a, b, offs, twin, ldc)
				for i := range mr {
					for j := range ldc {
						k := i*ldc + j
						want := c0[k]
						if j < nr {
							var acc float32
							for p := range kc {
								acc = gemmFMA32(a[p*mr+i], b[offs[p]/4+j], acc)
							}
							want += acc
						}
						if math.Float32bits(got[k]) != math.Float32bits(want) {
							t.Fatalf("c[%d][%d] = %v, want %v", i, j, got[k], want)
						}
						if d := math.Abs(float64(twin[k] - want)); d > 1e-5*float64(kc) {
							t.Fatalf("Go twin c[%d][%d] = %v, want %v", i, j, twin[k], want)
						}
					}
				}
			})
		}
	}
}
