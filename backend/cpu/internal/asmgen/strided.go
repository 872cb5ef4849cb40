package main

// f32Strided emits gemmKernel12x32StridedAVX512, the float32 12×32 FMA
// micro-kernel whose A row i's value at step p is read at a + i·lda +
// p·astep bytes (gemmKernelRowsAVX512's addressing, for all 12 rows): with
// lda 4 and astep the row stride it reads a transposed A in place, the
// columns of a row-major k×12 block, which the packed kernel reads only
// after a transposing pack. Each element gets the 12-row kernels'
// arithmetic, FMA for FMA in the same operand order: accumulator from +0,
// ascending p, then added to C (start nil) or stored as start[j] + the sum
// (start a row of 32 values, C not read).
func (g *gen) f32Strided() {
	name := "gemmKernel12x32StridedAVX512"
	g.p("")
	g.p("// func %s(kc int, a *float32, lda, astep int, b, c *float32, ldc int, start *float32)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-64", name)
	g.p("\tMOVQ kc+0(FP), CX")
	g.p("\tMOVQ a+8(FP), SI")
	g.p("\tMOVQ lda+16(FP), R9")
	g.p("\tMOVQ astep+24(FP), R13")
	g.p("\tMOVQ b+32(FP), DI")
	g.p("\tMOVQ c+40(FP), DX")
	g.p("\tMOVQ ldc+48(FP), R8")
	g.p("\tLEAQ (R9)(R9*2), R10 // 3·lda")
	g.p("\tLEAQ (SI)(R9*4), R11 // row 4")
	g.p("\tLEAQ (R11)(R9*4), R12 // row 8")
	g.f32Loops(name, 12, 2, func() { g.f32StepOf(12, 2, true, "R13") })
	g.f32StoreStartOrAdd(name, 12, 56)
}
