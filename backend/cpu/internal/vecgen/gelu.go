package main

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/backend/cpu/internal/gelucoef"
)

// The float32 constants of the GELU loops (vecGelu), each stored sixteen
// times (64 bytes, so that a zmm or ymm operand reads it from memory): the erf
// coefficients and exp32's of package gelucoef (which vec_gelu.go rounds too),
// rounded to float32, its bounds and masks. TestVecGelu compares the loops with
// their twin bit for bit.
var geluConsts = func() []struct {
	name string
	bits uint32
} {
	type c = struct {
		name string
		bits uint32
	}
	f := func(name string, v float64) c { return c{name, math.Float32bits(float32(v))} }
	var cs []c
	for _, k := range gelucoef.Scalars() {
		cs = append(cs, f(k.Name, k.V))
	}
	cs = append(cs, c{"abs", 0x7fffffff}, c{"sign", 0x80000000}, c{"bias", 127})
	for _, p := range gelucoef.Polys {
		for i, v := range p.C {
			cs = append(cs, f(fmt.Sprintf("%s%d", p.Name, i), v))
		}
	}
	return cs
}()

// gc returns the memory operand of the named GELU constant.
func gc(name string) string {
	for i, c := range geluConsts {
		if c.name == name {
			return fmt.Sprintf("geluc<>+%d(SB)", 64*i)
		}
	}
	panic("vecgen: no constant " + name)
}

// polyLen is the number of coefficients of the named polynomial.
func polyLen(name string) int {
	n := 0
	for gcHas(fmt.Sprintf("%s%d", name, n)) {
		n++
	}
	return n
}

func gcHas(name string) bool {
	for _, c := range geluConsts {
		if c.name == name {
			return true
		}
	}
	return false
}

func (g *gen) geluConsts() {
	g.p("")
	g.p("// Constants of the GELU loops (vecGelu), float32, each sixteen times.")
	for i, c := range geluConsts {
		for j := range 8 {
			g.p("DATA geluc<>+%d(SB)/8, $0x%08x%08x // %s", 64*i+8*j, c.bits, c.bits, c.name)
		}
	}
	g.p("GLOBL geluc<>(SB), RODATA|NOPTR, $%d", 64*len(geluConsts))
}

// geluEm emits the instructions of one instruction set's GELU loop. Masks
// live in K registers (AVX-512) or in vector registers (AVX2), named by
// mask(i): K<i> or the i-th spare vector register.
type geluEm struct {
	*gen
	x isa
}

func (e geluEm) r(i int) string { return e.x.reg(i) }

// mask names mask slot i: K1 or K2, or registers 13 or 14 on AVX2.
func (e geluEm) mask(i int) string {
	if e.x.masks {
		return fmt.Sprintf("K%d", i+1)
	}
	return e.x.reg(13 + i)
}

// cmp sets mask m to the lanes where reg pred constant c holds.
func (e geluEm) cmp(pred int, c string, reg int, m int, comment string) {
	e.p("\tVCMPPS $0x%02x, %s, %s, %s // %s", pred, gc(c), e.r(reg), e.mask(m), comment)
}

// logic emits the bitwise op ("AND" or "XOR") dst = a op b; AVX-512 uses
// the integer forms (VPANDD, VPXORD), which need only AVX512F.
func (e geluEm) logic(op, a, b, dst string) {
	if e.x.masks {
		e.p("\tVP%sD %s, %s, %s", op, a, b, dst)
	} else {
		e.p("\tV%sPS %s, %s, %s", op, a, b, dst)
	}
}

// none jumps to label when mask m has no lane set.
func (e geluEm) none(m int, label string) {
	if e.x.masks {
		e.p("\tKORTESTW %s, %s", e.mask(m), e.mask(m))
	} else {
		e.p("\tVMOVMSKPS %s, AX", e.mask(m))
		e.p("\tTESTL AX, AX")
	}
	e.p("\tJZ %s", label)
}

// sel moves register src into dst in the lanes of mask m.
func (e geluEm) sel(m, src, dst int) {
	if e.x.masks {
		e.p("\tVMOVAPS %s, %s, %s", e.r(src), e.mask(m), e.r(dst))
	} else {
		e.p("\tVBLENDVPS %s, %s, %s, %s", e.mask(m), e.r(src), e.r(dst), e.r(dst))
	}
}

