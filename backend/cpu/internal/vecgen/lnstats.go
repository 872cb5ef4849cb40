package main

// lnStats emits lnStatsAVX512(x *float32, n int) (mean, sq float64), n a positive
// multiple of 16: LayerNorm's row statistics in one call, the sum in vecSumF64's
// sixteen lanes folded in vecFold's order, mean = sum/n, then the lanes of
// FMA(d, d, ·) with d = float64(x[i]) - mean (vecDevSqF64's) folded the same way.
// The row is read twice but the lanes stay in registers and the folds are done there.
func (g *gen) lnStats() {
	const name = "lnStatsAVX512"
	g.p("")
	g.p("// func %s(x *float32, n int) (mean, sq float64)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-32", name)
	g.p("\tMOVQ x+0(FP), SI")
	g.p("\tMOVQ n+8(FP), CX")
	g.p("\tMOVQ SI, DI")
	g.p("\tMOVQ CX, DX")
	g.p("\tVXORPD Z0, Z0, Z0")
	g.p("\tVXORPD Z1, Z1, Z1")
	g.p("")
	g.p("%s_sum:", name)
	g.p("\tVCVTPS2PD (SI), Z8")
	g.p("\tVCVTPS2PD 32(SI), Z9")
	g.p("\tVADDPD Z8, Z0, Z0")
	g.p("\tVADDPD Z9, Z1, Z1")
	g.p("\tADDQ $64, SI")
	g.p("\tSUBQ $16, CX")
	g.p("\tJNZ %s_sum", name)
	g.lnFold()
	g.p("\tVCVTSI2SDQ DX, X2, X2")
	g.p("\tVDIVSD X2, X0, X0")
	g.p("\tVMOVSD X0, mean+16(FP)")
	g.p("\tVBROADCASTSD X0, Z2")
	g.p("\tVXORPD Z0, Z0, Z0")
	g.p("\tVXORPD Z1, Z1, Z1")
	g.p("")
	g.p("%s_dev:", name)
	g.p("\tVCVTPS2PD (DI), Z8")
	g.p("\tVCVTPS2PD 32(DI), Z9")
	g.p("\tVSUBPD Z2, Z8, Z8")
	g.p("\tVSUBPD Z2, Z9, Z9")
	g.p("\tVFMADD231PD Z8, Z8, Z0")
	g.p("\tVFMADD231PD Z9, Z9, Z1")
	g.p("\tADDQ $64, DI")
	g.p("\tSUBQ $16, DX")
	g.p("\tJNZ %s_dev", name)
	g.lnFold()
	g.p("\tVMOVSD X0, sq+24(FP)")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}

// lnFold folds the sixteen float64 lanes of Z0 (lanes 0-7) and Z1 (8-15) into X0 in
// vecFold's order: a[k] = s[k] + s[k+8], b[k] = a[k] + a[k+4], c[k] = b[k] + b[k+2],
// c[0] + c[1].
func (g *gen) lnFold() {
	g.p("\tVADDPD Z1, Z0, Z0")
	g.p("\tVEXTRACTF64X4 $1, Z0, Y1")
	g.p("\tVADDPD Y1, Y0, Y0")
	g.p("\tVEXTRACTF128 $1, Y0, X1")
	g.p("\tVADDPD X1, X0, X0")
	g.p("\tVUNPCKHPD X0, X0, X1")
	g.p("\tVADDSD X1, X0, X0")
}
