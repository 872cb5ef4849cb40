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

// poolGradConsts emits the VPERMI2PS indices that interleave two registers of
// sixteen (0, 16, 1, 17, …): the first eight pairs, then the last eight.
func (g *gen) poolGradConsts() {
	g.p("")
	g.p("// Tables of the 2×2 max-pool gradient loop (vecMaxPool2x2GradRows): interleave low and high halves.")
	for i := range 16 {
		g.p("DATA poolgc<>+%d(SB)/4, $%d", 4*i, i/2+16*(i%2))
	}
	for i := range 16 {
		g.p("DATA poolgc<>+%d(SB)/4, $%d", 64+4*i, 8+i/2+16*(i%2))
	}
	g.p("GLOBL poolgc<>(SB), RODATA|NOPTR, $128")
}

// maxPool2x2Rows emits, for grad false, vecMaxPool2x2RowsAVX512(out, x
// *float32, rows, ow, w int): out[i·ow + j] is the maximum of window j of row
// pair i (x rows 2i and 2i+1, w = 2·ow wide), maxPool2x2's comparisons; for
// grad true, vecMaxPool2x2GradRowsAVX512(g, x, gy *float32, rows, ow, w int):
// the window's winner in g (laid out as x) gets 0 + gy[i·ow + j] (as
// PoolBackward's zeroed accumulator adds it) and the other three +0. Rows are
// read in place, sixteen windows at a time, the last group of a row under
// lane masks (masked-off lanes neither load nor store), so the windows of
// rows of any length run on the vector layer (maxPool2x2RowsBF16 is the bfloat16
// form).
func (g *gen) maxPool2x2Rows(x isa, grad bool) {
	es := 4
	name, o := g.poolPrologue(x, grad, "Rows", "*float32", ", w int")
	g.p("\tMOVQ w+%d(FP), R12", o)
	g.p("\tSHLQ $2, R12 // bytes per input row")
	g.p("\tMOVL $1, AX")
	g.p("\tVPBROADCASTD AX, Z23 // winner 1")
	g.p("\tMOVL $2, AX")
	g.p("\tVPBROADCASTD AX, Z24 // winner 2")
	g.p("\tMOVL $3, AX")
	g.p("\tVPBROADCASTD AX, Z25 // winner 3")
	g.p("\tVPXORD Z28, Z28, Z28 // +0, winner 0")
	g.p("\tVMOVDQU32 poolc<>+0(SB), Z26 // even")
	g.p("\tVMOVDQU32 poolc<>+64(SB), Z27 // odd")
	if grad {
		g.p("\tVMOVDQU32 poolgc<>+0(SB), Z18 // interleave, low")
		g.p("\tVMOVDQU32 poolgc<>+64(SB), Z19 // interleave, high")
	}
	g.poolRowHead(name, grad)
	// body emits one group of sixteen windows; masked says whether the loads and
	// stores go under K4/K5 (the input and gradient registers) and K3 (gy, out).
	body := func(masked bool) {
		// ld loads sixteen elements at element offset e of ptr into Zz as
		// float32, stv stores Zz's sixteen there (offsets in elements).
		ld := func(e int, ptr, k string, z int) {
			if masked {
				g.p("\tVMOVUPS.Z %d(%s), %s, Z%d", e*es, ptr, k, z)
			} else {
				g.p("\tVMOVUPS %d(%s), Z%d", e*es, ptr, z)
			}
		}
		stv := func(z int, e int, ptr, k string) {
			if masked {
				g.p("\tVMOVUPS Z%d, %s, %d%s", z, k, e*es, ptr)
			} else {
				g.p("\tVMOVUPS Z%d, %d%s", z, e*es, ptr)
			}
		}
		ld(0, "DX", "K4", 0)
		ld(16, "DX", "K5", 1)
		ld(0, "BX", "K4", 2)
		ld(16, "BX", "K5", 3)
		g.p("\tVMOVDQA32 Z26, Z4")
		g.p("\tVPERMI2PS Z1, Z0, Z4 // best = r0 even")
		g.p("\tVMOVDQA32 Z27, Z5")
		g.p("\tVPERMI2PS Z1, Z0, Z5 // r0 odd")
		g.p("\tVMOVDQA32 Z26, Z6")
		g.p("\tVPERMI2PS Z3, Z2, Z6 // r1 even")
		g.p("\tVMOVDQA32 Z27, Z7")
		g.p("\tVPERMI2PS Z3, Z2, Z7 // r1 odd")
		g.p("\tVPXORD Z8, Z8, Z8 // winner 0")
		g.poolChain(grad)
		if !grad {
			stv(4, 0, "(DI)", "K3")
			return
		}
		ld(0, "R8", "K3", 9)
		g.p("\tVADDPS Z9, Z28, Z9 // 0 + gy")
		for k, id := range []int{28, 23, 24, 25} {
			g.p("\tVPCMPEQD Z%d, Z8, K1", id)
			g.p("\tVMOVAPS.Z Z9, K1, Z%d", 10+k)
		}
		for _, row := range []struct {
			even, odd int
			ptr       string
		}{{10, 11, "(R9)"}, {12, 13, "(R9)(R12*1)"}} {
			g.p("\tVMOVDQA32 Z18, Z14")
			g.p("\tVPERMI2PS Z%d, Z%d, Z14", row.odd, row.even)
			g.p("\tVMOVDQA32 Z19, Z15")
			g.p("\tVPERMI2PS Z%d, Z%d, Z15", row.odd, row.even)
			stv(14, 0, row.ptr, "K4")
			stv(15, 16, row.ptr, "K5")
		}
	}
	g.p("")
	g.p("%s_group:", name)
	g.p("\tCMPQ R13, $16")
	g.p("\tJLT %s_tail", name)
	body(false)
	g.p("\tADDQ $%d, DX", 32*es)
	g.p("\tADDQ $%d, BX", 32*es)
	if grad {
		g.p("\tADDQ $%d, R9", 32*es)
		g.p("\tADDQ $%d, R8", 16*es)
	} else {
		g.p("\tADDQ $%d, DI", 16*es)
	}
	g.p("\tSUBQ $16, R13")
	g.p("\tJMP %s_group", name)
	g.p("")
	g.p("%s_tail:", name)
	g.p("\tTESTQ R13, R13")
	g.p("\tJZ %s_next", name)
	g.p("\tMOVL $1, AX")
	g.p("\tMOVQ R13, CX")
	g.p("\tSHLL CX, AX")
	g.p("\tDECL AX")
	g.p("\tKMOVW AX, K3 // the last windows")
	g.p("\tMOVL $1, AX")
	g.p("\tLEAQ (R13)(R13*1), CX // their input columns")
	g.p("\tCMPQ CX, $16")
	g.p("\tJGE %s_wide", name)
	g.p("\tSHLL CX, AX")
	g.p("\tDECL AX")
	g.p("\tKMOVW AX, K4")
	g.p("\tKXORW K5, K5, K5")
	g.p("\tJMP %s_masked", name)
	g.p("%s_wide:", name)
	g.p("\tSUBQ $16, CX")
	g.p("\tSHLL CX, AX")
	g.p("\tDECL AX")
	g.p("\tKMOVW AX, K5")
	g.p("\tKXNORW K4, K4, K4")
	g.p("%s_masked:", name)
	body(true)
	if grad {
		g.p("\tLEAQ (R8)(R13*%d), R8", es)
	} else {
		g.p("\tLEAQ (DI)(R13*%d), DI", es)
	}
	g.poolRowEnd(name, grad)
}

