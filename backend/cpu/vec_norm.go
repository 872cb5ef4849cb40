package cpu

import "math"

// The row loops of LayerNorm: the variance pass of the forward and the reduction pass
// of the backward, with sums in vecSumF64's sixteen lanes (so in an order that depends
// on the row length only) and per-column accumulators updated in place.

// vecDevSqF64 returns the sum of (float64(x[i]) - mean)² for i < len(x), each square
// fused into its lane's sum, in vecSumF64's order.
func vecDevSqF64(x []float32, mean float64) float64 {
	var s [16]float64
	m := 0
	if vec != nil {
		if m = len(x) &^ 15; m > 0 {
			vecDevSqF64Run(&s, &x[0], mean, m)
		}
	}
	vecDevSqF64Go(&s, x[m:], mean)
	return vecFold(&s)
}

// vecDevSqF64Go is the twin of the devSq loops, for any len(x).
func vecDevSqF64Go(s *[16]float64, x []float32, mean float64) {
	for i, v := range x {
		d := float64(v) - mean
		s[i&15] = math.FMA(d, d, s[i&15])
	}
}

// vecLnRow runs LayerNorm backward's pass over one row: with xh = (x - mean)·invstd it
// returns Σ g and Σ g·xh (vecSumF64's order, the products fused) and sets gw[i] +=
// gy[i]·xh and gb[i] += gy[i] (the product rounded first, as the loop it replaces did).
func vecLnRow(gw, gb []float64, g, gy, x []float32, mean, invstd float64) (s1, s2 float64) {
	n := len(g)
	gw, gb, gy, x = gw[:n], gb[:n], gy[:n], x[:n]
	var s [32]float64
	m := 0
	if vec != nil {
		if m = n &^ 15; m > 0 {
			vecLnRowRun(&s, &gw[0], &gb[0], &g[0], &gy[0], &x[0], mean, invstd, m)
		}
	}
	vecLnRowGo(&s, gw[m:], gb[m:], g[m:], gy[m:], x[m:], mean, invstd)
	return vecFold((*[16]float64)(s[:16])), vecFold((*[16]float64)(s[16:]))
}

// vecLnRowGo is the twin of the lnRow loops, for any len(g).
func vecLnRowGo(s *[32]float64, gw, gb []float64, g, gy, x []float32, mean, invstd float64) {
	n := len(g)
	gw, gb, gy, x = gw[:n], gb[:n], gy[:n], x[:n]
	for i, v := range g {
		xh := (float64(x[i]) - mean) * invstd
		s[i&15] += float64(v)
		s[16+i&15] = math.FMA(float64(v), xh, s[16+i&15])
		gw[i] += float64(float64(gy[i]) * xh) // the conversion keeps the product rounded
		gb[i] += float64(gy[i])
	}
}

// vecLnFwd sets y[i] = ((x[i] - m)·is)·w[i] + b[i] for i < len(y), each step rounded
// to float32: LayerNorm's normalisation and affine map of one row in one pass, the
// result of the four vecScalar/vecBinary passes it replaces. y may be x.
func vecLnFwd(y, x, w, b []float32, m, is float32) {
	n := len(y)
	x, w, b = x[:n], w[:n], b[:n]
	k := 0
	if vec != nil {
		if k = n &^ 15; k > 0 {
			vecLnFwdRun(&y[0], &x[0], &w[0], &b[0], m, is, k)
		}
	}
	vecLnFwdGo(y[k:], x[k:], w[k:], b[k:], m, is)
}

// vecLnFwdGo is the twin of the lnFwd loops. The conversions keep Go from fusing a
// product into the following sum.
func vecLnFwdGo(y, x, w, b []float32, m, is float32) {
	x, w, b = x[:len(y)], w[:len(y)], b[:len(y)]
	for i, v := range x {
		t := float32(float32(v-m)*is) * w[i]
		y[i] = float32(t) + b[i]
	}
}

// vecLnBwd sets g[i] = (g[i]·ca + (x[i] - cm)·cb) + cc for i < len(g), each step rounded
// to float32: LayerNorm backward's input gradient of one row in one pass, the result of
// the five passes it replaces.
func vecLnBwd(g, x []float32, ca, cm, cb, cc float32) {
	n := len(g)
	x = x[:n]
	k := 0
	if vec != nil {
		if k = n &^ 15; k > 0 {
			vecLnBwdRun(&g[0], &x[0], ca, cm, cb, cc, k)
		}
	}
	vecLnBwdGo(g[k:], x[k:], ca, cm, cb, cc)
}

// vecLnBwdGo is the twin of the lnBwd loops.
func vecLnBwdGo(g, x []float32, ca, cm, cb, cc float32) {
	x = x[:len(g)]
	for i, v := range x {
		d := float32(float32(v-cm) * cb)
		g[i] = float32(float32(g[i]*ca)+d) + cc
	}
}
