// Command gelugen writes backend/cpu/gelu_f32_amd64.s: geluCompactAVX512, the
// float32 exact-erf GELU (forward and backward) of vec_gelu.go by lane compaction, and
// geluCompactGradAVX512 (grad.go), its forward that also writes the backward's factor.
// vecgen's vecGeluAVX512 runs every piece of geluParts that some lane of a 16-lane
// vector needs, and activations put lanes of several pieces in most vectors; this loop
// takes a block of up to 1024 elements in three passes:
//
//  1. classify: from |x| against the exact thresholds of a = |x·(1/√2)| (0.84375 and
//     1.25), VCOMPRESSPS packs the x values of the second and third pieces densely into
//     a buffer each (a register compress and a full store, the next overwriting the
//     tail; scratch in the frame) and their lane masks are kept; a NaN anywhere (the
//     largest |x| bits above +Inf's) makes the call return false with dst untouched,
//     for the caller to use vecGeluAVX512 on that block;
//  2. the second and third pieces each run over their own packed lanes, in place;
//  3. the first piece runs over every lane of the block in order, and VEXPANDPS puts
//     the other pieces' results over it under their masks; the backward multiplies by
//     gy (VMULPS with the factor first, as vecGeluAVX512); one store.
//
// Every lane of a piece gets exactly the instructions, in the same operand order, that
// vecGeluAVX512 applies to a lane of that piece (uh, ul, the Horner steps and VDIVPS,
// exp32, the final steps, y = x·Φ or fma(x, φ, Φ)), so results are bit for bit equal.
// Tried and dropped: packing the first piece's lanes too (its compress and expand cost
// about what its padding lanes save) and interleaving two vectors of the last pass (no
// change: the loop is bound by the vector ports, not by its chains' latency).
//
// Run it from backend/cpu:
//
//	go generate ./backend/cpu/   (or: go run ./internal/gelugen -o gelu_f32_amd64.s)
//
// TestGeluCompactGenerated checks that the committed file is its output;
// gelu_f32_test.go pits the loop against vecGeluAVX512 and geluGo bit for bit.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"math"
	"os"

	"github.com/gamp-ml/gamp/backend/cpu/internal/gelucoef"
)

// block is the most elements one call takes (geluBlock in gelu_f32_amd64.go).
const block = 1024

// Compare predicates (VCMPPS imm8).
const (
	cmpLTOQ = 0x11 // src1 < src2, false on NaN
	cmpGEOQ = 0x1d // src1 ≥ src2, false on NaN
)

// consts are the float32 constants of the loop, each stored sixteen times: those of
// internal/vecgen/gelu.go, from package gelucoef, and the loop's own thresholds.
var consts = func() []struct {
	name string
	bits uint32
} {
	type c = struct {
		name string
		bits uint32
	}
	f := func(name string, v float64) c { return c{name, math.Float32bits(float32(v))} }
	inv := float32(math.Sqrt2 / 2)
	var cs []c
	for _, k := range gelucoef.Scalars() {
		cs = append(cs, f(k.Name, k.V))
	}
	cs = append(cs, c{"abs", 0x7fffffff}, c{"sign", 0x80000000}, c{"bias", 127},
		c{"ta", thresh(inv, 0.84375)}, c{"tb", thresh(inv, 1.25)}, c{"inf", 0x7f800000})
	for _, p := range gelucoef.Polys {
		for i, v := range p.C {
			cs = append(cs, f(fmt.Sprintf("%s%d", p.Name, i), v))
		}
	}
	return cs
}()

// thresh returns the bits of the least float32 t ≥ 0 with t·inv, rounded to float32,
// at least bound: as rounding is monotonic, |x·inv| < bound exactly when |x| < t, so
// the pieces are told apart from |x| without forming uh.
func thresh(inv float32, bound float32) uint32 {
	t := bound / inv
	for float32(t*inv) >= bound {
		t = math.Nextafter32(t, 0)
	}
	for float32(t*inv) < bound {
		t = math.Nextafter32(t, 1e30)
	}
	return math.Float32bits(t)
}

// gc returns the memory operand of the named constant.
func gc(name string) string {
	for i, c := range consts {
		if c.name == name {
			return fmt.Sprintf("gelucx<>+%d(SB)", 64*i)
		}
	}
	panic("gelugen: no constant " + name)
}

func has(name string) bool {
	for _, c := range consts {
		if c.name == name {
			return true
		}
	}
	return false
}

type gen struct{ b bytes.Buffer }