// poolRowHead emits the row loops' head (label name_row): the next row pair's r0 in
// DX, r1 in BX, the gradient's rows at R9, the windows left in R13; done when R10 is
// 0. R12 holds the bytes of an input row.
func (g *gen) poolRowHead(name string, grad bool) {
	g.p("")
	g.p("%s_row:", name)
	g.p("\tTESTQ R10, R10")
	g.p("\tJZ %s_done", name)
	g.p("\tMOVQ SI, DX // r0")
	g.p("\tLEAQ (SI)(R12*1), BX // r1")
	if grad {
		g.p("\tMOVQ DI, R9 // g0; g1 at (R9)(R12*1)")
	}
	g.p("\tMOVQ R11, R13 // windows left in the row")
}

// poolRowEnd emits the row loops' end: name_next moves x (and the gradient) on by
// a row pair and loops, name_done returns.
func (g *gen) poolRowEnd(name string, grad bool) {
	g.p("")
	g.p("%s_next:", name)
	g.p("\tLEAQ (SI)(R12*2), SI")
	if grad {
		g.p("\tLEAQ (DI)(R12*2), DI")
	}
	g.p("\tDECQ R10")
	g.p("\tJMP %s_row", name)
	g.p("")
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}

// poolPrologue emits the head of vecMaxPool2x2<kind>… (or vecMaxPool2x2Grad<kind>…)
// whose arguments are (out, x <et>, rows, ow<last>) or (gx, x, gy <et>, rows,
// ow<last>): out or gx (not g: the assembler's goroutine register) in DI, x in SI,
// gy in R8, rows in R10, ow in R11. It returns the routine's name and the frame
// offset of the argument after ow.
func (g *gen) poolPrologue(x isa, grad bool, kind, et, last string) (string, int) {
	if !x.masks {
		panic("vecgen: the max-pool loop needs AVX-512 masks")
	}
	name, out := "vecMaxPool2x2"+kind+x.name, "out"
	args, frame := "out, x "+et+", rows, ow"+last, 40
	if grad {
		name, out = "vecMaxPool2x2Grad"+kind+x.name, "gx"
		args, frame = "gx, x, gy "+et+", rows, ow"+last, 48
	}
	g.p("")
	g.p("// func %s(%s)", name, args)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-%d", name, frame)
	g.p("\tMOVQ %s+0(FP), DI", out)
	g.p("\tMOVQ x+8(FP), SI")
	o := 16
	if grad {
		g.p("\tMOVQ gy+16(FP), R8")
		o = 24
	}
	g.p("\tMOVQ rows+%d(FP), R10", o)
	g.p("\tMOVQ ow+%d(FP), R11", o+8)
	return name, o + 16
}

