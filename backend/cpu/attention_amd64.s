//go:build amd64 && !purego

#include "textflag.h"

// EXP_REDUCE: Z16 = fma(Z16, Z1, -Z2), the argument; Z17 = k = round(Z16·log₂e);
// Z18 = r = Z16 - k·ln2 in two steps (Z3 = log₂e, Z4 and Z5 = ln2 high and low).
#define EXP_REDUCE \
	VFMSUB213PS Z2, Z1, Z16 \
	VMULPS Z3, Z16, Z17 \
	VRNDSCALEPS $0, Z17, Z17 \
	VMOVAPS Z16, Z18 \
	VFNMADD231PS Z4, Z17, Z18 \
	VFNMADD231PS Z5, Z17, Z18

// EXP_BODY: Z19 = attnExp32(fma(Z16, Z1, -Z2)) per lane; Z16 keeps the argument;
// clobbers Z17, Z18, K2. Lanes where the argument is below the cut (not NaN) are 0.
// 2^k is applied by VSCALEFPS, exact here as the multiplication by 2^k is: k ≥ -124
// wherever the cut keeps a lane.
#define EXP_BODY \
	EXP_REDUCE \
	VMOVAPS Z6, Z19 \
	VFMADD213PS Z7, Z18, Z19 \
	VFMADD213PS Z8, Z18, Z19 \
	VFMADD213PS Z9, Z18, Z19 \
	VFMADD213PS Z10, Z18, Z19 \
	VFMADD213PS Z11, Z18, Z19 \
	VFMADD213PS Z12, Z18, Z19 \
	VFMADD213PS Z13, Z18, Z19 \
	VSCALEFPS Z17, Z19, Z19 \
	VCMPPS $0x15, Z14, Z16, K2 \
	VMOVAPS.Z Z19, K2, Z19

// EXP_BODY_M is EXP_BODY with the polynomial's constants broadcast from the
// attnExpConsts at R15 (Z6-Z13 free).
#define EXP_BODY_M \
	EXP_REDUCE \
	VBROADCASTSS 16(R15), Z19 \
	VFMADD213PS.BCST 20(R15), Z18, Z19 \
	VFMADD213PS.BCST 24(R15), Z18, Z19 \
	VFMADD213PS.BCST 28(R15), Z18, Z19 \
	VFMADD213PS.BCST 32(R15), Z18, Z19 \
	VFMADD213PS.BCST 36(R15), Z18, Z19 \
	VFMADD213PS.BCST 40(R15), Z18, Z19 \
	VFMADD213PS.BCST 44(R15), Z18, Z19 \
	VSCALEFPS Z17, Z19, Z19 \
	VCMPPS $0x15, Z14, Z16, K2 \
	VMOVAPS.Z Z19, K2, Z19

// BF16_ROUND: Z23 = the bf16 bits of Z19's lanes as half.BFloat16FromFloat32 rounds them
// (x + 0x7fff + (x>>16)&1) >> 16, a NaN truncated and quieted (| 0x40); needs Z25 =
// 0x7fff, Z26 = 1, Z27 = 0x40; clobbers Z21, Z22, K3.
#define BF16_ROUND \
	VPSRLD $16, Z19, Z21 \
	VPANDD Z26, Z21, Z22 \
	VPADDD Z25, Z19, Z23 \
	VPADDD Z22, Z23, Z23 \
	VPSRLD $16, Z23, Z23 \
	VCMPPS $3, Z19, Z19, K3 \
	VPORD Z27, Z21, K3, Z23

#define BF16_CONSTS \
	MOVL $0x7fff, AX \
	VPBROADCASTD AX, Z25 \
	MOVL $1, AX \
	VPBROADCASTD AX, Z26 \
	MOVL $0x40, AX \
	VPBROADCASTD AX, Z27

