package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// gemmSameBits reports whether x and y have the same bits, any two NaNs
// counting as equal (payloads are not part of the contract).
func gemmSameBits(x, y float32) bool {
	return math.Float32bits(x) == math.Float32bits(y) || x != x && y != y
}

// TestGemmRowKernels checks each kernel's row kernels (rowsFn, rowsDirect)
// for every row count and several depths: start nil bit for bit against fn
// on the same rows of a whole tile (the padding rows of the panel hold NaNs
// and must not reach the valid rows), start +0s against fn on a C of +0s,
// start a bias row against fn on a C filled with it (C holding garbage
// then), the in-place form against the packed one, assembly bit for bit
// against an exactly fused multiply-add loop and the pure-Go twin
// (gemmKernelGoRows) within a tight bound; nothing outside the rows×nr
// block is written.
func TestGemmRowKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	for _, kern := range gemmKernels32() {
		if kern.rowsFn == nil {
			continue
		}
		mr, nr := kern.mr, kern.nr
		for rows := 1; rows < mr; rows++ {
			for _, kc := range []int{0, 1, 7, 16, 17, 256, 517} {
				t.Run(fmt.Sprintf("%s/rows=%d/kc=%d", kern.name, rows, kc), func(t *testing.T) {
					ap := make([]float32, kc*mr)
					for x := range ap {
						ap[x] = rng.Float32()*2 - 1
						if x%mr >= rows {
							ap[x] = float32(math.NaN())
						}
					}
					if kc > 3 && rows > 1 {
						// A row of -0s: its sums are -0 before the store.
						for p := range kc {
							ap[p*mr+1] = float32(math.Copysign(0, -1))
						}
					}
					bp := make([]float32, kc*nr)
					for x := range bp {
						bp[x] = rng.Float32()*2 - 1
					}
					const ldc = 45 // wider than any tile
					// C has mr rows: the row kernels must leave the rows
					// from rows on alone.
					c0 := make([]float32, mr*ldc)
					for x := range c0 {
						c0[x] = rng.Float32()*2 - 1
					}
					bias := make([]float32, nr)
					for x := range bias {
						bias[x] = rng.Float32()*2 - 1
					}
					bias[0] = float32(math.Copysign(0, -1))
					garbage := make([]float32, mr*ldc)
					for x := range garbage {
						garbage[x] = [...]float32{float32(math.NaN()), float32(math.Copysign(0, -1)), 3}[x%3]
					}

					// The reference: fn on a whole tile.
					full := slices.Clone(c0)
					kern.fn(kc, ap, bp, full, ldc)
					fullZero := make([]float32, mr*ldc)
					kern.fn(kc, ap, bp, fullZero, ldc)
					fullBias := make([]float32, mr*ldc)
					for i := range mr {
						copy(fullBias[i*ldc:][:nr], bias)
					}
					kern.fn(kc, ap, bp, fullBias, ldc)

					// The same rows of A in place, stored without the
					// padding rows (row stride lda).
					lda := kc + 3
					ar := make([]float32, (rows-1)*lda+kc)
					for i := range rows {
						for p := range kc {
							ar[i*lda+p] = ap[p*mr+i]
						}
					}

					for _, tc := range []struct {
						name      string
						c0, start []float32
						want      []float32
					}{{"add", c0, nil, full}, {"zero", garbage, make([]float32, nr), fullZero}, {"bias", garbage, bias, fullBias}} {
						for _, inPlace := range []bool{false, true} {
							if inPlace && kern.rowsDirect == nil {
								continue
							}
							got := slices.Clone(tc.c0)
							if inPlace {
								kern.rowsDirect(rows, kc, ar, lda, bp, got, ldc, tc.start)
							} else {
								kern.rowsFn(rows, kc, ap, bp, got, ldc, tc.start)
							}
							for i := range mr {
								for j := range ldc {
									x := i*ldc + j
									if i >= rows || j >= nr {
										if math.Float32bits(got[x]) != math.Float32bits(tc.c0[x]) {
											t.Fatalf("%s in place=%v: wrote outside the rows at (%d,%d)", tc.name, inPlace, i, j)
										}
										continue
									}
									if !gemmSameBits(got[x], tc.want[x]) {
										t.Fatalf("%s in place=%v: (%d,%d) = %v (%#x), whole-tile kernel %v (%#x)", tc.name, inPlace, i, j,
											got[x], math.Float32bits(got[x]), tc.want[x], math.Float32bits(tc.want[x]))
									}
								}
							}
						}
					}

					// Against the loop of the doc comments: fused exactly for
					// the assembly kernels, the Go twin within rounding.
					twin := slices.Clone(c0)
					gemmKernelGoRows(rows, nr, kc, ap, 1, mr, bp, twin, ldc, nil)
					twinDirect := slices.Clone(c0)
					gemmKernelGoRows(rows, nr, kc, ar, lda, 1, bp, twinDirect, ldc, nil)
					for i := range rows {
						for j := range nr {
							x := i*ldc + j
							if !gemmSameBits(twin[x], twinDirect[x]) {
								t.Fatalf("(%d,%d): Go twin packed %v, in place %v", i, j, twin[x], twinDirect[x])
							}
							var acc, s float32
							for p := range kc {
								acc = gemmFMA32(ap[p*mr+i], bp[p*nr+j], acc)
								s += float32(math.Abs(float64(ap[p*mr+i] * bp[p*nr+j])))
							}
							want := c0[x] + acc
							if kern.name[:2] != "go" && !gemmSameBits(full[x], want) {
								t.Fatalf("(%d,%d): kernel %v, fused Go loop %v", i, j, full[x], want)
							}
							tol := float64(kc+1) * 0x1p-24 * float64(s+float32(math.Abs(float64(c0[x]))))
							if d := math.Abs(float64(full[x] - twin[x])); !(d <= tol) {
								t.Fatalf("(%d,%d): kernel %v, Go twin %v, differ by more than %v", i, j, full[x], twin[x], tol)
							}
						}
					}
				})
			}
		}
	}
}