// poolBF16Consts loads the bfloat16 max-pool loops' constants: Z29 a NaN's quiet
// bit (in the high half), Z30 the high halves, Z28 +0 (winner 0) and, for the
// gradient, Z23–Z25 winners 1–3.
func (g *gen) poolBF16Consts(grad bool) {
	g.p("\tMOVL $0x40, AX")
	g.p("\tVPBROADCASTD AX, Z29 // a NaN's quiet bit, in the high half")
	g.p("\tMOVL $0xffff0000, AX")
	g.p("\tVPBROADCASTD AX, Z30 // the high halves")
	g.p("\tVPXORD Z28, Z28, Z28 // +0, winner 0")
	if grad {
		for id := 1; id <= 3; id++ {
			g.p("\tMOVL $%d, AX", id)
			g.p("\tVPBROADCASTD AX, Z%d // winner %d", 22+id, id)
		}
	}
}

// poolBF16Max compares the windows whose r0 and r1 dwords are in Z<r0> and Z<r1>
// as maxPool2x2Rows compares them (r0 even, r0 odd, r1 even, r1 odd; the even
// element widened by a shift of 16, the odd one by clearing the low half): the
// maximum in Z4 and, for the gradient, the winner's number in Z8.
func (g *gen) poolBF16Max(r0, r1 int, grad bool) {
	g.p("\tVPSLLD $16, Z%d, Z4 // best = r0 even", r0)
	g.p("\tVPANDD Z30, Z%d, Z5 // r0 odd", r0)
	g.p("\tVPSLLD $16, Z%d, Z6 // r1 even", r1)
	g.p("\tVPANDD Z30, Z%d, Z7 // r1 odd", r1)
	if grad {
		g.p("\tVPXORD Z8, Z8, Z8 // winner 0")
	}
	g.poolChain(grad)
}

