//go:build !purego

#include "textflag.h"

// Each kernel takes (dst, src *T, n int), n > 0 a multiple of its lane
// count; the Go side converts the remainder. Loads and stores are
// unaligned. The Go stubs in convert_amd64.go show the loop each equals.

// func float32ToFloat16AVX512(dst *Float16, src *float32, n int)
TEXT ·float32ToFloat16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

	// 64 elements a round, four independent conversions in flight.
	CMPQ CX, $64
	JB   f2h512one

f2h512four:
	VMOVUPS   0(SI), Z0
	VMOVUPS   64(SI), Z1
	VMOVUPS   128(SI), Z2
	VMOVUPS   192(SI), Z3
	VCVTPS2PH $0, Z0, 0(DI)  // $0: round to nearest even
	VCVTPS2PH $0, Z1, 32(DI)
	VCVTPS2PH $0, Z2, 64(DI)
	VCVTPS2PH $0, Z3, 96(DI)
	ADDQ      $256, SI
	ADDQ      $128, DI
	SUBQ      $64, CX
	CMPQ      CX, $64
	JAE       f2h512four
	TESTQ     CX, CX
	JZ        f2h512done

f2h512one:
	VMOVUPS   (SI), Z0
	VCVTPS2PH $0, Z0, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	JNZ       f2h512one

f2h512done:
	VZEROUPPER
	RET

// func float32ToFloat16F16C(dst *Float16, src *float32, n int)
TEXT ·float32ToFloat16F16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

	CMPQ CX, $32
	JB   f2h256one

f2h256four:
	VMOVUPS   0(SI), Y0
	VMOVUPS   32(SI), Y1
	VMOVUPS   64(SI), Y2
	VMOVUPS   96(SI), Y3
	VCVTPS2PH $0, Y0, 0(DI)
	VCVTPS2PH $0, Y1, 16(DI)
	VCVTPS2PH $0, Y2, 32(DI)
	VCVTPS2PH $0, Y3, 48(DI)
	ADDQ      $128, SI
	ADDQ      $64, DI
	SUBQ      $32, CX
	CMPQ      CX, $32
	JAE       f2h256four
	TESTQ     CX, CX
	JZ        f2h256done

f2h256one:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	SUBQ      $8, CX
	JNZ       f2h256one

f2h256done:
	VZEROUPPER
	RET

// func float16ToFloat32AVX512(dst *float32, src *Float16, n int)
TEXT ·float16ToFloat32AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

	CMPQ CX, $64
	JB   h2f512one

h2f512four:
	VCVTPH2PS 0(SI), Z0
	VCVTPH2PS 32(SI), Z1
	VCVTPH2PS 64(SI), Z2
	VCVTPH2PS 96(SI), Z3
	VMOVUPS   Z0, 0(DI)
	VMOVUPS   Z1, 64(DI)
	VMOVUPS   Z2, 128(DI)
	VMOVUPS   Z3, 192(DI)
	ADDQ      $128, SI
	ADDQ      $256, DI
	SUBQ      $64, CX
	CMPQ      CX, $64
	JAE       h2f512four
	TESTQ     CX, CX
	JZ        h2f512done

h2f512one:
	VCVTPH2PS (SI), Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	SUBQ      $16, CX
	JNZ       h2f512one

h2f512done:
	VZEROUPPER
	RET

// func float16ToFloat32F16C(dst *float32, src *Float16, n int)
TEXT ·float16ToFloat32F16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

	CMPQ CX, $32
	JB   h2f256one

h2f256four:
	VCVTPH2PS 0(SI), Y0
	VCVTPH2PS 16(SI), Y1
	VCVTPH2PS 32(SI), Y2
	VCVTPH2PS 48(SI), Y3
	VMOVUPS   Y0, 0(DI)
	VMOVUPS   Y1, 32(DI)
	VMOVUPS   Y2, 64(DI)
	VMOVUPS   Y3, 96(DI)
	ADDQ      $64, SI
	ADDQ      $128, DI
	SUBQ      $32, CX
	CMPQ      CX, $32
	JAE       h2f256four
	TESTQ     CX, CX
	JZ        h2f256done

h2f256one:
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNZ       h2f256one

h2f256done:
	VZEROUPPER
	RET

// BF16 rounding, per 32-bit lane x (see BFloat16FromFloat32):
//	NaN:   x>>16 | 0x40
//	else:  (x + 0x7fff + (x>>16)&1) >> 16