// func attnExpAVX512(x *float32, n int, scale, shift float32, c *[12]float32, lo *uint16) float32
//
// Per lane, as attnExp32(fma32(x, scale, -shift)):
//   Z16 = x·scale - shift (VFMSUB213PS, one rounding)
//   Z17 = roundeven(Z16·log₂e)
//   Z18 = Z16 - Z17·ln2hi - Z17·ln2lo (two VFNMADD231PS)
//   Z19 = Horner(expC, Z18) (VFMADD213PS)
//   e   = Z19 · 2^Z17, zeroed where !(Z16 >= cut is unordered-false), i.e. Z16 < cut.
TEXT ·attnExpAVX512(SB), NOSPLIT, $0-44
	MOVQ lo+32(FP), DI
	BF16_CONSTS
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS scale+16(FP), Z1
	VBROADCASTSS shift+20(FP), Z2
	MOVQ c+24(FP), R8
	VBROADCASTSS 0(R8), Z3
	VBROADCASTSS 4(R8), Z4
	VBROADCASTSS 8(R8), Z5
	VBROADCASTSS 12(R8), Z14
	VBROADCASTSS 16(R8), Z6
	VBROADCASTSS 20(R8), Z7
	VBROADCASTSS 24(R8), Z8
	VBROADCASTSS 28(R8), Z9
	VBROADCASTSS 32(R8), Z10
	VBROADCASTSS 36(R8), Z11
	VBROADCASTSS 40(R8), Z12
	VBROADCASTSS 44(R8), Z13
	MOVL $127, AX
	VPBROADCASTD AX, Z15
	VXORPS Z0, Z0, Z0

attnExpAVX512_loop:
	CMPQ CX, $16
	JBE attnExpAVX512_last
	VMOVUPS 0(SI), Z16
	EXP_BODY
	VMOVUPS Z19, 0(SI)
	VADDPS Z19, Z0, Z0
	TESTQ DI, DI
	JZ attnExpAVX512_next
	BF16_ROUND
	VPMOVDW Z23, 0(DI)
	ADDQ $32, DI

attnExpAVX512_next:
	ADDQ $64, SI
	SUBQ $16, CX
	JMP attnExpAVX512_loop

attnExpAVX512_last:
	// 1 to 16 elements left: K1 = (1<<CX) - 1.
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z 0(SI), K1, Z16
	EXP_BODY
	VMOVUPS Z19, K1, 0(SI)
	VADDPS Z19, Z0, K1, Z0
	TESTQ DI, DI
	JZ attnExpAVX512_sum
	BF16_ROUND
	VPMOVDW Z23, K1, 0(DI)

