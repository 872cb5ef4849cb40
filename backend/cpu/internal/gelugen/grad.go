package main

import "fmt"

// The frame of geluCompactGradAVX512: kernel's (the packed lanes of the second and
// third pieces at 0 and S, the masks at 2S), then the factors T of those packed lanes
// at gradT bytes past their x values.
const (
	gradT     = 2*scratchS + 4*block/16
	gradFrame = gradT + 2*scratchS
)

// gradStore emits y = x·Φ into register 13 and T = Φ + x·φ into 16 (Φ in register
// phi, exp(-x²/2) in 4), with result's instructions and operand order, and stores them
// over the packed x at SI and gradT bytes past it.
func (g *gen) gradStore(phi int) {
	g.gradResults(phi)
	g.p("\tVMOVUPS Z13, (SI)")
	g.p("\tVMOVUPS Z16, %d(SI)", gradT)
}

// gradResults emits y (13) and T (16) as gradStore says, without the stores.
func (g *gen) gradResults(phi int) {
	g.p("\tVMULPS %s, Z0, Z13 // y = x·Φ", r(phi))
	g.p("\tVMULPS %s, Z4, Z16 // φ", gc("invsqrt2pi"))
	g.p("\tVFMADD213PS %s, Z0, Z16 // T = Φ + x·φ", r(phi))
}

// kernelGrad emits geluCompactGradAVX512(y, t, x *float32, n int) bool: kernel's
// passes with the backward's pieces (Φ and exp(-x²/2)), storing both the forward
// y = x·Φ and the backward's factor T = Φ + x·φ, the value kernel's backward
// multiplies gy by (VMULPS with T first), so that the backward becomes gx = T·gy.
func (g *gen) kernelGrad() {
	const name = "geluCompactGradAVX512"
	const S = scratchS
	g.p("")
	g.p("// func %s(y, t, x *float32, n int) bool", name)
	g.p("// The frame (not zeroed, no pointers) holds the packed lanes, the masks and the")
	g.p("// packed lanes' factors T.")
	g.p("TEXT ·%s(SB), 0, $%d-33", name, gradFrame)
	g.p("\tMOVQ y+0(FP), DI")
	g.p("\tMOVQ t+8(FP), R8")
	g.p("\tMOVQ x+16(FP), SI")
	g.p("\tMOVQ n+24(FP), CX")
	g.classify(name)
	lab := name + "_grad"
	g.p("")
	g.p("%s:", lab)
	g.p("\tLEAQ 0(BX), SI")
	g.pieceWith(lab+"_b", "R9", func() int { return g.bPiece(true) }, g.gradStore)
	g.p("\tLEAQ %d(BX), SI", S)
	g.pieceWith(lab+"_c", "R10", func() int { return g.cPiece(lab, true) }, g.gradStore)
	g.p("\tMOVQ R13, SI")
	g.p("\tLEAQ 0(BX), R9")
	g.p("\tLEAQ %d(BX), R10", S)
	g.p("\tLEAQ %d(BX), R11", 2*S)
	g.p("%s_a:", lab)
	g.p("\tVMOVUPS (SI), Z0")
	g.gradResults(g.aPiece(true))
	for i, ptr := range []string{"R9", "R10"} {
		k := fmt.Sprintf("K%d", i+2)
		g.p("\tKMOVW %d(R11), %s", 2*i, k)
		g.p("\tVEXPANDPS (%s), %s, Z13", ptr, k)
		g.p("\tVEXPANDPS %d(%s), %s, Z16", gradT, ptr, k)
		g.p("\tMOVWLZX %d(R11), AX", 2*i)
		g.p("\tPOPCNTL AX, AX")
		g.p("\tLEAQ (%s)(AX*4), %s", ptr, ptr)
	}
	g.p("\tVMOVUPS Z13, (DI)")
	g.p("\tVMOVUPS Z16, (R8)")
	g.lastPassEnd(lab, "SI", "DI", "R8")
	g.nanExit(name)
}
