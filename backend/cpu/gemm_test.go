package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"
	"testing"
)

// gemmShape is one problem size; the reference product is computed once per
// shape and reused for every transpose, alpha, beta and kernel.
type gemmShape struct{ m, n, k int }

var gemmShapes = []gemmShape{
	{1, 1, 1},
	{1, 17, 5},
	{19, 1, 7},
	{1, 1, 300},
	{12, 32, 256}, // exactly one AVX-512 tile and one k slice
	{13, 33, 257},
	{37, 53, 71},
	{64, 64, 64},
	{129, 257, 65},
	{300, 200, 500},
	{3, 4100, 9}, // more than one NC column block
	{200, 40, 600},
}

var gemmScalars = []struct{ alpha, beta float64 }{
	{1, 0},
	{1, 1},
	{-0.5, 2},
	{2.5, -1.5},
	{0, 0.5},
	{0, 0},
}

// gemmCase holds op(A), op(B) and C0 as float64 matrices (row-major, dense)
// plus the exact-enough reference product P = op(A)·op(B) and S = |op(A)|·|op(B)|.
type gemmCase struct {
	gemmShape
	opA, opB, c0 []float64
	p, s         []float64
}

func newGemmCase(rng *rand.Rand, sh gemmShape) *gemmCase {
	g := &gemmCase{gemmShape: sh}
	rnd := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			// Values exactly representable in float32, so both precisions see
			// the same inputs.
			x[i] = float64(float32(rng.Float64()*2 - 1))
		}
		return x
	}
	g.opA, g.opB, g.c0 = rnd(sh.m*sh.k), rnd(sh.k*sh.n), rnd(sh.m*sh.n)
	g.p = make([]float64, sh.m*sh.n)
	g.s = make([]float64, sh.m*sh.n)
	for i := range sh.m {
		for j := range sh.n {
			var p, s float64
			for l := range sh.k {
				x := g.opA[i*sh.k+l] * g.opB[l*sh.n+j]
				p += x
				s += math.Abs(x)
			}
			g.p[i*sh.n+j], g.s[i*sh.n+j] = p, s
		}
	}
	return g
}

// gemmStore lays out the rows×cols dense matrix x (transposed when trans) with a
// row stride padded by pad elements filled with NaN, so that a read outside
// the matrix shows up in the result.
func gemmStore[T float32 | float64](x []float64, rows, cols int, trans bool, pad int) ([]T, int) {
	sr, sc := rows, cols
	if trans {
		sr, sc = cols, rows
	}
	ld := max(sc+pad, 1)
	out := make([]T, max(sr*ld, 1))
	for i := range out {
		out[i] = T(math.NaN())
	}
	for i := range rows {
		for j := range cols {
			if trans {
				out[j*ld+i] = T(x[i*cols+j])
			} else {
				out[i*ld+j] = T(x[i*cols+j])
			}
		}
	}
	return out, ld
}

// check runs gemm on the case with the given layout and scalars and compares
// against the reference within the rounding bound (k+2)·eps·(|alpha|·S + |beta·C0|).
func (g *gemmCase) check(t *testing.T, transA, transB bool, alpha, beta float64, pad int, eps float64,
	run func(a []float64, lda int, b []float64, ldb int, c []float64, ldc int),
) {
	t.Helper()
	a, lda := gemmStore[float64](g.opA, g.m, g.k, transA, pad)
	b, ldb := gemmStore[float64](g.opB, g.k, g.n, transB, pad)
	c, ldc := gemmStore[float64](g.c0, g.m, g.n, false, pad)
	if beta == 0 {
		// beta == 0 must ignore C, even NaN.
		for i := range g.m {
			for j := range g.n {
				c[i*ldc+j] = math.NaN()
			}
		}
	}
	run(a, lda, b, ldb, c, ldc)
	for i := range g.m {
		for j := range ldc {
			got := c[i*ldc+j]
			if j >= g.n {
				if !math.IsNaN(got) {
					t.Fatalf("C padding (%d,%d) overwritten with %v", i, j, got)
				}
				continue
			}
			want := alpha * g.p[i*g.n+j]
			bound := math.Abs(alpha) * g.s[i*g.n+j]
			if beta != 0 {
				want += beta * g.c0[i*g.n+j]
				bound += math.Abs(beta * g.c0[i*g.n+j])
			}
			tol := float64(g.k+2)*eps*bound + 1e-300
			if math.IsNaN(got) || math.Abs(got-want) > tol {
				t.Fatalf("C[%d][%d] = %v, want %v ± %v", i, j, got, want, tol)
			}
		}
	}
}

