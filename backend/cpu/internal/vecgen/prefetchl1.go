package main

// prefetchRowsL1 emits attnPrefetchRowsL1(p *byte, stride, rows, lines int):
// prefetchRows' loop with PREFETCHT0 (to L1), the attention products' hint for
// the next row panel of an A operand they read in place, issued while the
// current one computes.
func (g *gen) prefetchRowsL1() {
	const name = "attnPrefetchRowsL1"
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
	g.p("\tPREFETCHT0 (DI)")
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
