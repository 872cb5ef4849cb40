package main

// lnFwdRows2 emits lnFwdRows2AVX512(y, x, w, b, ms, is *float32, eps float64, n, pairs
// int): lnFwdRowsAVX512 on 2·pairs rows, with the same bits, two rows at a time. The
// statistics passes of the two rows run in one loop, so four chains of lane sums
// (two per row) are in flight instead of two: each lane still adds its row's
// elements in order and is folded as lnFold does, in other registers for the second
// row. During the squared deviations' pass the next pair is prefetched into L1, two
// lines per 64 bytes of a row, 2048 bytes ahead (a pair's 8n bytes from there):
// earlier than in the output pass, which measured slower from DRAM at width 512.
//
// With h (not nil) it emits lnFwdRows2<h>AVX512(y *uint16, x, w, b, ms, is *float32,
// eps float64, n, pairs int), the same with each float32 result rounded to h as it is
// stored (halfNarrow: BFloat16FromFloat32's or Float16FromFloat32's rounding, exact
// for subnormals and NaNs), for a layer norm that feeds an autocast Linear
// (backend.LayerNormHalfIO): no float32 rows to convert afterwards.
//
// With ne (bfloat16 only: lnFwdRows2BF16NEAVX512, AVX512_BF16 and DQ) each pair of
// vectors, one per row, is rounded by one VCVTNE2PS2BF16, which rounds as halfNarrow
// does but flushes subnormal inputs to zero, unless VFPCLASSPS finds a subnormal among
// them: that pair takes halfNarrow.
func (g *gen) lnFwdRows2(h *halfFormat, ne bool) {
	name := "lnFwdRows2AVX512"
	yType := "*float32"
	if h != nil {
		name, yType = "lnFwdRows2"+h.name+"AVX512", "*uint16"
		if ne {
			name = "lnFwdRows2" + h.name + "NEAVX512"
		}
	}
	g.p("")
	if h != nil {
		g.p("// func %s(y %s, x, w, b, ms, is *float32, eps float64, n, pairs int)", name, yType)
	} else {
		g.p("// func %s(y, x, w, b, ms, is *float32, eps float64, n, pairs int)", name)
	}
	g.p("TEXT ·%s(SB), NOSPLIT, $0-72", name)
	if h != nil {
		g.halfNarrowConsts(*h) // through R9, before it holds b
	}
	g.p("\tMOVQ y+0(FP), DI")
	g.p("\tMOVQ x+8(FP), SI")
	g.p("\tMOVQ w+16(FP), R8")
	g.p("\tMOVQ b+24(FP), R9")
	g.p("\tMOVQ ms+32(FP), R10")
	g.p("\tMOVQ is+40(FP), R11")
	g.p("\tVMOVSD eps+48(FP), X5")
	g.p("\tMOVQ n+56(FP), DX")
	g.p("\tMOVQ pairs+64(FP), BX")
	g.p("\tVCVTSI2SDQ DX, X6, X6 // float64(n)")
	g.p("\tMOVQ $0x3ff0000000000000, AX")
	g.p("\tVMOVQ AX, X7 // 1.0")
	g.p("\tTESTQ BX, BX")
	g.p("\tJZ %s_done", name)
	g.p("")
	g.p("%s_pair:", name)
	g.p("\tLEAQ (SI)(DX*4), R13 // the second row")
	g.p("\tLEAQ 2048(SI)(DX*8), R12 // the next pair, ahead")
	g.p("\tXORQ AX, AX")
	g.p("\tMOVQ DX, CX")
	for r := range 4 {
		g.p("\tVXORPD Z%d, Z%d, Z%d", r, r, r)
	}
	g.p("")
	g.p("%s_sum:", name)
	g.lnPairLoad()
	g.p("\tVADDPD Z8, Z0, Z0")
	g.p("\tVADDPD Z9, Z1, Z1")
	g.p("\tVADDPD Z12, Z2, Z2")
	g.p("\tVADDPD Z13, Z3, Z3")
	g.p("\tADDQ $64, AX")
	g.p("\tSUBQ $16, CX")
	g.p("\tJNZ %s_sum", name)
	g.lnFoldRegs(0, 1)
	g.lnFoldRegs(2, 3)
	g.p("\tVDIVSD X6, X0, X0 // the means")
	g.p("\tVDIVSD X6, X2, X2")
	g.p("\tVBROADCASTSD X0, Z14")
	g.p("\tVBROADCASTSD X2, Z15")
	g.p("\tVCVTSD2SS X0, X4, X4")
	g.p("\tVMOVSS X4, (R10)")
	g.p("\tVBROADCASTSS X4, Z10")
	g.p("\tVCVTSD2SS X2, X4, X4")
	g.p("\tVMOVSS X4, 4(R10)")
	g.p("\tVBROADCASTSS X4, Z16")
	g.p("\tXORQ AX, AX")
	g.p("\tMOVQ DX, CX")
	for r := range 4 {
		g.p("\tVXORPD Z%d, Z%d, Z%d", r, r, r)
	}
	g.p("")
	g.p("%s_dev:", name)
	g.lnPairLoad()
	g.p("\tVSUBPD Z14, Z8, Z8")
	g.p("\tVSUBPD Z14, Z9, Z9")
	g.p("\tVSUBPD Z15, Z12, Z12")
	g.p("\tVSUBPD Z15, Z13, Z13")
	g.p("\tVFMADD231PD Z8, Z8, Z0")
	g.p("\tVFMADD231PD Z9, Z9, Z1")
	g.p("\tVFMADD231PD Z12, Z12, Z2")
	g.p("\tVFMADD231PD Z13, Z13, Z3")
	g.p("\tPREFETCHT0 (R12)(AX*2)")
	g.p("\tPREFETCHT0 64(R12)(AX*2)")
	g.p("\tADDQ $64, AX")
	g.p("\tSUBQ $16, CX")
	g.p("\tJNZ %s_dev", name)
	g.lnFoldRegs(0, 1)
	g.lnFoldRegs(2, 3)
	for k, x := range []int{0, 2} {
		g.p("\tVDIVSD X6, X%d, X%d // sq/n", x, x)
		g.p("\tVADDSD X5, X%d, X%d // + eps", x, x)
		g.p("\tVSQRTSD X%d, X%d, X%d", x, x, x)
		g.p("\tVDIVSD X%d, X7, X%d // invstd", x, x)
		g.p("\tVCVTSD2SS X%d, X4, X4", x)
		g.p("\tVMOVSS X4, %d(R11)", 4*k)
		g.p("\tVBROADCASTSS X4, Z%d", []int{11, 17}[k])
	}
	if h != nil {
		g.p("\tLEAQ (DI)(DX*2), R14 // the second row's y")
		g.p("\tXORQ R12, R12 // y's byte offset")
	} else {
		g.p("\tLEAQ (DI)(DX*4), R14 // the second row's y")
	}
	g.p("\tXORQ AX, AX")
	g.p("\tMOVQ DX, CX")
	g.p("")
	g.p("%s_out:", name)
	g.p("\tVMOVUPS (SI)(AX*1), Z8")
	g.p("\tVMOVUPS (R13)(AX*1), Z12")
	g.p("\tVSUBPS Z10, Z8, Z8 // x - m")
	g.p("\tVSUBPS Z16, Z12, Z12")
	g.p("\tVMULPS Z11, Z8, Z8 // ·is")
	g.p("\tVMULPS Z17, Z12, Z12")
	g.p("\tVMOVUPS (R8)(AX*1), Z9")
	g.p("\tVMULPS Z9, Z8, Z8 // ·w")
	g.p("\tVMULPS Z9, Z12, Z12")
	g.p("\tVMOVUPS (R9)(AX*1), Z13")
	g.p("\tVADDPS Z13, Z8, Z8 // + b")
	g.p("\tVADDPS Z13, Z12, Z12")
	if h != nil && ne {
		g.p("\tVMOVAPS Z8, Z0 // the first row's 16 results, then the second's")
		g.p("\tVMOVAPS Z12, Z8")
		g.p("\tVFPCLASSPSZ $0x20, Z0, K1 // subnormal")
		g.p("\tVFPCLASSPSZ $0x20, Z8, K2")
		g.p("\tKORTESTW K1, K2")
		g.p("\tJNZ %s_int", name)
		g.p("\tBYTE $0x62; BYTE $0xf2; BYTE $0x3f; BYTE $0x48; BYTE $0x72; BYTE $0xd0 // vcvtne2ps2bf16 %%zmm0, %%zmm8, %%zmm2")
		g.p("\tVMOVDQU32 Y2, (DI)(R12*1)")
		g.p("\tVEXTRACTI64X4 $1, Z2, Y3")
		g.p("\tVMOVDQU32 Y3, (R14)(R12*1)")
		g.p("\tJMP %s_stored", name)
		g.p("")
		g.p("%s_int:", name)
		g.halfNarrow(*h, 0, 21, 18)
		g.p("\tVMOVDQU32 Y21, (DI)(R12*1)")
		g.halfNarrow(*h, 8, 22, 18)
		g.p("\tVMOVDQU32 Y22, (R14)(R12*1)")
		g.p("")
		g.p("%s_stored:", name)
		g.p("\tADDQ $32, R12")
	} else if h != nil {
		g.halfNarrow(*h, 8, 21, 18)
		g.p("\tVMOVDQU32 Y21, (DI)(R12*1)")
		g.halfNarrow(*h, 12, 22, 18)
		g.p("\tVMOVDQU32 Y22, (R14)(R12*1)")
		g.p("\tADDQ $32, R12")
	} else {
		g.p("\tVMOVUPS Z8, (DI)(AX*1)")
		g.p("\tVMOVUPS Z12, (R14)(AX*1)")
	}
	g.p("\tADDQ $64, AX")
	g.p("\tSUBQ $16, CX")
	g.p("\tJNZ %s_out", name)
	g.p("\tLEAQ (SI)(DX*8), SI")
	if h != nil {
		g.p("\tLEAQ (DI)(DX*4), DI")
	} else {
		g.p("\tLEAQ (DI)(DX*8), DI")
	}
	g.p("\tADDQ $8, R10")
	g.p("\tADDQ $8, R11")
	g.p("\tDECQ BX")
	g.p("\tJNZ %s_pair", name)
	g.p("")
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}