// selNeg moves register src into dst in the lanes where x (register 0) is
// negative (AVX2: its sign bit; the lanes that use it are neither zero nor
// NaN), with mask slot m as scratch.
func (e geluEm) selNeg(m, src, dst int) {
	if e.x.masks {
		e.cmp(cmpLTOQ, "zero", 0, m, "x < 0")
		e.sel(m, src, dst)
	} else {
		e.p("\tVBLENDVPS %s, %s, %s, %s // where x < 0", e.r(0), e.r(src), e.r(dst), e.r(dst))
	}
}

// horner emits dst = poly(v) by Horner's rule, one FMA per coefficient, as
// vec_gelu.go's horner32.
func (e geluEm) horner(poly string, v, dst int) {
	e.p("\tVMOVUPS %s, %s", gc(poly+"0"), e.r(dst))
	for i := 1; i < polyLen(poly); i++ {
		e.p("\tVFMADD213PS %s, %s, %s // p = p·v + %s%d", gc(fmt.Sprintf("%s%d", poly, i)), e.r(v), e.r(dst), poly, i)
	}
}

// exp32 emits p = exp32(hi, lo) of vec_gelu.go, with k, r and i as scratch;
// mask slot m is scratch for the cut on AVX-512 (AVX2 reuses k).
func (e geluEm) exp32(hi, lo, p, k, r, i, m int) {
	e.p("\tVADDPS %s, %s, %s // hi + lo", e.r(hi), e.r(lo), e.r(k))
	e.p("\tVMULPS %s, %s, %s", gc("log2e"), e.r(k), e.r(k))
	if e.x.masks {
		e.p("\tVRNDSCALEPS $8, %s, %s // k, to nearest even", e.r(k), e.r(k))
	} else {
		e.p("\tVROUNDPS $8, %s, %s // k, to nearest even", e.r(k), e.r(k))
	}
	e.p("\tVMOVAPS %s, %s", e.r(hi), e.r(r))
	e.p("\tVFNMADD231PS %s, %s, %s // r = hi - k·ln2hi", gc("ln2hi"), e.r(k), e.r(r))
	e.p("\tVFNMADD231PS %s, %s, %s // r -= k·ln2lo", gc("ln2lo"), e.r(k), e.r(r))
	e.p("\tVADDPS %s, %s, %s // r += lo", e.r(lo), e.r(r), e.r(r))
	e.horner("ex", r, p)
	e.p("\tVCVTPS2DQ %s, %s", e.r(k), e.r(i))
	e.p("\tVPADDD %s, %s, %s", gc("bias"), e.r(i), e.r(i))
	e.p("\tVPSLLD $23, %s, %s // 2^k", e.r(i), e.r(i))
	e.p("\tVMULPS %s, %s, %s", e.r(i), e.r(p), e.r(p))
	if e.x.masks {
		km := e.mask(m)
		e.p("\tVCMPPS $0x%02x, %s, %s, %s // hi < cut", cmpLTOQ, gc("cut"), e.r(hi), km)
		e.p("\tVPXORD %s, %s, %s, %s", e.r(p), e.r(p), km, e.r(p))
	} else {
		e.p("\tVCMPPS $0x%02x, %s, %s, %s // hi < cut", cmpLTOQ, gc("cut"), e.r(hi), e.r(k))
		e.p("\tVANDNPS %s, %s, %s", e.r(p), e.r(k), e.r(p))
	}
}

