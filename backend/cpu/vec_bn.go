package cpu

// The float32 elementwise passes of the batch-norm kernels: one fused AVX-512 loop
// (bn_amd64.s) over whole vectors where the CPU has it, the vecOp passes it fuses
// (bnAffineVec, bnGradVec: its twins) over the rest and everywhere else.

// bnAffineF32 sets o = ((v − m)·s) + b, each operation rounded, then with relu the
// ReLU (+0 where o ≤ 0, NaN kept). o may be v.
func bnAffineF32(o, v, m, s, b []float32, relu bool) {
	n := len(o)
	v, m, s, b = v[:n], m[:n], s[:n], b[:n]
	k := 0
	if vecAVX512OK() {
		if k = n &^ 15; k > 0 {
			bnAffineRun(&o[0], &v[0], &m[0], &s[0], &b[0], k, relu)
		}
	}
	bnAffineVec(o[k:], v[k:], m[k:], s[k:], b[k:], relu)
}

// bnAffineVec is bnAffineF32 as three vecOp passes and vecOp's ReLU: the twin of the
// fused loops.
func bnAffineVec(o, v, m, s, b []float32, relu bool) {
	n := len(o)
	vecBinary(vecSub, o, v[:n], m[:n])
	vecBinary(vecMul, o, o, s[:n])
	vecBinary(vecAdd, o, o, b[:n])
	if relu {
		vecScalar(vecRelu, o, o, 0)
	}
}

// bnGradF32 sets o = ((ea·g) + eb·(x − em)) + ec, each operation rounded, using t as
// scratch. o may be g or x.
func bnGradF32(o, g, x, ea, eb, ec, em, t []float32) {
	n := len(o)
	g, x, ea, eb, ec, em = g[:n], x[:n], ea[:n], eb[:n], ec[:n], em[:n]
	k := 0
	if vecAVX512OK() {
		if k = n &^ 15; k > 0 {
			bnGradRun(&o[0], &g[0], &x[0], &ea[0], &eb[0], &ec[0], &em[0], k)
		}
	}
	bnGradVec(o[k:], g[k:], x[k:], ea[k:], eb[k:], ec[k:], em[k:], t[k:])
}

// bnSumsF32 is batch norm's backward sums over one tile: with y not nil it first sets o
// = g where 0 < y, else +0 (reluMask), and sums that; acc1 += float64(g) and acc2 +=
// float64(g)·(float64(x) − m), fused (accAdd, accDev's product form). o may be g.
func bnSumsF32(o []float32, acc1, acc2 []float64, g, y, x []float32, m []float64) {
	n := len(g)
	acc1, acc2, x, m = acc1[:n], acc2[:n], x[:n], m[:n]
	k := 0
	if vecAVX512OK() {
		if k = n &^ 15; k > 0 {
			var op, yp *float32
			if y != nil {
				y, o = y[:n], o[:n]
				op, yp = &o[0], &y[0]
			}
			bnSumsRun(op, &acc1[0], &acc2[0], &g[0], yp, &x[0], &m[0], k)
		}
	}
	var yk, ok []float32
	if y != nil {
		yk, ok = y[k:n], o[k:n]
	}
	bnSumsVec(ok, acc1[k:], acc2[k:], g[k:], yk, x[k:], m[k:])
}

// bnSumsVec is bnSumsF32 as the vector-layer passes it fuses: the twin of the fused
// loops.
func bnSumsVec(o []float32, acc1, acc2 []float64, g, y, x []float32, m []float64) {
	if y != nil {
		vecBinary(vecMask, o, g, y[:len(g)])
		g = o[:len(g)]
	}
	vecAccF64(acc1, g)
	vecAccDevF64(accProd, acc2, g, x, m)
}
