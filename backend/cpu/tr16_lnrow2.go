package cpu

// vecLnRow2 is vecLnRow on two rows of the same width, row 0 then row 1, with the same
// results bit for bit: (s1, s2) of row 0 as a1, a2 and of row 1 as b1, b2, and gw, gb
// getting row 0's terms, then row 1's. Where the vector layer is AVX-512 the column
// sums are loaded and stored once for both rows.
func vecLnRow2(gw, gb []float64, g0, gy0, x0, g1, gy1, x1 []float32, m0, is0, m1, is1 float64) (a1, a2, b1, b2 float64) {
	n := len(g0)
	gw, gb, gy0, x0, g1, gy1, x1 = gw[:n], gb[:n], gy0[:n], x0[:n], g1[:n], gy1[:n], x1[:n]
	m := n &^ 15
	var s [64]float64
	if m == 0 || !vecLnRow2Run(&s, &gw[0], &gb[0], &g0[0], &gy0[0], &x0[0], &g1[0], &gy1[0], &x1[0], m0, is0, m1, is1, m) {
		a1, a2 = vecLnRow(gw, gb, g0, gy0, x0, m0, is0)
		b1, b2 = vecLnRow(gw, gb, g1, gy1, x1, m1, is1)
		return a1, a2, b1, b2
	}
	s0, s1 := (*[32]float64)(s[:32]), (*[32]float64)(s[32:])
	// The tail columns: row 0's terms, then row 1's.
	vecLnRowGo(s0, gw[m:], gb[m:], g0[m:], gy0[m:], x0[m:], m0, is0)
	vecLnRowGo(s1, gw[m:], gb[m:], g1[m:], gy1[m:], x1[m:], m1, is1)
	return vecFold((*[16]float64)(s0[:16])), vecFold((*[16]float64)(s0[16:])),
		vecFold((*[16]float64)(s1[:16])), vecFold((*[16]float64)(s1[16:]))
}

// vecLnRow2W sets g0 = gy0·w and g1 = gy1·w (vecBinary's vecMul) and returns
// vecLnRow2 on those rows, with the same results bit for bit; where the vector layer
// is AVX-512 the products are made in the row pass's loop (vecLnRow2WAVX512). Neither
// g may overlap another operand.
func vecLnRow2W(gw, gb []float64, w, g0, gy0, x0, g1, gy1, x1 []float32, m0, is0, m1, is1 float64) (a1, a2, b1, b2 float64) {
	n := len(g0)
	gw, gb, w, gy0, x0, g1, gy1, x1 = gw[:n], gb[:n], w[:n], gy0[:n], x0[:n], g1[:n], gy1[:n], x1[:n]
	m := n &^ 15
	var s [64]float64
	if m == 0 || !vecLnRow2WRun(&s, &gw[0], &gb[0], &w[0], &g0[0], &gy0[0], &x0[0], &g1[0], &gy1[0], &x1[0], m0, is0, m1, is1, m) {
		vecBinary(vecMul, g0, gy0, w)
		vecBinary(vecMul, g1, gy1, w)
		return vecLnRow2(gw, gb, g0, gy0, x0, g1, gy1, x1, m0, is0, m1, is1)
	}
	vecBinary(vecMul, g0[m:], gy0[m:], w[m:])
	vecBinary(vecMul, g1[m:], gy1[m:], w[m:])
	s0, s1 := (*[32]float64)(s[:32]), (*[32]float64)(s[32:])
	// The tail columns: row 0's terms, then row 1's.
	vecLnRowGo(s0, gw[m:], gb[m:], g0[m:], gy0[m:], x0[m:], m0, is0)
	vecLnRowGo(s1, gw[m:], gb[m:], g1[m:], gy1[m:], x1[m:], m1, is1)
	return vecFold((*[16]float64)(s0[:16])), vecFold((*[16]float64)(s0[16:])),
		vecFold((*[16]float64)(s1[:16])), vecFold((*[16]float64)(s1[16:]))
}

// layerNormBackward2RowsF32 is layerNormBackwardRowF32 on row 0 (g0, gy0, x0, m0, is0)
// and then on row 1, with the same results bit for bit, the bgw and bgb updates of
// both rows in one vecLnRow2. Neither g may overlap the other rows or each other.
func layerNormBackward2RowsF32(g0, gy0, x0, g1, gy1, x1, w []float32, bgw, bgb, scratch []float64, m0, is0, m1, is1 float64) {
	if bgw == nil {
		bgw = scratch
	}
	if bgb == nil {
		bgb = scratch
	}
	var a1, a2, b1, b2 float64
	if w != nil {
		a1, a2, b1, b2 = vecLnRow2W(bgw, bgb, w, g0, gy0, x0, g1, gy1, x1, m0, is0, m1, is1)
	} else {
		copy(g0, gy0)
		copy(g1, gy1)
		a1, a2, b1, b2 = vecLnRow2(bgw, bgb, g0, gy0, x0, g1, gy1, x1, m0, is0, m1, is1)
	}
	lnBwdFinish(g0, x0, a1, a2, m0, is0)
	lnBwdFinish(g1, x1, b1, b2, m1, is1)
}

// lnBwdFinish is layerNormBackwardRowF32's last step: g = g·ca + (x - cm)·cb + cc from
// the row sums s1, s2.
func lnBwdFinish(g, xr []float32, s1, s2, mean, invstd float64) {
	n := float64(len(g))
	ca, cm := float32(invstd), float32(mean)
	cb := float32(-invstd * invstd * s2 / n)
	cc := float32(-invstd * s1 / n)
	vecLnBwd(g, xr, ca, cm, cb, cc)
}
