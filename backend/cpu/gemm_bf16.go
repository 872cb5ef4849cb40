package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/gamp-ml/gamp/half"
)

// GemmBF16 follows Gemm's blocking (gemmBlocks) with operands packed as bf16
// pairs, the layout VDPBF16PS reads: a packed word holds two consecutive k
// values of one row of op(A) or one column of op(B), the even k in its low
// half. A k slice (even length, except the last) thus covers kc2 = ⌈kc/2⌉
// pair steps, odd K padded with a zero. The micro-kernel accumulates a
// float32 tile from zero over a slice; with one slice (K ≤ gemmBF16KC) the
// tile goes straight to C, otherwise slices add into a float32 copy of the
// current column block and the last one goes to C. Storing computes
// alpha·acc + beta·C in float32 and rounds once to bf16. Every element of C
// sees the same operations in the same order whatever the number of workers.

// Blocking for bf16. KC is large so that k is rarely split: each extra k
// slice costs a float32 pass over the C block, and on the 2-core Zen 5 VM
// KC = 4096 beat 1024 by 10–15 % at K = 2048–4096 (and 2048 by 0–10 %)
// although its B micro-panel (up to 256 KB) streams from L2. For K ≤ 1024
// the value does not matter. MC and NC are the float32 ones.
// gemmBF16RowOrderWords bounds the packed B panels (in words) of a chunk
// of a task's columns that it runs row by row, chunk after chunk, instead
// of column by column; with fewer than 8 panels to a chunk the task runs
// column by column (a variable so that benchmarks can compare the two
// orders).
var gemmBF16RowOrderWords = 1 << 18

// gemmBF16ColumnSplitPanels is the most row panels for which the workers
// split the columns of an in-place product rather than its rows, with a
// kernel that runs whole rows of tiles (directRow: AMX); a variable so that
// benchmarks can compare the two.
var gemmBF16ColumnSplitPanels = 8

// gemmBF16ColumnSplitPanelsDirect is gemmBF16ColumnSplitPanels for the
// other in-place kernels (VDPBF16PS), which then run each worker's columns
// tile by tile. With 11 row panels (the CNN's 128-row linear layer) a row
// split gives the workers 6 and 5 panels and both read every B panel, half
// of them packed by the other core; split by columns, each packs and reads
// its own. On the 2-core EPYC the CNN BF16 step's linear_relu went 0.25–0.31
// → 0.22–0.29 ms forward and 0.40–0.55 → 0.33–0.44 ms backward (six
// alternated runs, five better in each pass); the MLP's 22 panels (256 rows)
// showed no change in its steps although an isolated product gains 3–11 %
// (its A, written by the other core in the step, is read whole by each
// worker), so the bound stays below them.
var gemmBF16ColumnSplitPanelsDirect = 16

// gemmBF16ColumnSplitRows is the most rows of a packed (transposed) op(A)
// for which the workers split the columns, each packing all of op(A),
// when there are at least as many columns; a variable so that tests and
// benchmarks can turn it off (0).
var gemmBF16ColumnSplitRows = 256

const (
	gemmBF16KC = 4096
	gemmBF16MC = 144
	gemmBF16NC = 4096
)

// gemmBF16Kernel is a bf16 micro-kernel and the tile it computes.
// fn(kc2, a, b, c, ldc, add) computes, for i < mr and j < nr, the dot
// product of A micro-panel row i (a[p*mr+i], p < kc2, each word a pair of
// bf16) and B micro-panel column j (b[p*nr+j]) with VDPBF16PS arithmetic
// (see gemmBF16KernelGo), accumulated from +0 in ascending p, and stores it
// to c[i*ldc+j], or adds it there (float32 addition) when add is set.
//
// store(kc2, a, b, c, ldc, alpha, beta) computes the same tile and writes
// bf16Out(alpha, beta, acc, c[i*ldc+j]) to the bf16 c[i*ldc+j].
//
// The panels' layout: B is always b[p*nr+j]; A is a[p*mr+i] (a broadcast
// per pair step, for VDPBF16PS) or, with rowsA, rows of pairs tile by tile
// as AMX loads them (see packAMXA). kc2 is always a multiple of tileK, the
// packers padding k with zero pairs. AMX kernels accumulate onto C when
// add is set instead of adding a tile summed from zero (see
// gemmAMXKernelGo).
type gemmBF16Kernel struct {
	name   string
	mr, nr int
	tileK  int
	rowsA  bool
	fn     func(kc2 int, a, b []uint32, c []float32, ldc int, add bool)
	store  func(kc2 int, a, b []uint32, c []half.BFloat16, ldc int, alpha, beta float32)
	// direct, where set, is store reading mr whole rows of a row-major A
	// in place (row stride lda, 2·kc2 values each, kc2 a positive multiple
	// of tileK): no packing of A when k needs no padding.
	direct func(kc2 int, a []half.BFloat16, lda int, b []uint32, c []half.BFloat16, ldc int, alpha, beta float32)
	// storeN and directN, where set, are store and direct for n tiles down
	// a column of C (c[r*mr*ldc:] for r < n) from n consecutive packed A
	// panels (a[r*mr*kc2:]) or row panels in place (a[r*mr*lda:]) and one
	// B panel: the same bits as n calls, at less cost per tile. A bias
	// that is not nil holds the nr columns' bias, which every row of the
	// tiles starts from instead of C (beta is then ignored): the bits of
	// copying it into each row of C first and running with beta 1.
	storeN  func(n, kc2 int, a, b []uint32, bias, c []half.BFloat16, ldc int, alpha, beta float32)
	directN func(n, kc2 int, a []half.BFloat16, lda int, b []uint32, bias, c []half.BFloat16, ldc int, alpha, beta float32)
	// directRow, where set, is direct for n tiles across a row of C
	// (c[q*nr:]) from one row panel of A in place and n consecutive B
	// panels (b[q*nr*kc2:]); a bias holds the n·nr columns' bias.
	directRow func(n, kc2 int, a []half.BFloat16, lda int, b []uint32, bias, c []half.BFloat16, ldc int, alpha, beta float32)
	// fnDirect, where set, is fn reading mr whole rows of a row-major A in
	// place (row stride lda, 2·kc2 values each), as direct is store: the
	// attention's products use it (the AMX kernels' counterpart is
	// attnAMXDirect).
	fnDirect func(kc2 int, a []half.BFloat16, lda int, b []uint32, c []float32, ldc int, add bool)
	// fnDirect8, where set, is fnDirect for a tile of 8 rows (nr columns):
	// the attention's 64-row blocks take 8 of them, no edge tile.
	fnDirect8 func(kc2 int, a []half.BFloat16, lda int, b []uint32, c []float32, ldc int, add bool)
}

