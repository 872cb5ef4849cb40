package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gamp-ml/gamp/half"
)

// TestGemmPackB runs whole float32 products through each micro-kernel that
// has fast B packing (packRows, packTrans) or start-store variants (fnStart,
// directStart) and through the same kernel without them, bit for bit: the
// packed panels must hold the same words, and a first k slice stored
// without clearing C the same values. The shapes cover partial panels (n
// not a multiple of 32, m not of 12), k not a multiple of 16, several k
// slices and column blocks, both op(B), beta 0 and not, and A rows of
// zeros (sums of -0) and NaNs.
func TestGemmPackB(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, kern := range gemmKernels32() {
		if kern.packRows == nil && kern.packRowsWide == nil && kern.packTrans == nil && kern.fnStart == nil && kern.packATrans == nil && kern.packATransWide == nil {
			continue
		}
		plain := *kern
		plain.packRows, plain.packRowsWide, plain.packTrans, plain.packATrans, plain.packATransWide = nil, nil, nil, nil, nil
		plain.fnStart, plain.directStart = nil, nil
		for _, sh := range []gemmShape{{1, 1, 1}, {13, 33, 15}, {12, 32, 16}, {37, 64, 47}, {25, 100, 530}, {256, 1024, 784}, {3, 4100, 40}} {
			for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
				transA, transB := tr[0], tr[1]
				t.Run(fmt.Sprintf("%s/%dx%dx%d/tA=%v,tB=%v", kern.name, sh.m, sh.n, sh.k, transA, transB), func(t *testing.T) {
					m, n, k := sh.m, sh.n, sh.k
					a := make([]float32, m*k)
					lda := k
					if transA {
						lda = m
					}
					ldb := n + 3
					if transB {
						ldb = k + 5
					}
					b := make([]float32, max(n, k)*ldb)
					for i := range a {
						a[i] = rng.Float32()*2 - 1
						switch r := i / k % 7; {
						case r == 1:
							a[i] = float32(math.Copysign(0, -1))
						case r == 2 && i%k == k/2:
							a[i] = float32(math.NaN())
						}
					}
					for i := range b {
						b[i] = rng.Float32()*2 - 1
					}
					c0 := make([]float32, m*n)
					for i := range c0 {
						c0[i] = rng.Float32()
					}
					got, want := slices.Clone(c0), slices.Clone(c0)
					for _, w := range []struct {
						workers     int
						alpha, beta float32
					}{{1, 1, 0.5}, {2, 1, 0}, {1, 1, 0}, {2, -2, 0}, {2, 1, 1}, {1, float32(math.Inf(1)), 0}, {2, 0.3, 1}} {
						gemmWith(kern, w.workers, transA, transB, m, n, k, w.alpha, a, lda, b, ldb, w.beta, got, n)
						gemmWith(&plain, w.workers, transA, transB, m, n, k, w.alpha, a, lda, b, ldb, w.beta, want, n)
						for i := range got {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
								t.Fatalf("%+v: C[%d][%d] = %v, want %v", w, i/n, i%n, got[i], want[i])
							}
						}
					}
				})
			}
		}
	}
}

