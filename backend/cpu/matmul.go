package cpu

import (
	"fmt"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// MatMul implements backend.Backend. Float32 and float64 run the blocked GEMM in place;
// BFloat16 runs GemmBF16 in place where the CPU has AVX512_BF16. Other half operands are
// widened to float32 per batch item (the GEMM accumulates in float32) and the result is
// rounded once on store.
func (b *Backend) MatMul(a backend.MatMulArgs) {
	A, B, C := st(a.A), st(a.B), st(a.C)
	if A.dt != B.dt || A.dt != C.dt || !A.dt.IsFloat() {
		panic(fmt.Sprintf("cpu: MatMul: operands %s, %s, %s must share one floating dtype", A.dt, B.dt, C.dt))
	}
	if a.Batch == 0 || a.M == 0 || a.N == 0 {
		return
	}
	lda, ldb, ldc := a.LeadingDims()
	// With a Bias, every route starts C from the bias row where it would read C
	// (beta 1): Gemm and GemmBF16 per tile, the widening path per batch item.
	var bias *storage
	if a.Bias != nil {
		bias = st(a.Bias)
		if bias.dt != C.dt || a.Beta != 0 || a.OffBias < 0 || a.OffBias+a.N > bias.n {
			panic(fmt.Sprintf("cpu: MatMul: bias %s (offset %d, %d elements) wants %d values of %s and Beta 0 (Beta %v)", bias.dt, a.OffBias, bias.n, a.N, C.dt, a.Beta))
		}
	}
	if a.ReLU && !b.GemmReLU(C.dt) {
		panic(fmt.Sprintf("cpu: MatMul: ReLU on %s C (GemmReLU says no)", C.dt))
	}
	// Many small products (attention heads, conv groups): spread the batch over the
	// workers; nested GEMM calls then run inline.
	perItem := a.M * a.N * max(a.K, 1)
	grain := max(1, (1<<18)/max(perItem, 1))
	run := func(item func(i int)) {
		if a.Batch > 1 && perItem < 1<<18 {
			ParallelFor(a.Batch, grain, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					item(i)
				}
			})
			return
		}
		for i := 0; i < a.Batch; i++ {
			item(i)
		}
	}
	if A.dt == backend.BFloat16 && gemmBF16Native {
		// VDPBF16PS reads the bf16 operands as they are stored: no widening.
		// Without it the widening path below, on the float32 kernels, is
		// faster than the pure-Go bf16 twin.
		af, bf, cf := A.bf16(), B.bf16(), C.bf16()
		var bs []half.BFloat16
		if bias != nil {
			bs = bias.bf16()[a.OffBias:][:a.N]
		}
		run(func(i int) {
			gemmBF16WithBias(gemmBF16KernelBest, Workers(), a.TransA, a.TransB, a.M, a.N, a.K, a.Alpha, af[a.OffA+i*a.StrideA:], lda,
				bf[a.OffB+i*a.StrideB:], ldb, a.Beta, bs, cf[a.OffC+i*a.StrideC:], ldc)
		})
		return
	}
	switch A.dt {
	case backend.Float32:
		af, bf, cf := A.f32(), B.f32(), C.f32()
		var bs []float32
		if bias != nil {
			bs = bias.f32()[a.OffBias:][:a.N]
		}
		run(func(i int) {
			gemmWithBiasReLU(gemmKernel32, Workers(), a.TransA, a.TransB, a.M, a.N, a.K, a.Alpha, af[a.OffA+i*a.StrideA:], lda,
				bf[a.OffB+i*a.StrideB:], ldb, a.Beta, bs, cf[a.OffC+i*a.StrideC:], ldc, a.ReLU)
		})
	case backend.Float64:
		af, bf, cf := A.f64(), B.f64(), C.f64()
		var bs []float64
		if bias != nil {
			bs = bias.f64()[a.OffBias:][:a.N]
		}
		run(func(i int) {
			gemmWithBiasReLU(gemmKernelGo64, Workers(), a.TransA, a.TransB, a.M, a.N, a.K, float64(a.Alpha), af[a.OffA+i*a.StrideA:], lda,
				bf[a.OffB+i*a.StrideB:], ldb, float64(a.Beta), bs, cf[a.OffC+i*a.StrideC:], ldc, a.ReLU)
		})
	default:
		ra, ca := a.M, a.K
		if a.TransA {
			ra, ca = ca, ra
		}
		rb, cb := a.K, a.N
		if a.TransB {
			rb, cb = cb, rb
		}
		run(func(i int) {
			aw := widen(A, a.OffA+i*a.StrideA, ra, ca, lda)
			bw := widen(B, a.OffB+i*a.StrideB, rb, cb, ldb)
			cw := make([]float32, a.M*a.N)
			offC := a.OffC + i*a.StrideC
			beta := a.Beta
			switch {
			case bias != nil:
				// As if C held the bias row in every row: widened the same way.
				bias.loadF32(cw[:a.N], a.OffBias)
				for r := 1; r < a.M; r++ {
					copy(cw[r*a.N:(r+1)*a.N], cw[:a.N])
				}
				beta = 1
			case beta != 0:
				for r := 0; r < a.M; r++ {
					C.loadF32(cw[r*a.N:(r+1)*a.N], offC+r*ldc)
				}
			}
			Gemm(a.TransA, a.TransB, a.M, a.N, a.K, a.Alpha, aw, ca, bw, cb, beta, cw, a.N)
			for r := 0; r < a.M; r++ {
				C.storeF32(offC+r*ldc, cw[r*a.N:(r+1)*a.N])
			}
		})
	}
}

// GemmBias implements backend.GemmBias: MatMul accepts every MatMulArgs.Bias.
func (b *Backend) GemmBias() bool { return true }

// GemmReLU implements backend.GemmReLU: MatMul applies MatMulArgs.ReLU inside the
// float32 and float64 GEMMs (gemmWithBiasReLU); the bf16 and widening routes take
// none (the caller runs Unary's Relu after them).
func (b *Backend) GemmReLU(dt backend.DType) bool {
	return dt == backend.Float32 || dt == backend.Float64
}

// widen converts a rows×cols matrix with leading dimension ld to dense float32.
func widen(s *storage, off, rows, cols, ld int) []float32 {
	out := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		s.loadF32(out[r*cols:(r+1)*cols], off+r*ld)
	}
	return out
}
