package cpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gamp-ml/gamp/half"
)

// BenchmarkGemmPack times the packing of one operand of the linear layers'
// GEMMs alone, on one thread: every float32 B micro-panel of W (forward,
// op(B) = Wᵀ, and input gradient, op(B) = W), every bf16 B micro-panel of
// the same (GemmBF16's pair panels) and every AMX A panel of a transposed dY
// (weight gradient, op(A) = dYᵀ). MB/s counts the operand's bytes.
func BenchmarkGemmPack(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sh := range []struct{ rows, in, out int }{{2048, 128, 384}, {2048, 512, 128}, {256, 784, 1024}, {256, 1024, 1024}, {256, 1024, 10}} {
		in, out, rows := sh.in, sh.out, sh.rows
		w := make([]float32, out*in)
		for i := range w {
			w[i] = rng.Float32()
		}
		wb := make([]half.BFloat16, len(w))
		half.Float32ToBFloat16(wb, w)
		dyb := make([]half.BFloat16, rows*out)
		for i := range dyb {
			dyb[i] = half.BFloat16(rng.Uint32() & 0x3fff)
		}
		for _, c := range []struct {
			name   string
			transB bool
			n, k   int
		}{{"fwd", true, out, in}, {"dx", false, in, out}} {
			for _, panels := range []int{1, 4, 8, 32} {
				b.Run(fmt.Sprintf("%dx%dx%d/%s/f32/p%d", rows, in, out, c.name, panels), func(b *testing.B) {
					g := new(gemmCall[float32])
					g.kern = gemmKernel32
					g.transB, g.b, g.ldb = c.transB, w, in
					g.plan(256, c.n, c.k, g.kern.mr, g.kern.nr, 1, gemmSizes{kc: gemmKC, mc: gemmMC, nc: gemmNC})
					g.bPack = make([]float32, g.kcMax*gemmCeilDiv(g.ncMax, g.nr)*g.nr)
					b.SetBytes(int64(4 * len(w)))
					for b.Loop() {
						for jc := 0; jc < g.n; jc += g.ncMax {
							g.jc, g.nc = jc, min(g.ncMax, g.n-jc)
							for pc := 0; pc < g.k; pc += g.kcMax {
								g.pc, g.kc = pc, min(g.kcMax, g.k-pc)
								np := gemmCeilDiv(g.nc, g.nr)
								for q := 0; q < np; q += panels {
									g.packBPanels(g.bPack[q*g.kc*g.nr:], g.kc*g.nr, g.jc/g.nr+q, g.jc/g.nr+min(q+panels, np), g.pc, g.kc)
								}
							}
						}
					}
				})
			}
			b.Run(fmt.Sprintf("%dx%dx%d/%s/bf16", rows, in, out, c.name), func(b *testing.B) {
				g := new(gemmBF16Call)
				g.kern = gemmBF16KernelBest
				g.transB, g.b, g.ldb = c.transB, wb, in
				g.plan(256, c.n, c.k, g.kern.mr, g.kern.nr, 1, gemmSizes{kc: gemmBF16KC, mc: gemmBF16MC, nc: gemmBF16NC, evenK: true})
				g.bPack = make([]uint32, g.pairSteps(g.kcMax)*gemmCeilDiv(g.ncMax, g.nr)*g.nr)
				b.SetBytes(int64(2 * len(w)))
				for b.Loop() {
					for jc := 0; jc < g.n; jc += g.ncMax {
						g.jc, g.nc = jc, min(g.ncMax, g.n-jc)
						for pc := 0; pc < g.k; pc += g.kcMax {
							g.pc, g.kc = pc, min(g.kcMax, g.k-pc)
							g.kc2 = g.pairSteps(g.kc)
							np := gemmCeilDiv(g.nc, g.nr)
							for q := 0; q < np; q += max(np/4, 1) {
								g.packPanels(q, min(q+max(np/4, 1), np))
							}
						}
					}
				}
			})
		}
		for _, p := range []struct {
			name string
			pack func(dst []uint32, src []half.BFloat16, ld, kc, kc2, lanes int, sideBySide bool)
		}{{"amxA", packAMXA}, {"amxAGo", packAMXAGo}} {
			b.Run(fmt.Sprintf("%dx%dx%d/fwd/%s", rows, in, out, p.name), func(b *testing.B) {
				// X's row panels as the forward GEMM packs them where k is
				// not a multiple of 32 (no in-place A): dY stands in for X.
				k := out - 16
				kc2 := gemmCeilDiv(gemmCeilDiv(k, 2), amxTileK) * amxTileK
				dst := make([]uint32, amxMR*kc2)
				b.SetBytes(int64(2 * rows * k))
				for b.Loop() {
					for i0 := 0; i0 < rows; i0 += amxMR {
						p.pack(dst, dyb[i0*out:], out, k, kc2, min(amxMR, rows-i0), true)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("%dx%dx%d/dw/amxA", rows, in, out), func(b *testing.B) {
			kc2 := gemmCeilDiv(gemmCeilDiv(rows, 2), amxTileK) * amxTileK
			dst := make([]uint32, amxMR*kc2)
			b.SetBytes(int64(2 * len(dyb)))
			for b.Loop() {
				for i0 := 0; i0 < out; i0 += amxMR {
					packAMXA(dst, dyb[i0:], out, rows, kc2, min(amxMR, out-i0), false)
				}
			}
		})
	}
}

// BenchmarkGemmBF16Store times the best bf16 kernel's store (a whole tile
// computed and rounded to bf16 C) alone, on panels in L1, for the depths of
// the linear layers: the tile store's share shows at small k.
func BenchmarkGemmBF16Store(b *testing.B) {
	kern := gemmBF16KernelBest
	for _, k := range []int{128, 512, 1024} {
		kc2 := gemmCeilDiv(k/2, kern.tileK) * kern.tileK
		b.Run(fmt.Sprintf("%s/k=%d", kern.name, k), func(b *testing.B) {
			x := make([]uint32, kc2*kern.mr)
			y := make([]uint32, kc2*kern.nr)
			c := make([]half.BFloat16, kern.mr*kern.nr)
			for b.Loop() {
				kern.store(kc2, x, y, c, kern.nr, 1, 0)
			}
			b.ReportMetric(2*float64(kern.mr*kern.nr*2*kc2)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkGemmLinear1 is BenchmarkGemmLinear's bf16 and float32 GEMMs on
// one worker (f32col, bf16col: with every task's tiles column by column),
// reporting the thread's CPU time per op (cpu-ns/op) besides
// ns/op: on a machine shared with other work the CPU time is the steadier
// figure for comparing two builds.
func BenchmarkGemmLinear1(b *testing.B) {
	for _, sh := range []struct{ rows, in, out int }{
		{2048, 128, 384}, {2048, 128, 512}, {2048, 512, 128}, {256, 784, 1024}, {256, 1024, 1024},
		{2048, 512, 1536}, {2048, 512, 2048}, {2048, 2048, 512}, {256, 1024, 10},
	} {
		rng := rand.New(rand.NewPCG(uint64(sh.rows), uint64(sh.out)))
		x, w, dy := make([]float32, sh.rows*sh.in), make([]float32, sh.out*sh.in), make([]float32, sh.rows*sh.out)
		for _, s := range [][]float32{x, w, dy} {
			for i := range s {
				s[i] = rng.Float32() - 0.5
			}
		}
		xb, wb, dyb := make([]half.BFloat16, len(x)), make([]half.BFloat16, len(w)), make([]half.BFloat16, len(dy))
		half.Float32ToBFloat16(xb, x)
		half.Float32ToBFloat16(wb, w)
		half.Float32ToBFloat16(dyb, dy)
		y, dx, dw := make([]float32, len(dy)), make([]float32, len(x)), make([]float32, len(w))
		yb, dxb, dwb := make([]half.BFloat16, len(dy)), make([]half.BFloat16, len(x)), make([]half.BFloat16, len(w))
		r, in, out := sh.rows, sh.in, sh.out
		k32, k16 := gemmKernel32, gemmBF16KernelBest
		cases := []struct {
			name string
			f32  func()
			bf16 func()
		}{
			{"fwd", func() { gemmWith(k32, 1, false, true, r, out, in, 1, x, in, w, in, 0, y, out) },
				func() { gemmBF16With(k16, 1, false, true, r, out, in, 1, xb, in, wb, in, 0, yb, out) }},
			{"dx", func() { gemmWith(k32, 1, false, false, r, in, out, 1, dy, out, w, in, 0, dx, in) },
				func() { gemmBF16With(k16, 1, false, false, r, in, out, 1, dyb, out, wb, in, 0, dxb, in) }},
			{"dw", func() { gemmWith(k32, 1, true, false, out, in, r, 1, dy, out, x, in, 0, dw, in) },
				func() { gemmBF16With(k16, 1, true, false, out, in, r, 1, dyb, out, xb, in, 0, dwb, in) }},
		}
		for _, c := range cases {
			for _, p := range []struct {
				name string
				run  func()
			}{{"f32", c.f32}, {"f32col", func() {
				defer func(w int) { gemmRowOrderWords = w }(gemmRowOrderWords)
				gemmRowOrderWords = 0
				c.f32()
			}}, {"bf16", c.bf16}, {"bf16col", func() {
				defer func(w int) { gemmBF16RowOrderWords = w }(gemmBF16RowOrderWords)
				gemmBF16RowOrderWords = 0
				c.bf16()
			}}} {
				b.Run(fmt.Sprintf("%dx%dx%d/%s/%s", r, in, out, c.name, p.name), func(b *testing.B) {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					p.run()
					t0 := gemmThreadCPU()
					for b.Loop() {
						p.run()
					}
					b.ReportMetric(float64(gemmThreadCPU()-t0)/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}

// BenchmarkGemmPackATrans times the float32 weight gradient's A packing
// alone (op(A) = dYᵀ, dY rows×out) on one thread, as packA runs it: every
// kc-deep slice of every task's row block (mc rows at most), p/wide with
// the kernel's packATransWide where set, p/1 panel by panel. MB/s counts
// dY's bytes.
func BenchmarkGemmPackATrans(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, sh := range []struct{ rows, out int }{{2048, 512}, {2048, 1536}, {2048, 2048}, {256, 1024}} {
		dy := make([]float32, sh.rows*sh.out)
		for i := range dy {
			dy[i] = rng.Float32() - 0.5
		}
		for _, wide := range []bool{false, true} {
			name := "p1"
			if wide {
				name = "wide"
			}
			b.Run(fmt.Sprintf("%dx%d/%s", sh.rows, sh.out, name), func(b *testing.B) {
				g := new(gemmCall[float32])
				kern := *gemmKernel32
				if !wide {
					kern.packATransWide = nil
				}
				g.kern, g.transA, g.a, g.lda, g.alpha = &kern, true, dy, sh.out, 1
				mc := gemmMC / kern.mr * kern.mr
				dst := make([]float32, mc*gemmKC)
				b.SetBytes(int64(4 * len(dy)))
				for b.Loop() {
					for pc := 0; pc < sh.rows; pc += gemmKC {
						kc := min(gemmKC, sh.rows-pc)
						for i0 := 0; i0 < sh.out; i0 += mc {
							g.packA(dst, i0, min(mc, sh.out-i0), pc, kc)
						}
					}
				}
			})
		}
	}
}

// BenchmarkGemmPackAfterWriter times packing a 1024×1024 bf16 op(B) into the input
// gradient's pair panels (gemmBF16PackPairRows, 2 MB) on a locked thread right after W
// was rewritten: by the same thread (same), by another goroutine locked to its own
// thread (other, whose dirty lines the packing thread must fetch from the other
// core), or not at all (none: W in this core's caches and L3). pack-us and GB/s are
// the packing thread's CPU time per pack and the bytes of W over it.
func BenchmarkGemmPackAfterWriter(b *testing.B) {
	const n = 1024
	w := make([]half.BFloat16, n*n)
	dst := make([]uint32, n*n/2)
	write := func() {
		for i := range w {
			w[i] = half.BFloat16(i)
		}
	}
	writer, done := make(chan struct{}), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for range writer {
			write()
			done <- struct{}{}
		}
		close(done)
	}()
	defer func() { close(writer); <-done }()
	for _, mode := range []string{"same", "other", "none"} {
		b.Run(mode, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var ns int64
			for b.Loop() {
				switch mode {
				case "same":
					write()
				case "other":
					writer <- struct{}{}
					<-done
				}
				t0 := gemmThreadCPU()
				for q := range n / 32 {
					gemmBF16PackPairRows(dst[q*n/2*32:][:n/2*32], w[q*32:], n, n/2, 32, 32)
				}
				ns += gemmThreadCPU() - t0
			}
			b.ReportMetric(float64(ns)/float64(b.N)/1e3, "pack-us")
			b.ReportMetric(2*n*n/(float64(ns)/float64(b.N)), "GB/s")
		})
	}
}