// TestGemmPackTrans32 checks the whole-block transposes (gemmPackTrans32
// behind gemmBF16PackGatherRows, gemmAMXPackTransTiles behind packAMXA) on
// the widths and depths where they run: 32 lanes or fewer, whole k tiles
// and a rest, against the Go loops, into destinations holding garbage.
func TestGemmPackTrans32(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	for _, steps := range []int{16, 17, 31, 32, 48, 100} {
		for _, pad := range []int{0, 1, 8} {
			ld := 2*steps + pad
			src := make([]half.BFloat16, 31*ld+2*steps)
			for i := range src {
				src[i] = half.BFloat16(rng.Uint32())
			}
			got, want := make([]uint32, steps*32+3), make([]uint32, steps*32+3)
			for i := range got {
				got[i], want[i] = 0xdeadbeef, 0xdeadbeef
			}
			gemmBF16PackGatherRows(got[:steps*32], src, ld, steps, 32, 32)
			gemmBF16PackGatherRowsGo(want[:steps*32], src, ld, steps, 32, 32)
			if !slices.Equal(got, want) {
				t.Fatalf("gather rows: steps=%d ld=%d:\n got %x\nwant %x", steps, ld, got, want)
			}
		}
	}
	for _, lanes := range []int{1, 7, 16, 17, 32} {
		for _, kc := range []int{1, 16, 31, 32, 63, 64, 65, 96, 200, 513, 784} {
			for _, pad := range []int{0, 5} {
				ld := lanes + pad
				kc2 := gemmCeilDiv(gemmCeilDiv(kc, 2), amxTileK) * amxTileK
				src := make([]half.BFloat16, (kc-1)*ld+lanes)
				for i := range src {
					src[i] = half.BFloat16(rng.Uint32())
				}
				got := make([]uint32, amxMR*kc2)
				want := make([]uint32, amxMR*kc2)
				for i := range got {
					got[i], want[i] = rng.Uint32(), rng.Uint32()
				}
				packAMXA(got, src, ld, kc, kc2, lanes, false)
				packAMXAGo(want, src, ld, kc, kc2, lanes, false)
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("AMX A: lanes=%d kc=%d ld=%d: word %d is %#x, want %#x", lanes, kc, ld, i, got[i], want[i])
					}
				}
				// Rows side by side (an op(A) that is not transposed), one k
				// tile more than the data fills.
				ld2 := kc + pad
				src2 := make([]half.BFloat16, (lanes-1)*ld2+kc)
				for i := range src2 {
					src2[i] = half.BFloat16(rng.Uint32())
				}
				kc2 += amxTileK
				got, want = make([]uint32, amxMR*kc2), make([]uint32, amxMR*kc2)
				for i := range got {
					got[i], want[i] = rng.Uint32(), rng.Uint32()
				}
				packAMXA(got, src2, ld2, kc, kc2, lanes, true)
				packAMXAGo(want, src2, ld2, kc, kc2, lanes, true)
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("AMX A rows: lanes=%d kc=%d ld=%d: word %d is %#x, want %#x", lanes, kc, ld2, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestGemmMicroKernelStart checks each kernel's start-store variants
// against fn run on a C whose rows hold the start row, bit for
// bit, on garbage C (NaN, -0): with a start of +0s, sums of -0 (zero rows
// of A) must come out +0, NaN sums NaN; with a bias row (holding -0 and a
// NaN), what fn leaves on C filled with the bias.
func TestGemmMicroKernelStart(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	for _, kern := range gemmKernels32() {
		if kern.fnStart == nil {
			continue
		}
		mr, nr := kern.mr, kern.nr
		bias := make([]float32, nr)
		for j := range bias {
			bias[j] = rng.Float32()*2 - 1
		}
		bias[1] = float32(math.Copysign(0, -1))
		bias[2] = float32(math.NaN())
		for _, kc := range []int{0, 1, 7, 64} {
			const ldc, pad = 45, 3
			lda := kc + pad
			a := make([]float32, mr*lda)
			for i := range a {
				a[i] = rng.Float32()*2 - 1
				switch i / lda {
				case 1:
					a[i] = float32(math.Copysign(0, -1))
				case 2:
					if i%lda == 0 {
						a[i] = float32(math.Inf(1))
					}
				}
			}
			ap := make([]float32, mr*kc)
			for p := range kc {
				for i := range mr {
					ap[p*mr+i] = a[i*lda+p]
				}
			}
			bp := make([]float32, nr*kc)
			for i := range bp {
				bp[i] = rng.Float32()*2 - 1
			}
			garbage := func() []float32 {
				c := make([]float32, (mr-1)*ldc+nr)
				for i := range c {
					c[i] = [...]float32{float32(math.NaN()), float32(math.Copysign(0, -1)), 3}[i%3]
				}
				return c
			}
			for _, start := range [][]float32{make([]float32, nr), bias} {
				for _, direct := range []bool{false, true} {
					got, want := garbage(), make([]float32, (mr-1)*ldc+nr)
					for i := range mr {
						copy(want[i*ldc:][:nr], start)
					}
					// The reference is fn for both forms: direct does
					// nothing at all for kc = 0, where fn adds +0 sums.
					kern.fn(kc, ap, bp, want, ldc)
					if direct {
						kern.directStart(kc, a, lda, bp, got, ldc, start)
					} else {
						kern.fnStart(kc, ap, bp, got, ldc, start)
					}
					for i := range mr {
						for j := range nr {
							g, w := got[i*ldc+j], want[i*ldc+j]
							if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
								t.Fatalf("%s kc=%d direct=%v start[0]=%v: C[%d][%d] = %v (%#x), want %v (%#x)", kern.name, kc, direct, start[0], i, j, g, math.Float32bits(g), w, math.Float32bits(w))
							}
						}
						for j := nr; j < ldc && i*ldc+j < len(got); j++ {
							if g := got[i*ldc+j]; math.Float32bits(g) != math.Float32bits(garbage()[i*ldc+j]) {
								t.Fatalf("%s kc=%d direct=%v: wrote outside the tile at (%d,%d)", kern.name, kc, direct, i, j)
							}
						}
					}
				}
			}
		}
	}
}

// TestGemmBF16StripKernels runs whole bf16 products through each kernel
// with strip variants (storeN, directN, directRow) and through the same
// kernel without them, bit for bit, on shapes with partial row and column panels,
// k that the direct path takes (a multiple of 32) and that it does not,
// both op(A), and scalars that read C.
func TestGemmBF16StripKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	for _, kern := range gemmBF16Kernels() {
		if kern.storeN == nil && kern.directN == nil && kern.directRow == nil {
			continue
		}
		plain := *kern
		plain.storeN, plain.directN, plain.directRow = nil, nil, nil
		for _, sh := range []gemmShape{{32, 32, 32}, {33, 40, 64}, {100, 64, 37}, {256, 96, 128}, {130, 33, 200}, {64, 64, 5000}, {100, 300, 64}, {70, 256, 96}} {
			for _, transA := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%dx%dx%d/tA=%v", kern.name, sh.m, sh.n, sh.k, transA), func(t *testing.T) {
					m, n, k := sh.m, sh.n, sh.k
					lda := k + 2
					if transA {
						lda = m + 3
					}
					a := make([]half.BFloat16, max(m, k)*lda)
					b := make([]half.BFloat16, k*n)
					for i := range a {
						a[i] = half.BFloat16(bf16Random(rng, i%5/4))
					}
					for i := range b {
						b[i] = half.BFloat16(bf16Random(rng, 0))
					}
					c0 := make([]half.BFloat16, m*n)
					for i := range c0 {
						c0[i] = half.BFloat16(bf16Random(rng, 0))
					}
					for _, sc := range [][2]float32{{1, 0}, {-0.5, 2}, {1, 1}} {
						got, want := slices.Clone(c0), slices.Clone(c0)
						gemmBF16With(kern, 2, transA, false, m, n, k, sc[0], a, lda, b, n, sc[1], got, n)
						gemmBF16With(&plain, 2, transA, false, m, n, k, sc[0], a, lda, b, n, sc[1], want, n)
						for i := range got {
							if got[i] != want[i] && !(got[i].IsNaN() && want[i].IsNaN()) {
								t.Fatalf("%v: C[%d][%d] = %#04x, want %#04x", sc, i/n, i%n, uint16(got[i]), uint16(want[i]))
							}
						}
					}
				})
			}
		}
	}
}

