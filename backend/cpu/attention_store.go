package cpu

// attnStoreFn and attnStoreDirect are gemmKernel32's storing forms for the float32
// attention products (mulF32): fn and direct storing +0 plus the sum to C instead of
// adding the sum to it, C not read, what fn and direct leave on a C of +0s bit for
// bit; nil where the kernel has none. This file is the one place that names the
// GEMM kernel's storing fields (gemmKernel.fnStart, directStart, run here with a
// start row of +0s), so that a change of that interface touches only
// attnStoreForms.
var attnStoreFn, attnStoreDirect = attnStoreForms(gemmKernel32)

// attnStoreForms returns kern's storing forms (see attnStoreFn).
func attnStoreForms(kern *gemmKernel[float32]) (fn func(kc int, a, b, c []float32, ldc int), direct func(kc int, a []float32, lda int, b, c []float32, ldc int)) {
	if kern.fnStart == nil || kern.directStart == nil {
		return nil, nil
	}
	zeros := make([]float32, kern.nr)
	fnStart, directStart := kern.fnStart, kern.directStart
	return func(kc int, a, b, c []float32, ldc int) { fnStart(kc, a, b, c, ldc, zeros) },
		func(kc int, a []float32, lda int, b, c []float32, ldc int) { directStart(kc, a, lda, b, c, ldc, zeros) }
}