// F2B_ROUND2: Z3 and Z7 = the bf16 bits of Z0's and Z4's lanes, in their low words,
// by the rounding above; needs Z31 = 0x7fff, Z30 = 1, Z29 = 0x40; clobbers Z1, Z2,
// Z5, Z6, K1, K2.
#define F2B_ROUND2 \
	VPSRLD $16, Z0, Z1 \
	VPSRLD $16, Z4, Z5 \
	VPANDD Z30, Z1, Z2 \
	VPANDD Z30, Z5, Z6 \
	VPADDD Z31, Z0, Z3 \
	VPADDD Z31, Z4, Z7 \
	VPADDD Z2, Z3, Z3 \
	VPADDD Z6, Z7, Z7 \
	VPSRLD $16, Z3, Z3 \
	VPSRLD $16, Z7, Z7 \
	VCMPPS $3, Z0, Z0, K1 \
	VCMPPS $3, Z4, Z4, K2 \
	VPORD Z29, Z1, K1, Z3 \
	VPORD Z29, Z5, K2, Z7

// func float32ToBFloat16AVX512(dst *BFloat16, src *float32, n int)
TEXT ·float32ToBFloat16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

	MOVL         $0x7fff, AX
	VPBROADCASTD AX, Z31
	MOVL         $1, AX
	VPBROADCASTD AX, Z30
	MOVL         $0x40, AX
	VPBROADCASTD AX, Z29

	CMPQ CX, $32
	JB   f2b512one

f2b512two:
	VMOVDQU32 0(SI), Z0
	VMOVDQU32 64(SI), Z4
	F2B_ROUND2
	VPMOVDW   Z3, 0(DI)
	VPMOVDW   Z7, 32(DI)
	ADDQ      $128, SI
	ADDQ      $64, DI
	SUBQ      $32, CX
	CMPQ      CX, $32
	JAE       f2b512two
	TESTQ     CX, CX
	JZ        f2b512done

f2b512one:
	VMOVDQU32 (SI), Z0
	VPSRLD    $16, Z0, Z1
	VPANDD    Z30, Z1, Z2
	VPADDD    Z31, Z0, Z3
	VPADDD    Z2, Z3, Z3
	VPSRLD    $16, Z3, Z3
	VCMPPS    $3, Z0, Z0, K1
	VPORD     Z29, Z1, K1, Z3
	VPMOVDW   Z3, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	JNZ       f2b512one

f2b512done:
	VZEROUPPER
	RET

// func float32ToBFloat16AVX2(dst *BFloat16, src *float32, n int)
TEXT ·float32ToBFloat16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

	MOVL         $0x7fff, AX
	MOVD         AX, X15
	VPBROADCASTD X15, Y15
	MOVL         $1, AX
	MOVD         AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x40, AX
	MOVD         AX, X13
	VPBROADCASTD X13, Y13

f2b256:
	VMOVDQU   0(SI), Y0
	VMOVDQU   32(SI), Y4
	VPSRLD    $16, Y0, Y1
	VPSRLD    $16, Y4, Y5
	VPAND     Y14, Y1, Y2
	VPAND     Y14, Y5, Y6
	VPADDD    Y15, Y0, Y3
	VPADDD    Y15, Y4, Y7
	VPADDD    Y2, Y3, Y3
	VPADDD    Y6, Y7, Y7
	VPSRLD    $16, Y3, Y3
	VPSRLD    $16, Y7, Y7
	VPOR      Y13, Y1, Y1         // quiet NaN candidates
	VPOR      Y13, Y5, Y5
	VCMPPS    $3, Y0, Y0, Y2      // all ones in NaN lanes
	VCMPPS    $3, Y4, Y4, Y6
	VPBLENDVB Y2, Y1, Y3, Y3      // NaN lanes take the quiet NaN
	VPBLENDVB Y6, Y5, Y7, Y7
	VPACKUSDW Y7, Y3, Y3          // words, in 64-bit blocks Y3lo Y7lo Y3hi Y7hi
	VPERMQ    $0xd8, Y3, Y3       // blocks back in order 0 2 1 3
	VMOVDQU   Y3, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	JNZ       f2b256

	VZEROUPPER
	RET

// func bfloat16ToFloat32AVX512(dst *float32, src *BFloat16, n int)
TEXT ·bfloat16ToFloat32AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

	CMPQ CX, $64
	JB   b2f512one

