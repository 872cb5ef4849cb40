package cpu

// attnStoreFn and attnStoreDirect are gemmKernel32's storing forms for the float32
// attention products (mulF32): fn and direct storing +0 plus the sum to C instead of
// adding the sum to it, C not read, what fn and direct leave on a C of +0s bit for
// bit; nil where the kernel has none. This file is the one place that names the
// GEMM kernel's storing fields (gemmKernel.fnStart, directStart, here with a start
// row of +0s), so that a change of that interface touches only attnStoreForms.
var attnStoreFn, attnStoreDirect = attnStoreForms(gemmKernel32)

// attnStoreForms returns kern's storing forms (see attnStoreFn).
func attnStoreForms(kern *gemmKernel[float32]) (fn func(kc int, a, b, c []float32, ldc int), direct func(kc int, a []float32, lda int, b, c []float32, ldc int)) {
	if kern.fnStart == nil || kern.directStart == nil {
		return nil, nil
	}
	zeros := make([]float32, kern.nr)
	fn = func(kc int, a, b, c []float32, ldc int) { kern.fnStart(kc, a, b, c, ldc, zeros) }
	direct = func(kc int, a []float32, lda int, b, c []float32, ldc int) {
		kern.directStart(kc, a, lda, b, c, ldc, zeros)
	}
	return fn, direct
}

// attnRowsFn and attnRowsDirect are gemmKernel32's kernels for the first rows < mr rows
// of a tile (rowsFn, rowsDirect; nil where it has none), and attnZeroRow their start
// row of +0s for a C that mulF32 sets: the last row panel of a product then computes
// only its rows, on C itself.
var (
	attnRowsFn, attnRowsDirect = gemmKernel32.rowsFn, gemmKernel32.rowsDirect
	attnZeroRow                = make([]float32, gemmKernel32.nr)
)

// attnStridedT is the kernel mulF32 runs on a transposed A in place (the backward's
// Pᵀ and dSᵀ, read down the columns of the tile: row i's value at step p at
// a[i*lda+p*astep], lda 1, astep the tile's row stride) instead of packing each row
// panel (attnPackT) for fn: rows ≤ mr rows of a tile, start as for rowsFn (nil adds
// to C). nil where gemmKernel32 has none; tests clear it to compare.
var attnStridedT = attnStridedFor(gemmKernel32)
