package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// gemmScheduleOf returns the schedule Gemm picks for a product on workers
// workers with kernel kern.
func gemmScheduleOf[T float32 | float64](kern *gemmKernel[T], workers int, transA bool, m, n, k int, alpha T) int {
	g := new(gemmCall[T])
	g.kern, g.transA, g.alpha = kern, transA, alpha
	if 2*float64(m)*float64(n)*float64(k) < gemmSerialFlops {
		workers = 1
	}
	g.plan(m, n, k, kern.mr, kern.nr, workers, gemmSizes{kc: gemmKC, mc: gemmMC, nc: gemmNC})
	return g.schedule()
}

// TestGemmSchedules runs products around the MLP's small ones (a 10-class
// layer: n = 10 forward, k = 10 input gradient, m = 10 weight gradient) on
// one, two and three workers, where Gemm runs row tasks or column tasks
// that pack op(A) (with B read in place by the row kernel below mr rows),
// and compares them bit for bit (NaN payloads included) with the blocking
// loop on one worker: every dimension drawn from
// 1–13, 31–33, 255–257, 511–513 and 1023–1025, both transposes, alpha 1
// (A read in place) and not, beta 0, 1 and other, a bias, and operands
// with NaN, ±Inf, ±0 and denormals. It fails unless the new schedules ran
// (row tasks where the kernel reads A in place, column tasks packing an
// op(A) of more rows than a panel).
func TestGemmSchedules(t *testing.T) {
	rng := rand.New(rand.NewPCG(221, 222))
	dims := []int{}
	for _, r := range [][2]int{{1, 13}, {31, 33}, {255, 257}, {511, 513}, {1023, 1025}} {
		for d := r[0]; d <= r[1]; d++ {
			dims = append(dims, d)
		}
	}
	small := dims[:13]
	pick := func(from []int) int { return from[rng.IntN(len(from))] }
	// The last two: more rows than a panel against more columns, op(A) packed
	// where transposed (a transformer's FFN2 weight gradient), over three
	// k slices.
	shapes := []gemmShape{{256, 10, 1024}, {256, 1024, 10}, {10, 1024, 256}, {2048, 10, 512}, {10, 512, 2048}, {5, 1024, 600},
		{128, 512, 1100}, {301, 640, 1030}}
	draws := 40
	if raceShort() {
		draws = 10 // the fixed shapes above keep every schedule; the plain pass draws 40
	}
	for range draws {
		// One small dimension and two drawn from all: the small products.
		sh := gemmShape{pick(dims), pick(dims), pick(dims)}
		switch rng.IntN(3) {
		case 0:
			sh.m = pick(small)
		case 1:
			sh.n = pick(small)
		default:
			sh.k = pick(small)
		}
		shapes = append(shapes, sh)
	}
	seen := map[int]int{}
	wide := 0 // column tasks packing op(A) of more rows than a panel
	for _, sh := range shapes {
		m, n, k := sh.m, sh.n, sh.k
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			transA, transB := tr[0], tr[1]
			adv := rng.IntN(2) == 0
			val := func() float32 {
				if adv {
					return gemmAdversarial32(rng)
				}
				return rng.Float32()*2 - 1
			}
			lda, ldb := k+1, n+3
			if transA {
				lda = m + 2
			}
			if transB {
				ldb = k
			}
			a := make([]float32, max(m, k)*lda)
			b := make([]float32, max(n, k)*ldb)
			bias := make([]float32, n)
			for _, s := range [][]float32{a, b, bias} {
				for i := range s {
					s[i] = val()
				}
			}
			ldc := n + 1
			c0 := make([]float32, m*ldc)
			for i := range c0 {
				c0[i] = val()
			}
			for _, v := range []struct {
				alpha, beta float32
				bias        bool
			}{{1, 0, false}, {1, 0, true}, {1, 0.5, false}, {-0.75, 1, false}, {0.5, 0, true}} {
				var bs []float32
				if v.bias {
					bs = bias
				}
				// The reference: the blocking loop, one worker.
				want := slices.Clone(c0)
				colMaxM, rowMax := gemmColMaxM, gemmRowMaxPanels
				gemmColMaxM, gemmRowMaxPanels = 0, 0
				gemmWithBias(gemmKernel32, 1, transA, transB, m, n, k, v.alpha, a, lda, b, ldb, v.beta, bs, want, ldc)
				gemmColMaxM, gemmRowMaxPanels = colMaxM, rowMax
				for _, workers := range []int{1, 2, 3} {
					s := gemmScheduleOf(gemmKernel32, workers, transA, m, n, k, v.alpha)
					seen[s]++
					if s == gemmColTasksPacked && m > gemmKernel32.mr {
						wide++
					}
					got := slices.Clone(c0)
					gemmWithBias(gemmKernel32, workers, transA, transB, m, n, k, v.alpha, a, lda, b, ldb, v.beta, bs, got, ldc)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%dx%dx%d tA=%v tB=%v %+v, %d workers: C[%d][%d] = %v (%#x), one worker %v (%#x)",
								m, n, k, transA, transB, v, workers, i/ldc, i%ldc, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
			}
		}
	}
	want := []int{gemmColTasksPacked}
	if gemmKernel32.direct != nil {
		want = append(want, gemmRowTasks) // row tasks read A in place
	}
	for _, s := range want {
		if seen[s] == 0 {
			t.Errorf("schedule %d never ran (schedules seen: %v)", s, seen)
		}
	}
	if wide == 0 {
		t.Errorf("column tasks never packed op(A) of more than %d rows", gemmKernel32.mr)
	}
}

// TestGemmSchedulesF64 is TestGemmSchedules' check of the column tasks
// that pack op(A) for float64 (its kernel reads no A in place): few rows,
// two workers against one, bit for bit.
func TestGemmSchedulesF64(t *testing.T) {
	rng := rand.New(rand.NewPCG(223, 224))
	for _, sh := range []gemmShape{{8, 1024, 256}, {5, 300, 1025}, {1, 2000, 600}, {3, 129, 4000}} {
		for _, transA := range []bool{false, true} {
			t.Run(fmt.Sprintf("%dx%dx%d/tA=%v", sh.m, sh.n, sh.k, transA), func(t *testing.T) {
				m, n, k := sh.m, sh.n, sh.k
				if s := gemmScheduleOf(gemmKernelGo64, 2, transA, m, n, k, 1); s != gemmColTasksPacked {
					t.Fatalf("schedule %d, want column tasks packing A", s)
				}
				a := make([]float64, m*k)
				b := make([]float64, k*n)
				for _, s := range [][]float64{a, b} {
					for i := range s {
						s[i] = rng.Float64()*2 - 1
					}
				}
				a[len(a)/2] = math.NaN()
				lda := k
				if transA {
					lda = m
				}
				want, got := make([]float64, m*n), make([]float64, m*n)
				gemmWith(gemmKernelGo64, 1, transA, false, m, n, k, 1, a, lda, b, n, 0, want, n) // the loop: float64 reads no B in place
				gemmWith(gemmKernelGo64, 2, transA, false, m, n, k, 1, a, lda, b, n, 0, got, n)
				for i := range got {
					if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
						t.Fatalf("C[%d][%d] = %v, one worker %v", i/n, i%n, got[i], want[i])
					}
				}
			})
		}
	}
}