func (g *gen) p(format string, args ...any) { fmt.Fprintf(&g.b, format+"\n", args...) }

func r(i int) string { return fmt.Sprintf("Z%d", i) }

// horner emits dst = poly(v), one FMA per coefficient, as vec_gelu.go's horner32.
func (g *gen) horner(poly string, v, dst int) {
	g.p("\tVMOVUPS %s, %s", gc(poly+"0"), r(dst))
	for i := 1; has(fmt.Sprintf("%s%d", poly, i)); i++ {
		g.p("\tVFMADD213PS %s, %s, %s // p = p·v + %s%d", gc(fmt.Sprintf("%s%d", poly, i)), r(v), r(dst), poly, i)
	}
}

// exp32 emits p = exp32(hi, lo) as vecGeluAVX512 does, k, rr and i scratch, K2 too.
// With cut false it leaves out the flush to 0 below hi < -86 (expCut32): the first
// piece's lanes have hi = -x²/2 > -0.72, and the other lanes' results of that pass
// are replaced.
func (g *gen) exp32(hi, lo, p, k, rr, i int, cut bool) {
	g.p("\tVADDPS %s, %s, %s // hi + lo", r(hi), r(lo), r(k))
	g.p("\tVMULPS %s, %s, %s", gc("log2e"), r(k), r(k))
	g.p("\tVRNDSCALEPS $8, %s, %s // k, to nearest even", r(k), r(k))
	g.p("\tVMOVAPS %s, %s", r(hi), r(rr))
	g.p("\tVFNMADD231PS %s, %s, %s // r = hi - k·ln2hi", gc("ln2hi"), r(k), r(rr))
	g.p("\tVFNMADD231PS %s, %s, %s // r -= k·ln2lo", gc("ln2lo"), r(k), r(rr))
	g.p("\tVADDPS %s, %s, %s // r += lo", r(lo), r(rr), r(rr))
	g.horner("ex", rr, p)
	g.p("\tVCVTPS2DQ %s, %s", r(k), r(i))
	g.p("\tVPADDD %s, %s, %s", gc("bias"), r(i), r(i))
	g.p("\tVPSLLD $23, %s, %s // 2^k", r(i), r(i))
	g.p("\tVMULPS %s, %s, %s", r(i), r(p), r(p))
	if cut {
		g.p("\tVCMPPS $0x%02x, %s, %s, K2 // hi < cut", cmpLTOQ, gc("cut"), r(hi))
		g.p("\tVPXORD %s, %s, K2, %s", r(p), r(p), r(p))
	}
}

// uhul emits uh (1) and ul (2) of x (0).
func (g *gen) uhul() {
	g.p("\tVMULPS %s, Z0, Z1 // uh = x·(1/√2)", gc("invsqrt2"))
	g.p("\tVMOVAPS Z1, Z2")
	g.p("\tVFMSUB231PS %s, Z0, Z2 // ul = x·(1/√2) - uh", gc("invsqrt2"))
	g.p("\tVFMADD231PS %s, Z0, Z2 // ul += x·lo", gc("invsqrt2lo"))
}

// sq emits s = x·x (9), sl = x·x - s (15) and hi = -s/2 (6), and for the backward
// exp(-x²/2) into 4 (10, 11, 12 and 9 scratch; cut as for exp32).
func (g *gen) sq(bwd, cut bool) {
	g.p("\tVMULPS Z0, Z0, Z9 // s = x·x")
	g.p("\tVMOVAPS Z9, Z15")
	g.p("\tVFMSUB231PS Z0, Z0, Z15 // sl = x·x - s")
	g.p("\tVMULPS %s, Z9, Z6 // hi = -s/2", gc("neghalf"))
	if bwd {
		g.p("\tVMULPS %s, Z15, Z10 // -sl/2", gc("neghalf"))
		g.exp32(6, 10, 4, 11, 12, 9, cut)
	}
}

// piece emits the loop over one piece's buffer, SI to its end in end, in place: the
// lane's Φ into register phi by code, then y = x·Φ or fma(x, φ, Φ).
func (g *gen) piece(label, end string, bwd bool, code func() int) {
	g.pieceWith(label, end, code, func(phi int) {
		g.result(phi, bwd)
		g.p("\tVMOVUPS Z13, (SI)")
	})
}

