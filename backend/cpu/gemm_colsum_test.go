package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gamp-ml/gamp/backend"
)

// sumAValues fills a k×m stored A (row stride lda) with values whose column sums
// depend on the order of the additions (magnitudes from 2^-60 to 2^60, subnormals)
// and with the special values a gradient may hold: NaN of either sign and payload,
// ±Inf (alone, or both in one column: a NaN from the sum), -0 (a column of -0s
// only, whose sum is +0), so that any change in the order or grouping of a
// column's additions shows in its bits.
//
// Columns of the last kinds hold a float32 tie that a float64 rounding tips: their
// sums tell one grouping of the additions from another.
func sumAValues(rng *rand.Rand, a []float32, k, m, lda int) {
	for r := range k {
		for c := range m {
			v := float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(121)-60))
			if rng.IntN(50) == 0 {
				v = float32(math.Ldexp(rng.Float64(), -140)) // subnormal
			}
			a[r*lda+c] = v
		}
	}
	set := func(r, c int, v float32) {
		if r < k && c < m {
			a[r*lda+c] = v
		}
	}
	if k == 0 {
		return
	}
	negNaN := math.Float32frombits(0xffc01234)
	for c := 0; c < m; c += 7 {
		switch (c / 7) % 8 {
		case 0:
			set(rng.IntN(k), c, float32(math.NaN()))
		case 1:
			set(rng.IntN(k), c, float32(math.Inf(1)))
		case 2:
			set(rng.IntN(k), c, float32(math.Inf(-1)))
			set(rng.IntN(k), c, float32(math.Inf(1)))
		case 3:
			for r := range k {
				set(r, c, float32(math.Copysign(0, -1)))
			}
		case 4:
			set(rng.IntN(k), c, negNaN)
			set(rng.IntN(k), c, float32(math.NaN()))
			set(k-1, c, float32(math.Inf(-1)))
		case 5:
			set(rng.IntN(k), c, math.MaxFloat32)
			set(rng.IntN(k), c, math.MaxFloat32)
		case 6, 7:
			// 2^60 + 2^36 is a float32 tie; a float64 add of 100 to it is
			// lost (half its ulp is 128), an add of 200 is not: with two
			// 100s after the pair, the float32 sum shows whether they were
			// added one by one or together, that is, where the blocks of
			// reduceColsSum start (two rows that straddle a block edge, 6)
			// and whether a block cut by a k slice is folded row by row (two
			// rows right after the pair, 7).
			for j := range k {
				set(j, c, 0)
			}
			block := max(1, redBlock/min(m, chunk))
			p, q := 0, 2+rng.IntN(max(1, k-3))
			if kc := gemmCeilDiv(k, gemmCeilDiv(k, gemmKC)); (c/7)%8 == 7 {
				// Right before the edge of a k slice of Gemm's, where one is.
				p = rng.IntN(k)
				if k > kc {
					p = kc*(1+rng.IntN((k-1)/kc)) - 2
				}
				q = p + 2
			} else if k > block {
				q = block*(1+rng.IntN((k-1)/block)) - 1
			}
			set(p, c, 0x1p60)
			set(p+1, c, 0x1p36)
			set(q, c, 100)
			set(q+1, c, 100)
		}
	}
}

// reduceRef is Reduce Sum over the k rows of the stored k×m A (stride lda), run as the
// tensor layer runs it on a dense g2.
func reduceRef(t *testing.T, be *Backend, a []float32, k, m, lda int) []float32 {
	src, err := be.Alloc(backend.Float32, max(k*m, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(src)
	dst, err := be.Alloc(backend.Float32, m)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(dst)
	for r := range k {
		copy(st(src).f32()[r*m:][:m], a[r*lda:][:m])
	}
	be.Reduce(backend.Sum, dst, src, 1, k, m)
	return append([]float32(nil), st(dst).f32()[:m]...)
}

// sumABits fails unless got has want's bits, NaN payloads aside (any NaN for a NaN):
// Reduce's vector loop and its pure-Go twin take a column's NaN from either operand
// (Go adds in whatever operand order the compiler picks), and which of the two sums a
// column follows Reduce's strips, which depend on the worker count.
func sumABits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if got[i] != got[i] && want[i] != want[i] {
			continue
		}
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d]: bits %#08x (%g), want %#08x (%g)", what, i, math.Float32bits(got[i]), got[i], math.Float32bits(want[i]), want[i])
		}
	}
}

