package main

import (
	"fmt"
	"math"
)

// The constants of the GELU loop (vecGelu), each stored eight times: the erf
// coefficients of vec_gelu.go (erfPP, …, highest degree first), its bounds
// and masks. TestVecGelu compares the loop with its twin bit for bit, which
// catches a value that differs from vec_gelu.go's.
var geluConsts = func() []struct {
	name string
	bits uint64
} {
	type c = struct {
		name string
		bits uint64
	}
	f := func(name string, v float64) c { return c{name, math.Float64bits(v)} }
	cs := []c{
		f("sqrt2", math.Sqrt2), f("one", 1), f("half", 0.5), f("neghalf", -0.5),
		f("m05625", -0.5625), f("erx", 8.45062911510467529297e-01),
		f("a", 0.84375), f("b", 1.25), f("c", 1/0.35), f("d", 6),
		f("invsqrt2pi", 0.3989422804014327),
		{"abs", 0x7fffffffffffffff}, {"sign", 0x8000000000000000}, {"hi", 0xffffffff00000000},
	}
	polys := []struct {
		name string
		c    []float64
	}{
		{"pp", []float64{-2.37630166566501626084e-05, -5.77027029648944159157e-03, -2.84817495755985104766e-02, -3.25042107247001499370e-01, 1.28379167095512558561e-01}},
		{"qq", []float64{-3.96022827877536812320e-06, 1.32494738004321644526e-04, 5.08130628187576562776e-03, 6.50222499887672944485e-02, 3.97917223959155352819e-01, 1}},
		{"pa", []float64{-2.16637559486879084300e-03, 3.54783043256182359371e-02, -1.10894694282396677476e-01, 3.18346619901161753674e-01, -3.72207876035701323847e-01, 4.14856118683748331666e-01, -2.36211856075265944077e-03}},
		{"qa", []float64{1.19844998467991074170e-02, 1.36370839120290507362e-02, 1.26171219808761642112e-01, 7.18286544141962662868e-02, 5.40397917702171048937e-01, 1.06420880400844228286e-01, 1}},
		{"ra", []float64{-9.81432934416914548592e+00, -8.12874355063065934246e+01, -1.84605092906711035994e+02, -1.62396669462573470355e+02, -6.23753324503260060396e+01, -1.05586262253232909814e+01, -6.93858572707181764372e-01, -9.86494403484714822705e-03}},
		{"sa", []float64{-6.04244152148580987438e-02, 6.57024977031928170135e+00, 1.08635005541779435134e+02, 4.29008140027567833386e+02, 6.45387271733267880336e+02, 4.34565877475229228821e+02, 1.37657754143519042600e+02, 1.96512716674392571292e+01, 1}},
		{"rb", []float64{-4.83519191608651397019e+02, -1.02509513161107724954e+03, -6.37566443368389627722e+02, -1.60636384855821916062e+02, -1.77579549177547519889e+01, -7.99283237680523006574e-01, -9.86494292470009928597e-03}},
		{"sb", []float64{-2.24409524465858183362e+01, 4.74528541206955367215e+02, 2.55305040643316442583e+03, 3.19985821950859553908e+03, 1.53672958608443695994e+03, 3.25792512996573918826e+02, 3.03380607434824582924e+01, 1}},
	}
	for _, p := range polys {
		for i, v := range p.c {
			cs = append(cs, f(fmt.Sprintf("%s%d", p.name, i), v))
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
	g.p("// Constants of the GELU loop (vecGelu), each eight times.")
	for i, c := range geluConsts {
		for j := range 8 {
			g.p("DATA geluc<>+%d(SB)/8, $0x%016x // %s", 64*i+8*j, c.bits, c.name)
		}
	}
	g.p("GLOBL geluc<>(SB), RODATA|NOPTR, $%d", 64*len(geluConsts))
}

// horner emits dst = poly(v) by Horner's rule, one FMA per coefficient, as
// vec_gelu.go's horner.
func (g *gen) horner(poly string, v, dst string) {
	g.p("\tVMOVUPD %s, %s", gc(poly+"0"), dst)
	for i := 1; i < polyLen(poly); i++ {
		g.p("\tVFMADD213PD %s, %s, %s // %s = %s·%s + %s%d", gc(fmt.Sprintf("%s%d", poly, i)), v, dst, dst, dst, v, poly, i)
	}
}

// gelu emits vecGeluAVX512(dst, x, gy *float32, n int): the GELU forward (gy
// nil) or backward of geluGo, eight float64 lanes at a time. Every lane's erf
// starts as ±1 (|u| ≥ 6) and the pieces for [1.25, 6), [0.84375, 1.25) and
// [0, 0.84375) overwrite it in turn, each computed only when some lane needs
// it and moved in under the mask of its upper bound; NaN lanes keep u.
func (g *gen) gelu(x isa) {
	if !x.masks {
		panic("vecgen: the GELU loop needs AVX-512 masks")
	}
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
		g.erfBody(label)
		if !bwd {
			g.p("\tVADDPD %s, Z3, Z4 // 1 + erf", gc("one"))
			g.p("\tVMULPD %s, Z0, Z5 // 0.5·x", gc("half"))
			g.p("\tVMULPD Z4, Z5, Z5")
		} else {
			g.p("\tVADDPD %s, Z3, Z4", gc("one"))
			g.p("\tVMULPD %s, Z4, Z4 // cdf", gc("half"))
			g.p("\tVMULPD %s, Z0, Z10", gc("neghalf"))
			g.p("\tVMULPD Z0, Z10, Z10 // -0.5·x·x")
			for _, l := range expCore(x, 10, 11, 12, 13, 14, 1) {
				g.p("%s", l)
			}
			g.p("\tVMULPD %s, Z13, Z13 // pdf", gc("invsqrt2pi"))
			g.p("\tVFMADD231PD Z0, Z13, Z4 // cdf + x·pdf")
			g.p("\tVCVTPS2PD (DX), Z20")
			g.p("\tVMULPD Z20, Z4, Z5")
			g.p("\tADDQ $32, DX")
		}
		g.p("\tVCVTPD2PS Z5, Y5")
		g.p("\tVMOVUPS Y5, (DI)")
		g.p("\tADDQ $32, SI")
		g.p("\tADDQ $32, DI")
		g.p("\tSUBQ $8, CX")
		g.p("\tJMP %s", label)
	}
	g.p("")
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}

// erfBody emits the load of eight x (Z0, as float64), u = x/√2 (Z1), |u| (Z2)
// and erf(u) (Z3), as vec_gelu.go's erfF64; labels start with label. Each
// piece's numerator and denominator go into Z5 and Z6 under its lanes' mask,
// one VDIVPD makes every lane's quotient, and the pieces then finish in turn.
func (g *gen) erfBody(label string) {
	g.p("\tVCVTPS2PD (SI), Z0")
	g.p("\tVDIVPD %s, Z0, Z1 // u = x/√2", gc("sqrt2"))
	g.p("\tVPANDQ %s, Z1, Z2 // a = |u|", gc("abs"))
	g.p("\tVPANDQ %s, Z1, Z9", gc("sign"))
	g.p("\tVPORQ %s, Z9, Z3 // ±1", gc("one"))

	// [1.25, 6): R/S in s = (1/a)², ra/sa or rb/sb; 1/a kept in Z8.
	g.p("\tVCMPPD $0x1d, %s, Z2, K5 // a >= 1.25", gc("b"))
	g.p("\tKORTESTW K5, K5")
	g.p("\tJZ %s_numb", label)
	g.p("\tVMOVUPD %s, Z4", gc("one"))
	g.p("\tVDIVPD Z2, Z4, Z8 // 1/a")
	g.p("\tVMULPD Z8, Z8, Z4 // s")
	g.horner("ra", "Z4", "Z5")
	g.horner("sa", "Z4", "Z6")
	g.p("\tVCMPPD $0x1d, %s, Z2, K3 // a >= 1/0.35", gc("c"))
	g.p("\tKORTESTW K3, K3")
	g.p("\tJZ %s_numb", label)
	g.horner("rb", "Z4", "Z7")
	g.p("\tVMOVAPD Z7, K3, Z5")
	g.horner("sb", "Z4", "Z7")
	g.p("\tVMOVAPD Z7, K3, Z6")

	// [0.84375, 1.25): P/Q in s = a - 1.
	g.p("%s_numb:", label)
	g.p("\tVCMPPD $0x1d, %s, Z2, K2 // a >= 0.84375", gc("a"))
	g.p("\tKORTESTW K2, K2")
	g.p("\tJZ %s_numa", label)
	g.p("\tVSUBPD %s, Z2, Z4 // s = a - 1", gc("one"))
	g.horner("pa", "Z4", "Z7")
	g.horner("qa", "Z4", "Z9")
	g.p("\tVCMPPD $0x%02x, %s, Z2, K4 // a < 1.25", cmpLTOQ, gc("b"))
	g.p("\tVMOVAPD Z7, K4, Z5")
	g.p("\tVMOVAPD Z9, K4, Z6")

	// [0, 0.84375): P/Q in z = u².
	g.p("%s_numa:", label)
	g.p("\tVCMPPD $0x%02x, %s, Z2, K2 // a < 0.84375", cmpLTOQ, gc("a"))
	g.p("\tKORTESTW K2, K2")
	g.p("\tJZ %s_div", label)
	g.p("\tVMULPD Z1, Z1, Z4 // z = u·u")
	g.horner("pp", "Z4", "Z7")
	g.horner("qq", "Z4", "Z9")
	g.p("\tVMOVAPD Z7, K2, Z5")
	g.p("\tVMOVAPD Z9, K2, Z6")

	g.p("%s_div:", label)
	g.p("\tVDIVPD Z6, Z5, Z5 // every piece's quotient")

	// [1.25, 6): 1 - erfc.
	g.p("\tKORTESTW K5, K5")
	g.p("\tJZ %s_skipc", label)
	g.p("\tVPANDQ %s, Z2, Z7 // z", gc("hi"))
	g.p("\tVMOVUPD %s, Z10", gc("m05625"))
	g.p("\tVFNMADD231PD Z7, Z7, Z10 // -z·z - 0.5625")
	g.p("\tVSUBPD Z2, Z7, Z15 // z - a")
	g.p("\tVADDPD Z2, Z7, Z9 // z + a")
	g.p("\tVFMADD213PD Z5, Z9, Z15 // (z-a)(z+a) + R/S")
	for _, l := range expCore(isas[0], 10, 11, 12, 13, 14, 1) {
		g.p("%s", l)
	}
	for _, l := range expCore(isas[0], 15, 16, 17, 18, 19, 1) {
		g.p("%s", l)
	}
	g.p("\tVMULPD Z18, Z13, Z13")
	g.p("\tVMULPD Z8, Z13, Z13 // erfc")
	g.p("\tVMOVUPD %s, Z4", gc("one"))
	g.p("\tVSUBPD Z13, Z4, Z4 // 1 - erfc")
	g.p("\tVPANDQ %s, Z1, Z9", gc("sign"))
	g.p("\tVPORQ Z9, Z4, Z4")
	g.p("\tVCMPPD $0x%02x, %s, Z2, K4 // a < 6", cmpLTOQ, gc("d"))
	g.p("\tVMOVAPD Z4, K4, Z3")
	g.p("%s_skipc:", label)

	// [0.84375, 1.25): erx + P/Q.
	g.p("\tVCMPPD $0x1d, %s, Z2, K2 // a >= 0.84375", gc("a"))
	g.p("\tKORTESTW K2, K2")
	g.p("\tJZ %s_skipb", label)
	g.p("\tVADDPD %s, Z5, Z4", gc("erx"))
	g.p("\tVPANDQ %s, Z1, Z9", gc("sign"))
	g.p("\tVPORQ Z9, Z4, Z4")
	g.p("\tVCMPPD $0x%02x, %s, Z2, K4 // a < 1.25", cmpLTOQ, gc("b"))
	g.p("\tVMOVAPD Z4, K4, Z3")
	g.p("%s_skipb:", label)

	// [0, 0.84375): u + u·P/Q.
	g.p("\tVCMPPD $0x%02x, %s, Z2, K2 // a < 0.84375", cmpLTOQ, gc("a"))
	g.p("\tVFMADD213PD Z1, Z1, Z5 // u·y + u")
	g.p("\tVMOVAPD Z5, K2, Z3")

	g.p("\tVCMPPD $0x%02x, Z1, Z1, K2 // NaN", cmpUnord)
	g.p("\tVMOVAPD Z1, K2, Z3")
}
