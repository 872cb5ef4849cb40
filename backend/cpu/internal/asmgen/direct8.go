package main

import "fmt"

// kernelDirectF32Rows emits gemmBF16Kernel<rows>x32DirectF32AVX512: the float32
// kernel reading A in place (kernelDirect(false)) for a tile of rows < mr rows,
// 2·rows accumulators. The attention's products, whose blocks are 64 rows (8
// tiles of 8, against 5 of 12 and a 4-row edge), run it.
func (g *gen) kernelDirectF32Rows(rows int) {
	name := fmt.Sprintf("gemmBF16Kernel%dx%dDirectF32AVX512", rows, nr)
	g.p("")
	g.p("// func %s(kc2 int, a *half.BFloat16, lda int, b *uint32, c *float32, ldc int, add bool)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-49", name)
	g.p("\tMOVQ kc2+0(FP), CX")
	g.p("\tMOVQ a+8(FP), SI")
	g.p("\tMOVQ lda+16(FP), R9")
	g.p("\tSHLQ $1, R9 // bytes per row of A")
	g.p("\tLEAQ (R9)(R9*2), R10 // 3 rows")
	g.p("\tLEAQ (R9)(R9*4), R11 // 5 rows")
	g.p("\tLEAQ (R10)(R9*4), R12 // 7 rows")
	g.p("\tMOVQ b+24(FP), DI")
	g.p("\tMOVQ c+32(FP), DX")
	g.p("\tMOVQ ldc+40(FP), R8")
	g.p("\tSHLQ $2, R8")
	for z := range rows * nv {
		g.p("\tVPXORD Z%d, Z%d, Z%d", z, z, z)
	}
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_store", name)
	g.p("")
	g.p("%s_loop:", name)
	bReg := rows * nv
	for v := range nv {
		g.p("\tVMOVDQU32 %d(DI), Z%d", 64*v, bReg+v)
	}
	addr := []string{"(SI)", "(SI)(R9*1)", "(SI)(R9*2)", "(SI)(R10*1)", "(SI)(R9*4)", "(SI)(R11*1)",
		"(SI)(R10*2)", "(SI)(R12*1)"}
	aRegs := 32 - bReg - nv
	for i := range rows {
		ar := bReg + nv + i%aRegs
		g.p("\tVPBROADCASTD %s, Z%d", addr[i], ar)
		for v := range nv {
			g.gnu(fmt.Sprintf("vdpbf16ps %%zmm%d, %%zmm%d, %%zmm%d", ar, bReg+v, i*nv+v))
		}
	}
	g.p("\tADDQ $4, SI")
	g.p("\tADDQ $%d, DI", 4*nr)
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_loop", name)
	g.p("")
	g.p("%s_store:", name)
	g.p("\tMOVBLZX add+48(FP), AX")
	g.p("\tTESTL AX, AX")
	g.p("\tJZ %s_overwrite", name)
	for _, add := range []bool{true, false} {
		if !add {
			g.p("")
			g.p("%s_overwrite:", name)
		}
		for i := range rows {
			if i > 0 {
				g.p("\tADDQ R8, DX")
			}
			for v := range nv {
				acc := i*nv + v
				if add {
					g.p("\tVADDPS %d(DX), Z%d, Z%d", 64*v, acc, acc)
				}
				g.p("\tVMOVUPS Z%d, %d(DX)", acc, 64*v)
			}
		}
		g.p("\tVZEROUPPER")
		g.p("\tRET")
	}
}