// goTwin returns the pure-Go kernel that k equals bit for bit (NaN payloads
// aside): same tile, same panel layout, same arithmetic.
func (k *gemmBF16Kernel) goTwin() *gemmBF16Kernel {
	if k.rowsA {
		return gemmAMXKernelGo32x32
	}
	return gemmBF16KernelGo12x32
}

// gemmBF16KernelGo12x32 is the portable micro-kernel, with the tile of the
// AVX-512 one so that the two share packed panels in tests.
var gemmBF16KernelGo12x32 = &gemmBF16Kernel{name: "go12x32", mr: 12, nr: 32, tileK: 1,
	fn: func(kc2 int, a, b []uint32, c []float32, ldc int, add bool) {
		gemmBF16KernelGo(12, 32, kc2, a, b, c, ldc, add)
	},
	store: gemmBF16StoreGo12x32,
}

// gemmBF16StoreGo12x32 is gemmBF16KernelGo12x32's store: the float32 tile, then
// bf16Out of each element.
func gemmBF16StoreGo12x32(kc2 int, a, b []uint32, c []half.BFloat16, ldc int, alpha, beta float32) {
	var t [12 * 32]float32
	gemmBF16KernelGo(12, 32, kc2, a, b, t[:], 32, false)
	for i := range 12 {
		row := c[i*ldc:][:32]
		for j, v := range t[i*32:][:32] {
			row[j] = bf16Out(alpha, beta, v, row[j])
		}
	}
}

// bf16Out is an element of C as GemmBF16 stores it: the float32 sum t of
// the products, scaled, plus beta times the old value (not read when beta
// == 0), rounded once to bf16. The products are rounded apart, so that no
// build fuses them.
func bf16Out(alpha, beta, t float32, old half.BFloat16) half.BFloat16 {
	v := alpha * t
	if beta != 0 {
		v = float32(v) + float32(beta*old.Float32())
	}
	return half.BFloat16FromFloat32(v)
}

// gemmBF16KernelGo is the pure-Go twin of the VDPBF16PS micro-kernel, for
// any tile with nr a multiple of 4. For every i < mr and j < nr it computes
//
//	var acc float32
//	for p := 0; p < kc2; p++ {
//		x, y := a[p*mr+i], b[p*nr+j]
//		acc = bf16FMA(acc, bf16Lane(x>>16), bf16Lane(y>>16)) // odd k first
//		acc = bf16FMA(acc, bf16Lane(x&0xffff), bf16Lane(y&0xffff))
//	}
//	c[i*ldc+j] = acc // or += acc when add
//
// which is VDPBF16PS as measured on AMD Zen 5 and as the Intel SDM specifies
// it: per lane, two float32 fused multiply-adds, the high (odd k) pair
// first, each rounding to nearest even once, with denormal inputs read as
// zero and denormal results flushed to a zero of the same sign (tininess
// after rounding), whatever MXCSR says. Only NaN payloads may differ.
func gemmBF16KernelGo(mr, nr, kc2 int, a, b []uint32, c []float32, ldc int, add bool) {
	a = a[:kc2*mr]
	b = b[:kc2*nr]
	for i := range mr {
		crow := c[i*ldc:][:nr]
		for j := 0; j < nr; j += 4 {
			var s0, s1, s2, s3 float32
			for p := range kc2 {
				x := a[p*mr+i]
				bp := b[p*nr+j:][:4]
				xh, xl := bf16Lane(x>>16), bf16Lane(x&0xffff)
				s0 = bf16FMA(bf16FMA(s0, xh, bf16Lane(bp[0]>>16)), xl, bf16Lane(bp[0]&0xffff))
				s1 = bf16FMA(bf16FMA(s1, xh, bf16Lane(bp[1]>>16)), xl, bf16Lane(bp[1]&0xffff))
				s2 = bf16FMA(bf16FMA(s2, xh, bf16Lane(bp[2]>>16)), xl, bf16Lane(bp[2]&0xffff))
				s3 = bf16FMA(bf16FMA(s3, xh, bf16Lane(bp[3]>>16)), xl, bf16Lane(bp[3]&0xffff))
			}
			d := crow[j:][:4]
			if add {
				d[0] += s0
				d[1] += s1
				d[2] += s2
				d[3] += s3
			} else {
				d[0], d[1], d[2], d[3] = s0, s1, s2, s3
			}
		}
	}
}

