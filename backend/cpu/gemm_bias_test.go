package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// biasSpecials are bias values (as float64, stored in each dtype) that the
// fused bias must carry as the copy does: NaN, ±Inf, -0 and a subnormal of
// the dtype.
func biasSpecials(dt backend.DType) []float64 {
	sub := 0x1p-140 // float32 subnormal
	switch dt {
	case backend.Float64:
		sub = 0x1p-1060
	case backend.Float16:
		sub = 0x1p-20
	case backend.BFloat16:
		sub = 0x1p-130
	}
	return []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), sub, -sub, 0}
}

// TestMatMulBiasBits checks that MatMul with a Bias (Beta 0, C holding NaN
// garbage) gives the bits of copying the bias row into every row of C and
// running with Beta 1, over every dtype and the GEMM routes the shapes take:
// direct and packed kernels, edge tiles, row and column runs of whole tiles,
// k slices (K > KC for float32, K > gemmBF16KC for bf16), small M and N,
// transposed operands, K = 0 and alpha 0.
func TestMatMulBiasBits(t *testing.T) {
	be, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	type shape struct{ m, n, k int }
	shapes := []shape{
		{1, 1, 1}, {1, 7, 5}, {5, 1, 9}, {13, 33, 17}, {12, 32, 64}, {24, 64, 128},
		{33, 65, 31}, {64, 96, 128}, {70, 300, 64}, {100, 257, 130}, {96, 320, 256},
		{30, 50, 1100}, {3, 0x50, 0}, {128, 384, 128},
	}
	if !testing.Short() {
		shapes = append(shapes, shape{40, 70, 4500}, shape{65, 40, 4098})
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.BFloat16, backend.Float16} {
		for _, sh := range shapes {
			for _, tr := range [][2]bool{{false, true}, {false, false}, {true, false}, {true, true}} {
				for _, alpha := range []float32{1, 0} {
					if alpha == 0 && (tr != [2]bool{false, true} || sh.k > 200) {
						continue
					}
					name := fmt.Sprintf("%s/%dx%dx%d/tA=%v,tB=%v/alpha=%v", dt, sh.m, sh.n, sh.k, tr[0], tr[1], alpha)
					t.Run(name, func(t *testing.T) {
						checkMatMulBias(t, be, rng, dt, sh.m, sh.n, sh.k, tr[0], tr[1], alpha)
					})
				}
			}
		}
	}
}

func checkMatMulBias(t *testing.T, be *Backend, rng *rand.Rand, dt backend.DType, m, n, k int, transA, transB bool, alpha float32) {
	alloc := func(size int, fill func(i int) float64) backend.Storage {
		s, err := be.Alloc(dt, size)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float64, size)
		for i := range v {
			v[i] = fill(i)
		}
		st(s).storeF64(0, v)
		return s
	}
	normal := func(int) float64 { return rng.NormFloat64() }
	ra, ca := m, k
	if transA {
		ra, ca = k, m
	}
	rb, cb := k, n
	if transB {
		rb, cb = n, k
	}
	lda, ldb, ldc := ca+1, cb+2, n+3
	offA, offB, offC, offBias := 3, 5, 7, 2
	as := alloc(offA+max(ra*lda, 1), normal)
	bs := alloc(offB+max(rb*ldb, 1), normal)
	specials := biasSpecials(dt)
	bias := alloc(offBias+n+1, func(i int) float64 {
		if i%5 == 1 {
			return specials[(i/5)%len(specials)]
		}
		return rng.NormFloat64() * 4
	})
	sizeC := offC + m*ldc
	ref := alloc(sizeC, func(i int) float64 { return float64(i) })
	got := alloc(sizeC, func(i int) float64 { return float64(i) })
	es := len(st(ref).rawBytes()) / sizeC
	// The reference: the bias row copied into every row of C, then Beta 1.
	rb8, bb8 := st(ref).rawBytes(), st(bias).rawBytes()
	for i := range m {
		copy(rb8[(offC+i*ldc)*es:][:n*es], bb8[offBias*es:][:n*es])
	}
	args := backend.MatMulArgs{
		A: as, B: bs, C: ref, OffA: offA, OffB: offB, OffC: offC,
		Batch: 1, M: m, N: n, K: k, TransA: transA, TransB: transB,
		LDA: lda, LDB: ldb, LDC: ldc, Alpha: alpha, Beta: 1,
	}
	be.MatMul(args)
	// Fused: C's own rows hold NaN, which must not be read.
	gb8 := st(got).rawBytes()
	nan := alloc(1, func(int) float64 { return math.NaN() })
	for i := range m {
		for j := range n {
			copy(gb8[(offC+i*ldc+j)*es:][:es], st(nan).rawBytes())
		}
	}
	args.C, args.Beta, args.Bias, args.OffBias = got, 0, bias, offBias
	be.MatMul(args)
	if !bytes.Equal(rb8, gb8) {
		for x := 0; x < sizeC; x++ {
			if !bytes.Equal(rb8[x*es:][:es], gb8[x*es:][:es]) {
				i, j := (x-offC)/ldc, (x-offC)%ldc
				t.Fatalf("C[%d][%d] (element %d): bits %x with Bias, %x with the copy and Beta 1", i, j, x, gb8[x*es:][:es], rb8[x*es:][:es])
			}
		}
	}
}

