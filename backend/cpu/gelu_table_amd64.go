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