// gemmRunAs converts the float64 operands to T, runs f and converts C back.
func gemmRunAs[T float32 | float64](f func(a []T, lda int, b []T, ldb int, c []T, ldc int)) func(a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	conv := func(x []float64) []T {
		y := make([]T, len(x))
		for i, v := range x {
			y[i] = T(v)
		}
		return y
	}
	return func(a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
		ct := conv(c)
		f(conv(a), lda, conv(b), ldb, ct, ldc)
		for i, v := range ct {
			c[i] = float64(v)
		}
	}
}

func TestGemm(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const eps32, eps64 = 0x1p-24, 0x1p-53
	for _, sh := range gemmShapes {
		if testing.Short() && sh.m*sh.n*sh.k > 1<<20 {
			continue
		}
		g := newGemmCase(rng, sh)
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for si, sc := range gemmScalars {
				pad := si % 3 // strides larger than the width in most cases
				name := fmt.Sprintf("%dx%dx%d/tA=%v,tB=%v/alpha=%v,beta=%v", sh.m, sh.n, sh.k, tr[0], tr[1], sc.alpha, sc.beta)
				t.Run("f32/"+name, func(t *testing.T) {
					g.check(t, tr[0], tr[1], sc.alpha, sc.beta, pad, eps32, gemmRunAs(func(a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
						Gemm(tr[0], tr[1], sh.m, sh.n, sh.k, float32(sc.alpha), a, lda, b, ldb, float32(sc.beta), c, ldc)
					}))
				})
				t.Run("f64/"+name, func(t *testing.T) {
					g.check(t, tr[0], tr[1], sc.alpha, sc.beta, pad, eps64, gemmRunAs(func(a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
						Gemm(tr[0], tr[1], sh.m, sh.n, sh.k, sc.alpha, a, lda, b, ldb, sc.beta, c, ldc)
					}))
				})
			}
		}
	}
}

// TestGemmKernels runs whole products through every float32 micro-kernel
// this machine supports (Gemm itself uses only the best one).
func TestGemmKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	shapes := []gemmShape{{1, 1, 1}, {37, 53, 71}, {129, 257, 65}, {200, 40, 600}}
	for _, kern := range gemmKernels32() {
		for _, sh := range shapes {
			g := newGemmCase(rng, sh)
			for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
				for _, sc := range gemmScalars[:4] {
					name := fmt.Sprintf("%s/%dx%dx%d/tA=%v,tB=%v/alpha=%v,beta=%v", kern.name, sh.m, sh.n, sh.k, tr[0], tr[1], sc.alpha, sc.beta)
					t.Run(name, func(t *testing.T) {
						g.check(t, tr[0], tr[1], sc.alpha, sc.beta, 1, 0x1p-24, gemmRunAs(func(a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
							gemmWith(kern, Workers(), tr[0], tr[1], sh.m, sh.n, sh.k, float32(sc.alpha), a, lda, b, ldb, float32(sc.beta), c, ldc)
						}))
					})
				}
			}
		}
	}
}