// TestColSumRangeCuts checks colSumRange against colSumF32 over whole blocks (the
// arithmetic of reduceColsSum) for ranges cut anywhere: before, at and after block
// edges, single rows, blocks spanning several cuts.
func TestColSumRangeCuts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, sh := range [][3]int{{1, 3, 1}, {37, 21, 5}, {100, 13, 16}, {300, 9, 1638}, {64, 40, 64}, {1100, 17, 512}} {
		k, m, block := sh[0], sh[1], sh[2]
		lda := m + 3
		a := make([]float32, k*lda)
		sumAValues(rng, a, k, m, lda)
		want := make([]float64, m)
		for j0 := 0; j0 < k; j0 += block {
			colSumF32(want, a[j0*lda:], lda, min(block, k-j0), j0 > 0)
		}
		for trial := range 20 {
			acc, blk := make([]float64, m), make([]float64, m)
			for r := 0; r < k; {
				e := min(k, r+1+rng.IntN(max(1, 2*block)))
				if trial == 0 {
					e = r + 1
				}
				colSumRange(acc, blk, a, lda, r, e, k, block)
				r = e
			}
			for c := range m {
				if math.Float64bits(acc[c]) != math.Float64bits(want[c]) {
					t.Fatalf("k=%d m=%d block=%d trial %d: column %d: %#x, want %#x", k, m, block, trial, c, math.Float64bits(acc[c]), math.Float64bits(want[c]))
				}
			}
		}
	}
}

// TestGemmSumABits runs the weight-gradient product op(A)ᵀ... that is, C = op(A)·B
// with op(A) = Aᵀ for A stored k×m, with the row sums of op(A), on 1 to 3 workers,
// over the k slicings (one slice, a multiple of KC, uneven slices), the schedules
// (column tasks for m < MR, the loop with one or several row tasks, several column
// blocks for n > NC) and Reduce's block sizes (m < 1024 and m ≥ 1024): the sums
// must have the bits of Reduce Sum and C those of the product without them.
func TestGemmSumABits(t *testing.T) {
	if !vecAVX512OK() {
		t.Skip("the sums in the pack need Reduce's vector loop")
	}
	be, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	ks := []int{1, 5, 511, 512, 513, 1024, 2048 + 7}
	ms := []int{2, 10, 12, 13, 100, 1024, 1536}
	ns := []int{10, 32, 512}
	type shape struct{ k, m, n, pad int }
	var shapes []shape
	for _, k := range ks {
		for _, m := range ms {
			for _, n := range ns {
				if testing.Short() && k*m*n > 1<<26 {
					continue
				}
				shapes = append(shapes, shape{k, m, n, (k + m + n) % 3})
			}
		}
	}
	shapes = append(shapes, shape{600, 13, gemmNC + 100, 1}, shape{1030, 40, gemmNC + 33, 0})
	for _, sh := range shapes {
		lda, ldb := sh.m+sh.pad, sh.n+1
		a := make([]float32, sh.k*lda)
		sumAValues(rng, a, sh.k, sh.m, lda)
		b := make([]float32, sh.k*ldb)
		for i := range b {
			b[i] = float32(rng.NormFloat64())
		}
		want := reduceRef(t, be, a, sh.k, sh.m, lda)
		cRef := make([]float32, sh.m*sh.n)
		gemmWith(gemmKernel32, 2, true, false, sh.m, sh.n, sh.k, 1, a, lda, b, ldb, 0, cRef, sh.n)
		for workers := 1; workers <= 3; workers++ {
			name := fmt.Sprintf("k=%d/m=%d/n=%d/workers=%d", sh.k, sh.m, sh.n, workers)
			sums := make([]float32, sh.m+1)
			sums[sh.m] = 42
			c := make([]float32, sh.m*sh.n)
			gemmWithSumA(gemmKernel32, workers, true, false, sh.m, sh.n, sh.k, 1, a, lda, b, ldb, 0, nil, c, sh.n, false, sums)
			sumABits(t, name+": sum", sums, want)
			sumABits(t, name+": C", c, cRef)
			if sums[sh.m] != 42 {
				t.Fatalf("%s: wrote past the m sums", name)
			}
		}
	}
}

