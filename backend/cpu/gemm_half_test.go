package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// gemmAdversarial32 returns a float32 value drawn from rng, now and then a
// NaN, an infinity, a signed zero, a denormal, a huge value (products that
// overflow) or a tiny one (products that underflow).
func gemmAdversarial32(rng *rand.Rand) float32 {
	switch rng.IntN(16) {
	case 0:
		return float32(math.NaN())
	case 1:
		return float32(math.Inf(1 - 2*rng.IntN(2)))
	case 2:
		return float32(math.Copysign(0, -1))
	case 3:
		return math.Float32frombits(rng.Uint32() & 0x807fffff) // denormal or zero
	case 4:
		return (rng.Float32()*2 - 1) * 0x1p100
	case 5:
		return (rng.Float32()*2 - 1) * 0x1p-100
	}
	return rng.Float32()*2 - 1
}

// TestGemmHalfKernels checks each kernel's half-width forms (fnHalf,
// directHalf) against fn and direct on the first nr/2 columns of a whole
// tile bit for bit, on ordinary panels, on panels that cancel exactly (B's
// odd steps negating its even ones) and on adversarial ones (NaN, ±Inf,
// ±0, denormals, overflowing and underflowing products): nothing beyond the
// first nr/2 columns of the tile is written; the assembly equals the
// exactly fused loop, and the pure-Go twin (gemmKernelGoHalf) is within a
// tight bound on finite panels.
func TestGemmHalfKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for _, kern := range gemmKernels32() {
		if kern.fnHalf == nil {
			continue
		}
		mr, nr := kern.mr, kern.nr
		for _, kc := range []int{0, 1, 2, 7, 16, 17, 33, 256, 517} {
			for _, kind := range []string{"plain", "cancel", "adversarial"} {
				t.Run(fmt.Sprintf("%s/kc=%d/%s", kern.name, kc, kind), func(t *testing.T) {
					ap := make([]float32, kc*mr)
					bp := make([]float32, kc*nr)
					for x := range ap {
						ap[x] = rng.Float32()*2 - 1
						if kind == "adversarial" {
							ap[x] = gemmAdversarial32(rng)
						}
					}
					for x := range bp {
						bp[x] = rng.Float32()*2 - 1
						if kind == "adversarial" {
							bp[x] = gemmAdversarial32(rng)
						}
					}
					if kind == "cancel" {
						// Steps 2q and 2q+1 share A and negate B: every pair of
						// products cancels, the sums come back to +0 or to
						// the rounding residue of the odd step.
						for p := 1; p < kc; p += 2 {
							copy(ap[p*mr:][:mr], ap[(p-1)*mr:][:mr])
							for j := range nr {
								bp[p*nr+j] = -bp[(p-1)*nr+j]
							}
						}
					}
					const ldc = 37
					c0 := make([]float32, mr*ldc)
					for x := range c0 {
						c0[x] = rng.Float32()*2 - 1
						if x%5 == 0 {
							c0[x] = float32(math.Copysign(0, -1))
						}
					}
					lda := kc + 5
					ar := make([]float32, mr*lda)
					for x := range ar {
						ar[x] = float32(math.NaN()) // beyond kc: never read
					}
					for i := range mr {
						for p := range kc {
							ar[i*lda+p] = ap[p*mr+i]
						}
					}
					full := slices.Clone(c0)
					kern.fn(kc, ap, bp, full, ldc)
					for _, inPlace := range []bool{false, true} {
						if inPlace && (kern.directHalf == nil || kern.direct == nil || kc == 0) {
							continue
						}
						want := full
						got := slices.Clone(c0)
						if inPlace {
							want = slices.Clone(c0)
							kern.direct(kc, ar, lda, bp, want, ldc)
							kern.directHalf(kc, ar, lda, bp, got, ldc)
						} else {
							kern.fnHalf(kc, ap, bp, got, ldc)
						}
						for i := range mr {
							for j := range ldc {
								x := i*ldc + j
								if j >= nr/2 {
									if math.Float32bits(got[x]) != math.Float32bits(c0[x]) {
										t.Fatalf("in place=%v: wrote (%d,%d) beyond the half tile", inPlace, i, j)
									}
									continue
								}
								if !gemmSameBits(got[x], want[x]) {
									t.Fatalf("in place=%v: (%d,%d) = %v (%#x), whole tile %v (%#x)", inPlace, i, j,
										got[x], math.Float32bits(got[x]), want[x], math.Float32bits(want[x]))
								}
							}
						}
					}
					twin := slices.Clone(c0)
					gemmKernelGoHalf(mr, nr, kc, ap, bp, twin, ldc)
					for i := range mr {
						for j := range ldc {
							x := i*ldc + j
							if j >= nr/2 {
								if math.Float32bits(twin[x]) != math.Float32bits(c0[x]) {
									t.Fatalf("Go twin wrote (%d,%d) beyond the half tile", i, j)
								}
								continue
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
							if kind == "adversarial" {
								continue
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

// TestGemmHalfEdges runs whole float32 products with edge tiles of at most
// nr/2 columns (n ≤ nr/2, or a last panel that narrow: Gemm runs the
// half-width kernels there) through each kernel with half-width forms and
// through the same kernel without them, bit for bit: both op(A) and op(B),
// several k slices, alpha 1 and not, beta 0, 1 and other, a bias, one and
// two workers (the blocking loop and column tasks), and adversarial
// operands (NaN, ±Inf, ±0, denormals, overflowing and underflowing
// products).
func TestGemmHalfEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(73, 74))
	for _, kern := range gemmKernels32() {
		if kern.fnHalf == nil {
			continue
		}
		plain := *kern
		plain.fnHalf, plain.directHalf = nil, nil
		shapes := []gemmShape{{256, 10, 1024}, {256, 1024, 10}, {10, 1024, 256}, {37, 16, 70}, {12, 1, 5}, {25, 7, 3000}, {5, 9, 33},
			// Column tasks (few rows, A in place, 2 workers) with a last panel of
			// at most 16 columns.
			{40, 138, 50}, {100, 144, 1500}}
		for _, sh := range shapes {
			for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
				for _, adv := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/%dx%dx%d/tA=%v/tB=%v/adv=%v", kern.name, sh.m, sh.n, sh.k, tr[0], tr[1], adv), func(t *testing.T) {
						m, n, k := sh.m, sh.n, sh.k
						val := func() float32 {
							if adv {
								return gemmAdversarial32(rng)
							}
							return rng.Float32()*2 - 1
						}
						a := make([]float32, m*k)
						for i := range a {
							a[i] = val()
						}
						b := make([]float32, k*n)
						for i := range b {
							b[i] = val()
						}
						lda, ldb := k, n
						if tr[0] {
							lda = m
						}
						if tr[1] {
							ldb = k
						}
						bias := make([]float32, n)
						for i := range bias {
							bias[i] = val()
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
							gemmWithBias(kern, w.workers, tr[0], tr[1], m, n, k, w.alpha, a, lda, b, ldb, w.beta, bs, got, n)
							gemmWithBias(&plain, w.workers, tr[0], tr[1], m, n, k, w.alpha, a, lda, b, ldb, w.beta, bs, want, n)
							for i := range got {
								if !gemmSameBits(got[i], want[i]) {
									t.Fatalf("%+v: C[%d][%d] = %v, without half kernels %v", w, i/n, i%n, got[i], want[i])
								}
							}
						}
					})
				}
			}
		}
	}
}

// BenchmarkGemmHalf times single-worker float32 products of few columns
// with the half-width kernels (half) and without them (plain), in thread
// CPU time (cpu-ns/op): the MLP's last layer forward (N = 10 classes).
func BenchmarkGemmHalf(b *testing.B) {
	kern := gemmKernel32
	if kern.fnHalf == nil {
		b.Skip("no half-width kernels")
	}
	plain := *kern
	plain.fnHalf, plain.directHalf = nil, nil
	for _, sh := range []gemmShape{{256, 10, 1024}, {256, 16, 784}} {
		rng := rand.New(rand.NewPCG(uint64(sh.m), uint64(sh.n)))
		x, w, y, bias := make([]float32, sh.m*sh.k), make([]float32, sh.n*sh.k), make([]float32, sh.m*sh.n), make([]float32, sh.n)
		for _, s := range [][]float32{x, w} {
			for i := range s {
				s[i] = rng.Float32() - 0.5
			}
		}
		for _, v := range []struct {
			name string
			kern *gemmKernel[float32]
		}{{"half", kern}, {"plain", &plain}} {
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