// bf16Lane widens the bf16 bits h to float32, reading a denormal as a zero
// of the same sign (VDPBF16PS's DAZ).
func bf16Lane(h uint32) float32 {
	u := h << 16
	if u&0x7f800000 == 0 {
		u &= 0x80000000
	}
	return math.Float32frombits(u)
}

// bf16FMA returns acc + x·y rounded once to nearest even, with a denormal
// result flushed to zero (VDPBF16PS's FTZ); x and y are bf16 values and acc
// is not denormal. The product of two bf16 values has at most 16 significant
// bits, so where it is a float32 normal (or an exact zero) it is exact and a
// plain float32 addition is the fused operation; the sum is then a multiple
// of 2^-149, so IEEE gradual underflow and a flush after rounding with an
// unbounded exponent agree on which sums are tiny.
func bf16FMA(acc, x, y float32) float32 {
	p := x * y
	if e := math.Float32bits(p) >> 23 & 0xff; e-1 < 0xfe || (x == 0 || y == 0) && p == 0 {
		s := acc + p
		if u := math.Float32bits(s); u&0x7f800000 == 0 {
			s = math.Float32frombits(u & 0x80000000)
		}
		return s
	}
	return bf16FMASlow(acc, x, y)
}

// bf16FMASlow is bf16FMA where x·y overflows or underflows float32, or an
// operand is not finite.
func bf16FMASlow(acc, x, y float32) float32 {
	a, p := float64(acc), float64(x)*float64(y) // p is exact
	if math.IsInf(p, 0) || math.IsNaN(p) || math.IsInf(a, 0) || math.IsNaN(a) {
		return float32(p + a)
	}
	// s+e == p+a exactly (TwoSum). Moving s one float64 ulp towards the
	// exact sum when e != 0 lets the float32 rounding below break ties as
	// the exact sum would.
	s := p + a
	bb := s - p
	if e := (p - (s - bb)) + (a - bb); e > 0 {
		s = math.Nextafter(s, math.Inf(1))
	} else if e < 0 {
		s = math.Nextafter(s, math.Inf(-1))
	}
	switch abs := math.Abs(s); {
	case abs >= 0x1.ffffffp127: // rounds past MaxFloat32
		return float32(math.Copysign(math.Inf(1), s))
	case abs >= 0x1p-126:
		return float32(s)
	case abs >= 0x1.ffffffp-127: // rounds up to the smallest normal
		return float32(math.Copysign(0x1p-126, s))
	default:
		return float32(math.Copysign(0, s))
	}
}