// TestGemmBiasDirect runs the float32 and bf16 drivers with a bias on every
// worker count, with the pure-Go kernels too, against the copy with beta 1.
func TestGemmBiasDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sh := range [][3]int{{37, 70, 40}, {144, 300, 600}, {7, 513, 33}} {
		m, n, k := sh[0], sh[1], sh[2]
		a := make([]float32, m*k)
		b := make([]float32, n*k)
		bias := make([]float32, n)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		for i := range b {
			b[i] = float32(rng.NormFloat64())
		}
		for i := range bias {
			bias[i] = float32(rng.NormFloat64())
		}
		bias[0] = float32(math.NaN())
		for _, kern := range []*gemmKernel[float32]{gemmKernel32, gemmKernelGo32} {
			for _, workers := range []int{1, 2, 3} {
				want := make([]float32, m*n)
				for i := range m {
					copy(want[i*n:][:n], bias)
				}
				gemmWith(kern, workers, false, true, m, n, k, 1, a, k, b, k, 1, want, n)
				got := make([]float32, m*n)
				for i := range got {
					got[i] = float32(math.Inf(1))
				}
				gemmWithBias(kern, workers, false, true, m, n, k, 1, a, k, b, k, 0, bias, got, n)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s %dx%dx%d workers %d: element %d = %v, want %v", kern.name, m, n, k, workers, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// BenchmarkLinearBias compares, per linear layer shape (rows×in→out, x·wᵀ),
// the bias broadcast by a strided Copy followed by MatMul with Beta 1 (copy)
// against MatMul with the Bias (fused).
func BenchmarkLinearBias(b *testing.B) {
	be, err := New(0)
	if err != nil {
		b.Fatal(err)
	}
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		for _, sh := range [][3]int{{2048, 128, 384}, {2048, 128, 512}, {2048, 512, 128}, {256, 784, 1024}} {
			rows, in, out := sh[0], sh[1], sh[2]
			alloc := func(n int) backend.Storage {
				s, err := be.Alloc(dt, n)
				if err != nil {
					b.Fatal(err)
				}
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(i%13) / 13
				}
				st(s).storeF32(0, v)
				return s
			}
			x, w, bias, y := alloc(rows*in), alloc(out*in), alloc(out), alloc(rows*out)
			args := backend.MatMulArgs{A: x, B: w, C: y, Batch: 1, M: rows, N: out, K: in, TransB: true, Alpha: 1}
			for _, mode := range []string{"copy", "fused"} {
				b.Run(fmt.Sprintf("%s/%dx%d->%d/%s", dt, rows, in, out, mode), func(b *testing.B) {
					for b.Loop() {
						if mode == "copy" {
							be.Copy(backend.View{S: y, Shape: []int{rows, out}, Strides: []int{out, 1}},
								backend.View{S: bias, Shape: []int{rows, out}, Strides: []int{0, 1}})
							a := args
							a.Beta = 1
							be.MatMul(a)
							continue
						}
						a := args
						a.Bias = bias
						be.MatMul(a)
					}
				})
			}
		}
	}
}

// BenchmarkGemmBiasStart times single-worker float32 products with a bias
// (the transformer's and the MLP's forward shapes, Y = X·Wᵀ + bias) in
// thread CPU time: start, the kernels storing bias + sum (fnStart,
// directStart), against fill, the bias copied into each tile of C before
// the kernel adds to it.
func BenchmarkGemmBiasStart(b *testing.B) {
	kern := gemmKernel32
	if kern.fnStart == nil {
		b.Skip("no start-store kernels")
	}
	fill := *kern
	fill.fnStart, fill.directStart = nil, nil
	for _, sh := range []gemmShape{{2048, 512, 512}, {2048, 1536, 512}, {2048, 512, 2048}, {256, 1024, 784}} {
		rng := rand.New(rand.NewPCG(uint64(sh.m), uint64(sh.n)))
		x, w, bias, y := make([]float32, sh.m*sh.k), make([]float32, sh.n*sh.k), make([]float32, sh.n), make([]float32, sh.m*sh.n)
		for _, s := range [][]float32{x, w, bias} {
			for i := range s {
				s[i] = rng.Float32() - 0.5
			}
		}
		for _, v := range []struct {
			name string
			kern *gemmKernel[float32]
		}{{"start", kern}, {"fill", &fill}} {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", sh.m, sh.n, sh.k, v.name), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				t0 := gemmThreadCPU()
				for b.Loop() {
					gemmWithBias(v.kern, 1, false, true, sh.m, sh.n, sh.k, 1, x, sh.k, w, sh.k, 0, bias, y, sh.n)
				}
				b.ReportMetric(float64(gemmThreadCPU()-t0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
