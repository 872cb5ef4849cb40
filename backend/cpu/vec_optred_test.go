package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
	"github.com/gamp-ml/gamp/internal/testenv"
)

// colSumInputs are column-sum inputs: specials, and magnitudes far apart so the float64
// sums round and their order shows.
func colSumInputs(rng *rand.Rand, n int) []float32 {
	x := vecInputs(rng, n)
	for i := range x {
		switch rng.IntN(6) {
		case 0:
			x[i] *= 1e7
		case 1:
			x[i] = float32(rng.NormFloat64() * 1e-3)
		}
	}
	return x
}

// TestVecColSum pits colSumF32 and colSumBF16 (the AVX-512 loops where the CPU has
// them) against colSumGo, bit for bit.
func TestVecColSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for _, w := range []int{0, 1, 7, 8, 9, 15, 16, 63, 64, 65, 72, 127, 128, 200, 1024} {
		for _, rows := range []int{1, 2, 5, 16, 33} {
			for _, add := range []bool{false, true} {
				stride := w + rng.IntN(3)*9
				n := (rows-1)*stride + w
				x := colSumInputs(rng, n)
				xb := make([]half.BFloat16, n)
				half.Float32ToBFloat16(xb, x)
				xu := make([]uint16, n)
				for i, v := range xb {
					xu[i] = uint16(v)
				}
				init := make([]float64, w)
				for i := range init {
					init[i] = float64(colSumInputs(rng, 1)[0]) * 3
				}
				for _, bf := range []bool{false, true} {
					got, want := slices.Clone(init), slices.Clone(init)
					if bf {
						colSumBF16(got, xu, stride, rows, add)
						colSumGo(want, xu, stride, rows, add)
					} else {
						colSumF32(got, x, stride, rows, add)
						colSumGo(want, x, stride, rows, add)
					}
					for c := range got {
						if !sameBits64(got[c], want[c]) {
							t.Fatalf("w=%d rows=%d stride=%d add=%v bf16=%v: column %d = %v, twin %v",
								w, rows, stride, add, bf, c, got[c], want[c])
						}
					}
				}
			}
		}
	}
}

// TestReduceColsSumMatches pits reduceColsSum (the Sum and Mean path of Float32 and
// BFloat16 data) against reduceCols, bit for bit, over shapes that take one and many
// row blocks, one and many column strips, and every destination dtype.
func TestReduceColsSumMatches(t *testing.T) {
	b, _ := New(0)
	rng := rand.New(rand.NewPCG(73, 74))
	shapes := [][3]int{{1, 1, 2}, {1, 5, 3}, {2, 17, 8}, {1, 33, 100}, {3, 300, 17}, {1, 2048, 128},
		{1, 256, 1024}, {2, 100, 512}, {1, 70, 1500}, {1, 40, 2100}, {4, 9, 64}, {1, 1000, 384}}
	if testing.Short() {
		shapes = shapes[:6]
	}
	for _, sh := range shapes {
		outer, n, inner := sh[0], sh[1], sh[2]
		x := colSumInputs(rng, outer*n*inner)
		for _, sdt := range []backend.DType{backend.Float32, backend.BFloat16} {
			src, _ := b.Alloc(sdt, len(x))
			st(src).storeF32(0, x)
			for _, ddt := range []backend.DType{backend.Float32, backend.BFloat16, backend.Float64} {
				for _, op := range []backend.ReduceOp{backend.Sum, backend.Mean} {
					got, _ := b.Alloc(ddt, outer*inner)
					want, _ := b.Alloc(ddt, outer*inner)
					reduceColsSum(op, st(got), st(src), outer, n, inner)
					reduceCols[float32](op, st(want), st(src), outer, n, inner)
					g, w := make([]float64, outer*inner), make([]float64, outer*inner)
					st(got).loadF64(g, 0)
					st(want).loadF64(w, 0)
					for i := range g {
						if !sameBits64(g[i], w[i]) {
							t.Fatalf("%v %s→%s [%d %d %d]: [%d] = %v, reduceCols %v", op, sdt, ddt, outer, n, inner, i, g[i], w[i])
						}
					}
				}
			}
		}
	}
}