// GemmBF16 computes C = alpha·op(A)·op(B) + beta·C for row-major BFloat16
// matrices with float32 accumulation, rounding each element of C once (to
// nearest even, subnormals kept) when it is stored. Shapes, strides, beta
// == 0 and the panics are as for Gemm.
//
// The products use VDPBF16PS arithmetic (see gemmBF16KernelGo): bf16
// denormals in A and B count as zero (dropping at most 2^-126 times the
// other factor) and a partial sum below the float32 normal range is flushed
// to zero (at most 2^-126 per product). With K > gemmBF16KC the partial sums
// of the k slices go through a float32 buffer of m×min(n, gemmBF16NC).
// AVX-512 BF16 CPUs run the instruction itself; others, and the purego build
// tag, run the pure-Go twin, which gives the same bits except for NaN
// payloads, much more slowly. For a given (m, n, k) the result does not
// depend on the number of workers.
func GemmBF16(transA, transB bool, m, n, k int, alpha float32, a []half.BFloat16, lda int, b []half.BFloat16, ldb int, beta float32, c []half.BFloat16, ldc int) {
	gemmBF16With(gemmBF16KernelBest, Workers(), transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// gemmBF16With is GemmBF16 with an explicit micro-kernel and worker count;
// workers only shapes the task split, which never changes the result.
func gemmBF16With(kern *gemmBF16Kernel, workers int, transA, transB bool, m, n, k int, alpha float32, a []half.BFloat16, lda int, b []half.BFloat16, ldb int, beta float32, c []half.BFloat16, ldc int) {
	gemmBF16WithBias(kern, workers, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, nil, c, ldc)
}

// gemmBF16WithBias is gemmBF16With where bias, if not nil, holds n values
// that every row of C starts from instead of its old contents (beta is then
// ignored): the bits of copying bias into each row of C and running with
// beta 1. C is read only when a tile is stored, so each tile takes the bias
// row right before its store: no pass of its own writes C.
func gemmBF16WithBias(kern *gemmBF16Kernel, workers int, transA, transB bool, m, n, k int, alpha float32, a []half.BFloat16, lda int, b []half.BFloat16, ldb int, beta float32, bias, c []half.BFloat16, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(gemmArgError(fmt.Sprintf("cpu: GemmBF16: negative dimension m=%d n=%d k=%d", m, n, k)))
	}
	gemmBF16Check("C", m, n, len(c), ldc)
	if m == 0 || n == 0 {
		return
	}
	if k > 0 {
		ar, ac := m, k
		if transA {
			ar, ac = k, m
		}
		gemmBF16Check("A", ar, ac, len(a), lda)
		br, bc := k, n
		if transB {
			br, bc = n, k
		}
		gemmBF16Check("B", br, bc, len(b), ldb)
	}
	if bias != nil {
		if len(bias) < n {
			panic(gemmArgError(fmt.Sprintf("cpu: GemmBF16: len(bias)=%d is less than n=%d", len(bias), n)))
		}
		bias, beta = bias[:n], 1
	}
	if k == 0 || alpha == 0 {
		if bias != nil {
			for i := range m {
				copy(c[i*ldc:][:n], bias)
			}
		}
		gemmBF16Scale(m, n, beta, c, ldc)
		return
	}

	g := gemmBF16Calls.Get().(*gemmBF16Call)
	if kern.direct != nil && !transA && m >= 2*kern.mr && k <= gemmBF16KC && k%(2*max(kern.tileK, 1)) == 0 && gemmAliasedRows[half.BFloat16](lda) {
		a, lda = g.pad(a, lda, m, k)
	}
	g.bias = bias
	g.transA, g.transB = transA, transB
	g.alpha, g.beta = alpha, beta
	g.a, g.lda, g.b, g.ldb, g.c, g.ldc = a, lda, b, ldb, c, ldc
	g.kern = kern
	if 2*float64(m)*float64(n)*float64(k) < gemmSerialFlops {
		workers = 1
	}
	g.run(m, n, k, workers)
	g.a, g.b, g.c, g.bias, g.kern = nil, nil, nil, nil, nil
	gemmBF16Calls.Put(g)
}

func gemmBF16Check(name string, rows, cols, n, ld int) {
	if ld < max(1, cols) {
		panic(gemmArgError(fmt.Sprintf("cpu: GemmBF16: ld%s=%d is less than max(1, %d)", name, ld, cols)))
	}
	if rows > 0 && cols > 0 && n < (rows-1)*ld+cols {
		panic(gemmArgError(fmt.Sprintf("cpu: GemmBF16: len(%s)=%d is too short for %d×%d with stride %d", name, n, rows, cols, ld)))
	}
}

// gemmBF16Scale sets the m×n matrix C to beta·C, rounded to bf16; beta == 0
// overwrites C with zeros.
func gemmBF16Scale(m, n int, beta float32, c []half.BFloat16, ldc int) {
	switch beta {
	case 1:
	case 0:
		for i := range m {
			clear(c[i*ldc:][:n])
		}
	default:
		for i := range m {
			row := c[i*ldc:][:n]
			for j, v := range row {
				row[j] = half.BFloat16FromFloat32(beta * v.Float32())
			}
		}
	}
}

// gemmBF16Call is the state of one GemmBF16 call, shared by its tasks and
// pooled with its buffers.
type gemmBF16Call struct {
	gemmBlocks
	transA, transB bool
	alpha, beta    float32
	a, b, c        []half.BFloat16
	lda, ldb, ldc  int
	kern           *gemmBF16Kernel
	// kc2: pair steps of the current k slice, as packed.
	kc2 int
	// bias, where not nil, is the row every row of C starts from (beta is
	// then 1): copied into each tile of C right before the tile is stored.
	bias []half.BFloat16

	// gemmPadA copies A off a stride that is a multiple of 4 KB.
	gemmPadA[half.BFloat16]

	bPack []uint32
	// acc holds the float32 partial sums of the current column block when
	// sliced: row stride accLd, whole tiles.
	acc   []float32
	accLd int
}

// gemmBF16Scratch is per-task scratch: the packed A block, a float32 tile
// and its bf16 rounding.
type gemmBF16Scratch struct {
	aPack []uint32
	tile  []float32
	out   []half.BFloat16
}

var (
	gemmBF16Calls = sync.Pool{New: func() any {
		g := new(gemmBF16Call)
		g.onBlock = func() {
			g.kc2 = g.pairSteps(g.kc)
			g.packGrain = max(1, 8192/(g.kc2*g.nr))
			if !g.transB {
				// packPanels reads stored rows across a chunk's panels:
				// two chunks a worker.
				g.packGrain = max(g.packGrain, g.nPanels/(2*g.workers))
			}
		}
		g.packFn = g.packPanels
		g.taskFn = func(lo, hi int) {
			for t := lo; t < hi; t++ {
				g.task(t)
			}
		}
		return g
	}}
	gemmBF16Scratches = sync.Pool{New: func() any { return new(gemmBF16Scratch) }}
)

// grow returns buf resliced to n elements, reallocating only when too small.
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

func (g *gemmBF16Call) run(m, n, k, workers int) {
	mr, nr := g.kern.mr, g.kern.nr
	g.plan(m, n, k, mr, nr, workers, gemmSizes{kc: gemmBF16KC, mc: gemmBF16MC, nc: gemmBF16NC, evenK: true})
	g.ownPack = false
	if g.splitColumns() {
		g.tm, g.ownPack = 1, true
	}
	g.bPack = grow(g.bPack, g.pairSteps(g.kcMax)*gemmCeilDiv(g.ncMax, nr)*nr)
	if g.sliced {
		g.accLd = gemmCeilDiv(g.ncMax, nr) * nr
		g.acc = grow(g.acc, g.mPanels*mr*g.accLd)
	}
	g.loop()
}

// splitColumns says whether the workers of a planned call split its columns
// (one row task, each task packing the B panels it uses, so that they stay
// in its own L2 rather than every worker reading every panel, packed by
// both) rather than its rows:
//   - few rows that the kernel reads in place, k in one slice of whole k
//     tiles;
//   - few rows that are packed (a transposed op(A): the weight gradients of
//     width-128 layers, m = 128 against n = 128 or 512), no more than the
//     columns, k in one slice: each task then packs all of op(A) as well.
func (g *gemmBF16Call) splitColumns() bool {
	if g.workers <= 1 || g.sliced {
		return false
	}
	if !g.transA && g.k%(2*g.kern.tileK) == 0 && (g.kern.directRow != nil && g.mPanels <= gemmBF16ColumnSplitPanels ||
		g.kern.directRow == nil && g.kern.direct != nil && g.mPanels <= gemmBF16ColumnSplitPanelsDirect) {
		return true
	}
	return g.transA && g.m <= gemmBF16ColumnSplitRows && g.m <= g.n && gemmCeilDiv(g.n, g.kern.nr) >= 2*g.workers
}

// pairSteps is the number of pair steps the packed panels hold for kc
// values of k: ⌈kc/2⌉ rounded up to the kernel's k tile.
func (g *gemmBF16Call) pairSteps(kc int) int {
	t := max(g.kern.tileK, 1)
	return gemmCeilDiv((kc+1)/2, t) * t
}

// pair packs two bf16 values, lo for the even k, into one word.
func pair(lo, hi half.BFloat16) uint32 { return uint32(lo) | uint32(hi)<<16 }

// gemmBF16PackGatherRowsGo collects the k pairs of stored rows of src (row
// stride ld, pairs side by side) into rows of dst (stride stride, w ≤
// stride ≤ 32 pairs): row p of dst holds pair p of each stored row.
//
//	for p := 0; p < steps; p++ {
//		for i := 0; i < stride; i++ {
//			dst[p*stride+i] = 0
//			if i < w {
//				dst[p*stride+i] = pair(src[i*ld+2*p], src[i*ld+2*p+1])
//			}
//		}
//	}
func gemmBF16PackGatherRowsGo(dst []uint32, src []half.BFloat16, ld, steps, w, stride int) {
	dst = dst[:steps*stride]
	i := 0
	// Four stored rows at once: four read streams, one 4-wide write per p.
	for ; i+4 <= w; i += 4 {
		s0 := src[i*ld:][:2*steps]
		s1 := src[(i+1)*ld:][:len(s0)]
		s2 := src[(i+2)*ld:][:len(s0)]
		s3 := src[(i+3)*ld:][:len(s0)]
		for p := range steps {
			d := dst[p*stride+i:][:4]
			d[0] = pair(s0[2*p], s0[2*p+1])
			d[1] = pair(s1[2*p], s1[2*p+1])
			d[2] = pair(s2[2*p], s2[2*p+1])
			d[3] = pair(s3[2*p], s3[2*p+1])
		}
	}
	for ; i < w; i++ {
		s := src[i*ld:][:2*steps]
		for p := range steps {
			dst[p*stride+i] = pair(s[2*p], s[2*p+1])
		}
	}
	if w < stride {
		for p := range steps {
			clear(dst[p*stride+w:][:stride-w])
		}
	}
}

// gemmBF16PackPairRowsGo interleaves pairs of stored rows of src (row
// stride ld) into rows of dst (stride stride, w ≤ stride ≤ 32 pairs):
//
//	for p := 0; p < steps; p++ {
//		for i := 0; i < stride; i++ {
//			dst[p*stride+i] = 0
//			if i < w {
//				dst[p*stride+i] = pair(src[2*p*ld+i], src[(2*p+1)*ld+i])
//			}
//		}
//	}
func gemmBF16PackPairRowsGo(dst []uint32, src []half.BFloat16, ld, steps, w, stride int) {
	for p := range steps {
		d := dst[p*stride:][:stride]
		r0 := src[2*p*ld:][:w]
		r1 := src[(2*p+1)*ld:][:w]
		for i, v := range r0 {
			d[i] = pair(v, r1[i])
		}
		clear(d[w:])
	}
}

// packPanels packs micro-panels [lo, hi) of the current B block. Whole
// 32-column panels of an op(B) that is not transposed are packed together,
// row by row (gemmBF16PackPairPanels), where the CPU can; the rest panel
// by panel.
func (g *gemmBF16Call) packPanels(lo, hi int) {
	nr := g.kern.nr
	if !g.transB && nr == 32 && g.kc >= 2 {
		full := min(hi, (g.n-g.jc)/nr)
		if full-lo >= 2 && gemmBF16PackPairPanels(g.bPack[lo*g.kc2*nr:], g.b[g.pc*g.ldb+g.jc+lo*nr:], g.ldb, g.kc/2, full-lo, g.kc2*nr) {
			for q := lo; q < full; q++ {
				dst := g.bPack[q*g.kc2*nr:][:g.kc2*nr]
				if g.kc%2 == 1 {
					// Odd depth: the last step pairs the last k value with
					// a zero.
					d := dst[g.kc/2*nr:][:nr]
					for j, v := range g.b[(g.pc+g.kc-1)*g.ldb+g.jc+q*nr:][:nr] {
						d[j] = uint32(v)
					}
				}
				clear(dst[(g.kc+1)/2*nr:])
			}
			lo = full
		}
	}
	for q := lo; q < hi; q++ {
		g.packBPanel(q)
	}
}

// packBPanel packs micro-panel q of the current B block:
// bPack[q*kc2*nr + p*nr + j] = pair(op(B)[pc+2p][j0+j], op(B)[pc+2p+1][j0+j]),
// j0 = jc+q*nr, zero beyond n and beyond k.
func (g *gemmBF16Call) packBPanel(q int) {
	nr := g.kern.nr
	j0 := g.jc + q*nr
	cols := min(nr, g.n-j0)
	dst := g.bPack[q*g.kc2*nr:][:g.kc2*nr]
	if !g.transB {
		// Two stored rows give one row of pairs.
		packPairs(dst, g.b[g.pc*g.ldb+j0:], g.ldb, g.kc, cols, nr, false)
	} else {
		// op(B)[p][j] = B[j][p]: a stored row holds its pairs side by side.
		packPairs(dst, g.b[j0*g.ldb+g.pc:], g.ldb, g.kc, cols, nr, true)
	}
	clear(dst[(g.kc+1)/2*nr:])
}

// packA packs rows [i0, i0+rows) of op(A), depth [pc, pc+kc), into mr-row
// micro-panels: dst[q*kc2*mr + p*mr + i] = pair(op(A)[r][pc+2p],
// op(A)[r][pc+2p+1]), r = i0+q*mr+i, zero beyond the last row and beyond k.
//
// With a rowsA kernel the micro-panels are AMX panels instead (see
// packAMXA).
func (g *gemmBF16Call) packA(dst []uint32, i0, rows int) {
	mr := g.kern.mr
	if g.kern.rowsA {
		if g.transA && packAMXATransPanels(dst, g.a[g.pc*g.lda+i0:], g.lda, g.kc, g.kc2, rows) {
			return
		}
		for q := 0; q*mr < rows; q++ {
			d := dst[q*g.kc2*mr:][:g.kc2*mr]
			r0 := i0 + q*mr
			nrow := min(mr, rows-q*mr)
			if !g.transA {
				packAMXA(d, g.a[r0*g.lda+g.pc:], g.lda, g.kc, g.kc2, nrow, true)
			} else {
				packAMXA(d, g.a[g.pc*g.lda+r0:], g.lda, g.kc, g.kc2, nrow, false)
			}
		}
		return
	}
	for q := 0; q*mr < rows; q++ {
		d := dst[q*g.kc2*mr:][:g.kc2*mr]
		r0 := i0 + q*mr
		nrow := min(mr, rows-q*mr)
		if g.transA && mr == 12 && rows-q*mr >= 2*mr && g.kc >= 2 {
			// Two whole panels of a transposed op(A) side by side: each stored
			// row's 24 values read once. An odd depth's last step as packPairs.
			d1 := dst[(q+1)*g.kc2*mr:][:g.kc2*mr]
			src := g.a[g.pc*g.lda+r0:]
			gemmBF16PackPairRows24(d, d1, src, g.lda, g.kc/2)
			packPairsOdd(d, src, g.lda, g.kc, mr, mr, false)
			packPairsOdd(d1, src[mr:], g.lda, g.kc, mr, mr, false)
			q++
			continue
		}
		if !g.transA {
			// A stored row holds its pairs side by side.
			packPairs(d, g.a[r0*g.lda+g.pc:], g.lda, g.kc, nrow, mr, true)
			continue
		}
		// op(A)[i][p] = A[p][i]: two stored rows give one step of pairs.
		packPairs(d, g.a[g.pc*g.lda+r0:], g.lda, g.kc, nrow, mr, false)
	}
}

// packPairs packs lanes × kc values of a bf16 operand into ceil(kc/2) steps of width
// pairs: dst[p*width+j] = pair(x(j, 2p), x(j, 2p+1)), zero beyond lanes and beyond kc.
// With sideBySide, lane j's k values are consecutive in memory (x(j, k) = src[j*ld+k]);
// otherwise lanes are adjacent and k steps by ld (x(j, k) = src[k*ld+j]).
func packPairs(dst []uint32, src []half.BFloat16, ld, kc, lanes, width int, sideBySide bool) {
	if kc >= 2 {
		if sideBySide {
			gemmBF16PackGatherRows(dst, src, ld, kc/2, lanes, width)
		} else {
			gemmBF16PackPairRows(dst, src, ld, kc/2, lanes, width)
		}
	}
	packPairsOdd(dst, src, ld, kc, lanes, width, sideBySide)
}

// packPairsOdd is packPairs's last step for an odd depth kc (nothing for an even
// one): the last k value paired with a zero.
func packPairsOdd(dst []uint32, src []half.BFloat16, ld, kc, lanes, width int, sideBySide bool) {
	if kc%2 == 0 {
		return
	}
	d := dst[(kc/2)*width:][:width]
	for j := range lanes {
		if sideBySide {
			d[j] = uint32(src[j*ld+kc-1])
		} else {
			d[j] = uint32(src[(kc-1)*ld+j])
		}
	}
	clear(d[lanes:])
}

// task computes task t of the current (jc, pc) block: a disjoint block of
// C rows and columns.
func (g *gemmBF16Call) task(t int) {
	mr, nr := g.kern.mr, g.kern.nr
	mp0, mp1, np0, np1 := g.taskPanels(t)
	if mp0 >= mp1 || np0 >= np1 {
		return
	}
	if g.ownPack {
		g.packPanels(np0, np1)
	}
	s := gemmBF16Scratches.Get().(*gemmBF16Scratch)
	kc2 := g.kc2
	s.aPack = grow(s.aPack, (mp1-mp0)*mr*kc2)
	s.tile = grow(s.tile, mr*nr)
	s.out = grow(s.out, mr*nr)
	i0, i1 := mp0*mr, min(mp1*mr, g.m)
	// The kernel reads whole row panels of A in place where it can and k
	// needs no zero padding: only a last, partial panel is packed then.
	direct := g.kern.direct != nil && !g.transA && !g.sliced && g.kc%(2*g.kern.tileK) == 0
	if !direct {
		g.packA(s.aPack, i0, i1-i0)
	} else if last := (mp1 - 1) * mr; i1-last < mr {
		g.packA(s.aPack[(mp1-1-mp0)*kc2*mr:], last, i1-last)
	}

	kern := g.kern.fn
	c, ldc := g.c, g.ldc
	if chunk := gemmBF16RowOrderWords / (kc2 * nr); direct && g.kern.directRow != nil && np1-np0 >= 8 && chunk >= 8 {
		// Row by row over chunks of B panels small enough to stay in L2
		// and many enough to fill a call: a row panel of A stays in L1
		// while a chunk goes by, and the whole tiles of a row of the chunk
		// take one call.
		nch := gemmCeilDiv(np1-np0, chunk)
		for ch := range nch {
			q0, q1 := np0+ch*(np1-np0)/nch, np0+(ch+1)*(np1-np0)/nch
			g.rowOrder(s, mp0, mp1, q0, q1)
		}
		gemmBF16Scratches.Put(s)
		return
	}
	for q := np0; q < np1; q++ {
		bp := g.bPack[q*kc2*nr:][:kc2*nr]
		j := g.jc + q*nr
		cols := min(nr, g.n-j)
		r := mp0
		// Whole tiles down the column at once where the kernel can.
		if full := min(mp1, g.m/mr); cols == nr && full > r {
			if direct && g.kern.directN != nil {
				g.kern.directN(full-r, kc2, g.a[r*mr*g.lda+g.pc:], g.lda, bp, g.biasAt(j), c[r*mr*ldc+j:], ldc, g.alpha, g.beta)
				r = full
			} else if !direct && !g.sliced && g.kern.storeN != nil {
				g.kern.storeN(full-r, kc2, s.aPack[(r-mp0)*kc2*mr:], bp, g.biasAt(j), c[r*mr*ldc+j:], ldc, g.alpha, g.beta)
				r = full
			}
		}
		for ; r < mp1; r++ {
			ap := s.aPack[(r-mp0)*kc2*mr:][:kc2*mr]
			i := r * mr
			rows := min(mr, g.m-i)
			if direct && rows == mr {
				g.storeDirect(s, bp, i, j, cols)
				continue
			}
			if !g.sliced {
				if rows == mr && cols == nr {
					ct := c[i*ldc+j:]
					_ = ct[(mr-1)*ldc+nr-1]
					g.fillBias(i, j, mr, nr)
					g.kern.store(kc2, ap, bp, ct, ldc, g.alpha, g.beta)
					continue
				}
				kern(kc2, ap, bp, s.tile, nr, false)
				g.store(s, s.tile, nr, i, j, rows, cols)
				continue
			}
			acc := g.acc[i*g.accLd+q*nr:]
			kern(kc2, ap, bp, acc, g.accLd, g.pc > 0)
			if g.last {
				g.store(s, acc, g.accLd, i, j, rows, cols)
			}
		}
	}
	gemmBF16Scratches.Put(s)
}

// rowOrder computes the task's tiles of rows [mp0, mp1) and columns
// [np0, np1) of the current block row by row, reading A in place (direct).
func (g *gemmBF16Call) rowOrder(s *gemmBF16Scratch, mp0, mp1, np0, np1 int) {
	mr, nr, kc2 := g.kern.mr, g.kern.nr, g.kc2
	c, ldc := g.c, g.ldc
	fullQ := min(np1, (g.n-g.jc)/nr)
	for r := mp0; r < mp1; r++ {
		i := r * mr
		q := np0
		if i+mr <= g.m && fullQ > q {
			j := g.jc + q*nr
			g.kern.directRow(fullQ-q, kc2, g.a[i*g.lda+g.pc:], g.lda, g.bPack[q*kc2*nr:], g.biasAt(j), c[i*ldc+j:], ldc, g.alpha, g.beta)
			q = fullQ
		}
		for ; q < np1; q++ {
			bp := g.bPack[q*kc2*nr:][:kc2*nr]
			j := g.jc + q*nr
			cols := min(nr, g.n-j)
			if i+mr <= g.m {
				g.storeDirect(s, bp, i, j, cols)
				continue
			}
			rows := g.m - i
			// The last, partial row panel of the task was packed.
			ap := s.aPack[(r-mp0)*kc2*mr:][:kc2*mr]
			g.kern.fn(kc2, ap, bp, s.tile, nr, false)
			g.store(s, s.tile, nr, i, j, rows, cols)
		}
	}
}

// biasAt returns the bias from column j on, nil without one.
func (g *gemmBF16Call) biasAt(j int) []half.BFloat16 {
	if g.bias == nil {
		return nil
	}
	return g.bias[j:]
}

// fillBias copies the bias row, if any, into the rows×cols block of C at
// (i, j).
func (g *gemmBF16Call) fillBias(i, j, rows, cols int) {
	if g.bias == nil {
		return
	}
	src := g.bias[j:][:cols]
	for r := range rows {
		copy(g.c[(i+r)*g.ldc+j:][:cols], src)
	}
}

// storeDirect computes the tile of C at (i, j), cols ≤ nr of its columns
// valid, with the kernel's direct store from mr whole rows of A in place,
// through the scratch tile where cols < nr.
func (g *gemmBF16Call) storeDirect(s *gemmBF16Scratch, bp []uint32, i, j, cols int) {
	mr, nr := g.kern.mr, g.kern.nr
	a := g.a[i*g.lda+g.pc:]
	c, ldc := g.c, g.ldc
	if cols == nr && g.kern.directN != nil {
		g.kern.directN(1, g.kc2, a, g.lda, bp, g.biasAt(j), c[i*ldc+j:], ldc, g.alpha, g.beta)
		return
	}
	g.fillBias(i, j, mr, cols)
	if cols == nr {
		g.kern.direct(g.kc2, a, g.lda, bp, c[i*ldc+j:], ldc, g.alpha, g.beta)
		return
	}
	out := s.out[:mr*nr]
	if g.beta != 0 {
		for r := range mr {
			copy(out[r*nr:][:cols], c[(i+r)*ldc+j:][:cols])
		}
	}
	g.kern.direct(g.kc2, a, g.lda, bp, out, nr, g.alpha, g.beta)
	for r := range mr {
		copy(c[(i+r)*ldc+j:][:cols], out[r*nr:][:cols])
	}
}

// store writes the rows×cols corner of the float32 tile t (row stride ldt)
// to C at (i, j) as bf16Out does, converting the tile at once.
func (g *gemmBF16Call) store(s *gemmBF16Scratch, t []float32, ldt, i, j, rows, cols int) {
	nr := g.kern.nr
	alpha, beta := g.alpha, g.beta
	c, ldc := g.c, g.ldc
	g.fillBias(i, j, rows, cols)
	x := s.tile
	if alpha == 1 && beta == 0 && &t[0] != &x[0] {
		// A partial sum buffer: round its rows straight into C (1·v
		// rounds as v does, NaNs included).
		for r := range rows {
			half.Float32ToBFloat16(c[(i+r)*ldc+j:][:cols], t[r*ldt:][:cols])
		}
		return
	}
	if alpha != 1 || beta != 0 || &t[0] != &x[0] {
		// Gather alpha·t + beta·C into the scratch tile (t may be it, with
		// ldt == nr).
		for r := range rows {
			src := t[r*ldt:][:cols]
			dst := x[r*nr:][:cols]
			if beta != 0 {
				old := c[(i+r)*ldc+j:][:cols]
				for jj, v := range src {
					dst[jj] = float32(alpha*v) + float32(beta*old[jj].Float32())
				}
				continue
			}
			for jj, v := range src {
				dst[jj] = alpha * v
			}
		}
	}
	out := s.out[:rows*nr]
	half.Float32ToBFloat16(out, x[:rows*nr])
	for r := range rows {
		copy(c[(i+r)*ldc+j:][:cols], out[r*nr:][:cols])
	}
}
