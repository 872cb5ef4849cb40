package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// reluTestValues returns n normal values with NaN, ±Inf and -0 sprinkled in
// (one in about every 97 elements each) when specials is set.
func reluTestValues[T float32 | float64](rng *rand.Rand, n int, specials bool) []T {
	v := make([]T, n)
	for i := range v {
		v[i] = T(rng.NormFloat64())
		if specials {
			switch rng.IntN(97) {
			case 0:
				v[i] = T(math.NaN())
			case 1:
				v[i] = T(math.Inf(1))
			case 2:
				v[i] = T(math.Inf(-1))
			case 3, 4:
				v[i] = T(math.Copysign(0, -1))
			}
		}
	}
	return v
}

// reluSpecialRows sets one element of each of the first rows of a (row stride ld,
// width w) to NaN, +Inf, -Inf and -0 in turn, so that those rows of the product
// hold NaN, ±Inf (or NaN) and the other rows stay finite.
func reluSpecialRows[T float32 | float64](a []T, rows, ld, w int) {
	sp := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)}
	for r := range min(rows, len(sp)) {
		a[r*ld+(7*r+3)%w] = T(sp[r])
	}
}

// TestGemmReLUBits checks gemmWithBiasReLU with relu set against gemmWithBias
// followed by reluInPlace on every row of C (Unary's Relu), bit for bit, over
// both schedules (column tasks for m ≤ gemmColMaxM, the blocking loop above it
// or with them turned off), both tile orders of the loop, 1 to 3 workers, with
// and without a bias, beta 0 and 1, transposed operands, edge tiles (m not a
// multiple of 12, n not of 32), two k slices, K = 0, and NaN, ±Inf and -0 in
// A and the bias; for the float32 assembly and pure-Go kernels and float64.
func TestGemmReLUBits(t *testing.T) {
	type shape struct{ m, n, k int }
	shapes := []shape{
		{1, 1, 1}, {7, 45, 600}, {25, 70, 37}, {13, 33, 17}, {12, 32, 512}, {40, 16, 513},
		{100, 257, 130}, {3, 80, 0}, {290, 70, 600}, {256, 1024, 784},
		// Few columns against many rows: row tasks (gemmRowTasks).
		{290, 20, 600}, {256, 10, 1024},
	}
	defer func(w, m int) { gemmRowOrderWords, gemmColMaxM = w, m }(gemmRowOrderWords, gemmColMaxM)
	rowOrder, colMaxM := gemmRowOrderWords, gemmColMaxM
	rng := rand.New(rand.NewPCG(21, 22))
	for _, sh := range shapes {
		for _, sched := range []string{"default", "loop", "loop-col-order"} {
			gemmRowOrderWords, gemmColMaxM = rowOrder, colMaxM
			switch sched {
			case "loop":
				gemmColMaxM = 0
			case "loop-col-order":
				gemmRowOrderWords, gemmColMaxM = 0, 0
			}
			for _, workers := range []int{1, 2, 3} {
				for _, tr := range [][2]bool{{false, true}, {true, false}, {false, false}} {
					name := fmt.Sprintf("%dx%dx%d/%s/w%d/tA=%v,tB=%v", sh.m, sh.n, sh.k, sched, workers, tr[0], tr[1])
					big := sh.m*sh.n*sh.k > 1<<22
					if big && (workers == 3 || tr != [2]bool{false, true} || raceShort()) {
						continue
					}
					t.Run("f32/"+name, func(t *testing.T) {
						checkGemmReLU(t, rng, gemmKernel32, workers, sh.m, sh.n, sh.k, tr[0], tr[1])
					})
					if big || raceShort() && sh.m*sh.n*sh.k > 1<<18 {
						// Under the race detector the pure-Go kernels take the small
						// shapes; the assembly one takes every schedule above.
						continue
					}
					t.Run("go32/"+name, func(t *testing.T) {
						checkGemmReLU(t, rng, gemmKernelGo32, workers, sh.m, sh.n, sh.k, tr[0], tr[1])
					})
					t.Run("f64/"+name, func(t *testing.T) {
						checkGemmReLU(t, rng, gemmKernelGo64, workers, sh.m, sh.n, sh.k, tr[0], tr[1])
					})
				}
			}
		}
	}
}

