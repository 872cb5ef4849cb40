//go:build amd64 && !purego

package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/half"
)

// BenchmarkGemmBF16DirectDepth times the 12×32 direct bf16 kernel (bf16 store) on
// L1-resident operands at the depths of the transformers' linear layers, next to
// the float32-tile kernel: the cost of the bf16 epilogue per tile.
func BenchmarkGemmBF16DirectDepth(b *testing.B) {
	if gemmBF16KernelBest != gemmBF16KernelAVX512 {
		b.Skip("no AVX512-BF16 12×32 kernel")
	}
	for _, k := range []int{32, 128, 512} {
		kc2 := k / 2
		a := make([]half.BFloat16, 12*k)
		bp := make([]uint32, kc2*32)
		c := make([]half.BFloat16, 12*32)
		cf := make([]float32, 12*32)
		// Operands of ±1 scale, as in training: all-zero ones would hide what
		// the epilogue costs on real values.
		rng := rand.New(rand.NewPCG(1, uint64(k)))
		for i := range a {
			a[i] = half.BFloat16FromFloat32(rng.Float32() - 0.5)
		}
		for i := range bp {
			bp[i] = uint32(half.BFloat16FromFloat32(rng.Float32()-0.5)) | uint32(half.BFloat16FromFloat32(rng.Float32()-0.5))<<16
		}
		flops := 2 * float64(12*32*k)
		b.Run(fmt.Sprintf("k=%d/bf16", k), func(b *testing.B) {
			for b.Loop() {
				gemmBF16Kernel12x32DirectAVX512(kc2, &a[0], k, &bp[0], nil, &c[0], 32, 1, 0)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(fmt.Sprintf("k=%d/f32", k), func(b *testing.B) {
			for b.Loop() {
				gemmBF16Kernel12x32DirectF32AVX512(kc2, &a[0], k, &bp[0], &cf[0], 32, false)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
