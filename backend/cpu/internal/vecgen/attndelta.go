package main

// attnDeltaF32 emits attnDeltaF32AVX(delta *float32, gr *float32, lg int, o *float32,
// lo int, t, d int): delta[i] = attnDot(g[i*lg:][:d], o[i*lo:][:d]) for i < t, the
// float32 attention backward's row terms δ_i = Σ_c dO_ic·O_ic, bit for bit (NaN
// payloads aside), t ≥ 1 and d a positive multiple of 4. As attnDot, lane k of an xmm
// register adds the products of the columns c ≡ k (mod 4) in ascending c, a multiply
// and then an add (no FMA), and the lanes end as (s0 + s1) + (s2 + s3). Four rows run
// at once, each in its own register, so that four add chains are in flight instead of
// one; the last t mod 4 rows one at a time. Row r of a group is read at the group's
// pointer plus r·stride (strides in bytes: R8 = lg·4 and R12 = 3·lg·4 for g, R9 and
// R13 for o).
func (g *gen) attnDeltaF32() {
	const name = "attnDeltaF32AVX"
	g.p("")
	g.p("// func %s(delta *float32, gr *float32, lg int, o *float32, lo int, t, d int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-56", name)
	g.p("\tMOVQ delta+0(FP), DI")
	g.p("\tMOVQ gr+8(FP), SI")
	g.p("\tMOVQ lg+16(FP), R8")
	g.p("\tMOVQ o+24(FP), DX")
	g.p("\tMOVQ lo+32(FP), R9")
	g.p("\tMOVQ t+40(FP), CX")
	g.p("\tMOVQ d+48(FP), R10")
	g.p("\tSHLQ $2, R8")
	g.p("\tSHLQ $2, R9")
	g.p("\tLEAQ (R8)(R8*2), R12")
	g.p("\tLEAQ (R9)(R9*2), R13")
	// The row r of a group at (AX) for g and (BX) for o, plus r strides.
	gAt := []string{"(AX)", "(AX)(R8*1)", "(AX)(R8*2)", "(AX)(R12*1)"}
	oAt := []string{"(BX)", "(BX)(R9*1)", "(BX)(R9*2)", "(BX)(R13*1)"}
	group := func(label string, rows int) {
		for r := range rows {
			g.p("\tVXORPS X%d, X%d, X%d", r, r, r)
		}
		g.p("\tMOVQ SI, AX")
		g.p("\tMOVQ DX, BX")
		g.p("\tMOVQ R10, R11")
		g.p("")
		g.p("%s_%s:", name, label)
		for r := range rows {
			g.p("\tVMOVUPS %s, X%d", gAt[r], 4+r)
			g.p("\tVMULPS %s, X%d, X%d", oAt[r], 4+r, 4+r)
			g.p("\tVADDPS X%d, X%d, X%d", 4+r, r, r)
		}
		g.p("\tADDQ $16, AX")
		g.p("\tADDQ $16, BX")
		g.p("\tSUBQ $4, R11")
		g.p("\tJNZ %s_%s", name, label)
		// (s0 + s1) + (s2 + s3), as attnDot ends.
		for r := range rows {
			g.p("\tVMOVSHDUP X%d, X8", r)
			g.p("\tVADDPS X8, X%d, X%d", r, r)
			g.p("\tVMOVHLPS X%d, X8, X8", r)
			g.p("\tVADDSS X8, X%d, X%d", r, r)
			g.p("\tVMOVSS X%d, %d(DI)", r, 4*r)
		}
	}
	g.p("")
	g.p("%s_quad:", name)
	g.p("\tCMPQ CX, $4")
	g.p("\tJLT %s_one", name)
	group("quadcol", 4)
	g.p("\tADDQ $16, DI")
	g.p("\tLEAQ (SI)(R8*4), SI")
	g.p("\tLEAQ (DX)(R9*4), DX")
	g.p("\tSUBQ $4, CX")
	g.p("\tJMP %s_quad", name)
	g.p("")
	g.p("%s_one:", name)
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_done", name)
	group("onecol", 1)
	g.p("\tADDQ $4, DI")
	g.p("\tADDQ R8, SI")
	g.p("\tADDQ R9, DX")
	g.p("\tDECQ CX")
	g.p("\tJMP %s_one", name)
	g.p("")
	g.p("%s_done:", name)
	g.p("\tRET")
}
