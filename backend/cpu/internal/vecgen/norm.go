package main

// devSqF64 emits vecDevSqF64<ISA>(s *[16]float64, x *float32, mean float64,
// n int): s[k] = FMA(d, d, s[k]) with d = float64(x[i]) - mean, for every
// i ≡ k (mod 16) in ascending i: the second pass of LayerNorm's row variance.
func (g *gen) devSqF64(x isa) {
	name := "vecDevSqF64" + x.name
	nr := x.f64Regs()
	mean := x.reg(2 * nr)
	g.p("")
	g.p("// func %s(s *[16]float64, x *float32, mean float64, n int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-32", name)
	g.p("\tMOVQ s+0(FP), DI")
	g.p("\tMOVQ x+8(FP), SI")
	g.p("\tVBROADCASTSD mean+16(FP), %s", mean)
	g.p("\tMOVQ n+24(FP), CX")
	for r := range nr {
		g.p("\tVMOVUPD %d(DI), %s", r*x.vb(), x.reg(r))
	}
	g.p("")
	g.p("%s_loop:", name)
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_done", name)
	for r := range nr {
		d := x.reg(nr + r)
		g.p("\tVCVTPS2PD %d(SI), %s", r*x.vb()/2, d)
		g.p("\tVSUBPD %s, %s, %s", mean, d, d)
		g.p("\tVFMADD231PD %s, %s, %s", d, d, x.reg(r))
	}
	g.p("\tADDQ $64, SI")
	g.p("\tSUBQ $16, CX")
	g.p("\tJMP %s_loop", name)
	g.p("")
	g.p("%s_done:", name)
	for r := range nr {
		g.p("\tVMOVUPD %s, %d(DI)", x.reg(r), r*x.vb())
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}

// lnRow emits vecLnRow<ISA>(s *[32]float64, gw, gb *float64, g, gy, x
// *float32, mean, invstd float64, n int): with xh = (float64(x[i]) - mean)·
// invstd, s[k] += float64(g[i]) and s[16+k] = FMA(float64(g[i]), xh, s[16+k])
// for i ≡ k (mod 16), gw[i] += float64(gy[i])·xh (rounded, then added) and
// gb[i] += float64(gy[i]): the row pass of LayerNorm's backward.
func (g *gen) lnRow(x isa) {
	name := "vecLnRow" + x.name
	nr := x.f64Regs()
	mean, inv := x.reg(2*nr), x.reg(2*nr+1)
	t := func(i int) string { return x.reg(2*nr + 2 + i) }
	g.p("")
	g.p("// func %s(s *[32]float64, gw, gb *float64, gv, gy, x *float32, mean, invstd float64, n int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-72", name)
	g.p("\tMOVQ s+0(FP), DI")
	g.p("\tMOVQ gw+8(FP), R9")
	g.p("\tMOVQ gb+16(FP), R10")
	g.p("\tMOVQ gv+24(FP), DX")
	g.p("\tMOVQ gy+32(FP), R8")
	g.p("\tMOVQ x+40(FP), SI")
	g.p("\tVBROADCASTSD mean+48(FP), %s", mean)
	g.p("\tVBROADCASTSD invstd+56(FP), %s", inv)
	g.p("\tMOVQ n+64(FP), CX")
	for r := range 2 * nr {
		g.p("\tVMOVUPD %d(DI), %s", r*x.vb(), x.reg(r))
	}
	g.p("")
	g.p("%s_loop:", name)
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_done", name)
	for r := range nr {
		o32, o64 := r*x.vb()/2, r*x.vb()
		g.p("\tVCVTPS2PD %d(SI), %s", o32, t(0))
		g.p("\tVSUBPD %s, %s, %s", mean, t(0), t(0))
		g.p("\tVMULPD %s, %s, %s // xh", inv, t(0), t(0))
		g.p("\tVCVTPS2PD %d(DX), %s", o32, t(1))
		g.p("\tVADDPD %s, %s, %s", t(1), x.reg(r), x.reg(r))
		g.p("\tVFMADD231PD %s, %s, %s", t(0), t(1), x.reg(nr+r))
		g.p("\tVCVTPS2PD %d(R8), %s", o32, t(2))
		g.p("\tVMULPD %s, %s, %s", t(0), t(2), t(3))
		g.p("\tVADDPD %d(R9), %s, %s", o64, t(3), t(3))
		g.p("\tVMOVUPD %s, %d(R9)", t(3), o64)
		g.p("\tVADDPD %d(R10), %s, %s", o64, t(2), t(2))
		g.p("\tVMOVUPD %s, %d(R10)", t(2), o64)
	}
	g.p("\tADDQ $64, SI")
	g.p("\tADDQ $64, DX")
	g.p("\tADDQ $64, R8")
	g.p("\tADDQ $128, R9")
	g.p("\tADDQ $128, R10")
	g.p("\tSUBQ $16, CX")
	g.p("\tJMP %s_loop", name)
	g.p("")
	g.p("%s_done:", name)
	for r := range 2 * nr {
		g.p("\tVMOVUPD %s, %d(DI)", x.reg(r), r*x.vb())
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}

// lnAffine emits LayerNorm's elementwise row passes, each one call per row where
// the kernels made four or five, with every step rounded to float32 as there (no
// fused multiply-add):
//
//   - vecLnFwd<ISA>(y, x, w, b *float32, m, is float32, n int): y[i] =
//     ((x[i] - m)·is)·w[i] + b[i], the forward's normalisation and affine map;
//   - vecLnBwd<ISA>(g, x *float32, ca, cm, cb, cc float32, n int): g[i] =
//     (g[i]·ca + (x[i] - cm)·cb) + cc, the backward's input gradient.
func (g *gen) lnAffine(x isa) {
	vb := x.vb()
	name := "vecLnFwd" + x.name
	g.p("")
	g.p("// func %s(y, x, w, b *float32, m, is float32, n int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	g.p("\tMOVQ y+0(FP), DI")
	g.p("\tMOVQ x+8(FP), SI")
	g.p("\tMOVQ w+16(FP), R8")
	g.p("\tMOVQ b+24(FP), R9")
	g.p("\tVBROADCASTSS m+32(FP), %s", x.reg(8))
	g.p("\tVBROADCASTSS is+36(FP), %s", x.reg(9))
	g.p("\tMOVQ n+40(FP), CX")
	g.p("")
	g.p("%s_loop:", name)
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_done", name)
	g.p("\tVMOVUPS (SI), %s", x.reg(0))
	g.p("\tVSUBPS %s, %s, %s // x - m", x.reg(8), x.reg(0), x.reg(0))
	g.p("\tVMULPS %s, %s, %s // ·is", x.reg(9), x.reg(0), x.reg(0))
	g.p("\tVMULPS (R8), %s, %s // ·w", x.reg(0), x.reg(0))
	g.p("\tVADDPS (R9), %s, %s // + b", x.reg(0), x.reg(0))
	g.p("\tVMOVUPS %s, (DI)", x.reg(0))
	for _, r := range []string{"SI", "DI", "R8", "R9"} {
		g.p("\tADDQ $%d, %s", vb, r)
	}
	g.p("\tSUBQ $%d, CX", x.lanes)
	g.p("\tJMP %s_loop", name)
	g.p("")
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")

	name = "vecLnBwd" + x.name
	g.p("")
	g.p("// func %s(gv, x *float32, ca, cm, cb, cc float32, n int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-40", name)
	g.p("\tMOVQ gv+0(FP), DI")
	g.p("\tMOVQ x+8(FP), SI")
	g.p("\tVBROADCASTSS ca+16(FP), %s", x.reg(8))
	g.p("\tVBROADCASTSS cm+20(FP), %s", x.reg(9))
	g.p("\tVBROADCASTSS cb+24(FP), %s", x.reg(10))
	g.p("\tVBROADCASTSS cc+28(FP), %s", x.reg(11))
	g.p("\tMOVQ n+32(FP), CX")
	g.p("")
	g.p("%s_loop:", name)
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_done", name)
	g.p("\tVMOVUPS (SI), %s", x.reg(0))
	g.p("\tVSUBPS %s, %s, %s // x - cm", x.reg(9), x.reg(0), x.reg(0))
	g.p("\tVMULPS %s, %s, %s // ·cb", x.reg(10), x.reg(0), x.reg(0))
	g.p("\tVMULPS (DI), %s, %s // g·ca", x.reg(8), x.reg(1))
	g.p("\tVADDPS %s, %s, %s", x.reg(0), x.reg(1), x.reg(1))
	g.p("\tVADDPS %s, %s, %s // + cc", x.reg(11), x.reg(1), x.reg(1))
	g.p("\tVMOVUPS %s, (DI)", x.reg(1))
	g.p("\tADDQ $%d, SI", vb)
	g.p("\tADDQ $%d, DI", vb)
	g.p("\tSUBQ $%d, CX", x.lanes)
	g.p("\tJMP %s_loop", name)
	g.p("")
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}

// lnRow2 emits vecLnRow2AVX512(s *[64]float64, gw, gb *float64, g0, gy0, x0, g1,
// gy1, x1 *float32, m0, is0, m1, is1 float64, n int): vecLnRowAVX512 on row 0 (s[:32],
// g0, gy0, x0, m0, is0) and then on row 1 (s[32:], g1, gy1, x1, m1, is1), with the
// column sums gw and gb loaded and stored once for both rows: each column still
// adds row 0's term, then row 1's.
//
// With withW it emits vecLnRow2WAVX512(s *[64]float64, gw, gb *float64, w, g0, gy0,
// x0, g1, gy1, x1 *float32, m0, is0, m1, is1 float64, n int) instead: g0[i] =
// gy0[i]·w[i] and g1[i] = gy1[i]·w[i] (float32 products, stored), then the pass above
// on those g: LayerNorm backward's weight product and row pass over two rows in one
// loop, the products reused from registers rather than read back.
func (g *gen) lnRow2(withW bool) {
	name, sig, frame, off := "vecLnRow2AVX512", "", 112, 0
	if withW {
		name, sig, frame, off = "vecLnRow2WAVX512", "w, ", 120, 8
	}
	g.p("")
	g.p("// func %s(s *[64]float64, gw, gb *float64, %sg0, gy0, x0, g1, gy1, x1 *float32, m0, is0, m1, is1 float64, n int)", name, sig)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-%d", name, frame)
	g.p("\tMOVQ s+0(FP), DI")
	g.p("\tMOVQ gw+8(FP), R9")
	g.p("\tMOVQ gb+16(FP), R10")
	if withW {
		g.p("\tMOVQ w+24(FP), R12")
	}
	for i, a := range [][2]string{{"g0", "DX"}, {"gy0", "R8"}, {"x0", "SI"}, {"g1", "AX"}, {"gy1", "BX"}, {"x1", "R11"}} {
		g.p("\tMOVQ %s+%d(FP), %s", a[0], 24+off+i*8, a[1])
	}
	for i, a := range []string{"m0", "is0", "m1", "is1"} {
		g.p("\tVBROADCASTSD %s+%d(FP), Z%d", a, 72+off+i*8, 8+i)
	}
	g.p("\tMOVQ n+%d(FP), CX", 104+off)
	// Z0-Z3: row 0's s (two sums, two FMA sums); Z4-Z7: row 1's.
	for r := range 8 {
		g.p("\tVMOVUPD %d(DI), Z%d", r*64, r)
	}
	g.p("")
	g.p("%s_loop:", name)
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_done", name)
	rows := [2]struct{ x, gv, gy string }{{"SI", "DX", "R8"}, {"R11", "AX", "BX"}}
	if withW {
		// Z22: w; Z23, Z24: the rows' products g, stored; Z25: a product's upper half.
		g.p("\tVMOVUPS (R12), Z22")
		for k, rw := range rows {
			// gy first, w second, as vecBinary's vecMul has them (the NaN payload kept).
			g.p("\tVMOVUPS (%s), Z%d", rw.gy, 23+k)
			g.p("\tVMULPS Z22, Z%d, Z%d", 23+k, 23+k)
			g.p("\tVMOVUPS Z%d, (%s)", 23+k, rw.gv)
		}
	}
	for h := range 2 {
		o32, o64 := h*32, h*64
		for k, rw := range rows {
			acc := 4 * k
			mean, inv := 8+2*k, 9+2*k
			xh, gv, gy, p := 12+4*k, 13+4*k, 14+4*k, 15+4*k
			g.p("\tVCVTPS2PD %d(%s), Z%d", o32, rw.x, xh)
			g.p("\tVSUBPD Z%d, Z%d, Z%d", mean, xh, xh)
			g.p("\tVMULPD Z%d, Z%d, Z%d // xh", inv, xh, xh)
			switch {
			case !withW:
				g.p("\tVCVTPS2PD %d(%s), Z%d", o32, rw.gv, gv)
			case h == 0:
				g.p("\tVCVTPS2PD Y%d, Z%d", 23+k, gv)
			default:
				g.p("\tVEXTRACTF32X8 $1, Z%d, Y25", 23+k)
				g.p("\tVCVTPS2PD Y25, Z%d", gv)
			}
			g.p("\tVADDPD Z%d, Z%d, Z%d", gv, acc+h, acc+h)
			g.p("\tVFMADD231PD Z%d, Z%d, Z%d", xh, gv, acc+2+h)
			g.p("\tVCVTPS2PD %d(%s), Z%d", o32, rw.gy, gy)
			g.p("\tVMULPD Z%d, Z%d, Z%d", xh, gy, p)
		}
		g.p("\tVADDPD %d(R9), Z15, Z20", o64)
		g.p("\tVADDPD Z19, Z20, Z20")
		g.p("\tVMOVUPD Z20, %d(R9)", o64)
		g.p("\tVADDPD %d(R10), Z14, Z21", o64)
		g.p("\tVADDPD Z18, Z21, Z21")
		g.p("\tVMOVUPD Z21, %d(R10)", o64)
	}
	ptrs := []string{"SI", "DX", "R8", "R11", "AX", "BX"}
	if withW {
		ptrs = append(ptrs, "R12")
	}
	for _, r := range ptrs {
		g.p("\tADDQ $64, %s", r)
	}
	g.p("\tADDQ $128, R9")
	g.p("\tADDQ $128, R10")
	g.p("\tSUBQ $16, CX")
	g.p("\tJMP %s_loop", name)
	g.p("")
	g.p("%s_done:", name)
	for r := range 8 {
		g.p("\tVMOVUPD Z%d, %d(DI)", r, r*64)
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}