// TestVecSGD pits sgdFused (the AVX-512 loop where the CPU has it) against sgdGo, the
// chunked vector passes (sgdVecPasses) and sgdSpan's loop (Maximize with the gradient
// negated, an exact negation, keeps it on the loop), bit for bit, in every mode.
func TestVecSGD(t *testing.T) {
	rng := rand.New(rand.NewPCG(75, 76))
	for _, n := range []int{0, 1, 15, 16, 17, 63, 64, 65, 100, 1000, 4099} {
		for _, wd := range []float64{0, 0.01} {
			for _, mom := range []float64{0, 0.9} {
				for _, first := range []bool{false, true} {
					for _, damp := range []float64{0, 0.25} {
						for _, nest := range []bool{false, true} {
							if mom == 0 && (first || damp != 0 || nest) {
								continue
							}
							a := backend.SGDArgs{LR: 0.01, Momentum: mom, Dampening: damp, WeightDecay: wd,
								Nesterov: nest, First: first, N: n}
							w0, g, b0 := vecInputs(rng, n), vecInputs(rng, n), vecInputs(rng, n)
							type res struct{ w, buf []float32 }
							run := func(f func(w, g, buf []float32)) res {
								w, buf := slices.Clone(w0), slices.Clone(b0)
								if mom == 0 {
									buf = nil
								}
								f(w, slices.Clone(g), buf)
								return res{w, buf}
							}
							got := run(func(w, g, buf []float32) { sgdFused(a, w, g, buf) })
							others := map[string]res{
								"twin": run(func(w, g, buf []float32) {
									sgdGo(sgdModeOf(a), w, g, buf, float32(wd), float32(mom), float32(1-damp), float32(a.LR))
								}),
								"passes": run(func(w, g, buf []float32) { sgdVecPasses(a, w, g, buf, 0, n) }),
								"loop": run(func(w, g, buf []float32) {
									am := a
									am.Maximize = true
									for i := range g {
										g[i] = -g[i]
									}
									sgdSpan(am, w, g, buf)
								}),
							}
							buf := func(r res, i int) *float32 {
								if r.buf == nil {
									return nil
								}
								return &r.buf[i]
							}
							for name, want := range others {
								for i := range got.w {
									if !sameBits(got.w[i], want.w[i]) || (buf(got, i) != nil && !sameBits(*buf(got, i), *buf(want, i))) {
										t.Fatalf("n=%d %+v: [%d] w %v buf %v, %s w %v buf %v", n, a, i, got.w[i], buf(got, i), name, want.w[i], buf(want, i))
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestVecAdam pits adamFused (the AVX-512 loop where the CPU has it) against adamGo,
// the chunked vector passes (adamVecPasses) and adamSpan's loop (Maximize with the
// gradient negated keeps it there), bit for bit, in every mode.
func TestVecAdam(t *testing.T) {
	rng := rand.New(rand.NewPCG(77, 78))
	for _, n := range []int{0, 1, 15, 16, 17, 63, 64, 65, 100, 1000, 4099} {
		for _, c := range []struct {
			beta1, wd float64
			decoupled bool
		}{{0.9, 0, false}, {0.9, 0.01, false}, {0.9, 0.01, true}, {0.3, 0, false}, {0.3, 0.1, false}, {0.3, 0.1, true}} {
			a := backend.AdamArgs{N: n, LR: 1e-3, Beta1: c.beta1, Beta2: 0.999, Eps: 1e-8,
				WeightDecay: c.wd, Decoupled: c.decoupled, Step: 5}
			k := newAdamConsts[float32](a)
			w0, g0, m0, v0 := vecInputs(rng, n), vecInputs(rng, n), vecInputs(rng, n), vecInputs(rng, n)
			for i := range v0 {
				if rng.IntN(2) == 0 {
					v0[i] = float32(math.Abs(float64(v0[i])))
				}
			}
			run := func(f func(w, g, m, v []float32)) [3][]float32 {
				w, g, m, v := slices.Clone(w0), slices.Clone(g0), slices.Clone(m0), slices.Clone(v0)
				f(w, g, m, v)
				return [3][]float32{w, m, v}
			}
			got := run(func(w, g, m, v []float32) { adamFused(a, w, g, m, v, k.stepSize, k.bc2Sqrt, k.small) })
			others := map[string][3][]float32{
				"passes": run(func(w, g, m, v []float32) {
					adamVecPasses(a, w, g, m, v, 0, n, k.stepSize, k.bc2Sqrt, k.small)
				}),
				"loop": run(func(w, g, m, v []float32) {
					am := a
					am.Maximize = true
					for i := range g {
						g[i] = -g[i]
					}
					adamSpan(am, k, w, g, m, v, nil)
				}),
			}
			for name, want := range others {
				for q, what := range []string{"w", "m", "v"} {
					for i := range got[q] {
						if !sameBits(got[q][i], want[q][i]) {
							t.Fatalf("n=%d %+v: %s[%d] = %v, %s %v", n, c, what, i, got[q][i], name, want[q][i])
						}
					}
				}
			}
		}
	}
}

// TestVecOptRedGenerated checks that vec_optred_amd64.s is what internal/vecgen writes
// beside vec_amd64.s.
func TestVecOptRedGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go run")
	}
	gotool := testenv.Programs(t, testenv.GoTool, "go")[0]
	out := t.TempDir() + "/vec_amd64.s"
	if b, err := exec.Command(gotool, "run", "./internal/vecgen", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("vecgen: %v\n%s", err, b)
	}
	const name = "vec_optred_amd64.s"
	got, err := os.ReadFile(filepath.Join(filepath.Dir(out), name))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s is not what vecgen writes: run go generate ./backend/cpu/", name)
	}
}

func BenchmarkReduceBiasGrad(b *testing.B) {
	be, _ := New(0)
	for _, sh := range [][2]int{{2048, 512}, {4096, 384}, {2048, 128}, {256, 1024}} {
		for _, dt := range []backend.DType{backend.BFloat16, backend.Float32} {
			n, inner := sh[0], sh[1]
			src, _ := be.Alloc(dt, n*inner)
			st(src).storeF32(0, colSumInputs(rand.New(rand.NewPCG(1, 2)), n*inner))
			dst, _ := be.Alloc(dt, inner)
			for _, path := range []string{"new", "old"} {
				b.Run(fmt.Sprintf("%dx%d/%s/%s", n, inner, dt, path), func(b *testing.B) {
					b.SetBytes(int64(n * inner * dt.Size()))
					for b.Loop() {
						if path == "new" {
							be.Reduce(backend.Sum, dst, src, 1, n, inner)
						} else {
							reduceCols[float32](backend.Sum, st(dst), st(src), 1, n, inner)
						}
					}
				})
			}
		}
	}
}

func BenchmarkSGDFused(b *testing.B) {
	const n = 1860000
	rng := rand.New(rand.NewPCG(3, 4))
	w, g, buf := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range w {
		// Normal values of a model's scale (no subnormals, whose assists would dominate).
		w[i], g[i], buf[i] = float32(rng.NormFloat64()*0.05), float32(rng.NormFloat64()*1e-3), float32(rng.NormFloat64()*1e-2)
	}
	for _, wd := range []float64{0, 1e-4} {
		a := backend.SGDArgs{LR: 0.01, Momentum: 0.9, WeightDecay: wd, N: n}
		for _, path := range []string{"fused", "passes"} {
			b.Run(fmt.Sprintf("wd=%v/%s", wd, path), func(b *testing.B) {
				b.SetBytes(5 * 4 * n)
				for b.Loop() {
					ParallelFor(n, grainElems, func(lo, hi int) {
						if path == "fused" {
							sgdFused(a, w[lo:hi], g[lo:hi], buf[lo:hi])
						} else {
							sgdVecPasses(a, w, g, buf, lo, hi)
						}
					})
				}
			})
		}
	}
}

func BenchmarkAdamFused(b *testing.B) {
	const n = 800000
	rng := rand.New(rand.NewPCG(5, 6))
	w, g, m, v := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range w {
		w[i], g[i] = float32(rng.NormFloat64()*0.05), float32(rng.NormFloat64()*1e-3)
		m[i], v[i] = float32(rng.NormFloat64()*1e-3), float32(rng.Float64()*1e-6)
	}
	a := backend.AdamArgs{N: n, LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Decoupled: true, Step: 10}
	k := newAdamConsts[float32](a)
	for _, path := range []string{"fused", "passes"} {
		b.Run(path, func(b *testing.B) {
			b.SetBytes(6 * 4 * n)
			for b.Loop() {
				ParallelFor(n, grainElems, func(lo, hi int) {
					if path == "fused" {
						adamFused(a, w[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi], k.stepSize, k.bc2Sqrt, k.small)
					} else {
						adamVecPasses(a, w, g, m, v, lo, hi, k.stepSize, k.bc2Sqrt, k.small)
					}
				})
			}
		})
	}
}

// BenchmarkColSumKernel times the column-sum loops alone on one goroutine over a block
// that stays in L2 (128 rows of 512 columns), in elements per second.
func BenchmarkColSumKernel(b *testing.B) {
	const rows, w = 128, 512
	x := colSumInputs(rand.New(rand.NewPCG(7, 8)), rows*w)
	xu := make([]uint16, len(x))
	for i, v := range x {
		xu[i] = uint16(math.Float32bits(v) >> 16)
	}
	dst := make([]float64, w)
	b.Run("bf16", func(b *testing.B) {
		b.SetBytes(rows * w)
		for b.Loop() {
			colSumBF16(dst, xu, w, rows, false)
		}
	})
	b.Run("f32", func(b *testing.B) {
		b.SetBytes(rows * w)
		for b.Loop() {
			colSumF32(dst, x, w, rows, false)
		}
	})
}