// TestMatMulSumA checks MatMul's SumA against MatMul then Reduce Sum over op(A), bit
// for bit, on the fused route and on the ones that run Reduce itself: one row of
// op(A), op(A) not transposed, a batch, K = 0, N = 0, alpha 0, a bias and ReLU.
func TestMatMulSumA(t *testing.T) {
	be, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	if be.GemmSumA(backend.Float64) || be.GemmSumA(backend.BFloat16) || !be.GemmSumA(backend.Float32) {
		t.Fatal("GemmSumA: yes for float32 alone")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	type tc struct {
		m, n, k, batch int
		transA, bias   bool
		alpha          float32
	}
	cases := []tc{
		{1, 10, 513, 1, true, false, 1}, {1, 32, 5, 1, true, false, 1},
		{10, 32, 513, 1, true, false, 1}, {1024, 64, 1030, 1, true, true, 1}, {13, 512, 70, 1, true, false, 1},
		{13, 20, 600, 1, false, false, 1}, {40, 20, 2100, 1, false, false, 1},
		{12, 10, 300, 3, true, false, 1}, {7, 9, 0, 1, true, false, 1}, {7, 0, 9, 1, true, false, 1},
		{30, 40, 600, 1, true, false, 0}, {30, 40, 600, 1, true, true, 0.5},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%+v", c)
		ra, ca := c.m, c.k
		if c.transA {
			ra, ca = c.k, c.m
		}
		lda := ca + 2
		strideA := ra*lda + 5
		alloc := func(n int) backend.Storage {
			s, err := be.Alloc(backend.Float32, max(n, 1))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		A := alloc(3 + c.batch*strideA)
		for i := range c.batch {
			sumAValues(rng, st(A).f32()[3+i*strideA:], ra, ca, lda)
		}
		B := alloc(c.batch * c.k * c.n)
		for i := range st(B).f32() {
			st(B).f32()[i] = float32(rng.NormFloat64())
		}
		args := backend.MatMulArgs{
			A: A, B: B, OffA: 3, Batch: c.batch, M: c.m, N: c.n, K: c.k, TransA: c.transA,
			LDA: lda, StrideA: strideA, StrideB: c.k * c.n, StrideC: c.m * c.n, Alpha: c.alpha,
		}
		if c.bias {
			args.Bias = alloc(c.n)
			for i := range c.n {
				st(args.Bias).f32()[i] = float32(i) - 3
			}
		} else {
			args.ReLU = true
		}
		args.C = alloc(c.batch * c.m * c.n)
		be.MatMul(args)
		cRef := append([]float32(nil), st(args.C).f32()...)
		var want []float32
		for i := range c.batch {
			base := st(A).f32()[3+i*strideA:]
			if c.transA {
				want = append(want, reduceRef(t, be, base, c.k, c.m, lda)...)
				continue
			}
			// Row sums of the stored m×k A: Reduce over the inner axis.
			src, dst := alloc(c.m*c.k), alloc(c.m)
			for r := range c.m {
				copy(st(src).f32()[r*c.k:][:c.k], base[r*lda:][:c.k])
			}
			be.Reduce(backend.Sum, dst, src, c.m, c.k, 1)
			want = append(want, st(dst).f32()[:c.m]...)
		}
		args.C = alloc(c.batch * c.m * c.n)
		args.SumA, args.OffSumA = alloc(2+c.batch*c.m+1), 2
		st(args.SumA).f32()[2+c.batch*c.m] = 42
		be.MatMul(args)
		sumABits(t, name+": sum", st(args.SumA).f32()[2:], want)
		sumABits(t, name+": C", st(args.C).f32(), cRef)
		if st(args.SumA).f32()[2+c.batch*c.m] != 42 {
			t.Fatalf("%s: wrote past the sums", name)
		}
	}
}

// BenchmarkLinearBiasGrad times a linear layer's weight and bias gradients from a
// g2 [rows, out] and x [rows, in] as transformer-large has them: the weight
// gradient's MatMul then Reduce Sum over g2, against one MatMul with SumA, the two
// alternated in each iteration (other work on the machine then weighs on both
// alike); it reports the median milliseconds of each, of the Reduce alone and the
// median of the paired ratios.
func BenchmarkLinearBiasGrad(b *testing.B) {
	be, err := New(0)
	if err != nil {
		b.Fatal(err)
	}
	for _, sh := range [][3]int{{2048, 512, 512}, {2048, 1536, 512}, {2048, 2048, 512}, {2048, 512, 2048}} {
		rows, out, in := sh[0], sh[1], sh[2]
		alloc := func(n int) backend.Storage {
			s, err := be.Alloc(backend.Float32, n)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, uint64(n)))
			for i := range st(s).f32() {
				st(s).f32()[i] = float32(rng.NormFloat64())
			}
			return s
		}
		g2, x, gw, gb := alloc(rows*out), alloc(rows*in), alloc(out*in), alloc(out)
		args := backend.MatMulArgs{A: g2, B: x, C: gw, Batch: 1, M: out, N: in, K: rows, TransA: true, Alpha: 1}
		fused := args
		fused.SumA = gb
		b.Run(fmt.Sprintf("rows=%d/out=%d/in=%d", rows, out, in), func(b *testing.B) {
			var tr, tf, tred, ratio []float64
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				be.MatMul(args)
				t1 := time.Now()
				be.Reduce(backend.Sum, gb, g2, 1, rows, out)
				t2 := time.Now()
				be.MatMul(fused)
				t3 := time.Now()
				r, f := t2.Sub(t0).Seconds()*1e3, t3.Sub(t2).Seconds()*1e3
				tr, tf, tred, ratio = append(tr, r), append(tf, f), append(tred, t2.Sub(t1).Seconds()*1e3), append(ratio, f/r)
			}
			med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
			b.ReportMetric(med(tr), "reduce-ms")
			b.ReportMetric(med(tf), "sumA-ms")
			b.ReportMetric(med(tred), "reduceonly-ms")
			b.ReportMetric(med(ratio), "ratio")
		})
	}
}