// gelu emits vecGelu<ISA>(dst, x, gy *float32, n int): the GELU forward (gy
// nil) or backward of geluGo, one register of float32 lanes at a time.
// Registers: 0 x, 1 uh, 2 ul, 3 a = |uh|, 4 exp(-x²/2) (backward), 5 the
// pieces' numerators, then their quotients, 6 denominators, then -x²/2
// rounded, 7 Φ, 8 √2/|x|, 9–12 scratch, 15 x²'s rounding error, then scratch;
// AVX2 keeps its masks in 13 and 14. Each piece's numerator and
// denominator are computed only when some lane needs them and moved in under
// its lanes' mask; one VDIVPS makes every lane's quotient; Φ starts as x (NaN
// lanes keep it) and the pieces for a ≥ 1.25, [0.84375, 1.25) and [0, 0.84375)
// overwrite it in turn, each again only when some lane needs it.
func (g *gen) gelu(x isa) {
	e := geluEm{g, x}
	name := "vecGelu" + x.name
	g.p("")
	g.p("// func %s(dst, x, gy *float32, n int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-32", name)
	g.p("\tMOVQ dst+0(FP), DI")
	g.p("\tMOVQ x+8(FP), SI")
	g.p("\tMOVQ gy+16(FP), DX")
	g.p("\tMOVQ n+24(FP), CX")
	g.p("\tTESTQ DX, DX")
	g.p("\tJNZ %s_bwd", name)
	for _, bwd := range []bool{false, true} {
		label := name + "_fwd"
		if bwd {
			label = name + "_bwd"
		}
		g.p("")
		g.p("%s:", label)
		g.p("\tTESTQ CX, CX")
		g.p("\tJZ %s_done", name)
		e.body(label, bwd)
		if !bwd {
			g.p("\tVMULPS %s, %s, %s // y = x·Φ", e.r(7), e.r(0), e.r(9))
		} else {
			g.p("\tVMULPS %s, %s, %s // φ", gc("invsqrt2pi"), e.r(4), e.r(9))
			g.p("\tVFMADD213PS %s, %s, %s // Φ + x·φ", e.r(7), e.r(0), e.r(9))
			g.p("\tVMULPS (DX), %s, %s // gy·(Φ + x·φ)", e.r(9), e.r(9))
			g.p("\tADDQ $%d, DX", x.vb())
		}
		g.p("\tVMOVUPS %s, (DI)", e.r(9))
		g.p("\tADDQ $%d, SI", x.vb())
		g.p("\tADDQ $%d, DI", x.vb())
		g.p("\tSUBQ $%d, CX", x.lanes)
		g.p("\tJMP %s", label)
	}
	g.p("")
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}

