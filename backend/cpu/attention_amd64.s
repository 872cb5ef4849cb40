//go:build amd64 && !purego

#include "textflag.h"

// EXP_BODY: Z19 = attnExp32(fma(Z16, Z1, -Z2)) per lane; Z16 keeps the argument;
// clobbers Z17, Z18, Z20, K2. Lanes where the argument is below the cut (not NaN) are 0.
#define EXP_BODY \
	VFMSUB213PS Z2, Z1, Z16 \
	VMULPS Z3, Z16, Z17 \
	VRNDSCALEPS $0, Z17, Z17 \
	VMOVAPS Z16, Z18 \
	VFNMADD231PS Z4, Z17, Z18 \
	VFNMADD231PS Z5, Z17, Z18 \
	VMOVAPS Z6, Z19 \
	VFMADD213PS Z7, Z18, Z19 \
	VFMADD213PS Z8, Z18, Z19 \
	VFMADD213PS Z9, Z18, Z19 \
	VFMADD213PS Z10, Z18, Z19 \
	VFMADD213PS Z11, Z18, Z19 \
	VFMADD213PS Z12, Z18, Z19 \
	VFMADD213PS Z13, Z18, Z19 \
	VCVTPS2DQ Z17, Z20 \
	VPADDD Z15, Z20, Z20 \
	VPSLLD $23, Z20, Z20 \
	VMULPS Z20, Z19, Z19 \
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
