//go:build amd64 && !purego

// Float32 GEMM micro-kernel for AVX2; see the Go declaration in
// gemm_amd64.go for the loop it equals (the AVX-512 ones are generated, in
// gemm_bf16_amd64.s). It keeps the whole C tile in registers (12 ymm
// accumulators), loads one row of the B micro-panel per k step and
// broadcasts the A column element by element, then adds the tile to C once.
// The code is unrolled over the tile, not over k.

#include "textflag.h"

// func gemmKernel6x16AVX2(kc int, a, b, c []float32, ldc int)
TEXT ·gemmKernel6x16AVX2(SB), NOSPLIT, $0-88
	MOVQ kc+0(FP), CX
	MOVQ a_base+8(FP), SI
	MOVQ b_base+32(FP), DI
	MOVQ c_base+56(FP), DX
	MOVQ ldc+80(FP), R8
	SHLQ $2, R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	TESTQ CX, CX
	JZ gemmKernel6x16AVX2_store

gemmKernel6x16AVX2_loop:
	VMOVUPS 0(DI), Y12
	VMOVUPS 32(DI), Y13
	VBROADCASTSS 0(SI), Y14
	VFMADD231PS Y12, Y14, Y0
	VFMADD231PS Y13, Y14, Y1
	VBROADCASTSS 4(SI), Y15
	VFMADD231PS Y12, Y15, Y2
	VFMADD231PS Y13, Y15, Y3
	VBROADCASTSS 8(SI), Y14
	VFMADD231PS Y12, Y14, Y4
	VFMADD231PS Y13, Y14, Y5
	VBROADCASTSS 12(SI), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VBROADCASTSS 16(SI), Y14
	VFMADD231PS Y12, Y14, Y8
	VFMADD231PS Y13, Y14, Y9
	VBROADCASTSS 20(SI), Y15
	VFMADD231PS Y12, Y15, Y10
	VFMADD231PS Y13, Y15, Y11
	ADDQ $24, SI
	ADDQ $64, DI
	DECQ CX
	JNZ gemmKernel6x16AVX2_loop

gemmKernel6x16AVX2_store:
	VADDPS 0(DX), Y0, Y0
	VMOVUPS Y0, 0(DX)
	VADDPS 32(DX), Y1, Y1
	VMOVUPS Y1, 32(DX)
	ADDQ R8, DX
	VADDPS 0(DX), Y2, Y2
	VMOVUPS Y2, 0(DX)
	VADDPS 32(DX), Y3, Y3
	VMOVUPS Y3, 32(DX)
	ADDQ R8, DX
	VADDPS 0(DX), Y4, Y4
	VMOVUPS Y4, 0(DX)
	VADDPS 32(DX), Y5, Y5
	VMOVUPS Y5, 32(DX)
	ADDQ R8, DX
	VADDPS 0(DX), Y6, Y6
	VMOVUPS Y6, 0(DX)
	VADDPS 32(DX), Y7, Y7
	VMOVUPS Y7, 32(DX)
	ADDQ R8, DX
	VADDPS 0(DX), Y8, Y8
	VMOVUPS Y8, 0(DX)
	VADDPS 32(DX), Y9, Y9
	VMOVUPS Y9, 32(DX)
	ADDQ R8, DX
	VADDPS 0(DX), Y10, Y10
	VMOVUPS Y10, 0(DX)
	VADDPS 32(DX), Y11, Y11
	VMOVUPS Y11, 32(DX)
	VZEROUPPER
	RET

