package main

// poolConsts emits the tables of the max-pool loop: the VPERMI2PS indices
// that pick the even and the odd elements of 32, and the int64 offsets 0, 2,
// …, 14 of the first eight windows' left columns.
func (g *gen) poolConsts() {
	g.p("")
	g.p("// Tables of the 2×2 max-pool loop (vecMaxPool2x2): even and odd indices, window offsets.")
	for i := range 16 {
		g.p("DATA poolc<>+%d(SB)/4, $%d", 4*i, 2*i)
	}
	for i := range 16 {
		g.p("DATA poolc<>+%d(SB)/4, $%d", 64+4*i, 2*i+1)
	}
	for i := range 8 {
		g.p("DATA poolc<>+%d(SB)/8, $%d", 128+8*i, 2*i)
	}
	g.p("GLOBL poolc<>(SB), RODATA|NOPTR, $192")
}

// maxPool2x2 emits vecMaxPool2x2AVX512(out *float32, idx *int64, r0, r1
// *float32, n, base, w int): sixteen windows at a time, the even and odd
// columns of both rows split out with VPERMI2PS, then vec_pool.go's
// comparisons in its order (v > best or v NaN takes over: VCMPPS GT_OQ and
// UNORD, KORW), the winner's offset 0, 1, w or w+1 carried in int32 lanes and
// widened onto base + 2j.
func (g *gen) maxPool2x2(x isa) {
	if !x.masks {
		panic("vecgen: the max-pool loop needs AVX-512 masks")
	}
	name := "vecMaxPool2x2" + x.name
	g.p("")
	g.p("// func %s(out *float32, idx *int64, r0, r1 *float32, n, base, w int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-56", name)
	g.p("\tMOVQ out+0(FP), DI")
	g.p("\tMOVQ idx+8(FP), R9")
	g.p("\tMOVQ r0+16(FP), SI")
	g.p("\tMOVQ r1+24(FP), DX")
	g.p("\tMOVQ n+32(FP), CX")
	g.p("\tVPBROADCASTQ base+40(FP), Z20")
	g.p("\tVPADDQ poolc<>+128(SB), Z20, Z20 // base + 2j, j < 8")
	g.p("\tMOVQ $16, AX")
	g.p("\tVPBROADCASTQ AX, Z22")
	g.p("\tVPADDQ Z22, Z20, Z21 // j from 8")
	g.p("\tMOVQ $32, AX")
	g.p("\tVPBROADCASTQ AX, Z22 // the step of base + 2j")
	g.p("\tMOVL $1, AX")
	g.p("\tVPBROADCASTD AX, Z23 // offset 1")
	g.p("\tMOVQ w+48(FP), AX")
	g.p("\tVPBROADCASTD AX, Z24 // offset w")
	g.p("\tINCL AX")
	g.p("\tVPBROADCASTD AX, Z25 // offset w+1")
	g.p("\tVMOVDQU32 poolc<>+0(SB), Z26 // even")
	g.p("\tVMOVDQU32 poolc<>+64(SB), Z27 // odd")
	g.p("")
	g.p("%s_loop:", name)
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_done", name)
	g.p("\tVMOVUPS (SI), Z0")
	g.p("\tVMOVUPS 64(SI), Z1")
	g.p("\tVMOVUPS (DX), Z2")
	g.p("\tVMOVUPS 64(DX), Z3")
	g.p("\tVMOVDQA32 Z26, Z4")
	g.p("\tVPERMI2PS Z1, Z0, Z4 // best = r0 even")
	g.p("\tVMOVDQA32 Z27, Z5")
	g.p("\tVPERMI2PS Z1, Z0, Z5 // r0 odd")
	g.p("\tVMOVDQA32 Z26, Z6")
	g.p("\tVPERMI2PS Z3, Z2, Z6 // r1 even")
	g.p("\tVMOVDQA32 Z27, Z7")
	g.p("\tVPERMI2PS Z3, Z2, Z7 // r1 odd")
	g.p("\tVPXORD Z8, Z8, Z8 // offset 0")
	for _, c := range []struct{ v, off int }{{5, 23}, {6, 24}, {7, 25}} {
		g.p("\tVCMPPS $0x%02x, Z4, Z%d, K1 // v > best", cmpGTOQ, c.v)
		g.p("\tVCMPPS $0x%02x, Z%d, Z%d, K2 // v NaN", cmpUnord, c.v, c.v)
		g.p("\tKORW K1, K2, K1")
		g.p("\tVMOVAPS Z%d, K1, Z4", c.v)
		g.p("\tVMOVDQA32 Z%d, K1, Z8", c.off)
	}
	g.p("\tVMOVUPS Z4, (DI)")
	g.p("\tVPMOVSXDQ Y8, Z9")
	g.p("\tVPADDQ Z20, Z9, Z9")
	g.p("\tVMOVDQU64 Z9, (R9)")
	g.p("\tVEXTRACTI64X4 $1, Z8, Y10")
	g.p("\tVPMOVSXDQ Y10, Z10")
	g.p("\tVPADDQ Z21, Z10, Z10")
	g.p("\tVMOVDQU64 Z10, 64(R9)")
	g.p("\tVPADDQ Z22, Z20, Z20")
	g.p("\tVPADDQ Z22, Z21, Z21")
	g.p("\tADDQ $128, SI")
	g.p("\tADDQ $128, DX")
	g.p("\tADDQ $64, DI")
	g.p("\tADDQ $128, R9")
	g.p("\tSUBQ $16, CX")
	g.p("\tJMP %s_loop", name)
	g.p("")
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}