// gemmFMA32 returns x·y+z rounded once to float32, as VFMADD231PS does.
func gemmFMA32(x, y, z float32) float32 {
	p := float64(x) * float64(y) // exact: 24+24 significant bits
	s := p + float64(z)
	// TwoSum: p+z == s+e exactly.
	bb := s - p
	e := (p - (s - bb)) + (float64(z) - bb)
	// Rounding s to float32 rounds twice; nudging s one float64 ulp towards
	// the exact value changes the float32 result only when s lies exactly
	// halfway between two float32 values, where it breaks the tie correctly.
	if e > 0 {
		s = math.Nextafter(s, math.Inf(1))
	} else if e < 0 {
		s = math.Nextafter(s, math.Inf(-1))
	}
	return float32(s)
}

// TestGemmMicroKernel checks each micro-kernel against the Go loop its doc
// comment gives: assembly kernels bit for bit against an exactly fused
// multiply-add, and the pure-Go twin on the same panels within a tight bound;
// a kernel's in-place variant bit for bit against the packed one.
func TestGemmMicroKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, kern := range gemmKernels32() {
		mr, nr := kern.mr, kern.nr
		for _, kc := range []int{1, 2, 7, 256, 517} {
			t.Run(fmt.Sprintf("%s/kc=%d", kern.name, kc), func(t *testing.T) {
				a := make([]float32, kc*mr)
				b := make([]float32, kc*nr)
				for i := range a {
					a[i] = rng.Float32()*2 - 1
				}
				for i := range b {
					b[i] = rng.Float32()*2 - 1
				}
				const ldc = 101 // wider than any tile
				c0 := make([]float32, mr*ldc)
				for i := range c0 {
					c0[i] = rng.Float32()*2 - 1
				}
				got := append([]float32(nil), c0...)
				kern.fn(kc, a, b, got, ldc)
				twin := append([]float32(nil), c0...)
				gemmKernelGo(mr, nr, kc, a, b, twin, ldc)
				if kern.direct != nil {
					// The same rows of A in place (row stride lda): the same
					// bits as the packed panel.
					lda := kc + 3
					ar := make([]float32, (mr-1)*lda+kc)
					for i := range mr {
						for p := range kc {
							ar[i*lda+p] = a[p*mr+i]
						}
					}
					d := append([]float32(nil), c0...)
					kern.direct(kc, ar, lda, b, d, ldc)
					for x := range d {
						if math.Float32bits(d[x]) != math.Float32bits(got[x]) {
							t.Fatalf("(%d,%d): in-place kernel %v, packed kernel %v", x/ldc, x%ldc, d[x], got[x])
						}
					}
				}

				identical := true
				for i := range mr {
					for j := range ldc {
						x := i*ldc + j
						if j >= nr {
							if got[x] != c0[x] {
								t.Fatalf("kernel wrote outside its tile at (%d,%d)", i, j)
							}
							continue
						}
						var acc, s float32
						for p := range kc {
							acc = gemmFMA32(a[p*mr+i], b[p*nr+j], acc)
							s += float32(math.Abs(float64(a[p*mr+i] * b[p*nr+j])))
						}
						want := c0[x] + acc
						if kern.name[:2] != "go" {
							if math.Float32bits(want) != math.Float32bits(got[x]) {
								t.Fatalf("(%d,%d): kernel %v, fused Go loop %v", i, j, got[x], want)
							}
						}
						tol := float64(kc+1) * 0x1p-24 * float64(s+float32(math.Abs(float64(c0[x]))))
						if d := math.Abs(float64(got[x] - twin[x])); !(d <= tol) {
							t.Fatalf("(%d,%d): kernel %v, Go twin %v, differ by more than %v", i, j, got[x], twin[x], tol)
						}
						identical = identical && got[x] == twin[x]
					}
				}
				t.Logf("bit-identical to the pure-Go twin: %v (GOAMD64=%s)", identical, gemmBuildSetting("GOAMD64"))
			})
		}
	}
}

