package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gamp-ml/gamp/half"
)

// TestGemmPackB runs whole float32 products through each micro-kernel that
// has fast B packing (packRows, packTrans) and through the same kernel
// without it, bit for bit: the packed panels must hold the same words. The
// shapes cover partial panels (n not a multiple of 32), k not a multiple of
// 16, several k slices and column blocks, and both op(B).
func TestGemmPackB(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, kern := range gemmKernels32() {
		if kern.packRows == nil && kern.packTrans == nil {
			continue
		}
		plain := *kern
		plain.packRows, plain.packTrans = nil, nil
		for _, sh := range []gemmShape{{1, 1, 1}, {13, 33, 15}, {12, 32, 16}, {37, 64, 47}, {25, 100, 530}, {256, 1024, 784}, {3, 4100, 40}} {
			for _, transB := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%dx%dx%d/tB=%v", kern.name, sh.m, sh.n, sh.k, transB), func(t *testing.T) {
					m, n, k := sh.m, sh.n, sh.k
					a := make([]float32, m*k)
					ldb := n + 3
					if transB {
						ldb = k + 5
					}
					b := make([]float32, max(n, k)*ldb)
					for i := range a {
						a[i] = rng.Float32()*2 - 1
					}
					for i := range b {
						b[i] = rng.Float32()*2 - 1
					}
					c0 := make([]float32, m*n)
					for i := range c0 {
						c0[i] = rng.Float32()
					}
					got, want := slices.Clone(c0), slices.Clone(c0)
					for _, w := range []int{1, 2} {
						gemmWith(kern, w, false, transB, m, n, k, 1, a, k, b, ldb, 0.5, got, n)
						gemmWith(&plain, w, false, transB, m, n, k, 1, a, k, b, ldb, 0.5, want, n)
						for i := range got {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("workers=%d: C[%d][%d] = %v, want %v", w, i/n, i%n, got[i], want[i])
							}
						}
					}
				})
			}
		}
	}
}

// TestGemmPackTrans32 checks the whole-block transposes (gemmPackTrans32
// behind gemmBF16PackGatherRows, gemmAMXPackTransTiles behind packAMXA) on
// the widths and depths where they run: 32 lanes or fewer, whole k tiles
// and a rest, against the Go loops, into destinations holding garbage.
func TestGemmPackTrans32(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	for _, steps := range []int{16, 17, 31, 32, 48, 100} {
		for _, pad := range []int{0, 1, 8} {
			ld := 2*steps + pad
			src := make([]half.BFloat16, 31*ld+2*steps)
			for i := range src {
				src[i] = half.BFloat16(rng.Uint32())
			}
			got, want := make([]uint32, steps*32+3), make([]uint32, steps*32+3)
			for i := range got {
				got[i], want[i] = 0xdeadbeef, 0xdeadbeef
			}
			gemmBF16PackGatherRows(got[:steps*32], src, ld, steps, 32, 32)
			gemmBF16PackGatherRowsGo(want[:steps*32], src, ld, steps, 32, 32)
			if !slices.Equal(got, want) {
				t.Fatalf("gather rows: steps=%d ld=%d:\n got %x\nwant %x", steps, ld, got, want)
			}
		}
	}
	for _, lanes := range []int{1, 7, 16, 17, 32} {
		for _, kc := range []int{32, 63, 64, 65, 96, 200, 513} {
			for _, pad := range []int{0, 5} {
				ld := lanes + pad
				kc2 := gemmCeilDiv(gemmCeilDiv(kc, 2), amxTileK) * amxTileK
				src := make([]half.BFloat16, (kc-1)*ld+lanes)
				for i := range src {
					src[i] = half.BFloat16(rng.Uint32())
				}
				got := make([]uint32, amxMR*kc2)
				want := make([]uint32, amxMR*kc2)
				for i := range got {
					got[i], want[i] = rng.Uint32(), rng.Uint32()
				}
				packAMXA(got, src, ld, kc, kc2, lanes, false)
				packAMXAGo(want, src, ld, kc, kc2, lanes, false)
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("AMX A: lanes=%d kc=%d ld=%d: word %d is %#x, want %#x", lanes, kc, ld, i, got[i], want[i])
					}
				}
			}
		}
	}
}