func checkGemmReLU[T float32 | float64](t *testing.T, rng *rand.Rand, kern *gemmKernel[T], workers, m, n, k int, transA, transB bool) {
	t.Helper()
	lda, ldb, ldc := k+3, n+5, n+2
	if transA {
		lda = m + 3
	}
	if transB {
		ldb = k + 5
	}
	a := reluTestValues[T](rng, max(m, k)*lda, false)
	if k > 0 && !transA {
		reluSpecialRows(a, m, lda, k)
	}
	b := reluTestValues[T](rng, max(n, k)*ldb, false)
	bias := reluTestValues[T](rng, n, true)
	c0 := reluTestValues[T](rng, m*ldc, false)
	for _, withBias := range []bool{false, true} {
		for _, beta := range []T{0, 1} {
			if withBias && beta != 0 {
				continue
			}
			var bs []T
			if withBias {
				bs = bias
			}
			want := append([]T(nil), c0...)
			gemmWithBias(kern, workers, transA, transB, m, n, k, 1, a, lda, b, ldb, beta, bs, want, ldc)
			for i := range m {
				reluInPlace(want[i*ldc:][:n])
			}
			got := append([]T(nil), c0...)
			gemmWithBiasReLU(kern, workers, transA, transB, m, n, k, 1, a, lda, b, ldb, beta, bs, got, ldc, true)
			for i := range want {
				if w, g := float64(want[i]), float64(got[i]); math.Float64bits(w) != math.Float64bits(g) {
					t.Fatalf("bias %v beta %v: C[%d][%d] = %v, want %v (GEMM then ReLU)", withBias, beta, i/ldc, i%ldc, g, w)
				}
			}
		}
	}
}

// TestMatMulReLUBits checks the backend route: MatMul with ReLU against MatMul
// then Unary's Relu, bit for bit, for the dtypes GemmReLU accepts, and that the
// others are refused.
func TestMatMulReLUBits(t *testing.T) {
	be, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(23, 24))
	for _, dt := range []backend.DType{backend.Float32, backend.Float64} {
		if !be.GemmReLU(dt) {
			t.Fatalf("GemmReLU(%s) is false", dt)
		}
		for _, sh := range [][3]int{{7, 45, 600}, {300, 70, 40}, {256, 1024, 96}} {
			m, n, k := sh[0], sh[1], sh[2]
			alloc := func(v []float64) backend.Storage {
				s, err := be.Alloc(dt, len(v))
				if err != nil {
					t.Fatal(err)
				}
				st(s).storeF64(0, v)
				return s
			}
			xv := reluTestValues[float64](rng, m*k, false)
			reluSpecialRows(xv, m, k, k)
			x := alloc(xv)
			w := alloc(reluTestValues[float64](rng, n*k, false))
			bias := alloc(reluTestValues[float64](rng, n, true))
			pre, want, got := alloc(make([]float64, m*n)), alloc(make([]float64, m*n)), alloc(make([]float64, m*n))
			args := backend.MatMulArgs{A: x, B: w, C: pre, Batch: 1, M: m, N: n, K: k, TransB: true, Alpha: 1, Bias: bias}
			be.MatMul(args)
			be.Unary(backend.Relu, want, pre, m*n, 0, 0)
			args.C, args.ReLU = got, true
			be.MatMul(args)
			wv, gv := make([]float64, m*n), make([]float64, m*n)
			st(want).loadF64(wv, 0)
			st(got).loadF64(gv, 0)
			for i := range wv {
				if math.Float64bits(wv[i]) != math.Float64bits(gv[i]) {
					t.Fatalf("%s %v: element %d = %v, want %v", dt, sh, i, gv[i], wv[i])
				}
			}
		}
	}
	for _, dt := range []backend.DType{backend.BFloat16, backend.Float16} {
		if be.GemmReLU(dt) {
			t.Fatalf("GemmReLU(%s) is true", dt)
		}
		s, err := be.Alloc(dt, 4)
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("MatMul with ReLU on %s did not panic", dt)
				}
			}()
			be.MatMul(backend.MatMulArgs{A: s, B: s, C: s, Batch: 1, M: 2, N: 2, K: 2, Alpha: 1, ReLU: true})
		}()
	}
}