// pieceWith is piece with the results and their stores emitted by store, given the
// register holding Φ.
func (g *gen) pieceWith(label, end string, code func() int, store func(phi int)) {
	g.p("%s:", label)
	g.p("\tCMPQ SI, %s", end)
	g.p("\tJAE %s_end", label)
	g.p("\tVMOVUPS (SI), Z0")
	store(code())
	g.p("\tADDQ $64, SI")
	g.p("\tJMP %s", label)
	g.p("%s_end:", label)
}

// aPiece emits the first piece, a < 0.84375: ½ + ½uh + ½(uh·P/Q + ul), P/Q in z =
// uh² (register 14, formed once for both polynomials and erf'), on x in register 0;
// Φ is left in register 10. The backward's exp32 has no flush to 0 (see exp32).
func (g *gen) aPiece(bwd bool) int {
	g.uhul()
	g.p("\tVMULPS Z1, Z1, Z14 // z = uh·uh")
	g.horner("pp", 14, 11)
	g.horner("qq", 14, 12)
	g.p("\tVDIVPS Z12, Z11, Z5 // P/Q")
	if bwd {
		g.sq(true, false)
	}
	g.horner("dm", 14, 9)
	g.p("\tVMULPS Z2, Z9, Z9 // ul·erf'(uh)")
	g.p("\tVFMADD231PS Z5, Z1, Z9 // t = uh·q + ul·erf'")
	g.p("\tVMOVUPS %s, Z10", gc("half"))
	g.p("\tVFMADD231PS %s, Z1, Z10 // uh·½ + ½", gc("half"))
	g.p("\tVFMADD231PS %s, Z9, Z10 // t·½ + …", gc("half"))
	return 10
}

// result emits y = x·Φ (forward) or fma(x, φ, Φ) (backward) into register 13, Φ in
// register phi, exp(-x²/2) in 4.
func (g *gen) result(phi int, bwd bool) {
	if !bwd {
		g.p("\tVMULPS %s, Z0, Z13 // y = x·Φ", r(phi))
	} else {
		g.p("\tVMULPS %s, Z4, Z13 // φ", gc("invsqrt2pi"))
		g.p("\tVFMADD213PS %s, Z0, Z13 // Φ + x·φ", r(phi))
	}
}

// Scratch in the frame: the packed lanes of the second and third pieces at 0 and S
// (16 lanes of slack each), then two 16-bit lane masks per vector.
const (
	scratchS = 4 * (block + 16)
	frame    = 2*scratchS + 4*block/16
)

func (g *gen) kernel() {
	const name = "geluCompactAVX512"
	const S = scratchS
	g.p("")
	g.p("// func %s(dst, x, gy *float32, n int) bool", name)
	g.p("// The frame (not zeroed, no pointers) holds the packed lanes and the masks.")
	g.p("TEXT ·%s(SB), 0, $%d-33", name, frame)
	g.p("\tMOVQ dst+0(FP), DI")
	g.p("\tMOVQ x+8(FP), SI")
	g.p("\tMOVQ gy+16(FP), DX")
	g.p("\tMOVQ n+24(FP), CX")
	g.classify(name)
	g.p("\tTESTQ DX, DX")
	g.p("\tJNZ %s_bwd", name)
	for _, bwd := range []bool{false, true} {
		lab := name + "_fwd"
		if bwd {
			lab = name + "_bwd"
		}
		g.p("")
		g.p("%s:", lab)
		// [0.84375, 1.25): ½(1 + erx) + ½P/Q, or ½(1 - erx) - ½P/Q for x < 0.
		g.p("\tLEAQ 0(BX), SI")
		g.piece(lab+"_b", "R9", bwd, func() int { return g.bPiece(bwd) })
		// a ≥ 1.25: erfc = exp(hi + (R/S - 0.5625 - sl/2))·ia; Φ = ½erfc or 1 - ½erfc.
		g.p("\tLEAQ %d(BX), SI", S)
		g.piece(lab+"_c", "R10", bwd, func() int { return g.cPiece(lab, bwd) })
		// The first piece over every lane, in order, the other pieces' results
		// expanded over it under their masks.
		g.p("\tMOVQ R13, SI")
		g.p("\tLEAQ 0(BX), R9")
		g.p("\tLEAQ %d(BX), R10", S)
		g.p("\tLEAQ %d(BX), R11", 2*S)
		g.p("%s_a:", lab)
		g.p("\tVMOVUPS (SI), Z0")
		g.result(g.aPiece(bwd), bwd)
		for i, ptr := range []string{"R9", "R10"} {
			k := fmt.Sprintf("K%d", i+2)
			g.p("\tKMOVW %d(R11), %s", 2*i, k)
			g.p("\tVEXPANDPS (%s), %s, Z13", ptr, k)
			g.p("\tMOVWLZX %d(R11), AX", 2*i)
			g.p("\tPOPCNTL AX, AX")
			g.p("\tLEAQ (%s)(AX*4), %s", ptr, ptr)
		}
		if bwd {
			g.p("\tVMULPS (DX), Z13, Z13 // gy·(Φ + x·φ)")
			g.p("\tADDQ $64, DX")
		}
		g.p("\tVMOVUPS Z13, (DI)")
		g.lastPassEnd(lab, "SI", "DI")
	}
	g.nanExit(name)
}