// TestGemmDeterministic checks that the result is bit-identical whatever the
// worker count (which changes the task split and schedule), and across the
// FMA micro-kernels, whose tile shapes differ but whose per-element
// arithmetic does not.
func TestGemmDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var kernels []*gemmKernel[float32]
	for _, k := range gemmKernels32() {
		if k == gemmKernel32 || k.name[:2] != "go" {
			kernels = append(kernels, k)
		}
	}
	for _, sh := range []gemmShape{{300, 200, 1100}, {37, 4133, 71}} {
		g := newGemmCase(rng, sh)
		a, lda := gemmStore[float32](g.opA, sh.m, sh.k, true, 0)
		b, ldb := gemmStore[float32](g.opB, sh.k, sh.n, false, 0)
		c0, ldc := gemmStore[float32](g.c0, sh.m, sh.n, false, 0)
		var want []float32
		for _, kern := range kernels {
			for _, w := range []int{1, 2, 3, 7, 16} {
				c := append([]float32(nil), c0...)
				gemmWith(kern, w, true, false, sh.m, sh.n, sh.k, 0.75, a, lda, b, ldb, 0.5, c, ldc)
				if want == nil {
					want = c
					continue
				}
				for i := range c {
					if math.Float32bits(want[i]) != math.Float32bits(c[i]) {
						t.Fatalf("%s, workers=%d: element %d is %v, with %s and one worker %v",
							kern.name, w, i, c[i], kernels[0].name, want[i])
					}
				}
			}
		}
	}
}

