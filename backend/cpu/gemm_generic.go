//go:build !amd64 || purego

package cpu

// gemmKernel32 is the float32 micro-kernel Gemm uses: the portable one.
var gemmKernel32 = gemmKernelGo32

// gemmKernels32 lists every float32 micro-kernel this machine can run, best
// first.
func gemmKernels32() []*gemmKernel[float32] {
	return []*gemmKernel[float32]{gemmKernelGo32}
}
