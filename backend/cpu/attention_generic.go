//go:build !amd64 || purego

package cpu

import "github.com/gamp-ml/gamp/half"

// attnAsm is false: this build has no assembly.
const attnAsm = false

// attnExpRow is attnExpRowGo.
func attnExpRow(row []float32, lo []half.BFloat16, scale, shift float32) float32 {
	return attnExpRowGo(row, lo, scale, shift)
}

// attnDS is attnDSGo.
func attnDS(dp, p []float32, delta float32, lo []half.BFloat16) { attnDSGo(dp, p, delta, lo) }

// attnExpTile is attnExpTileGo.
func attnExpTile(x []float32, ld, rows, cols, vis0 int, lse []float32, scale float32, lo []half.BFloat16, sums []float32) {
	attnExpTileGo(x, ld, rows, cols, vis0, lse, scale, lo, sums)
}

// attnMaxTile is attnMaxTileGo.
func attnMaxTile(x []float32, ld, rows, cols, vis0 int, mx []float32) {
	attnMaxTileGo(x, ld, rows, cols, vis0, mx)
}

// attnDSTile is attnDSTileGo.
func attnDSTile(dp, p []float32, ld, rows, cols int, delta []float32, lo []half.BFloat16) {
	attnDSTileGo(dp, p, ld, rows, cols, delta, lo)
}

// attnMax is attnMaxGo.
func attnMax(row []float32) float32 { return attnMaxGo(row) }

// attnAMXDirectOK reports false: no AMX kernel in this build.
func attnAMXDirectOK(kern *gemmBF16Kernel) bool { return false }

func attnAMXDirect(kc2 int, a []half.BFloat16, lda int, b []uint32, c []float32, ldc int, add bool) {
	panic("cpu: attnAMXDirect without AMX")
}

// attnAMXAcquire reports false: no AMX kernel in this build.
func attnAMXAcquire(kern *gemmBF16Kernel) bool { return false }

func attnAMXRelease() {}

func attnAMXHeldFn(kc2 int, a, b []uint32, c []float32, ldc int, add bool) {
	panic("cpu: attnAMXHeldFn without AMX")
}

func attnAMXHeldDirect(kc2 int, a []half.BFloat16, lda int, b []uint32, c []float32, ldc int, add bool) {
	panic("cpu: attnAMXHeldDirect without AMX")
}

// attnPackT is attnPackTGo.
func attnPackT(dst, src []float32, ld, k, rows, mr int) { attnPackTGo(dst, src, ld, k, rows, mr) }

// attnDeltaF32 is attnDeltaF32Go.
func attnDeltaF32(delta, g []float32, lg int, o []float32, lo int, t, d int) {
	attnDeltaF32Go(delta, g, lg, o, lo, t, d)
}

// attnLSERows is attnLSEGo.
func attnLSERows(lse, m, l []float32) { attnLSEGo(lse, m, l) }