// lastPassEnd ends the last pass's loop at lab_a: the pointers ptrs each advanced by a
// vector, the mask pointer R11 by two masks, n in R12 by 16 lanes, then the return of
// true once the block is done.
func (g *gen) lastPassEnd(lab string, ptrs ...string) {
	for _, r := range ptrs {
		g.p("\tADDQ $64, %s", r)
	}
	g.p("\tADDQ $4, R11")
	g.p("\tSUBQ $16, R12")
	g.p("\tJNZ %s_a", lab)
	g.p("\tMOVB $1, ret+32(FP)")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}

// nanExit emits name_nan, where classify jumps when some x is NaN: return false.
func (g *gen) nanExit(name string) {
	g.p("")
	g.p("%s_nan:", name)
	g.p("\tMOVB $0, ret+32(FP)")
	g.p("\tVZEROUPPER")
	g.p("\tRET")
}

// classify emits the frame's scratch pointers (BX, R9, R10, R11; x kept in R13, n in
// R12) and the first pass over the block, x from SI and n in CX: the lanes of the
// second and third pieces packed, their masks stored, and a jump to name_nan when
// some x is NaN.
func (g *gen) classify(name string) {
	const S = scratchS
	g.p("\tLEAQ 0(SP), BX // the frame's scratch")
	g.p("\tLEAQ 0(BX), R9")
	g.p("\tLEAQ %d(BX), R10", S)
	g.p("\tLEAQ %d(BX), R11", 2*S)
	g.p("\tMOVQ SI, R13")
	g.p("\tMOVQ CX, R12")
	g.p("\tVPXORD Z20, Z20, Z20 // the largest |x| bits: > +Inf's for a NaN")
	g.p("")
	// Classify: only the lanes of the second and third pieces are packed; the first
	// piece runs over every lane in the last pass and the others' results replace it.
	g.p("%s_class:", name)
	g.p("\tVMOVUPS (SI), Z0")
	g.p("\tVPANDD %s, Z0, Z3 // |x|", gc("abs"))
	g.p("\tVPMAXUD Z3, Z20, Z20")
	g.p("\tVCMPPS $0x%02x, %s, Z3, K1 // |x| >= ta: a >= 0.84375", cmpGEOQ, gc("ta"))
	g.p("\tVCMPPS $0x%02x, %s, Z3, K1, K2 // and |x| < tb: a < 1.25", cmpLTOQ, gc("tb"))
	g.p("\tVCMPPS $0x%02x, %s, Z3, K3 // a >= 1.25", cmpGEOQ, gc("tb"))
	for i, ptr := range []string{"R9", "R10"} {
		k := fmt.Sprintf("K%d", i+2)
		g.p("\tVCOMPRESSPS Z0, %s, %s", k, r(5+i))
		g.p("\tVMOVUPS %s, (%s)", r(5+i), ptr)
		g.p("\tKMOVW %s, AX", k)
		g.p("\tMOVW AX, %d(R11)", 2*i)
		g.p("\tPOPCNTL AX, AX")
		g.p("\tLEAQ (%s)(AX*4), %s", ptr, ptr)
	}
	g.p("\tADDQ $64, SI")
	g.p("\tADDQ $4, R11")
	g.p("\tSUBQ $16, CX")
	g.p("\tJNZ %s_class", name)
	g.p("\tVPCMPUD $6, %s, Z20, K1 // |x| bits > +Inf's: NaN", gc("inf"))
	g.p("\tKORTESTW K1, K1")
	g.p("\tJNZ %s_nan", name)
}