// poolChain emits the 2×2 max-pool's comparisons: Z5, Z6 and Z7 (r0 odd, r1 even,
// r1 odd) each against the best so far in Z4 (r0 even at first), taken where
// greater or NaN (maxPool2x2's order); for the gradient the winner's number (Z23–Z25)
// goes to Z8.
func (g *gen) poolChain(grad bool) {
	for _, c := range []struct{ v, id int }{{5, 23}, {6, 24}, {7, 25}} {
		g.p("\tVCMPPS $0x%02x, Z4, Z%d, K1 // v > best", cmpGTOQ, c.v)
		g.p("\tVCMPPS $0x%02x, Z%d, Z%d, K2 // v NaN", cmpUnord, c.v, c.v)
		g.p("\tKORW K1, K2, K1")
		g.p("\tVMOVAPS Z%d, K1, Z4", c.v)
		if grad {
			g.p("\tVMOVDQA32 Z%d, K1, Z8", c.id)
		}
	}
}

// poolBF16Narrow leaves Z<z>'s high halves in the low halves of Z16, a NaN quieted
// as half.Float32ToBFloat16 quiets it.
func (g *gen) poolBF16Narrow(z int) {
	g.p("\tVPSRLD $16, Z%d, Z16", z)
	g.p("\tVCMPPS $0x%02x, Z%d, Z%d, K6 // NaN", cmpUnord, z, z)
	g.p("\tVPORD Z29, Z16, K6, Z16")
}

// poolBF16Grad turns the windows' gy (zero-extended in Z9) into the gradient's r0
// and r1 dwords, Z10 and Z11: 0 + gy (VADDPS) narrowed, in the low or high half of
// the winner's dword, every other element +0.
func (g *gen) poolBF16Grad() {
	g.p("\tVPSLLD $16, Z9, Z9")
	g.p("\tVADDPS Z9, Z28, Z9 // 0 + gy")
	g.poolBF16Narrow(9)
	for k, row := range []struct{ even, odd int }{{28, 23}, {24, 25}} {
		z := 10 + k
		g.p("\tVPCMPEQD Z%d, Z8, K1", row.even)
		g.p("\tVMOVDQA32.Z Z16, K1, Z%d // the even element wins", z)
		g.p("\tVPCMPEQD Z%d, Z8, K2", row.odd)
		g.p("\tVPSLLD $16, Z16, K2, Z%d // the odd one", z)
	}
}

