//go:build !amd64 || purego

package cpu

// geluTabFwd sets dst[i] = tab[x[i]] for every i in x.
func geluTabFwd(dst, x []uint16, tab *[1<<16 + 1]uint16) { geluTabFwdGo(dst, x, tab) }

// geluTabMul sets dst[i] = g[i]·tab[x[i]] (tab[x[i]] where it is NaN) for every i in
// dst; dst may be g.
func geluTabMul(dst, g []float32, x []uint16, tab *[1 << 16]float32) {
	geluTabMulGo(dst, g, x, tab)
}

// geluTabBwdHalf sets gx[i] = round(gy[i]·tab[x[i]]) (tab[x[i]] where it is NaN) for
// every i in gx, gy and gx bfloat16 (bf) or float16; gx may be gy or x.
func geluTabBwdHalf(gx, gy, x []uint16, tab *[1 << 16]float32, bf bool) {
	geluTabBwdHalfGo(gx, gy, x, tab, bf)
}
