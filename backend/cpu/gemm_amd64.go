//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

//go:noescape
func gemmKernel12x32AVX512(kc int, a, b, c []float32, ldc int)

//go:noescape
func gemmKernel12x32AVX512B(kc int, a, b, c []float32, ldc int)

//go:noescape
func gemmKernel6x64AVX512(kc int, a, b, c []float32, ldc int)

//go:noescape
func gemmKernel6x16AVX2(kc int, a, b, c []float32, ldc int)

var (
	gemmKernelAVX512  = &gemmKernel[float32]{name: "avx512-12x32", mr: 12, nr: 32, fn: gemmKernel12x32AVX512}
	gemmKernelAVX512B = &gemmKernel[float32]{name: "avx512b-12x32", mr: 12, nr: 32, fn: gemmKernel12x32AVX512B}
	gemmKernelAVX512W = &gemmKernel[float32]{name: "avx512-6x64", mr: 6, nr: 64, fn: gemmKernel6x64AVX512}
	gemmKernelAVX2    = &gemmKernel[float32]{name: "avx2-6x16", mr: 6, nr: 16, fn: gemmKernel6x16AVX2}
)

var gemmKernel32 = gemmKernels32()[0]

func gemmKernels32() []*gemmKernel[float32] {
	var ks []*gemmKernel[float32]
	if cpu.X86.HasAVX512F {
		ks = append(ks, gemmKernelAVX512, gemmKernelAVX512B, gemmKernelAVX512W)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, gemmKernelAVX2)
	}
	return append(ks, gemmKernelGo32)
}