// maxPool2x2RowsBF16 emits vecMaxPool2x2RowsBF16…(out, x *uint16, rows, ow, w int)
// and, for grad, vecMaxPool2x2GradRowsBF16…(gx, x, gy *uint16, rows, ow, w int):
// maxPool2x2Rows's loops on bfloat16 planes (w = 2·ow), bit for bit, without its
// shuffles. A window's two columns are one dword of its row (the even element in
// the low half), so sixteen windows are one 64-byte load per row: the even
// elements become float32 by a left shift of 16, the odd ones by clearing the low
// half (both exact), and the four are compared in maxPool2x2Rows's order. The
// maximum (an input or a quieted NaN) is stored as its high half, a NaN quieted as
// half.Float32ToBFloat16 quiets it; the gradient's winner gets 0 + gy (VADDPS)
// narrowed the same way, placed in the low or high half of its row's dword, every
// other element +0. A row's last windows run under a lane mask (masked-off lanes
// neither load nor store).
func (g *gen) maxPool2x2RowsBF16(x isa, grad bool) {
	name, o := g.poolPrologue(x, grad, "RowsBF16", "*uint16", ", w int")
	g.p("\tMOVQ w+%d(FP), R12", o)
	g.p("\tSHLQ $1, R12 // bytes per input row")
	g.poolBF16Consts(grad)
	g.p("\tMOVQ R11, CX")
	g.p("\tANDQ $15, CX // the windows of a row's last, partial group")
	g.maskCX("K3", "their lanes, the same in every row")
	g.poolRowHead(name, grad)
	// body emits one group of sixteen windows, under K3 where masked.
	body := func(masked bool) {
		mk, z := "", ""
		if masked {
			mk, z = ", K3", ".Z"
		}
		g.p("\tVMOVDQU32%s 0(DX)%s, Z0", z, mk)
		g.p("\tVMOVDQU32%s 0(BX)%s, Z2", z, mk)
		g.poolBF16Max(0, 2, grad)
		if !grad {
			g.poolBF16Narrow(4)
			g.p("\tVPMOVDW Z16%s, 0(DI)", mk)
			return
		}
		g.p("\tVPMOVZXWD%s 0(R8)%s, Z9", z, mk)
		g.poolBF16Grad()
		g.p("\tVMOVDQU32 Z10%s, 0(R9)", mk)
		g.p("\tVMOVDQU32 Z11%s, 0(R9)(R12*1)", mk)
	}
	g.p("")
	g.p("%s_group:", name)
	g.p("\tCMPQ R13, $16")
	g.p("\tJLT %s_tail", name)
	body(false)
	g.p("\tADDQ $64, DX")
	g.p("\tADDQ $64, BX")
	if grad {
		g.p("\tADDQ $64, R9")
		g.p("\tADDQ $32, R8")
	} else {
		g.p("\tADDQ $32, DI")
	}
	g.p("\tSUBQ $16, R13")
	g.p("\tJMP %s_group", name)
	g.p("")
	g.p("%s_tail:", name)
	g.p("\tTESTQ R13, R13")
	g.p("\tJZ %s_next", name)
	body(true)
	if grad {
		g.p("\tLEAQ (R8)(R13*2), R8")
	} else {
		g.p("\tLEAQ (DI)(R13*2), DI")
	}
	g.poolRowEnd(name, grad)
}

