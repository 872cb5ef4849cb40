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
		if k < n {
			// The last n mod 16: one run of the loop on operands padded to 16.
			var p [5][16]float32
			copy(p[1][:], v[k:])
			copy(p[2][:], m[k:])
			copy(p[3][:], s[k:])
			copy(p[4][:], b[k:])
			bnAffineRun(&p[0][0], &p[1][0], &p[2][0], &p[3][0], &p[4][0], 16, relu)
			copy(o[k:], p[0][:n-k])
		}
		return
	}
	bnAffineVec(o, v, m, s, b, relu)
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
		if k < n {
			// The last n mod 16: one run of the loop on operands padded to 16.
			var p [7][16]float32
			copy(p[1][:], g[k:])
			copy(p[2][:], x[k:])
			copy(p[3][:], ea[k:])
			copy(p[4][:], eb[k:])
			copy(p[5][:], ec[k:])
			copy(p[6][:], em[k:])
			bnGradRun(&p[0][0], &p[1][0], &p[2][0], &p[3][0], &p[4][0], &p[5][0], &p[6][0], 16)
			copy(o[k:], p[0][:n-k])
		}
		return
	}
	bnGradVec(o, g, x, ea, eb, ec, em, t)
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
		if k < n {
			// The last n mod 16: one run of the loop on operands padded to 16.
			var a1, a2, mp [16]float64
			var gp, yp, xp, op [16]float32
			copy(a1[:], acc1[k:])
			copy(a2[:], acc2[k:])
			copy(mp[:], m[k:])
			copy(gp[:], g[k:n])
			copy(xp[:], x[k:])
			var ypp *float32
			if y != nil {
				copy(yp[:], y[k:n])
				ypp = &yp[0]
			}
			bnSumsRun(&op[0], &a1[0], &a2[0], &gp[0], ypp, &xp[0], &mp[0], 16)
			copy(acc1[k:], a1[:n-k])
			copy(acc2[k:], a2[:n-k])
			if y != nil {
				copy(o[k:n], op[:n-k])
			}
		}
		return
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
