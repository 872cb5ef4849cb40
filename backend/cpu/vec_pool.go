package cpu

import "github.com/gamp-ml/gamp/half"

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

// maxRows2x2 sets out[i·ow + j] to the maximum of window j of row pair i of x (rows
// 2i and 2i+1, each w = 2·ow wide), for len(out)/ow row pairs: maxRow2x2's values,
// without the index. It is the twin of the row-pair max-pool loop (vec_amd64.s).
func maxRows2x2(out, x []float32, ow, w int) {
	if ow == 0 {
		return
	}
	for i := range len(out) / ow {
		o, r0, r1 := out[i*ow:][:ow], x[2*i*w:][:2*ow], x[(2*i+1)*w:][:2*ow]
		for j := range o {
			best := r0[2*j]
			if v := r0[2*j+1]; v > best || v != v {
				best = v
			}
			if v := r1[2*j]; v > best || v != v {
				best = v
			}
			if v := r1[2*j+1]; v > best || v != v {
				best = v
			}
			o[j] = best
		}
	}
}

// maxRows2x2Grad is the gradient of maxRows2x2 without an index: g has x's layout
// (rows 2i and 2i+1 of w = 2·ow), and window j of row pair i's winner (maxRow2x2's
// comparisons) gets 0 + gy[i·ow + j], the other three positions +0 — what
// PoolBackward's zeroed accumulator holds after adding gy at the index maxRow2x2
// wrote. It is the twin of the row-pair max-pool gradient loop (vec_amd64.s).
func maxRows2x2Grad(g, x, gy []float32, ow, w int) {
	if ow == 0 {
		return
	}
	for i := range len(gy) / ow {
		gr := gy[i*ow:][:ow]
		r0, r1 := x[2*i*w:][:2*ow], x[(2*i+1)*w:][:2*ow]
		g0, g1 := g[2*i*w:][:2*ow], g[(2*i+1)*w:][:2*ow]
		for j, d := range gr {
			best, at := r0[2*j], 0
			if v := r0[2*j+1]; v > best || v != v {
				best, at = v, 1
			}
			if v := r1[2*j]; v > best || v != v {
				best, at = v, 2
			}
			if v := r1[2*j+1]; v > best || v != v {
				at = 3
			}
			var acc [4]float32
			acc[at] += d
			g0[2*j], g0[2*j+1], g1[2*j], g1[2*j+1] = acc[0], acc[1], acc[2], acc[3]
		}
	}
}

// vecMaxRows2x2 is maxRows2x2 on the vector layer (AVX-512 only; the twin elsewhere).
func vecMaxRows2x2(out, x []float32, ow, w int) {
	if ow == 0 {
		return
	}
	rows := len(out) / ow
	if vecAVX512OK() && rows > 0 {
		_ = x[2*rows*w-1]
		vecMaxPool2x2RowsRun(&out[0], &x[0], rows, ow, w)
		return
	}
	maxRows2x2(out, x, ow, w)
}

// vecMaxRows2x2Grad is maxRows2x2Grad on the vector layer (AVX-512 only; the twin
// elsewhere).
func vecMaxRows2x2Grad(g, x, gy []float32, ow, w int) {
	if ow == 0 {
		return
	}
	rows := len(gy) / ow
	if vecAVX512OK() && rows > 0 {
		_, _ = g[2*rows*w-1], x[2*rows*w-1]
		vecMaxPool2x2GradRowsRun(&g[0], &x[0], &gy[0], rows, ow, w)
		return
	}
	maxRows2x2Grad(g, x, gy, ow, w)
}

// maxRows2x2BF16 is maxRows2x2 on bfloat16 planes: the rows widened to float32
// (exact), the maxima rounded back (exact but for a NaN, which is quieted). It is
// the twin of vecMaxPool2x2RowsBF16AVX512.
func maxRows2x2BF16(out, x []half.BFloat16, ow, w int) {
	xw, ow32 := make([]float32, len(x)), make([]float32, len(out))
	half.BFloat16ToFloat32(xw, x)
	maxRows2x2(ow32, xw, ow, w)
	half.Float32ToBFloat16(out, ow32)
}

// maxRows2x2GradBF16 is maxRows2x2Grad on bfloat16 planes, as maxRows2x2BF16 is
// maxRows2x2: the twin of vecMaxPool2x2GradRowsBF16AVX512.
func maxRows2x2GradBF16(g, x, gy []half.BFloat16, ow, w int) {
	xw, gyw, gw := make([]float32, len(x)), make([]float32, len(gy)), make([]float32, len(g))
	half.BFloat16ToFloat32(xw, x)
	half.BFloat16ToFloat32(gyw, gy)
	maxRows2x2Grad(gw, xw, gyw, ow, w)
	half.Float32ToBFloat16(g, gw)
}