// TestGemmRowsBKernel checks each kernel's rowsFnB (B read in place from a
// row-major op(B)) against its rowsFn on the same B packed, bit for bit
// (NaN payloads included), for every row count and several depths: adding
// to C, storing from +0s and from a bias row; the columns of B beyond the
// panel hold NaNs that must not be read, and nothing outside the rows×nr
// block of C may be written. The Go twin gemmKernelGoRowsB is checked
// against gemmKernelGoRows the same way.
func TestGemmRowsBKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(225, 226))
	type rowsB func(rows, kc int, a, b []float32, ldb int, c []float32, ldc int, start []float32)
	type rowsP func(rows, kc int, a, b, c []float32, ldc int, start []float32)
	var cases []struct {
		name   string
		mr, nr int
		inB    rowsB
		packed rowsP
	}
	for _, kern := range gemmKernels32() {
		if kern.rowsFnB != nil {
			cases = append(cases, struct {
				name   string
				mr, nr int
				inB    rowsB
				packed rowsP
			}{kern.name, kern.mr, kern.nr, kern.rowsFnB, kern.rowsFn})
		}
	}
	cases = append(cases, struct {
		name   string
		mr, nr int
		inB    rowsB
		packed rowsP
	}{"twin", 12, 32, func(rows, kc int, a, b []float32, ldb int, c []float32, ldc int, start []float32) {
		gemmKernelGoRowsB(rows, 32, kc, a, 1, 12, b, ldb, c, ldc, start)
	}, func(rows, kc int, a, b, c []float32, ldc int, start []float32) {
		gemmKernelGoRows(rows, 32, kc, a, 1, 12, b, c, ldc, start)
	}})
	if len(cases) < 2 {
		t.Fatal("no kernel has rowsFnB")
	}
	for _, kc := range cases {
		mr, nr := kc.mr, kc.nr
		for rows := 1; rows < mr; rows++ {
			for _, depth := range []int{0, 1, 7, 16, 17, 256, 517} {
				ap := make([]float32, max(depth, 1)*mr)
				for x := range ap {
					ap[x] = gemmAdversarial32(rng)
				}
				ldb := nr + 5
				b := make([]float32, max(depth, 1)*ldb)
				for x := range b {
					b[x] = gemmAdversarial32(rng)
					if x%ldb >= nr {
						b[x] = math.Float32frombits(0x7fc00001 + uint32(x)) // NaN, not to be read
					}
				}
				bp := make([]float32, max(depth, 1)*nr)
				for p := range depth {
					copy(bp[p*nr:][:nr], b[p*ldb:][:nr])
				}
				const ldc = 45
				c0 := make([]float32, mr*ldc)
				for x := range c0 {
					c0[x] = gemmAdversarial32(rng)
				}
				bias := make([]float32, nr)
				for x := range bias {
					bias[x] = gemmAdversarial32(rng)
				}
				for _, start := range [][]float32{nil, make([]float32, nr), bias} {
					got, want := slices.Clone(c0), slices.Clone(c0)
					kc.inB(rows, depth, ap, b, ldb, got, ldc, start)
					kc.packed(rows, depth, ap, bp, want, ldc, start)
					for x := range got {
						if i, j := x/ldc, x%ldc; (i >= rows || j >= nr) && math.Float32bits(got[x]) != math.Float32bits(c0[x]) {
							t.Fatalf("%s rows=%d kc=%d: wrote outside the tile at (%d,%d)", kc.name, rows, depth, i, j)
						}
						if math.Float32bits(got[x]) != math.Float32bits(want[x]) {
							t.Fatalf("%s rows=%d kc=%d start=%v: (%d,%d) = %v (%#x), packed B %v (%#x)", kc.name, rows, depth, start != nil,
								x/ldc, x%ldc, got[x], math.Float32bits(got[x]), want[x], math.Float32bits(want[x]))
						}
					}
				}
			}
		}
	}
}
