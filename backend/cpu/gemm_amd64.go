//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// gemmKernel12x32AVX512 adds to the 12×32 tile at c (row stride ldc) the
// product of a packed 12-row A micro-panel and a packed 32-column B
// micro-panel. It equals this Go loop with every multiply-add fused
// (VFMADD231PS: x·y+z rounded once, as math.FMA does for float64):
//
//	for i := 0; i < 12; i++ {
//		for j := 0; j < 32; j++ {
//			var acc float32
//			for p := 0; p < kc; p++ {
//				acc = fma(a[p*12+i], b[p*32+j], acc)
//			}
//			c[i*ldc+j] += acc
//		}
//	}
//
// gemmKernelGo(12, 32, ...) is that loop; it is bit-identical where the Go
// compiler fuses the multiply-add (GOAMD64=v3), and within rounding otherwise.
//
//go:noescape
func gemmKernel12x32AVX512(kc int, a, b, c []float32, ldc int)

// gemmKernel6x16AVX2 is gemmKernel12x32AVX512 for a 6×16 tile with AVX2 and
// FMA (ymm registers): the same loop with 6 and 16 for 12 and 32.
//
//go:noescape
func gemmKernel6x16AVX2(kc int, a, b, c []float32, ldc int)

var (
	gemmKernelAVX512 = &gemmKernel[float32]{name: "avx512-12x32", mr: 12, nr: 32, fn: gemmKernel12x32AVX512}
	gemmKernelAVX2   = &gemmKernel[float32]{name: "avx2-6x16", mr: 6, nr: 16, fn: gemmKernel6x16AVX2}
)

// gemmKernel32 is the float32 micro-kernel Gemm uses: the widest this CPU
// supports.
var gemmKernel32 = gemmKernels32()[0]

// gemmKernels32 lists every float32 micro-kernel this CPU can run, best first.
func gemmKernels32() []*gemmKernel[float32] {
	var ks []*gemmKernel[float32]
	if cpu.X86.HasAVX512F {
		ks = append(ks, gemmKernelAVX512)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, gemmKernelAVX2)
	}
	return append(ks, gemmKernelGo32)
}
