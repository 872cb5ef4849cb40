package main

import "fmt"

// f32RowsB emits gemmKernelRowsBAVX512: gemmKernelRowsAVX512 with the B
// micro-panel read in place from a row-major op(B), row p of its 32 columns
// at b + p·ldb bytes, instead of from a packed panel (rows 128 bytes
// apart). The B rows hold the words packing would have copied, and each
// element of C gets the same FMAs in the same operand order, so the two
// give the same bits. The B prefetch goes eight rows ahead (ldb·8 bytes)
// as the packed kernels' goes eight steps ahead.
func (g *gen) f32RowsB() {
	name := "gemmKernelRowsBAVX512"
	g.p("")
	g.p("// func %s(rows, kc int, a *float32, lda, astep int, b *float32, ldb int, c *float32, ldc int, start *float32)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-80", name)
	g.p("\tMOVQ rows+0(FP), AX")
	g.p("\tMOVQ kc+8(FP), CX")
	g.p("\tMOVQ a+16(FP), SI")
	g.p("\tMOVQ lda+24(FP), R9")
	g.p("\tMOVQ astep+32(FP), R13")
	g.p("\tMOVQ b+40(FP), DI")
	g.p("\tMOVQ ldb+48(FP), R14")
	g.p("\tMOVQ c+56(FP), DX")
	g.p("\tMOVQ ldc+64(FP), R8")
	g.p("\tLEAQ (R9)(R9*2), R10 // 3·lda")
	g.p("\tLEAQ (SI)(R9*4), R11 // row 4")
	g.p("\tLEAQ (R11)(R9*4), R12 // row 8")
	for r := 1; r < mr; r++ {
		g.p("\tCMPQ AX, $%d", r)
		g.p("\tJEQ %s_%d", name, r)
	}
	g.p("\tRET")
	for r := 1; r < mr; r++ {
		lbl := fmt.Sprintf("%s_%d", name, r)
		g.p("")
		g.p("%s:", lbl)
		g.f32Loops(lbl, r, 2, func() { g.f32RowsBStep(r) })
		g.f32StoreStartOrAdd(lbl, r, 72)
	}
}

// f32RowsBStep emits one k step of gemmKernelRowsBAVX512's rows-row body:
// f32StepOf's for rows rows read at astep (R13), with the B row at DI
// stepping ldb (R14) bytes and prefetched eight rows ahead.
func (g *gen) f32RowsBStep(rows int) {
	for v := range 2 {
		g.p("\tVMOVUPS %d(DI), Z%d", 64*v, 24+v)
	}
	g.p("\tPREFETCHT0 (DI)(R14*8)")
	g.p("\tPREFETCHT0 64(DI)(R14*8)")
	bases := []string{"SI", "R11", "R12"}
	offs := []string{"", "(R9*1)", "(R9*2)", "(R10*1)"}
	for i := range rows {
		r := 26 + i%6
		g.p("\tVBROADCASTSS (%s)%s, Z%d", bases[i/4], offs[i%4], r)
		for v := range 2 {
			g.p("\tVFMADD231PS Z%d, Z%d, Z%d", 24+v, r, 2*i+v)
		}
	}
	for b := range (rows + 3) / 4 {
		g.p("\tADDQ R13, %s", bases[b])
	}
	g.p("\tADDQ R14, DI")
}