// vecMaxRows2x2BF16 is maxRows2x2BF16 on the vector layer (AVX-512 only; the twin
// elsewhere). out holds rows·ow maxima, x (at least) 2·rows·w elements.
func vecMaxRows2x2BF16(out, x []half.BFloat16, ow, w int) {
	if ow == 0 {
		return
	}
	rows := len(out) / ow
	if vecAVX512OK() && rows > 0 {
		_ = x[2*rows*w-1]
		if idx := vecPoolPlaneIdx(rows, ow, w); idx != nil {
			vecMaxPool2x2PlaneBF16Run((*uint16)(&out[0]), (*uint16)(&x[0]), rows, ow, idx)
			return
		}
		vecMaxPool2x2RowsBF16Run((*uint16)(&out[0]), (*uint16)(&x[0]), rows, ow, w)
		return
	}
	maxRows2x2BF16(out, x[:2*rows*w], ow, w)
}

// vecMaxRows2x2GradBF16 is maxRows2x2GradBF16 on the vector layer (AVX-512 only;
// the twin elsewhere). gy holds rows·ow gradients, g and x (at least) 2·rows·w
// elements; g's first 2·rows·w are written.
func vecMaxRows2x2GradBF16(g, x, gy []half.BFloat16, ow, w int) {
	if ow == 0 {
		return
	}
	rows := len(gy) / ow
	if vecAVX512OK() && rows > 0 {
		_, _ = g[2*rows*w-1], x[2*rows*w-1]
		if idx := vecPoolPlaneIdx(rows, ow, w); idx != nil {
			vecMaxPool2x2GradPlaneBF16Run((*uint16)(&g[0]), (*uint16)(&x[0]), (*uint16)(&gy[0]), rows, ow, idx)
			return
		}
		vecMaxPool2x2GradRowsBF16Run((*uint16)(&g[0]), (*uint16)(&x[0]), (*uint16)(&gy[0]), rows, ow, w)
		return
	}
	maxRows2x2GradBF16(g[:2*rows*w], x[:2*rows*w], gy, ow, w)
}

// vecPoolPlanes holds vecPoolPlaneIdx's tables, for ow = 1…8.
var vecPoolPlanes = func() (t [9]*[64]int32) {
	for ow := 1; ow <= 8; ow++ {
		t[ow] = poolPlaneIdx(ow)
	}
	return t
}()

// vecPoolPlaneIdx returns the VPERMI2D indices of the bfloat16 plane loops
// (vecMaxPool2x2PlaneBF16AVX512) for rows row pairs of ow windows, or nil where
// the row loops run instead: rows 8 windows wide or wider (a round of the plane
// loops would hold one row pair, as the row loops' rounds do), a single row pair,
// or rows wider than 2·ow.
func vecPoolPlaneIdx(rows, ow, w int) *[64]int32 {
	if ow < 1 || ow > 8 || rows < 2 || w != 2*ow {
		return nil
	}
	return vecPoolPlanes[ow]
}

// poolPlaneIdx builds the plane loops' indices for ow: a round holds p = 32/(2·ow)
// row pairs, dwords 0 to 2·ow·p, each row pair its r0 dwords then its r1 ones. Window
// j (p·ow a round) is dword r0(j) = (j/ow)·2·ow + j%ow of its row pair's r0 and
// r0(j)+ow of r1: idx[j] and idx[16+j]. Dword d of the round goes back to window
// d%(2·ow) of row pair d/(2·ow), from the r0 register (idx[32+d] = its window) or,
// past ow, from the r1 one (16 + its window). Unused entries are 0.
func poolPlaneIdx(ow int) *[64]int32 {
	var idx [64]int32
	p := 32 / (2 * ow)
	for j := range p * ow {
		r0 := (j/ow)*2*ow + j%ow
		idx[j], idx[16+j] = int32(r0), int32(r0+ow)
	}
	for d := range 2 * ow * p {
		pair, at := d/(2*ow), d%(2*ow)
		if at < ow {
			idx[32+d] = int32(pair*ow + at)
		} else {
			idx[32+d] = int32(16 + pair*ow + at - ow)
		}
	}
	return &idx
}