// lnPairLoad converts 16 elements at offset AX of the rows at SI and R13 to float64:
// Z8, Z9 (first row's lanes 0-7, 8-15), Z12, Z13 (second row's).
func (g *gen) lnPairLoad() {
	g.p("\tVCVTPS2PD (SI)(AX*1), Z8")
	g.p("\tVCVTPS2PD 32(SI)(AX*1), Z9")
	g.p("\tVCVTPS2PD (R13)(AX*1), Z12")
	g.p("\tVCVTPS2PD 32(R13)(AX*1), Z13")
}

// lnFoldRegs is lnFold on the lanes of Za (0-7) and Zb (8-15), folded into Xa (Zb
// clobbered), with the same operations in the same order.
func (g *gen) lnFoldRegs(a, b int) {
	g.p("\tVADDPD Z%d, Z%d, Z%d", b, a, a)
	g.p("\tVEXTRACTF64X4 $1, Z%d, Y%d", a, b)
	g.p("\tVADDPD Y%d, Y%d, Y%d", b, a, a)
	g.p("\tVEXTRACTF128 $1, Y%d, X%d", a, b)
	g.p("\tVADDPD X%d, X%d, X%d", b, a, a)
	g.p("\tVUNPCKHPD X%d, X%d, X%d", a, a, b)
	g.p("\tVADDSD X%d, X%d, X%d", b, a, a)
}