// bPiece emits the second piece, a in [0.84375, 1.25): ½(1 + erx) + ½P/Q, or
// ½(1 - erx) - ½P/Q for x < 0, on x in register 0 (exp(-x²/2) into 4 for the
// backward); Φ is left in register 9.
func (g *gen) bPiece(bwd bool) int {
	g.uhul()
	g.p("\tVPANDD %s, Z1, Z3 // a = |uh|", gc("abs"))
	g.p("\tVPANDD %s, Z0, Z9", gc("sign"))
	g.p("\tVPXORD Z2, Z9, Z9 // ul with u's sign")
	g.p("\tVSUBPS %s, Z3, Z10 // a - 1", gc("one"))
	g.p("\tVADDPS Z9, Z10, Z10 // s")
	g.horner("pa", 10, 11)
	g.horner("qa", 10, 12)
	g.p("\tVDIVPS Z12, Z11, Z5 // P/Q")
	if bwd {
		g.sq(true, true)
	}
	g.p("\tVMOVUPS %s, Z9", gc("chp"))
	g.p("\tVFMADD231PS %s, Z5, Z9", gc("half"))
	g.p("\tVMOVUPS %s, Z10", gc("chm"))
	g.p("\tVFNMADD231PS %s, Z5, Z10", gc("half"))
	g.p("\tVCMPPS $0x%02x, %s, Z0, K2 // x < 0", cmpLTOQ, gc("zero"))
	g.p("\tVMOVAPS Z10, K2, Z9")
	return 9
}

// cPiece emits the third piece, a ≥ 1.25: erfc = exp(hi + (R/S - 0.5625 - sl/2))·ia;
// Φ = ½erfc or 1 - ½erfc, left in register 11 (exp(-x²/2) into 4 for the backward).
// lab prefixes its labels.
func (g *gen) cPiece(lab string, bwd bool) int {
	g.p("\tVMULPS %s, Z0, Z1 // uh", gc("invsqrt2"))
	g.p("\tVPANDD %s, Z1, Z3 // a = |uh|", gc("abs"))
	g.p("\tVPANDD %s, Z0, Z9 // |x|", gc("abs"))
	g.p("\tVMOVUPS %s, Z8", gc("sqrt2"))
	g.p("\tVDIVPS Z9, Z8, Z8 // ia = √2/|x|")
	g.p("\tVMULPS Z8, Z8, Z9 // q = ia·ia")
	g.horner("ra", 9, 5)
	g.horner("sa", 9, 6)
	g.p("\tVCMPPS $0x%02x, %s, Z3, K2 // a >= 1/0.35", cmpGEOQ, gc("c"))
	g.p("\tKORTESTW K2, K2")
	g.p("\tJZ %s_c_div", lab)
	g.horner("rb", 9, 10)
	g.p("\tVMOVAPS Z10, K2, Z5")
	g.horner("sb", 9, 10)
	g.p("\tVMOVAPS Z10, K2, Z6")
	g.p("%s_c_div:", lab)
	g.p("\tVDIVPS Z6, Z5, Z5 // R/S")
	g.sq(bwd, true)
	g.p("\tVADDPS %s, Z5, Z10 // R/S - 0.5625", gc("m05625"))
	g.p("\tVFMADD231PS %s, Z15, Z10 // - sl/2", gc("neghalf"))
	g.exp32(6, 10, 9, 11, 12, 15, true)
	g.p("\tVMULPS Z8, Z9, Z9 // erfc")
	g.p("\tVMULPS %s, Z9, Z10 // ½erfc", gc("half"))
	g.p("\tVMOVUPS %s, Z11", gc("one"))
	g.p("\tVFNMADD231PS %s, Z9, Z11 // 1 - ½erfc", gc("half"))
	g.p("\tVCMPPS $0x%02x, %s, Z0, K2 // x < 0", cmpLTOQ, gc("zero"))
	g.p("\tVMOVAPS Z10, K2, Z11")
	return 11
}

func main() {
	out := flag.String("o", "gelu_f32_amd64.s", "output file")
	flag.Parse()
	g := &gen{}
	g.p("// Code generated by internal/gelugen; DO NOT EDIT.")
	g.p("")
	g.p("//go:build amd64 && !purego")
	g.p("")
	g.p("#include \"textflag.h\"")
	g.p("")
	g.p("// Constants of geluCompactAVX512, float32, each sixteen times.")
	for i, c := range consts {
		for j := range 8 {
			g.p("DATA gelucx<>+%d(SB)/8, $0x%08x%08x // %s", 64*i+8*j, c.bits, c.bits, c.name)
		}
	}
	g.p("GLOBL gelucx<>(SB), RODATA|NOPTR, $%d", 64*len(consts))
	g.kernel()
	g.kernelGrad()
	if err := os.WriteFile(*out, g.b.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