// TestGemmRowEdges runs whole float32 products through each kernel with row
// kernels and through the same kernel without them (its partial row panels
// then run the whole-tile kernel on a zero-padded packed panel), bit for
// bit: m takes every remainder modulo mr, with whole and partial column
// panels, one and several k slices, both op(A) (in place and packed),
// alpha 1 and not, beta 0, 1 and other, a bias, one and two workers
// (column tasks and the blocking loop), and A rows of -0s and NaNs.
func TestGemmRowEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(63, 64))
	for _, kern := range gemmKernels32() {
		if kern.rowsFn == nil && kern.rowsDirect == nil {
			continue
		}
		plain := *kern
		plain.rowsFn, plain.rowsDirect = nil, nil
		mr := kern.mr
		var shapes []gemmShape
		for r := 1; r <= mr; r++ {
			shapes = append(shapes, gemmShape{2*mr + r, 96, 40}, gemmShape{r, 70, 9})
		}
		if !raceShort() {
			shapes = append(shapes, gemmShape{256, 1024, 600}, gemmShape{296, 200, 1100})
		}
		// k = 530: two k slices, whose partial sums the tasks share.
		shapes = append(shapes, gemmShape{155, 64, 530})
		for _, sh := range shapes {
			for _, transA := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%dx%dx%d/tA=%v", kern.name, sh.m, sh.n, sh.k, transA), func(t *testing.T) {
					m, n, k := sh.m, sh.n, sh.k
					a := make([]float32, m*k)
					lda := k
					if transA {
						lda = m
					}
					for i := range a {
						a[i] = rng.Float32()*2 - 1
						switch r := i / lda % 7; {
						case r == 1:
							a[i] = float32(math.Copysign(0, -1))
						case r == 2 && i%lda == lda/2:
							a[i] = float32(math.NaN())
						}
					}
					b := make([]float32, k*n)
					for i := range b {
						b[i] = rng.Float32()*2 - 1
					}
					bias := make([]float32, n)
					for i := range bias {
						bias[i] = rng.Float32()*2 - 1
					}
					c0 := make([]float32, m*n)
					for i := range c0 {
						c0[i] = rng.Float32()
					}
					got, want := slices.Clone(c0), slices.Clone(c0)
					for _, w := range []struct {
						workers     int
						alpha, beta float32
						bias        bool
					}{{1, 1, 0, false}, {2, 1, 0, false}, {2, 1, 0.5, false}, {1, 1, 1, true}, {2, 1, 0, true}, {2, -0.75, 0, false}, {1, 0.3, 1, true}} {
						var bs []float32
						if w.bias {
							bs = bias
						}
						gemmWithBias(kern, w.workers, transA, false, m, n, k, w.alpha, a, lda, b, n, w.beta, bs, got, n)
						gemmWithBias(&plain, w.workers, transA, false, m, n, k, w.alpha, a, lda, b, n, w.beta, bs, want, n)
						for i := range got {
							if !gemmSameBits(got[i], want[i]) {
								t.Fatalf("%+v: C[%d][%d] = %v, without row kernels %v", w, i/n, i%n, got[i], want[i])
							}
						}
					}
				})
			}
		}
	}
}

// BenchmarkGemmRowEdge times single-worker float32 products whose last row
// panel is partial, with the row kernels (rows) and without them (plain:
// the whole-tile kernel on a zero-padded panel), in thread CPU time
// (cpu-ns/op): the MLP's forward product (m 256 = 21·12 + 4), and small m
// where the partial panel is a large share of the work.
func BenchmarkGemmRowEdge(b *testing.B) {
	kern := gemmKernel32
	if kern.rowsFn == nil {
		b.Skip("no row kernels")
	}
	plain := *kern
	plain.rowsFn, plain.rowsDirect = nil, nil
	for _, sh := range []gemmShape{{16, 1024, 512}, {20, 1024, 512}, {256, 1024, 784}, {1024, 784, 256}} {
		rng := rand.New(rand.NewPCG(uint64(sh.m), uint64(sh.n)))
		a, w, c := make([]float32, sh.m*sh.k), make([]float32, sh.n*sh.k), make([]float32, sh.m*sh.n)
		for _, s := range [][]float32{a, w} {
			for i := range s {
				s[i] = rng.Float32() - 0.5
			}
		}
		for _, transA := range []bool{false, true} {
			lda := sh.k
			if transA {
				lda = sh.m
			}
			for _, v := range []struct {
				name string
				kern *gemmKernel[float32]
			}{{"rows", kern}, {"plain", &plain}} {
				b.Run(fmt.Sprintf("%dx%dx%d/tA=%v/%s", sh.m, sh.n, sh.k, transA, v.name), func(b *testing.B) {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					t0 := gemmThreadCPU()
					for b.Loop() {
						gemmWith(v.kern, 1, transA, true, sh.m, sh.n, sh.k, 1, a, lda, w, sh.k, 0, c, sh.n)
					}
					b.ReportMetric(float64(gemmThreadCPU()-t0)/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}
