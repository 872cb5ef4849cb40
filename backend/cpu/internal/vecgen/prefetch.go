package main

// prefetchRows emits attnPrefetchRows(p *byte, stride, rows, lines int): a
// PREFETCHT1 (to L2) of each of the first lines 64-byte lines of rows rows, row r at
// p + r·stride. It reads nothing into registers and writes nothing: a hint
// that brings the next attention head's operands into L2 while the
// current head computes (a prefetch never faults).
func (g *gen) prefetchRows() { g.prefetchRowsInsn("attnPrefetchRows", "PREFETCHT1") }

// prefetchRowsInsn emits name(p *byte, stride, rows, lines int): insn (a
// PREFETCHT0/T1) of each of the first lines 64-byte lines of rows rows, row r
// at p + r·stride.
func (g *gen) prefetchRowsInsn(name, insn string) {
	g.p("")
	g.p("// func %s(p *byte, stride, rows, lines int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-32", name)
	g.p("\tMOVQ p+0(FP), SI")
	g.p("\tMOVQ stride+8(FP), DX")
	g.p("\tMOVQ rows+16(FP), CX")
	g.p("\tMOVQ lines+24(FP), BX")
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_done", name)
	g.p("\tTESTQ BX, BX")
	g.p("\tJZ %s_done", name)
	g.p("")
	g.p("%s_row:", name)
	g.p("\tMOVQ SI, DI")
	g.p("\tMOVQ BX, AX")
	g.p("")
	g.p("%s_line:", name)
	g.p("\t%s (DI)", insn)
	g.p("\tADDQ $64, DI")
	g.p("\tDECQ AX")
	g.p("\tJNZ %s_line", name)
	g.p("\tADDQ DX, SI")
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_row", name)
	g.p("")
	g.p("%s_done:", name)
	g.p("\tRET")
}