// maxPool2x2PlaneBF16 emits vecMaxPool2x2PlaneBF16…(out, x *uint16, rows, ow int,
// idx *[64]int32) and, for grad, vecMaxPool2x2GradPlaneBF16…(gx, x, gy *uint16, rows,
// ow int, idx *[64]int32): maxPool2x2RowsBF16's loops for short rows (ow ≤ 8), the
// row pairs being contiguous (w = 2·ow): each round takes p = 32/(2·ow) row pairs
// (the last round fewer), its 2·ow·p dwords in two registers, and VPERMI2D gathers
// the windows' r0 and r1 dwords into one register each (idx[0:16], idx[16:32]), so
// that a round runs p·ow windows (14 for ow = 7) where maxPool2x2RowsBF16 runs ow.
// The gradient's dwords go back to the rows by VPERMI2D again (idx[32:48] and
// idx[48:64] pick, for each dword of the round, its window's r0 or r1 dword).
func (g *gen) maxPool2x2PlaneBF16(x isa, grad bool) {
	name, o := g.poolPrologue(x, grad, "PlaneBF16", "*uint16", " int, idx *[64]int32")
	g.p("\tMOVQ idx+%d(FP), AX", o)
	g.p("\tVMOVDQU32 0(AX), Z26 // the windows' r0 dwords")
	g.p("\tVMOVDQU32 64(AX), Z27 // their r1 dwords")
	if grad {
		g.p("\tVMOVDQU32 128(AX), Z18 // the round's first 16 dwords, from r0 (0-15) or r1 (16-31)")
		g.p("\tVMOVDQU32 192(AX), Z19 // its last 16")
	}
	g.poolBF16Consts(grad)
	g.p("\tMOVQ $32, AX")
	g.p("\tXORQ DX, DX")
	g.p("\tLEAQ (R11)(R11*1), CX // dwords a row pair")
	g.p("\tDIVQ CX")
	g.p("\tMOVQ AX, R12 // p, row pairs a full round")
	// setup sets, for R13 row pairs, R9 to their windows, BX to their dwords, K3 to
	// the windows' lanes, K4 and K5 to the dwords' in the two registers, then jumps
	// to next.
	setup := func(label, next string) {
		g.p("%s_%s:", name, label)
		g.p("\tMOVQ R13, R9")
		g.p("\tIMULQ R11, R9 // its windows")
		g.p("\tLEAQ (R9)(R9*1), BX // its dwords")
		g.p("\tMOVQ R9, CX")
		g.maskCX("K3", "the windows")
		g.p("\tMOVQ BX, CX")
		g.p("\tCMPQ CX, $16")
		g.p("\tJLE %s_%sshort", name, label)
		g.p("\tKXNORW K4, K4, K4")
		g.p("\tSUBQ $16, CX")
		g.maskCX("K5", "the dwords past 16")
		g.p("\tJMP %s_%s", name, next)
		g.p("%s_%sshort:", name, label)
		g.maskCX("K4", "the dwords")
		g.p("\tKXORW K5, K5, K5")
		g.p("\tJMP %s_%s", name, next)
	}
	g.p("\tMOVQ AX, R13")
	setup("full", "round")
	g.p("")
	g.p("%s_last:", name)
	g.p("\tMOVQ R10, R13 // the last round: q < p row pairs")
	setup("part", "body")
	g.p("")
	g.p("%s_round:", name)
	g.p("\tTESTQ R10, R10")
	g.p("\tJZ %s_done", name)
	g.p("\tCMPQ R10, R12")
	g.p("\tJLT %s_last", name)
	g.p("")
	g.p("%s_body:", name)
	g.p("\tVMOVDQU32.Z 0(SI), K4, Z0")
	g.p("\tVMOVDQU32.Z 64(SI), K5, Z1")
	g.p("\tVMOVDQA32 Z26, Z2")
	g.p("\tVPERMI2D Z1, Z0, Z2 // r0")
	g.p("\tVMOVDQA32 Z27, Z3")
	g.p("\tVPERMI2D Z1, Z0, Z3 // r1")
	g.poolBF16Max(2, 3, grad)
	if !grad {
		g.poolBF16Narrow(4)
		g.p("\tVPMOVDW Z16, K3, 0(DI)")
		g.p("\tLEAQ (DI)(R9*2), DI")
	} else {
		g.p("\tVPMOVZXWD.Z 0(R8), K3, Z9")
		g.poolBF16Grad()
		g.p("\tVMOVDQA32 Z18, Z14")
		g.p("\tVPERMI2D Z11, Z10, Z14")
		g.p("\tVMOVDQA32 Z19, Z15")
		g.p("\tVPERMI2D Z11, Z10, Z15")
		g.p("\tVMOVDQU32 Z14, K4, 0(DI)")
		g.p("\tVMOVDQU32 Z15, K5, 64(DI)")
		g.p("\tLEAQ (DI)(BX*4), DI")
		g.p("\tLEAQ (R8)(R9*2), R8")
	}
	g.p("\tLEAQ (SI)(BX*4), SI")
	g.p("\tSUBQ R13, R10")
	g.p("\tJMP %s_round", name)
	g.p("")
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}

// maskCX sets mask register k to the CX lowest bits (CX < 32; AX is clobbered), with
// comment, when not "", on the KMOVW.
func (g *gen) maskCX(k, comment string) {
	g.p("\tMOVL $1, AX")
	g.p("\tSHLL CX, AX")
	g.p("\tDECL AX")
	if comment == "" {
		g.p("\tKMOVW AX, %s", k)
		return
	}
	g.p("\tKMOVW AX, %s // %s", k, comment)
}