// body emits the load of x and Φ(x) into register 7, for the backward
// exp(-x²/2) into 4 too, as vec_gelu.go's geluParts; labels start with label.
func (e geluEm) body(label string, bwd bool) {
	r := e.r
	e.p("\tVMOVUPS (SI), %s", r(0))
	e.p("\tVMULPS %s, %s, %s // uh = x·(1/√2)", gc("invsqrt2"), r(0), r(1))
	e.p("\tVMOVAPS %s, %s", r(1), r(2))
	e.p("\tVFMSUB231PS %s, %s, %s // ul = x·(1/√2) - uh", gc("invsqrt2"), r(0), r(2))
	e.p("\tVFMADD231PS %s, %s, %s // ul += x·lo", gc("invsqrt2lo"), r(0), r(2))
	e.logic("AND", gc("abs"), r(1), r(3)) // a = |uh|

	// a ≥ 1.25: R/S in q = (√2/|x|)², ra/sa or rb/sb.
	e.cmp(0x1d, "b", 3, 0, "a >= 1.25")
	e.none(0, label+"_numb")
	e.logic("AND", gc("abs"), r(0), r(9)) // |x|
	e.p("\tVMOVUPS %s, %s", gc("sqrt2"), r(8))
	e.p("\tVDIVPS %s, %s, %s // ia = √2/|x|", r(9), r(8), r(8))
	e.p("\tVMULPS %s, %s, %s // q = ia·ia", r(8), r(8), r(9))
	e.horner("ra", 9, 5)
	e.horner("sa", 9, 6)
	e.cmp(0x1d, "c", 3, 1, "a >= 1/0.35")
	e.none(1, label+"_numb")
	e.horner("rb", 9, 10)
	e.sel(1, 10, 5)
	e.horner("sb", 9, 10)
	e.sel(1, 10, 6)

	// [0.84375, 1.25): P/Q in s = (a - 1) + ul with u's sign.
	e.p("%s_numb:", label)
	e.cmp(0x1d, "a", 3, 1, "a >= 0.84375")
	e.none(1, label+"_numa")
	e.logic("AND", gc("sign"), r(0), r(9))
	e.logic("XOR", r(2), r(9), r(9)) // ul with u's sign
	e.p("\tVSUBPS %s, %s, %s // a - 1", gc("one"), r(3), r(10))
	e.p("\tVADDPS %s, %s, %s // s", r(9), r(10), r(10))
	e.horner("pa", 10, 11)
	e.horner("qa", 10, 12)
	e.cmp(cmpLTOQ, "b", 3, 1, "a < 1.25")
	e.sel(1, 11, 5)
	e.sel(1, 12, 6)

	// [0, 0.84375): P/Q in z = uh².
	e.p("%s_numa:", label)
	e.cmp(cmpLTOQ, "a", 3, 1, "a < 0.84375")
	e.none(1, label+"_div")
	e.p("\tVMULPS %s, %s, %s // z = uh·uh", r(1), r(1), r(10))
	e.horner("pp", 10, 11)
	e.horner("qq", 10, 12)
	e.sel(1, 11, 5)
	e.sel(1, 12, 6)

	e.p("%s_div:", label)
	e.p("\tVDIVPS %s, %s, %s // every piece's quotient", r(6), r(5), r(5))

	// x² = s + sl exactly; hi = -s/2; exp(-x²/2) for the backward.
	e.p("\tVMULPS %s, %s, %s // s = x·x", r(0), r(0), r(9))
	e.p("\tVMOVAPS %s, %s", r(9), r(15))
	e.p("\tVFMSUB231PS %s, %s, %s // sl = x·x - s", r(0), r(0), r(15))
	e.p("\tVMULPS %s, %s, %s // hi = -s/2", gc("neghalf"), r(9), r(6))
	if bwd {
		e.p("\tVMULPS %s, %s, %s // -sl/2", gc("neghalf"), r(15), r(10))
		e.exp32(6, 10, 4, 11, 12, 9, 1)
	}

	e.p("\tVMOVAPS %s, %s // Φ = x (NaN)", r(0), r(7))

	// a ≥ 1.25: erfc = exp(hi + (R/S - 0.5625 - sl/2))·ia; Φ = ½erfc or 1 - ½erfc.
	e.cmp(0x1d, "b", 3, 0, "a >= 1.25")
	e.none(0, label+"_skipc")
	e.p("\tVADDPS %s, %s, %s // R/S - 0.5625", gc("m05625"), r(5), r(10))
	e.p("\tVFMADD231PS %s, %s, %s // - sl/2", gc("neghalf"), r(15), r(10))
	e.exp32(6, 10, 9, 11, 12, 15, 1)
	e.p("\tVMULPS %s, %s, %s // erfc", r(8), r(9), r(9))
	e.p("\tVMULPS %s, %s, %s // ½erfc", gc("half"), r(9), r(10))
	e.p("\tVMOVUPS %s, %s", gc("one"), r(11))
	e.p("\tVFNMADD231PS %s, %s, %s // 1 - ½erfc", gc("half"), r(9), r(11))
	e.selNeg(1, 10, 11)
	e.sel(0, 11, 7)
	e.p("%s_skipc:", label)

	// [0.84375, 1.25): ½(1 + erx) + ½P/Q, or ½(1 - erx) - ½P/Q for x < 0.
	e.cmp(0x1d, "a", 3, 0, "a >= 0.84375")
	e.none(0, label+"_skipb")
	e.p("\tVMOVUPS %s, %s", gc("chp"), r(9))
	e.p("\tVFMADD231PS %s, %s, %s", gc("half"), r(5), r(9))
	e.p("\tVMOVUPS %s, %s", gc("chm"), r(10))
	e.p("\tVFNMADD231PS %s, %s, %s", gc("half"), r(5), r(10))
	e.selNeg(1, 10, 9)
	e.cmp(cmpLTOQ, "b", 3, 0, "a < 1.25")
	e.sel(0, 9, 7)
	e.p("%s_skipb:", label)

	// [0, 0.84375): ½ + ½uh + ½(uh·P/Q + ul).
	e.cmp(cmpLTOQ, "a", 3, 0, "a < 0.84375")
	e.none(0, label+"_skipa")
	e.p("\tVMULPS %s, %s, %s // z = uh·uh", r(1), r(1), r(11))
	e.horner("dm", 11, 9)
	e.p("\tVMULPS %s, %s, %s // ul·erf'(uh)", r(2), r(9), r(9))
	e.p("\tVFMADD231PS %s, %s, %s // t = uh·q + ul·erf'", r(5), r(1), r(9))
	e.p("\tVMOVUPS %s, %s", gc("half"), r(10))
	e.p("\tVFMADD231PS %s, %s, %s // uh·½ + ½", gc("half"), r(1), r(10))
	e.p("\tVFMADD231PS %s, %s, %s // t·½ + …", gc("half"), r(9), r(10))
	e.sel(0, 10, 7)
	e.p("%s_skipa:", label)
}
