//go:build !amd64 || purego

package cpu

import "github.com/gamp-ml/gamp/half"

// gemmBF16KernelBest is the bf16 micro-kernel GemmBF16 uses: the portable
// one, so gemmBF16Native is false.
var (
	gemmBF16KernelBest = gemmBF16KernelGo12x32
	gemmBF16Native     = false
)

// gemmBF16Kernels lists every bf16 micro-kernel this machine can run.
func gemmBF16Kernels() []*gemmBF16Kernel {
	return []*gemmBF16Kernel{gemmBF16KernelGo12x32}
}

// gemmBF16PackPairRows is gemmBF16PackPairRowsGo.
func gemmBF16PackPairRows(dst []uint32, src []half.BFloat16, ld, steps, w, stride int) {
	gemmBF16PackPairRowsGo(dst, src, ld, steps, w, stride)
}

// gemmBF16PackPairRows24 is gemmBF16PackPairRowsGo on two 12-lane panels.
func gemmBF16PackPairRows24(dst0, dst1 []uint32, src []half.BFloat16, ld, steps int) {
	gemmBF16PackPairRowsGo(dst0, src, ld, steps, 12, 12)
	gemmBF16PackPairRowsGo(dst1, src[12:], ld, steps, 12, 12)
}

// gemmBF16PackGatherRows is gemmBF16PackGatherRowsGo.
func gemmBF16PackGatherRows(dst []uint32, src []half.BFloat16, ld, steps, w, stride int) {
	gemmBF16PackGatherRowsGo(dst, src, ld, steps, w, stride)
}

// gemmBF16PackPairPanels reports false: packBPanel packs each panel here.
func gemmBF16PackPairPanels(dst []uint32, src []half.BFloat16, ld, steps, panels, stride int) bool {
	return false
}