// TestGemmBF16PackPanels checks packPanels (whole panels of an op(B) that
// is not transposed packed together, row by row) against packBPanel panel
// by panel, word for word, over chunks, odd depths, partial last panels,
// several column blocks' offsets and strides, into buffers holding garbage.
func TestGemmBF16PackPanels(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 50))
	for _, kern := range gemmBF16Kernels() {
		for _, sh := range []struct{ n, k, pc, jc int }{{64, 2, 0, 0}, {100, 37, 0, 0}, {96, 64, 0, 32}, {300, 101, 7, 64}, {1024, 512, 0, 0}} {
			for _, chunk := range []int{1, 2, 3, 100} {
				ldb := sh.n + 5
				b := make([]half.BFloat16, (sh.pc+sh.k)*ldb)
				for i := range b {
					b[i] = half.BFloat16(rng.Uint32())
				}
				g := new(gemmBF16Call)
				g.kern = kern
				g.b, g.ldb = b, ldb
				g.plan(64, sh.n, sh.pc+sh.k, kern.mr, kern.nr, 1, gemmSizes{kc: gemmBF16KC, mc: gemmBF16MC, nc: gemmBF16NC, evenK: true})
				g.jc, g.nc, g.pc, g.kc = sh.jc, sh.n-sh.jc, sh.pc, sh.k
				g.kc2 = g.pairSteps(g.kc)
				np := gemmCeilDiv(g.nc, g.nr)
				size := g.kc2 * np * g.nr
				fill := func() []uint32 {
					d := make([]uint32, size)
					for i := range d {
						d[i] = 0xdeadbeef
					}
					return d
				}
				want := fill()
				g.bPack = want
				for q := range np {
					g.packBPanel(q)
				}
				got := fill()
				g.bPack = got
				for q := 0; q < np; q += chunk {
					g.packPanels(q, min(q+chunk, np))
				}
				if !slices.Equal(got, want) {
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("%s n=%d k=%d pc=%d jc=%d chunk=%d: word %d (panel %d) is %#x, want %#x", kern.name, sh.n, sh.k, sh.pc, sh.jc, chunk, i, i/(g.kc2*g.nr), got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestGemmBF16Store checks the driver's store of a float32 tile (an edge
// tile, or the partial sums of a k-sliced product) against bf16Out element
// by element, on hostile values: NaNs with payloads (signalling too),
// infinities, subnormals, rounding ties, both signs of zero.
func TestGemmBF16Store(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	special := []uint32{0x7fa00001, 0xffc12345, 0x7f800000, 0xff800000, 0x00000001, 0x807fffff, 0x00018000, 0x3f808000, 0x3f818000, 0x80000000, 0, 0x7f7fffff}
	for _, sc := range [][2]float32{{1, 0}, {-0.5, 0}, {1, 1}, {2, -3}} {
		for _, sliced := range []bool{false, true} {
			g := new(gemmBF16Call)
			g.kern = gemmBF16KernelBest
			mr, nr := g.kern.mr, g.kern.nr
			g.alpha, g.beta = sc[0], sc[1]
			const ldc = 70
			g.c, g.ldc = make([]half.BFloat16, (mr+3)*ldc), ldc
			for x := range g.c {
				g.c[x] = half.BFloat16(bf16Random(rng, x%3))
			}
			old := slices.Clone(g.c)
			s := new(gemmBF16Scratch)
			s.tile, s.out = make([]float32, mr*nr), make([]half.BFloat16, mr*nr)
			ldt := nr
			tile := s.tile
			if sliced {
				ldt = nr + 7
				tile = make([]float32, mr*ldt)
			}
			for x := range tile {
				u := rng.Uint32()
				if x%3 == 0 {
					u = special[x/3%len(special)]
				}
				tile[x] = math.Float32frombits(u)
			}
			src := slices.Clone(tile)
			const i, j, rows, cols = 2, 5, 7, 19
			g.store(s, tile, ldt, i, j, rows, cols)
			for r := range mr + 3 {
				for cc := range ldc {
					x := r*ldc + cc
					want := old[x]
					if r >= i && r < i+rows && cc >= j && cc < j+cols {
						want = bf16Out(sc[0], sc[1], src[(r-i)*ldt+cc-j], old[x])
					}
					if g.c[x] != want && !(g.c[x].IsNaN() && want.IsNaN() && sc != [2]float32{1, 0}) {
						t.Fatalf("%v sliced=%v: C[%d][%d] = %#04x, want %#04x", sc, sliced, r, cc, uint16(g.c[x]), uint16(want))
					}
				}
			}
		}
	}
}

// TestGemmPackRowsWide checks each kernel's packRowsWide against packRows
// panel by panel, bit for bit, gaps between the panels untouched.
func TestGemmPackRowsWide(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	for _, kern := range gemmKernels32() {
		if kern.packRowsWide == nil {
			continue
		}
		nr := kern.nr
		for _, c := range []struct{ kc, panels, extra, ld int }{{1, 1, 0, 32}, {7, 3, 5, 100}, {512, 25, 0, 784}, {392, 4, 1, 1027}} {
			src := make([]float32, (c.kc-1)*c.ld+c.panels*nr)
			for i := range src {
				src[i] = rng.Float32()*2 - 1
			}
			stride := c.kc*nr + c.extra
			got := make([]float32, c.panels*stride)
			want := make([]float32, len(got))
			for i := range got {
				got[i] = float32(i)
				want[i] = float32(i)
			}
			kern.packRowsWide(got, src, c.ld, c.kc, c.panels, stride)
			for q := range c.panels {
				kern.packRows(want[q*stride:], src[q*nr:], c.ld, c.kc, nr)
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s %+v: dst[%d] = %v, want %v", kern.name, c, i, got[i], want[i])
				}
			}
		}
	}
}

// TestGemmPackATransWide checks each float32 kernel's packATransWide (whole
// A micro-panels of a transposed op(A) side by side, as the weight
// gradient packs dYᵀ) against its Go twin, bit for bit, into destinations
// holding garbage with a guard past the end: one panel and several, depths
// below, at and past the four-step blocks (odd ones too), row strides with
// and without padding, values holding NaNs, ±Inf, -0 and subnormals, and
// alphas of 1, negative, inexact, +Inf (Inf·0 is a NaN), -0 and subnormal.
func TestGemmPackATransWide(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0, 1e-40, -3e-39}
	n := 0
	for _, kern := range gemmKernels32() {
		if kern.packATransWide == nil {
			continue
		}
		mr := kern.mr
		for _, panels := range []int{1, 2, 3, 12} {
			for _, kc := range []int{1, 2, 3, 4, 5, 7, 8, 17, 515} {
				for _, pad := range []int{0, 1, 7} {
					ld := panels*mr + pad
					src := make([]float32, (kc-1)*ld+panels*mr)
					for i := range src {
						src[i] = rng.Float32()*4 - 2
						if rng.IntN(8) == 0 {
							src[i] = special[rng.IntN(len(special))]
						}
					}
					for _, alpha := range []float32{1, -2, 0.3, float32(math.Inf(1)), float32(math.Copysign(0, -1)), 1e-40} {
						size := panels * kc * mr
						got, want := make([]float32, size+5), make([]float32, size+5)
						for i := range got {
							got[i] = math.Float32frombits(rng.Uint32())
							want[i] = got[i]
						}
						kern.packATransWide(got[:size], src, ld, kc, panels, alpha)
						gemmPackATransWideGo(mr, want[:size], src, ld, kc, panels, alpha)
						for i := range got {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%s: panels=%d kc=%d ld=%d alpha=%v: word %d (panel %d, step %d, row %d) is %#x, want %#x",
									kern.name, panels, kc, ld, alpha, i, i/(kc*mr), i%(kc*mr)/mr, i%mr, math.Float32bits(got[i]), math.Float32bits(want[i]))
							}
						}
						n++
					}
				}
			}
		}
	}
	if n == 0 {
		t.Skip("no float32 kernel has packATransWide here")
	}
	t.Logf("%d packings checked", n)
}

// TestGemmBF16PackPairRows24 checks the two-panel pair packing of a transposed op(A)
// (gemmBF16PackPairRows24) against gemmBF16PackPairRowsGo on each 12-lane panel, at
// several depths and row strides, into destinations holding garbage past the panels.
func TestGemmBF16PackPairRows24(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	for _, steps := range []int{1, 2, 7, 64, 100} {
		for _, ld := range []int{24, 25, 40, 384} {
			src := make([]half.BFloat16, (2*steps-1)*ld+24)
			for i := range src {
				src[i] = half.BFloat16(rng.Uint32())
			}
			got0, got1 := make([]uint32, 12*steps+5), make([]uint32, 12*steps+5)
			want0, want1 := make([]uint32, 12*steps+5), make([]uint32, 12*steps+5)
			for i := range got0 {
				got0[i], got1[i], want0[i], want1[i] = 0xdeadbeef, 0xdeadbeef, 0xdeadbeef, 0xdeadbeef
			}
			gemmBF16PackPairRows24(got0[:12*steps], got1[:12*steps], src, ld, steps)
			gemmBF16PackPairRowsGo(want0[:12*steps], src, ld, steps, 12, 12)
			gemmBF16PackPairRowsGo(want1[:12*steps], src[12:], ld, steps, 12, 12)
			if !slices.Equal(got0, want0) || !slices.Equal(got1, want1) {
				t.Fatalf("steps=%d ld=%d:\n got %x %x\nwant %x %x", steps, ld, got0, got1, want0, want1)
			}
		}
	}
}