attnExpAVX512_sum:
	// The lanes' tree: i += i+8, i += i+4, i += i+2, i += i+1.
	VEXTRACTF32X8 $1, Z0, Y1
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VADDPS X1, X0, X0
	VMOVSHDUP X0, X1
	VADDSS X1, X0, X0
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// func attnMaxAVX512(x *float32, n int) float32
//
// attnMaxGo with zmm lanes: VMAXPS (vecMax(lane, x)) a step of sixteen, the last 1–16
// under a lane mask, then the lanes' tree i = vecMax(i, i+8), (i, i+4), (i, i+2), (i, i+1).
TEXT ·attnMaxAVX512(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVL $0xff800000, AX
	VPBROADCASTD AX, Z0

attnMaxAVX512_loop:
	CMPQ CX, $16
	JBE attnMaxAVX512_last
	VMAXPS 0(SI), Z0, Z0
	ADDQ $64, SI
	SUBQ $16, CX
	JMP attnMaxAVX512_loop

attnMaxAVX512_last:
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMAXPS 0(SI), Z0, K1, Z0
	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VMAXPS X1, X0, X0
	VMOVSHDUP X0, X1
	VMAXSS X1, X0, X0
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET


// func attnDSAVX512(dp, p *float32, n int, delta float32, lo *uint16)
//
// dp[i] = p[i]·(dp[i] - delta) (VSUBPS, VMULPS), i < n (n ≥ 1; the last 1–16 under a
// lane mask), and its bf16 rounding to lo[i] when lo is not nil.
TEXT ·attnDSAVX512(SB), NOSPLIT, $0-40
	MOVQ dp+0(FP), SI
	MOVQ p+8(FP), BX
	MOVQ n+16(FP), CX
	VBROADCASTSS delta+24(FP), Z2
	MOVQ lo+32(FP), DI
	BF16_CONSTS

attnDSAVX512_loop:
	CMPQ CX, $16
	JBE attnDSAVX512_last
	VMOVUPS 0(SI), Z19
	VSUBPS Z2, Z19, Z19
	VMULPS 0(BX), Z19, Z19
	VMOVUPS Z19, 0(SI)
	TESTQ DI, DI
	JZ attnDSAVX512_next
	BF16_ROUND
	VPMOVDW Z23, 0(DI)
	ADDQ $32, DI

attnDSAVX512_next:
	ADDQ $64, SI
	ADDQ $64, BX
	SUBQ $16, CX
	JMP attnDSAVX512_loop

attnDSAVX512_last:
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z 0(SI), K1, Z19
	VMOVUPS.Z 0(BX), K1, Z20
	VSUBPS Z2, Z19, Z19
	VMULPS Z20, Z19, Z19
	VMOVUPS Z19, K1, 0(SI)
	TESTQ DI, DI
	JZ attnDSAVX512_done
	BF16_ROUND
	VPMOVDW Z23, K1, 0(DI)

attnDSAVX512_done:
	VZEROUPPER
	RET

// func attnPackTAVX512(dst, src *float32, ld, k, rows, mr int)
//
// attnPackTGo: for p < k, dst[p·mr + i] = src[p·ld + i] for i < rows and 0 for
// rows ≤ i < mr (rows ≤ mr ≤ 16): a zero-masked load and a masked store per p.
TEXT ·attnPackTAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ld+16(FP), R8
	SHLQ $2, R8
	MOVQ k+24(FP), CX
	MOVQ rows+32(FP), BX
	MOVQ mr+40(FP), DX
	MOVL $1, AX
	MOVQ BX, R9
	MOVQ CX, R10
	MOVQ R9, CX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	MOVL $1, AX
	MOVQ DX, CX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K2
	MOVQ R10, CX
	SHLQ $2, DX

attnPackTAVX512_loop:
	TESTQ CX, CX
	JZ attnPackTAVX512_done
	VMOVUPS.Z 0(SI), K1, Z0
	VMOVUPS Z0, K2, 0(DI)
	ADDQ R8, SI
	ADDQ DX, DI
	DECQ CX
	JMP attnPackTAVX512_loop

attnPackTAVX512_done:
	VZEROUPPER
	RET

// func attnExpTileAVX512(x *float32, ld, rows, cols, vis0 int, lse *float32, scale float32, c *[12]float32, lo *uint16, sums *float32)
//
// attnExpTileGo: for each row r < rows of the tile x (row stride ld, as lo's), with
// vis = clamp(r + vis0, 0, cols) and l = lse[r]: the row's cols elements (and lo's) are
// cleared when vis is 0 or l is -Inf; else its first vis are attnExpAVX512's
// exponentials (shift l, bf16 copies to lo when lo is not nil), the rest up to cols
// cleared. With sums not nil, sums[r] is attnExpAVX512's sum (its lanes and tree), 0
// for a cleared row. Z24 holds zeros, Z0 the row's lanes.
TEXT ·attnExpTileAVX512(SB), NOSPLIT, $0-80
	BF16_CONSTS
	MOVQ x+0(FP), SI
	MOVQ ld+8(FP), R12
	SHLQ $2, R12
	MOVQ rows+16(FP), R10
	MOVQ cols+24(FP), R11
	MOVQ vis0+32(FP), DX
	MOVQ lse+40(FP), R13
	VBROADCASTSS scale+48(FP), Z1
	MOVQ c+56(FP), R15
	VBROADCASTSS 0(R15), Z3
	VBROADCASTSS 4(R15), Z4
	VBROADCASTSS 8(R15), Z5
	VBROADCASTSS 12(R15), Z14
	VPXORD Z24, Z24, Z24
	MOVQ lo+64(FP), DI
	MOVQ sums+72(FP), R14
	XORQ BX, BX

attnExpTile_row:
	CMPQ BX, R10
	JGE attnExpTile_done
	// CX = vis = clamp(r + vis0, 0, cols)
	MOVQ BX, CX
	ADDQ DX, CX
	CMPQ CX, R11
	CMOVQGT R11, CX
	XORL AX, AX
	TESTQ CX, CX
	CMOVQLT AX, CX
	MOVL (R13)(BX*4), AX
	CMPL AX, $-8388608 // 0xff800000, -Inf
	JEQ attnExpTile_none
	TESTQ CX, CX
	JEQ attnExpTile_zero
	VPBROADCASTD AX, Z2
	MOVQ SI, R8
	MOVQ DI, R9
	VXORPS Z0, Z0, Z0

attnExpTile_loop4:
	// Four vectors at a time, their steps interleaved: the same operations per
	// lane as EXP_BODY, the polynomial's constants broadcast from c.
	CMPQ CX, $64
	JLT attnExpTile_loop
	VMOVUPS 0(R8), Z16
	VMOVUPS 64(R8), Z20
	VMOVUPS 128(R8), Z28
	VMOVUPS 192(R8), Z6
	VFMSUB213PS Z2, Z1, Z16
	VFMSUB213PS Z2, Z1, Z20
	VFMSUB213PS Z2, Z1, Z28
	VFMSUB213PS Z2, Z1, Z6
	VMULPS Z3, Z16, Z17
	VMULPS Z3, Z20, Z21
	VMULPS Z3, Z28, Z29
	VMULPS Z3, Z6, Z7
	VRNDSCALEPS $0, Z17, Z17
	VRNDSCALEPS $0, Z21, Z21
	VRNDSCALEPS $0, Z29, Z29
	VRNDSCALEPS $0, Z7, Z7
	VMOVAPS Z16, Z18
	VMOVAPS Z20, Z22
	VMOVAPS Z28, Z30
	VMOVAPS Z6, Z8
	VFNMADD231PS Z4, Z17, Z18
	VFNMADD231PS Z4, Z21, Z22
	VFNMADD231PS Z4, Z29, Z30
	VFNMADD231PS Z4, Z7, Z8
	VFNMADD231PS Z5, Z17, Z18
	VFNMADD231PS Z5, Z21, Z22
	VFNMADD231PS Z5, Z29, Z30
	VFNMADD231PS Z5, Z7, Z8
	VBROADCASTSS 16(R15), Z19
	VBROADCASTSS 16(R15), Z23
	VBROADCASTSS 16(R15), Z31
	VBROADCASTSS 16(R15), Z9
	VFMADD213PS.BCST 20(R15), Z18, Z19
	VFMADD213PS.BCST 20(R15), Z22, Z23
	VFMADD213PS.BCST 20(R15), Z30, Z31
	VFMADD213PS.BCST 20(R15), Z8, Z9
	VFMADD213PS.BCST 24(R15), Z18, Z19
	VFMADD213PS.BCST 24(R15), Z22, Z23
	VFMADD213PS.BCST 24(R15), Z30, Z31
	VFMADD213PS.BCST 24(R15), Z8, Z9
	VFMADD213PS.BCST 28(R15), Z18, Z19
	VFMADD213PS.BCST 28(R15), Z22, Z23
	VFMADD213PS.BCST 28(R15), Z30, Z31
	VFMADD213PS.BCST 28(R15), Z8, Z9
	VFMADD213PS.BCST 32(R15), Z18, Z19
	VFMADD213PS.BCST 32(R15), Z22, Z23
	VFMADD213PS.BCST 32(R15), Z30, Z31
	VFMADD213PS.BCST 32(R15), Z8, Z9
	VFMADD213PS.BCST 36(R15), Z18, Z19
	VFMADD213PS.BCST 36(R15), Z22, Z23
	VFMADD213PS.BCST 36(R15), Z30, Z31
	VFMADD213PS.BCST 36(R15), Z8, Z9
	VFMADD213PS.BCST 40(R15), Z18, Z19
	VFMADD213PS.BCST 40(R15), Z22, Z23
	VFMADD213PS.BCST 40(R15), Z30, Z31
	VFMADD213PS.BCST 40(R15), Z8, Z9
	VFMADD213PS.BCST 44(R15), Z18, Z19
	VFMADD213PS.BCST 44(R15), Z22, Z23
	VFMADD213PS.BCST 44(R15), Z30, Z31
	VFMADD213PS.BCST 44(R15), Z8, Z9
	VSCALEFPS Z17, Z19, Z19
	VSCALEFPS Z21, Z23, Z23
	VSCALEFPS Z29, Z31, Z31
	VSCALEFPS Z7, Z9, Z9
	VCMPPS $0x15, Z14, Z16, K2
	VMOVAPS.Z Z19, K2, Z19
	VCMPPS $0x15, Z14, Z20, K2
	VMOVAPS.Z Z23, K2, Z23
	VCMPPS $0x15, Z14, Z28, K2
	VMOVAPS.Z Z31, K2, Z31
	VCMPPS $0x15, Z14, Z6, K2
	VMOVAPS.Z Z9, K2, Z9
	VMOVUPS Z19, 0(R8)
	VMOVUPS Z23, 64(R8)
	VMOVUPS Z31, 128(R8)
	VMOVUPS Z9, 192(R8)
	VADDPS Z19, Z0, Z0
	VADDPS Z23, Z0, Z0
	VADDPS Z31, Z0, Z0
	VADDPS Z9, Z0, Z0
	TESTQ R9, R9
	JZ attnExpTile_next4
	// The bf16 roundings, 32 lanes an instruction: VCVTNE2PS2BF16 rounds as
	// half.BFloat16FromFloat32 (to nearest even, NaNs quieted) but flushes
	// subnormals, which the exponential never gives (0, or at least e^-86).
	BYTE $0x62; BYTE $0x32; BYTE $0x47; BYTE $0x40; BYTE $0x72; BYTE $0xd3 // vcvtne2ps2bf16 %zmm19, %zmm23, %zmm10
	BYTE $0x62; BYTE $0x12; BYTE $0x37; BYTE $0x48; BYTE $0x72; BYTE $0xdf // vcvtne2ps2bf16 %zmm31, %zmm9, %zmm11
	VMOVDQU16 Z10, 0(R9)
	VMOVDQU16 Z11, 64(R9)
	ADDQ $128, R9

attnExpTile_next4:
	ADDQ $256, R8
	SUBQ $64, CX
	JNZ attnExpTile_loop4
	JMP attnExpTile_sum

attnExpTile_loop:
	CMPQ CX, $16
	JBE attnExpTile_last
	VMOVUPS 0(R8), Z16
	EXP_BODY_M
	VMOVUPS Z19, 0(R8)
	VADDPS Z19, Z0, Z0
	TESTQ R9, R9
	JZ attnExpTile_next
	BYTE $0x62; BYTE $0x32; BYTE $0x7e; BYTE $0x48; BYTE $0x72; BYTE $0xe3 // vcvtneps2bf16 %zmm19, %ymm12
	VMOVDQU16 Y12, 0(R9)
	ADDQ $32, R9

attnExpTile_next:
	ADDQ $64, R8
	SUBQ $16, CX
	JMP attnExpTile_loop

attnExpTile_last:
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z 0(R8), K1, Z16
	EXP_BODY_M
	VMOVUPS Z19, K1, 0(R8)
	VADDPS Z19, Z0, K1, Z0
	TESTQ R9, R9
	JZ attnExpTile_sum
	BYTE $0x62; BYTE $0x32; BYTE $0x7e; BYTE $0x48; BYTE $0x72; BYTE $0xe3 // vcvtneps2bf16 %zmm19, %ymm12
	VMOVDQU16 Y12, K1, 0(R9)

attnExpTile_sum:
	TESTQ R14, R14
	JZ attnExpTile_vis
	// The lanes' tree, as attnExpAVX512's.
	VEXTRACTF32X8 $1, Z0, Y17
	VADDPS Y17, Y0, Y0
	VEXTRACTF32X4 $1, Y0, X17
	VADDPS X17, X0, X0
	VMOVHLPS X0, X0, X17
	VADDPS X17, X0, X0
	VMOVSHDUP X0, X17
	VADDSS X17, X0, X0
	VMOVSS X0, (R14)(BX*4)

attnExpTile_vis:
	// CX = vis again, for the clearing.
	MOVQ BX, CX
	ADDQ DX, CX
	CMPQ CX, R11
	CMOVQGT R11, CX
	JMP attnExpTile_clear

attnExpTile_none:
	XORQ CX, CX

attnExpTile_zero:
	// A cleared row's sum is 0.
	TESTQ R14, R14
	JZ attnExpTile_clear
	MOVL $0, (R14)(BX*4)

attnExpTile_clear:
	// Clear elements [CX, cols) of the row and of lo's row.
	LEAQ (SI)(CX*4), R8
	XORQ R9, R9
	TESTQ DI, DI
	JZ attnExpTile_count
	LEAQ (DI)(CX*2), R9

attnExpTile_count:
	NEGQ CX
	ADDQ R11, CX

attnExpTile_clearloop:
	TESTQ CX, CX
	JLE attnExpTile_nextrow
	MOVL $0xffff, AX
	CMPQ CX, $16
	JGE attnExpTile_mask
	MOVL $1, AX
	SHLL CX, AX
	DECL AX

attnExpTile_mask:
	KMOVW AX, K1
	VMOVUPS Z24, K1, 0(R8)
	TESTQ R9, R9
	JZ attnExpTile_clearnext
	VPMOVDW Z24, K1, 0(R9)
	ADDQ $32, R9

attnExpTile_clearnext:
	ADDQ $64, R8
	SUBQ $16, CX
	JMP attnExpTile_clearloop

attnExpTile_nextrow:
	ADDQ R12, SI
	TESTQ DI, DI
	JZ attnExpTile_inc
	MOVQ R12, AX
	SHRQ $1, AX
	ADDQ AX, DI

attnExpTile_inc:
	INCQ BX
	JMP attnExpTile_row

attnExpTile_done:
	VZEROUPPER
	RET

// func attnMaxTileAVX512(x *float32, ld, rows, cols, vis0 int, mx *float32)
//
// attnMaxTileGo: mx[r] = attnMaxAVX512(row r of x, its first vis = clamp(r + vis0, 0,
// cols) elements) for r < rows, -Inf where vis is 0.
TEXT ·attnMaxTileAVX512(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ ld+8(FP), R12
	SHLQ $2, R12
	MOVQ rows+16(FP), R10
	MOVQ cols+24(FP), R11
	MOVQ vis0+32(FP), DX
	MOVQ mx+40(FP), R13
	MOVL $0xff800000, AX
	VPBROADCASTD AX, Z2
	XORQ BX, BX

attnMaxTile_row:
	CMPQ BX, R10
	JGE attnMaxTile_done
	MOVQ BX, CX
	ADDQ DX, CX
	CMPQ CX, R11
	CMOVQGT R11, CX
	XORL AX, AX
	TESTQ CX, CX
	CMOVQLT AX, CX
	VMOVAPS Z2, Z0
	MOVQ SI, R8
	TESTQ CX, CX
	JEQ attnMaxTile_store

attnMaxTile_loop:
	CMPQ CX, $16
	JBE attnMaxTile_last
	VMAXPS 0(R8), Z0, Z0
	ADDQ $64, R8
	SUBQ $16, CX
	JMP attnMaxTile_loop

attnMaxTile_last:
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMAXPS 0(R8), Z0, K1, Z0
	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VMAXPS X1, X0, X0
	VMOVSHDUP X0, X1
	VMAXSS X1, X0, X0

attnMaxTile_store:
	VMOVSS X0, (R13)(BX*4)
	ADDQ R12, SI
	INCQ BX
	JMP attnMaxTile_row

attnMaxTile_done:
	VZEROUPPER
	RET

// func attnDSTileAVX512(dp, p *float32, ld, rows, cols int, delta *float32, lo *uint16)
//
// attnDSTileGo: attnDSAVX512 on each row r < rows (cols ≥ 1 elements, row stride ld for
// dp, p and lo) with delta[r].
TEXT ·attnDSTileAVX512(SB), NOSPLIT, $0-56
	BF16_CONSTS
	MOVQ dp+0(FP), SI
	MOVQ p+8(FP), BX
	MOVQ ld+16(FP), R13
	SHLQ $2, R13
	MOVQ rows+24(FP), R11
	MOVQ cols+32(FP), R12
	MOVQ delta+40(FP), DX
	MOVQ lo+48(FP), DI

attnDSTile_row:
	TESTQ R11, R11
	JLE attnDSTile_done
	VBROADCASTSS 0(DX), Z2
	MOVQ SI, R8
	MOVQ BX, R9
	MOVQ DI, R10
	MOVQ R12, CX

attnDSTile_loop:
	CMPQ CX, $16
	JBE attnDSTile_last
	VMOVUPS 0(R8), Z19
	VSUBPS Z2, Z19, Z19
	VMULPS 0(R9), Z19, Z19
	VMOVUPS Z19, 0(R8)
	TESTQ R10, R10
	JZ attnDSTile_next
	// The bf16 rounding by VCVTNEPS2BF16 unless a lane is subnormal (the
	// instruction flushes those): then BF16_ROUND's. The same bits either way.
	VFPCLASSPSZ $0x20, Z19, K2
	KORTESTW K2, K2
	JNZ attnDSTile_sub
	BYTE $0x62; BYTE $0x32; BYTE $0x7e; BYTE $0x48; BYTE $0x72; BYTE $0xe3 // vcvtneps2bf16 %zmm19, %ymm12
	VMOVDQU16 Y12, 0(R10)
	ADDQ $32, R10
	JMP attnDSTile_next

attnDSTile_sub:
	BF16_ROUND
	VPMOVDW Z23, 0(R10)
	ADDQ $32, R10

attnDSTile_next:
	ADDQ $64, R8
	ADDQ $64, R9
	SUBQ $16, CX
	JMP attnDSTile_loop

attnDSTile_last:
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z 0(R8), K1, Z19
	VMOVUPS.Z 0(R9), K1, Z20
	VSUBPS Z2, Z19, Z19
	VMULPS Z20, Z19, Z19
	VMOVUPS Z19, K1, 0(R8)
	TESTQ R10, R10
	JZ attnDSTile_nextrow
	VFPCLASSPSZ $0x20, Z19, K1, K2
	KORTESTW K2, K2
	JNZ attnDSTile_lastsub
	BYTE $0x62; BYTE $0x32; BYTE $0x7e; BYTE $0x48; BYTE $0x72; BYTE $0xe3 // vcvtneps2bf16 %zmm19, %ymm12
	VMOVDQU16 Y12, K1, 0(R10)
	JMP attnDSTile_nextrow

attnDSTile_lastsub:
	BF16_ROUND
	VPMOVDW Z23, K1, 0(R10)

attnDSTile_nextrow:
	ADDQ R13, SI
	ADDQ R13, BX
	TESTQ DI, DI
	JZ attnDSTile_inc
	MOVQ R13, AX
	SHRQ $1, AX
	ADDQ AX, DI

attnDSTile_inc:
	ADDQ $4, DX
	DECQ R11
	JMP attnDSTile_row

attnDSTile_done:
	VZEROUPPER
	RET

// func attnAMXBegin(cfg *[64]byte)
//
// Loads the AMX tile configuration cfg (LDTILECFG) for the attnAMXTile calls that
// follow on this thread, until attnAMXEnd.
TEXT ·attnAMXBegin(SB), NOSPLIT, $0-8
	MOVQ cfg+0(FP), AX
	BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0x00 // ldtilecfg (%rax)
	RET

// func attnAMXEnd()
//
// Releases the AMX tile state (TILERELEASE).
TEXT ·attnAMXEnd(SB), NOSPLIT, $0-0
	BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0 // tilerelease
	RET

// func attnAMXTile(kt int, a *uint32, aRow, aStep int, b *uint32, c *float32, ldc int, add bool)
//
// gemmAMXKernel32x32 without its LDTILECFG and TILERELEASE: the tile configuration of
// gemmAMXKernel32x32's cfg must be loaded (attnAMXBegin) on this thread. The same
// instructions in the same order, so the same tile.
TEXT ·attnAMXTile(SB), NOSPLIT, $0-57
	MOVQ kt+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ aRow+16(FP), R9
	MOVQ aStep+24(FP), R12
	MOVQ R9, R13
	SHLQ $4, R13
	MOVQ b+32(FP), DI
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R8
	MOVQ $128, R10 // bytes per B pair row
	MOVBLZX add+56(FP), AX
	TESTL AX, AX
	JNZ attnAMXTile_load
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc0 // tilezero %tmm0
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc8 // tilezero %tmm1
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd0 // tilezero %tmm2
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd8 // tilezero %tmm3
	JMP attnAMXTile_start

attnAMXTile_load:
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x04; BYTE $0x02 // tileloadd (%rdx,%r8,1), %tmm0
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x4c; BYTE $0x02; BYTE $0x40 // tileloadd 64(%rdx,%r8,1), %tmm1
	MOVQ R8, BX
	SHLQ $4, BX
	ADDQ BX, DX
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x14; BYTE $0x02 // tileloadd (%rdx,%r8,1), %tmm2
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x5c; BYTE $0x02; BYTE $0x40 // tileloadd 64(%rdx,%r8,1), %tmm3
	SUBQ BX, DX

attnAMXTile_start:
	TESTQ CX, CX
	JZ attnAMXTile_done

attnAMXTile_loop:
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x24; BYTE $0x0e // tileloadd (%rsi,%r9,1), %tmm4
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x34; BYTE $0x17 // tileloadd (%rdi,%r10,1), %tmm6
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x7c; BYTE $0x17; BYTE $0x40 // tileloadd 64(%rdi,%r10,1), %tmm7
	BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xc4 // tdpbf16ps %tmm6, %tmm4, %tmm0
	BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xcc // tdpbf16ps %tmm7, %tmm4, %tmm1
	LEAQ (SI)(R13*1), BX
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x2c; BYTE $0x0b // tileloadd (%rbx,%r9,1), %tmm5
	BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xd5 // tdpbf16ps %tmm6, %tmm5, %tmm2
	BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xdd // tdpbf16ps %tmm7, %tmm5, %tmm3
	ADDQ R12, SI
	ADDQ $2048, DI
	DECQ CX
	JNZ attnAMXTile_loop

attnAMXTile_done:
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7a; BYTE $0x4b; BYTE $0x04; BYTE $0x02 // tilestored %tmm0, (%rdx,%r8,1)
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7a; BYTE $0x4b; BYTE $0x4c; BYTE $0x02; BYTE $0x40 // tilestored %tmm1, 64(%rdx,%r8,1)
	MOVQ R8, BX
	SHLQ $4, BX
	ADDQ BX, DX
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7a; BYTE $0x4b; BYTE $0x14; BYTE $0x02 // tilestored %tmm2, (%rdx,%r8,1)
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7a; BYTE $0x4b; BYTE $0x5c; BYTE $0x02; BYTE $0x40 // tilestored %tmm3, 64(%rdx,%r8,1)
	RET

// func attnLSEAVX512(lse, m, l *float32, n int, c *[16]uint64)
//
// lse[i] = m[i] + float32(math.Log(float64(l[i]))) for i < n, eight lanes at a time
// (the last under a mask), every l[i] positive and finite: archLog's steps
// (math/log_amd64.s) in the same order, on float64 lanes — frexp by the bits,
// f1 ≤ √2/2 doubled (archLog's CMPSD predicate 5), s = f/(2+f), the two
// polynomials, the same sums — so each lane equals math.Log bit for bit; then
// rounded to float32 and added to m.
TEXT ·attnLSEAVX512(SB), NOSPLIT, $0-40
	MOVQ lse+0(FP), DI
	MOVQ m+8(FP), SI
	MOVQ l+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ c+32(FP), R8
	VPBROADCASTQ 0(R8), Z20   // mantissa bits
	VPBROADCASTQ 8(R8), Z21   // 0.5's bits
	VPBROADCASTQ 16(R8), Z22  // 0x3fe
	VBROADCASTSD 24(R8), Z23  // √2/2
	VBROADCASTSD 32(R8), Z24  // 1
	VBROADCASTSD 40(R8), Z25  // 2
	VPBROADCASTQ 120(R8), Z26 // 0x7ff

attnLSE_loop:
	TESTQ CX, CX
	JLE attnLSE_done
	MOVL $0xff, AX
	CMPQ CX, $8
	JGE attnLSE_mask
	MOVL $1, AX
	SHLL CX, AX
	DECL AX

attnLSE_mask:
	KMOVW AX, K1
	VMOVUPS.Z (DX), K1, Y0
	VCVTPS2PD Y0, Z0
	// f1, k := frexp(x)
	VPANDQ Z20, Z0, Z2
	VPORQ Z21, Z2, Z2
	VPSRLQ $52, Z0, Z1
	VPANDQ Z26, Z1, Z1
	VPSUBQ Z22, Z1, Z1
	VCVTQQ2PD Z1, Z1
	// f1 ≤ √2/2: k -= 1, f1 *= 2
	VCMPPD $2, Z23, Z2, K2
	VSUBPD Z24, Z1, K2, Z1
	VADDPD Z2, Z2, K2, Z2
	// f = f1 - 1; s = f / (2 + f); s2, s4
	VSUBPD Z24, Z2, Z2
	VADDPD Z25, Z2, Z3
	VDIVPD Z3, Z2, Z3
	VMULPD Z3, Z3, Z4
	VMULPD Z4, Z4, Z5
	// t1 = s2·(L1 + s4·(L3 + s4·(L5 + s4·L7)))
	VBROADCASTSD 96(R8), Z6
	VMULPD Z5, Z6, Z6
	VADDPD.BCST 80(R8), Z6, Z6
	VMULPD Z5, Z6, Z6
	VADDPD.BCST 64(R8), Z6, Z6
	VMULPD Z5, Z6, Z6
	VADDPD.BCST 48(R8), Z6, Z6
	VMULPD Z6, Z4, Z4
	// t2 = s4·(L2 + s4·(L4 + s4·L6))
	VBROADCASTSD 88(R8), Z6
	VMULPD Z5, Z6, Z6
	VADDPD.BCST 72(R8), Z6, Z6
	VMULPD Z5, Z6, Z6
	VADDPD.BCST 56(R8), Z6, Z6
	VMULPD Z6, Z5, Z5
	// R = t1 + t2; hfsq = 0.5·f·f
	VADDPD Z5, Z4, Z4
	VMULPD.BCST 8(R8), Z2, Z7
	VMULPD Z2, Z7, Z7
	// k·Ln2Hi - ((hfsq - (s·(hfsq + R) + k·Ln2Lo)) - f)
	VADDPD Z7, Z4, Z4
	VMULPD Z4, Z3, Z3
	VMULPD.BCST 112(R8), Z1, Z8
	VADDPD Z8, Z3, Z3
	VSUBPD Z3, Z7, Z7
	VSUBPD Z2, Z7, Z7
	VMULPD.BCST 104(R8), Z1, Z1
	VSUBPD Z7, Z1, Z1
	VCVTPD2PS Z1, Y1
	VMOVUPS.Z (SI), K1, Y9
	VADDPS Y1, Y9, Y9
	VMOVUPS Y9, K1, (DI)
	ADDQ $32, DX
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP attnLSE_loop

attnLSE_done:
	VZEROUPPER
	RET
