package cpu

// maxRow2x2 computes one output row of a 2×2, stride-2 max-pool: window j covers
// r0[2j], r0[2j+1], r1[2j], r1[2j+1], in that order; o[j] is the first maximum (a
// later value takes over when it is greater or NaN) and x[j] its plane index, base +
// 2j plus 0, 1, w or w+1. These are maxPlane's comparisons without the -Inf start,
// which the first value always passes or equals. It is the twin of the max-pool loop
// (vec_amd64.s) for float32.
func maxRow2x2[C numeric](o []C, x []int64, r0, r1 []C, base, w int) {
	x = x[:len(o)]
	r0, r1 = r0[:2*len(o)], r1[:2*len(o)]
	for j := range o {
		best, at := r0[2*j], 0
		if v := r0[2*j+1]; v > best || v != v {
			best, at = v, 1
		}
		if v := r1[2*j]; v > best || v != v {
			best, at = v, w
		}
		if v := r1[2*j+1]; v > best || v != v {
			best, at = v, w+1
		}
		o[j] = best
		x[j] = int64(base + 2*j + at)
	}
}

// vecMaxRow2x2 is maxRow2x2 for float32 on the vector layer (AVX-512 only).
func vecMaxRow2x2(o []float32, x []int64, r0, r1 []float32, base, w int) {
	n := len(o)
	x = x[:n]
	r0, r1 = r0[:2*n], r1[:2*n]
	m := 0
	if vecAVX512OK() {
		if m = n &^ 15; m > 0 {
			vecMaxPool2x2Run(&o[0], &x[0], &r0[0], &r1[0], m, base, w)
		}
	}
	maxRow2x2(o[m:], x[m:], r0[2*m:], r1[2*m:], base+2*m, w)
}