b2f512four:
	VPMOVZXWD 0(SI), Z0
	VPMOVZXWD 32(SI), Z1
	VPMOVZXWD 64(SI), Z2
	VPMOVZXWD 96(SI), Z3
	VPSLLD    $16, Z0, Z0
	VPSLLD    $16, Z1, Z1
	VPSLLD    $16, Z2, Z2
	VPSLLD    $16, Z3, Z3
	VMOVDQU32 Z0, 0(DI)
	VMOVDQU32 Z1, 64(DI)
	VMOVDQU32 Z2, 128(DI)
	VMOVDQU32 Z3, 192(DI)
	ADDQ      $128, SI
	ADDQ      $256, DI
	SUBQ      $64, CX
	CMPQ      CX, $64
	JAE       b2f512four
	TESTQ     CX, CX
	JZ        b2f512done

b2f512one:
	VPMOVZXWD (SI), Z0
	VPSLLD    $16, Z0, Z0
	VMOVDQU32 Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	SUBQ      $16, CX
	JNZ       b2f512one

b2f512done:
	VZEROUPPER
	RET

// func bfloat16ToFloat32AVX2(dst *float32, src *BFloat16, n int)
TEXT ·bfloat16ToFloat32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

b2f256:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNZ       b2f256

	VZEROUPPER
	RET

// func float32ToBFloat16AVX512BF16(dst *BFloat16, src *float32, n int)
//
// 32 lanes at a time by VCVTNE2PS2BF16 (AVX512_BF16), which rounds as
// BFloat16FromFloat32 does (to nearest even; a NaN truncated and quieted) but
// flushes subnormal inputs to zero: a block of 32 holding a subnormal
// (VFPCLASSPS class 0x20) takes the integer rounding above instead.
TEXT ·float32ToBFloat16AVX512BF16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

	MOVL         $0x7fff, AX
	VPBROADCASTD AX, Z31
	MOVL         $1, AX
	VPBROADCASTD AX, Z30
	MOVL         $0x40, AX
	VPBROADCASTD AX, Z29

f2bcvt:
	VMOVDQU32  0(SI), Z0
	VMOVDQU32  64(SI), Z4
	VFPCLASSPSZ $0x20, Z0, K1
	VFPCLASSPSZ $0x20, Z4, K2
	KORTESTW   K1, K2
	JNZ        f2bcvtslow
	BYTE $0x62; BYTE $0xf2; BYTE $0x5f; BYTE $0x48; BYTE $0x72; BYTE $0xd8 // vcvtne2ps2bf16 %zmm0, %zmm4, %zmm3
	VMOVDQU16  Z3, 0(DI)

f2bcvtnext:
	ADDQ $128, SI
	ADDQ $64, DI
	SUBQ $32, CX
	JNZ  f2bcvt
	VZEROUPPER
	RET

f2bcvtslow:
	F2B_ROUND2
	VPMOVDW Z3, 0(DI)
	VPMOVDW Z7, 32(DI)
	JMP     f2bcvtnext

// func float64ToFloat32OddAVX512(dst *float32, src *float64, n int)
//
// 16 lanes a round: VCVTPD2PS toward zero (embedded rounding, so MXCSR is left
// alone), then each lane whose result is inexact — its widening differs from
// the source, an ordered compare so NaN lanes are left as converted — gets its
// lowest bit set: float64 rounded to odd in float32.
TEXT ·float64ToFloat32OddAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

	MOVL         $1, AX
	VPBROADCASTD AX, Z31

d2fodd:
	VMOVUPD          0(SI), Z0
	VMOVUPD          64(SI), Z2
	VCVTPD2PS.RZ_SAE Z0, Y1
	VCVTPD2PS.RZ_SAE Z2, Y3
	VCVTPS2PD        Y1, Z4
	VCVTPS2PD        Y3, Z5
	VCMPPD           $0x0c, Z4, Z0, K1 // NEQ_OQ
	VCMPPD           $0x0c, Z5, Z2, K2
	KUNPCKBW         K1, K2, K3        // K3 = K2 (lanes 8-15) : K1 (lanes 0-7)
	VINSERTF64X4     $1, Y3, Z1, Z1
	VPORD            Z31, Z1, K3, Z1
	VMOVUPS          Z1, 0(DI)
	ADDQ             $128, SI
	ADDQ             $64, DI
	SUBQ             $16, CX
	JNZ              d2fodd
	VZEROUPPER
	RET