// TestGemmRowOrder checks that the order of the tiles within a task (row
// panel by row panel over chunks of B panels, or B panel by B panel) and
// the column tasks of products with few rows leave the same bits, on edge
// tiles, several k slices, in-place and packed A, the zero-storing first
// slice (beta 0), a scaled C and a bias.
func TestGemmRowOrder(t *testing.T) {
	defer func(w, m int) { gemmRowOrderWords, gemmColMaxM = w, m }(gemmRowOrderWords, gemmColMaxM)
	colMaxM := gemmColMaxM
	rng := rand.New(rand.NewPCG(9, 10))
	for _, sh := range []gemmShape{{300, 200, 1100}, {37, 413, 71}, {150, 700, 40}, {256, 300, 600}, {288, 130, 20}} {
		for _, transA := range []bool{false, true} {
			for _, beta := range []float32{0, 0.5} {
				for _, withBias := range []bool{false, true} {
					g := newGemmCase(rng, sh)
					a, lda := gemmStore[float32](g.opA, sh.m, sh.k, transA, 0)
					b, ldb := gemmStore[float32](g.opB, sh.k, sh.n, true, 0)
					c0, ldc := gemmStore[float32](g.c0, sh.m, sh.n, false, 0)
					var bias []float32
					if withBias {
						bias, _ = gemmStore[float32](g.c0[:sh.n], 1, sh.n, false, 0)
					}
					var want []float32
					for x, w := range []int{0, 1, 3 * gemmKC * 32, 1 << 18, 0, 1, 1 << 18} {
						gemmRowOrderWords, gemmColMaxM = w, 0
						if x >= 4 {
							gemmColMaxM = colMaxM
						}
						c := append([]float32(nil), c0...)
						gemmWithBias(gemmKernel32, 2, transA, true, sh.m, sh.n, sh.k, 1, a, lda, b, ldb, beta, bias, c, ldc)
						if want == nil {
							want = c
							continue
						}
						for i := range c {
							if math.Float32bits(want[i]) != math.Float32bits(c[i]) {
								t.Fatalf("%v transA=%v beta=%v bias=%v, row order %d words, column tasks up to %d rows: element %d is %v, column order %v",
									sh, transA, beta, withBias, w, gemmColMaxM, i, c[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

type gemmJob struct {
	a, b, c0, want []float32
	m, n, k        int
}

// run computes c += A·op(B), with B stored n×k when transB.
func (j gemmJob) run(transB bool, c []float32) {
	ldb := j.n
	if transB {
		ldb = j.k
	}
	Gemm(false, transB, j.m, j.n, j.k, 1, j.a, j.k, j.b, ldb, 1, c, j.n)
}

// TestGemmConcurrent runs Gemm from two goroutines at once (two models
// training at the same time) and checks both against serial results.
func TestGemmConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	jobs := make([]gemmJob, 2)
	for x := range jobs {
		m, n, k := 96+x*37, 160+x*11, 200-x*13
		j := gemmJob{m: m, n: n, k: k, a: make([]float32, m*k), b: make([]float32, k*n), c0: make([]float32, m*n)}
		for _, s := range [][]float32{j.a, j.b, j.c0} {
			for i := range s {
				s[i] = rng.Float32()*2 - 1
			}
		}
		j.want = append([]float32(nil), j.c0...)
		jobs[x] = j
		j.run(x == 1, j.want)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	for x, j := range jobs {
		wg.Go(func() {
			for range 10 {
				c := append([]float32(nil), j.c0...)
				j.run(x == 1, c)
				for i := range c {
					if c[i] != j.want[i] {
						errs[x] = fmt.Errorf("goroutine %d: element %d = %v, want %v", x, i, c[i], j.want[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestGemmEdgeCases(t *testing.T) {
	nan := float32(math.NaN())
	t.Run("k=0 beta=0 overwrites NaN", func(t *testing.T) {
		c := []float32{nan, nan, nan, nan}
		Gemm(false, false, 2, 2, 0, 1, nil, 1, nil, 2, 0, c, 2)
		gemmEqual(t, c, []float32{0, 0, 0, 0})
	})
	t.Run("k=0 scales by beta", func(t *testing.T) {
		c := []float64{1, 2, 3, 4, 5, 6}
		Gemm(true, true, 2, 2, 0, 1, nil, 2, nil, 1, 2, c, 3)
		gemmEqual(t, c, []float64{2, 4, 3, 8, 10, 6})
	})
	t.Run("alpha=0 ignores A and B", func(t *testing.T) {
		a := []float32{nan, nan}
		c := []float32{1, 2}
		Gemm(false, false, 1, 2, 1, 0, a, 1, a, 2, 3, c, 2)
		gemmEqual(t, c, []float32{3, 6})
	})
	t.Run("m=0 and n=0 touch nothing", func(t *testing.T) {
		c := []float32{7}
		Gemm(false, false, 0, 1, 3, 1, nil, 3, []float32{1, 1, 1}, 1, 0, c, 1)
		Gemm(false, false, 1, 0, 3, 1, []float32{1, 1, 1}, 3, nil, 1, 0, c, 1)
		Gemm[float32](false, false, 0, 0, 0, 1, nil, 1, nil, 1, 0, nil, 1)
		gemmEqual(t, c, []float32{7})
	})
	t.Run("beta=0 with NaN C and k>0", func(t *testing.T) {
		c := []float32{nan, nan}
		Gemm(false, false, 1, 2, 2, 2, []float32{1, 2}, 2, []float32{1, 2, 3, 4}, 2, 0, c, 2)
		gemmEqual(t, c, []float32{14, 20})
	})
}

func TestGemmPanics(t *testing.T) {
	x := make([]float32, 16)
	for name, f := range map[string]func(){
		"negative m":   func() { Gemm(false, false, -1, 2, 2, 1, x, 2, x, 2, 0, x, 2) },
		"lda < k":      func() { Gemm(false, false, 2, 2, 3, 1, x, 2, x, 2, 0, x, 2) },
		"lda < m (tA)": func() { Gemm(true, false, 3, 2, 2, 1, x, 2, x, 2, 0, x, 2) },
		"ldb < k (tB)": func() { Gemm(false, true, 2, 2, 3, 1, x, 3, x, 2, 0, x, 2) },
		"ldc < n":      func() { Gemm(false, false, 2, 3, 2, 1, x, 2, x, 3, 0, x, 2) },
		"short A":      func() { Gemm(false, false, 4, 2, 5, 1, x, 5, x, 2, 0, x, 2) },
		"short C":      func() { Gemm(false, false, 9, 2, 1, 1, x, 1, x, 2, 0, x, 2) },
		"ldc=0 n=0":    func() { Gemm(false, false, 2, 0, 1, 1, x, 1, x, 1, 0, x, 0) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil {
					t.Fatal("no panic")
				} else if _, ok := r.(gemmArgError); !ok {
					t.Fatalf("panic value %#v, want a gemmArgError", r)
				}
			}()
			f()
		})
	}
}

func TestGemmNoAllocs(t *testing.T) {
	if gemmBuildSetting("-race") == "true" {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	const n = 256
	a, b, c := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	Gemm(false, true, n, n, n, 1, a, n, b, n, 0, c, n)
	allocs := testing.AllocsPerRun(20, func() {
		Gemm(false, true, n, n, n, 1, a, n, b, n, 0, c, n)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per call, want 0", allocs)
	}
}

func gemmEqual[T comparable](t *testing.T, got, want []T) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// raceShort reports whether the tests run with -short under the race detector, as
// make test's race pass runs them: the numeric sweeps then take a sample of their
// cases (the race detector slows arithmetic loops ten times or more, and the full
// sweeps run in the plain pass), keeping every schedule that starts goroutines.
func raceShort() bool {
	return testing.Short() && gemmBuildSetting("-race") == "true"
}

func gemmBuildSetting(key string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == key {
				return s.Value
			}
		}
	}
	return ""
}

// TestGemmPaddedA checks that products whose op(A) the kernel would read in place at a
// stride of a multiple of 4 KB (gemmAliasedRows; copied by padA) leave the bits of the
// same product with A at a stride that is not: rows exactly k apart and with a gap,
// several worker counts, a scaled C and a bias with ReLU. It also checks the copy's
// buffer is reused: no allocations per call in steady state.
func TestGemmPaddedA(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const k = 1024
	for _, sh := range []struct{ m, n, lda int }{{256, 100, 1024}, {30, 70, 2048}, {25, 33, 1024}} {
		a := make([]float32, (sh.m-1)*sh.lda+k)
		ref := make([]float32, sh.m*(k+3))
		for i := range sh.m {
			for p := range k {
				v := float32(rng.NormFloat64())
				a[i*sh.lda+p], ref[i*(k+3)+p] = v, v
			}
		}
		if !gemmAliasedRows[float32](sh.lda) || gemmAliasedRows[float32](k+3) {
			t.Fatal("strides do not exercise the copy")
		}
		b := make([]float32, sh.n*k)
		bias := make([]float32, sh.n)
		c0 := make([]float32, sh.m*sh.n)
		for _, s := range [][]float32{b, bias, c0} {
			for i := range s {
				s[i] = float32(rng.NormFloat64())
			}
		}
		for _, w := range []int{1, 2, 3} {
			for _, beta := range []float32{0, 0.5} {
				for _, br := range []bool{false, true} {
					var bs []float32
					if br {
						bs = bias
					}
					got, want := slices.Clone(c0), slices.Clone(c0)
					gemmWithBiasReLU(gemmKernel32, w, false, true, sh.m, sh.n, k, 1, a, sh.lda, b, k, beta, bs, got, sh.n, br)
					gemmWithBiasReLU(gemmKernel32, w, false, true, sh.m, sh.n, k, 1, ref, k+3, b, k, beta, bs, want, sh.n, br)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("m=%d n=%d lda=%d workers=%d beta=%v bias+relu=%v: element %d is %v, want %v",
								sh.m, sh.n, sh.lda, w, beta, br, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
	if gemmBuildSetting("-race") == "true" {
		return // sync.Pool drops items at random under the race detector
	}
	const m, n = 256, 256
	a, b, c := make([]float32, m*k), make([]float32, n*k), make([]float32, m*n)
	Gemm(false, true, m, n, k, 1, a, k, b, k, 0, c, n)
	if allocs := testing.AllocsPerRun(20, func() { Gemm(false, true, m, n, k, 1, a, k, b, k, 0, c, n) }); allocs != 0 {
		t.Fatalf("%v allocations per call with A copied, want 0", allocs)
	}
}
