//go:build amd64 && !purego

#include "textflag.h"

// func attnDeltaBF16AVX(delta *float32, gr *half.BFloat16, lg int, o *half.BFloat16, lo int, t, d int)
TEXT ·attnDeltaBF16AVX(SB), NOSPLIT, $0-56
	MOVQ delta+0(FP), DI
	MOVQ gr+8(FP), SI
	MOVQ lg+16(FP), R8
	MOVQ o+24(FP), DX
	MOVQ lo+32(FP), R9
	MOVQ t+40(FP), CX
	MOVQ d+48(FP), R10
	SHLQ $1, R8
	SHLQ $1, R9

row:
	// X0 = [s0, s1, s2, s3]: lane k adds the products of the columns c ≡ k (mod 4) in
	// ascending c, a multiply and then an add (no FMA), as attnDotBF16 does.
	VXORPS X0, X0, X0
	XORQ   AX, AX
	MOVQ   R10, BX

col:
	VPMOVZXWD (SI)(AX*1), X1
	VPSLLD    $16, X1, X1
	VPMOVZXWD (DX)(AX*1), X2
	VPSLLD    $16, X2, X2
	VMULPS    X2, X1, X1
	VADDPS    X1, X0, X0
	ADDQ      $8, AX
	SUBQ      $4, BX
	JNZ       col

	// (s0 + s1) + (s2 + s3)
	VMOVSHDUP X0, X1
	VADDPS    X1, X0, X0
	VMOVHLPS  X0, X1, X1
	VADDSS    X1, X0, X0
	VMOVSS    X0, (DI)
	ADDQ      $4, DI
	ADDQ      R8, SI
	ADDQ      R9, DX
	DECQ      CX
	JNZ       row
	RET
