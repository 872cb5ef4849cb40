//go:build amd64 && !purego

package cpu

//go:generate go run ./internal/gelutabgen -o gelu_table_amd64.s

// geluTabFwdAVX512 looks up n elements, n a multiple of 16, with VPGATHERDD. It equals
// geluTabFwdGo:
//
//	for i := range n {
//		dst[i] = tab[x[i]]
//	}
//
//go:noescape
func geluTabFwdAVX512(dst, x *uint16, tab *[1<<16 + 1]uint16, n int)

// geluTabMulAVX512 multiplies n elements, n a multiple of 16, by their factors,
// gathered with VGATHERDPS; VMULPS returns the first source's NaN, T's, when both are
// NaN. It equals geluTabMulGo:
//
//	for i := range n {
//		t := tab[x[i]]
//		p := g[i] * t
//		if t != t {
//			p = t
//		}
//		dst[i] = p
//	}
//
//go:noescape
func geluTabMulAVX512(dst, gy *float32, x *uint16, tab *[1 << 16]float32, n int)

// geluTabBwdBF16AVX512 is geluTabMulAVX512 on bfloat16 gy and gx: gy widened (a
// zero extension and a shift), the product rounded as half's float32ToBFloat16AVX512
// rounds, in registers. It equals geluTabBwdHalfGo(gx, gy, x, tab, true):
//
//	for i := range n {
//		t := tab[x[i]]
//		p := half.BFloat16(gy[i]).Float32() * t
//		if t != t {
//			p = t
//		}
//		gx[i] = uint16(half.BFloat16FromFloat32(p))
//	}
//
//go:noescape
func geluTabBwdBF16AVX512(gx, gy, x *uint16, tab *[1 << 16]float32, n int)

// geluTabBwdF16AVX512 is geluTabBwdBF16AVX512 for float16 gy and gx (VCVTPH2PS,
// VCVTPS2PH $0): geluTabBwdHalfGo(gx, gy, x, tab, false).
//
//go:noescape
func geluTabBwdF16AVX512(gx, gy, x *uint16, tab *[1 << 16]float32, n int)

// geluTabBwdHalf sets gx[i] = round(gy[i]·tab[x[i]]) (tab[x[i]] where it is NaN) for
// every i in gx, gy and gx bfloat16 (bf) or float16; gx may be gy or x.
func geluTabBwdHalf(gx, gy, x []uint16, tab *[1 << 16]float32, bf bool) {
	n := 0
	if vecAVX512OK() {
		if n = len(gx) &^ 15; n > 0 {
			_, _ = gy[n-1], x[n-1]
			if bf {
				geluTabBwdBF16AVX512(&gx[0], &gy[0], &x[0], tab, n)
			} else {
				geluTabBwdF16AVX512(&gx[0], &gy[0], &x[0], tab, n)
			}
		}
	}
	geluTabBwdHalfGo(gx[n:], gy[n:], x[n:], tab, bf)
}

// geluTabFwd sets dst[i] = tab[x[i]] for every i in x.
func geluTabFwd(dst, x []uint16, tab *[1<<16 + 1]uint16) {
	n := 0
	if vecAVX512OK() {
		if n = len(x) &^ 15; n > 0 {
			_ = dst[n-1]
			geluTabFwdAVX512(&dst[0], &x[0], tab, n)
		}
	}
	geluTabFwdGo(dst[n:], x[n:], tab)
}

// geluTabMul sets dst[i] = g[i]·tab[x[i]] (tab[x[i]] where it is NaN) for every i in
// dst; dst may be g.
func geluTabMul(dst, g []float32, x []uint16, tab *[1 << 16]float32) {
	n := 0
	if vecAVX512OK() {
		if n = len(dst) &^ 15; n > 0 {
			_, _ = g[n-1], x[n-1]
			geluTabMulAVX512(&dst[0], &g[0], &x[0], tab, n)
		}
	}
	geluTabMulGo(dst[n:], g[n:], x[n:], tab)
}
