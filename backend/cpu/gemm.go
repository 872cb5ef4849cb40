package cpu

import (
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// Gemm follows the Goto/BLIS scheme of gemmBlocks: per block, op(B) is
// packed into NR-column micro-panels, then tasks pack their rows of op(A)
// (scaled by alpha) into MR-row micro-panels and run the register-blocked
// micro-kernel over every MR×NR tile. Every element of C thus accumulates
// its k products in a fixed order — ascending p within a KC slice into a
// zeroed register, then slice by slice into C — whatever the number of
// workers or the schedule.

// Blocking sizes, in elements, tuned on the 2-core AMD Zen 5 (family 26)
// development VM: 48 KB L1d and 1 MB L2 per core. KC = 512 halves the passes
// over C against 256 at the cost of a B micro-panel (KC×NR, 64 KB) that
// streams from L2; the A block (MC×KC, 288 KB) stays in L2; NC bounds the
// packed B block. Sizes within ±50 % of these were within 5 %.
const (
	gemmKC = 512
	gemmMC = 144
	gemmNC = 4096
	// gemmSerialFlops is the work below which waking the pool costs more
	// than it saves.
	gemmSerialFlops = 1 << 21
)

// gemmRowOrderWords, when positive, makes a task run its tiles row panel by
// row panel over chunks of at most that many words of packed B panels (at
// least one panel; 1 MB, half of a Sapphire Rapids L2); 0 runs them B panel
// by B panel. A variable so that benchmarks and tests can compare the orders.
var gemmRowOrderWords = 1 << 18

// Products of at most gemmColMaxM rows whose op(A) the kernel reads in
// place, and of at most 2·gemmColMaxM rows and as many columns whose op(A)
// it packs, run as gemmColTasksPerWorker column tasks per worker (see
// colTask); gemmColMaxM is a variable so that tests and benchmarks can turn
// them off.
var gemmColMaxM = 2 * gemmMC

// Products of at most gemmRowMaxPanels NR-column micro-panels per worker
// (the MLP's 10-class forward: one panel) whose op(A) the kernel reads in
// place run as one row task per worker (see rowTask); a variable so that
// tests and benchmarks can turn them off (0).
var gemmRowMaxPanels = 1

// One task per worker: each reads the row panels of A once per k slice and
// chunk of B panels, and packs its panels wide (gemmPackRows32Wide); 4 per
// worker were 4 % slower on the MLP fp32 step.
const gemmColTasksPerWorker = 1

// gemmKernel is a register-blocked micro-kernel together with the packing
// format it reads. fn(kc, a, b, c, ldc) adds to c[i*ldc+j], for i < mr and
// j < nr, the product of an A micro-panel a[p*mr+i] and a B micro-panel
// b[p*nr+j] (p < kc), each product sum accumulated in ascending p from zero
// and added to C once. a and b are read only; c must cover the whole tile.
//
// direct, where set, is fn reading the mr rows of a row-major A in place
// (a[i*lda+p]) instead of a packed panel, with the same arithmetic: Gemm
// uses it when op(A) is not transposed and alpha is 1, and packs no A then.
//
// packRows and packTrans, where set, pack a whole B micro-panel as
// packBPanel's loops do (same words, faster): packRows(dst, src, ld, kc,
// cols) copies kc rows of cols ≤ nr values (row stride ld) into rows of nr,
// zero beyond cols; packTrans(dst, src, ld, kc) transposes nr stored rows of
// kc values (row stride ld) into kc rows of nr.
type gemmKernel[T float32 | float64] struct {
	name   string
	mr, nr int
	fn     func(kc int, a, b, c []T, ldc int)
	direct func(kc int, a []T, lda int, b, c []T, ldc int)

	packRows func(dst, src []T, ld, kc, cols int)
	// packRowsWide, where set, is packRows for panels whole panels side by
	// side (dst[q*stride:] for panel q, cols = nr), each stored row read
	// once: the same words as panels calls of packRows.
	packRowsWide func(dst, src []T, ld, kc, panels, stride int)
	packTrans    func(dst, src []T, ld, kc int)
	// packATrans, where set, packs an A micro-panel from a transposed
	// op(A) as packA's loop does: dst[p*mr+i] = alpha·src[p*ld+i] for i <
	// rows ≤ mr, zero beyond, p < kc. alpha is not a NaN.
	packATrans func(dst, src []T, ld, kc, rows int, alpha T)
	// packATransWide, where set, is packATrans for panels whole micro-panels
	// side by side (panel q from src[q*mr:] to dst[q*kc*mr:]), each stored
	// row read once: the same words as panels calls of packATrans.
	packATransWide func(dst, src []T, ld, kc, panels int, alpha T)

	// fnStart and directStart, where set, are fn and direct storing
	// start[j] plus the sum for column j instead of adding it to C, which
	// they do not read (start holds nr values): what fn and direct leave on
	// a C whose rows hold start, bit for bit. Gemm runs them on the first k
	// slice when beta is 0 (start +0s) instead of clearing C first, and
	// with a bias (start the bias row) instead of filling C with it.
	fnStart     func(kc int, a, b, c []T, ldc int, start []T)
	directStart func(kc int, a []T, lda int, b, c []T, ldc int, start []T)

	// rowsFn and rowsDirect, where set, are fn and direct for the first
	// rows (0 < rows < mr) rows of a tile, with the same arithmetic for each
	// element: rowsFn reads only those rows of a packed mr-row panel
	// (a[p*mr+i], i < rows), rowsDirect only the rows rows of A in place,
	// and c covers rows rows. With start nil they add the sums to C as fn
	// does; otherwise they store start[j] + the sum for column j, C not
	// read: start is nr values, as for fnStart. Gemm
	// runs them on the last row panel when m is not a multiple of mr, which
	// then computes no padding rows and, where A is read in place, packs
	// nothing.
	rowsFn     func(rows, kc int, a, b, c []T, ldc int, start []T)
	rowsDirect func(rows, kc int, a []T, lda int, b, c []T, ldc int, start []T)
	// rowsFnB, where set, is rowsFn reading the nr columns of the B
	// micro-panel in place from a row-major op(B), step p's at b[p*ldb:],
	// instead of from a packed panel: the words packing would copy, the same
	// arithmetic. Column tasks that pack A (few rows) run it on whole
	// panels of a row-major op(B), which they then do not pack.
	rowsFnB func(rows, kc int, a, b []T, ldb int, c []T, ldc int, start []T)

	// fnHalf and directHalf, where set, are fn and direct on the first
	// nr/2 columns of the tile only, from the same nr-column B micro-panel:
	// each of those columns gets fn's arithmetic, the other columns of C
	// are neither read nor written. Gemm runs them on the edge tiles of at
	// most nr/2 valid columns (n ≤ nr/2: a classifier's few classes), for
	// half the multiply-adds of a whole tile.
	fnHalf     func(kc int, a, b, c []T, ldc int)
	directHalf func(kc int, a []T, lda int, b, c []T, ldc int)
}

// gemmKernelGoHalf is the pure-Go twin of a kernel's fnHalf: gemmKernelGo's
// loop on the first nr/2 columns of an mr×nr tile (nr a multiple of 8).
func gemmKernelGoHalf[T float32 | float64](mr, nr, kc int, a, b, c []T, ldc int) {
	a = a[:kc*mr]
	b = b[:kc*nr]
	for i := range mr {
		ci := c[i*ldc:][:nr/2]
		for j := 0; j < nr/2; j += 4 {
			var s0, s1, s2, s3 T
			for p := range kc {
				ai := a[p*mr+i]
				bp := b[p*nr+j:][:4]
				s0 += ai * bp[0]
				s1 += ai * bp[1]
				s2 += ai * bp[2]
				s3 += ai * bp[3]
			}
			ci[j] += s0
			ci[j+1] += s1
			ci[j+2] += s2
			ci[j+3] += s3
		}
	}
}

// gemmKernelGo32 and gemmKernelGo64 are the portable micro-kernels.
var (
	gemmKernelGo32 = &gemmKernel[float32]{name: "go8x8", mr: 8, nr: 8, fn: func(kc int, a, b, c []float32, ldc int) {
		gemmKernelGo(8, 8, kc, a, b, c, ldc)
	}, rowsFn: func(rows, kc int, a, b, c []float32, ldc int, start []float32) {
		gemmKernelGoRows(rows, 8, kc, a, 1, 8, b, c, ldc, start)
	}, rowsFnB: func(rows, kc int, a, b []float32, ldb int, c []float32, ldc int, start []float32) {
		gemmKernelGoRowsB(rows, 8, kc, a, 1, 8, b, ldb, c, ldc, start)
	}}
	gemmKernelGo64 = &gemmKernel[float64]{name: "go8x8", mr: 8, nr: 8, fn: func(kc int, a, b, c []float64, ldc int) {
		gemmKernelGo(8, 8, kc, a, b, c, ldc)
	}}
)

// gemmKernelGo is the pure-Go micro-kernel for any mr×nr tile with mr even
// and nr a multiple of 4. It is the twin of the assembly kernels: for every
// i < mr and j < nr it computes
//
//	var acc T
//	for p := 0; p < kc; p++ {
//		acc += a[p*mr+i] * b[p*nr+j]
//	}
//	c[i*ldc+j] += acc
//
// The multiply-add is fused where the Go compiler fuses x*y+z (arm64,
// GOAMD64=v3 and up), which then makes it bit-identical to the FMA assembly.
func gemmKernelGo[T float32 | float64](mr, nr, kc int, a, b, c []T, ldc int) {
	a = a[:kc*mr]
	b = b[:kc*nr]
	for i := 0; i < mr; i += 2 {
		c0 := c[i*ldc:][:nr]
		c1 := c[(i+1)*ldc:][:nr]
		for j := 0; j < nr; j += 4 {
			var s00, s01, s02, s03, s10, s11, s12, s13 T
			for p := range kc {
				ap := a[p*mr+i:][:2]
				bp := b[p*nr+j:][:4]
				a0, a1 := ap[0], ap[1]
				b0, b1, b2, b3 := bp[0], bp[1], bp[2], bp[3]
				s00 += a0 * b0
				s01 += a0 * b1
				s02 += a0 * b2
				s03 += a0 * b3
				s10 += a1 * b0
				s11 += a1 * b1
				s12 += a1 * b2
				s13 += a1 * b3
			}
			c0[j] += s00
			c0[j+1] += s01
			c0[j+2] += s02
			c0[j+3] += s03
			c1[j] += s10
			c1[j+1] += s11
			c1[j+2] += s12
			c1[j+3] += s13
		}
	}
}

// gemmKernelGoRows is the pure-Go twin of the kernels' rowsFn and
// rowsDirect: gemmKernelGo's arithmetic for rows rows of an nr-column tile
// (nr a multiple of 4), row i's value at step p read at a[i*lda+p*astep]
// (a packed mr-row panel: lda 1, astep mr; rows of A in place: lda the row
// stride, astep 1). For every i < rows and j < nr it computes
//
//	var acc T
//	for p := 0; p < kc; p++ {
//		acc += a[i*lda+p*astep] * b[p*nr+j]
//	}
//	if start == nil {
//		c[i*ldc+j] += acc
//	} else {
//		c[i*ldc+j] = start[j] + acc
//	}
func gemmKernelGoRows[T float32 | float64](rows, nr, kc int, a []T, lda, astep int, b, c []T, ldc int, start []T) {
	gemmKernelGoRowsB(rows, nr, kc, a, lda, astep, b[:kc*nr], nr, c, ldc, start)
}

// gemmArgError is the panic value for invalid Gemm arguments.
type gemmArgError string

func (e gemmArgError) Error() string { return string(e) }

// Gemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices, where op(X) is X or
// its transpose. op(A) is m×k, op(B) is k×n, C is m×n; lda, ldb, ldc are row strides (in
// elements) of A, B, C as stored. beta == 0 means C is overwritten (its old contents, even NaN, ignored).
//
// A is stored m×k (k×m when transA), B k×n (n×k when transB). Each stride
// must be at least max(1, stored width) and each slice long enough for its
// matrix; otherwise Gemm panics. C must not overlap A or B. Gemm is safe for
// concurrent use on disjoint C.
//
// For a given (m, n, k) the result does not depend on the number of workers
// or their schedule. float32 runs an AVX-512 or AVX2 assembly micro-kernel
// where the CPU has one (the two give bit-identical results) and a pure-Go
// one otherwise or with the purego build tag; float64 always runs pure Go.
func Gemm[T float32 | float64](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	gemmWith(gemmKernelFor[T](), Workers(), transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// gemmKernelFor returns the micro-kernel Gemm uses for T.
func gemmKernelFor[T float32 | float64]() *gemmKernel[T] {
	var zero T
	if _, ok := any(zero).(float32); ok {
		return any(gemmKernel32).(*gemmKernel[T])
	}
	return any(gemmKernelGo64).(*gemmKernel[T])
}

// gemmWith is Gemm with an explicit micro-kernel and worker count; workers
// only shapes the task split, which never changes the result.
func gemmWith[T float32 | float64](kern *gemmKernel[T], workers int, transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	gemmWithBias(kern, workers, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, nil, c, ldc)
}

// gemmWithBias is gemmWith where bias, if not nil, holds n values that every row
// of C starts from instead of its old contents (beta is then ignored): the bits
// of copying bias into each row of C and running with beta 1. The first k
// slice's kernels store bias + sum where they have start variants; other tiles
// of C take the bias row right before the kernel first reads them, so that no
// pass of its own writes C.
func gemmWithBias[T float32 | float64](kern *gemmKernel[T], workers int, transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, bias, c []T, ldc int) {
	gemmWithBiasReLU(kern, workers, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc, false)
}

// gemmWithBiasReLU is gemmWithBias followed, where relu is set, by a ReLU on C
// (reluInPlace: max(0, v), NaN kept, -0 to +0): the bits of gemmWithBias then
// Unary's Relu. The task that computes a block of C applies it on the last k
// slice, right after the block's kernel calls, while the block is in its cache.
func gemmWithBiasReLU[T float32 | float64](kern *gemmKernel[T], workers int, transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, bias, c []T, ldc int, relu bool) {
	if m < 0 || n < 0 || k < 0 {
		panic(gemmArgError(fmt.Sprintf("cpu: Gemm: negative dimension m=%d n=%d k=%d", m, n, k)))
	}
	gemmCheck("C", m, n, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	if k > 0 {
		ar, ac := m, k
		if transA {
			ar, ac = k, m
		}
		gemmCheck("A", ar, ac, a, lda)
		br, bc := k, n
		if transB {
			br, bc = n, k
		}
		gemmCheck("B", br, bc, b, ldb)
	}
	if bias != nil {
		if len(bias) < n {
			panic(gemmArgError(fmt.Sprintf("cpu: Gemm: len(bias)=%d is less than n=%d", len(bias), n)))
		}
		bias, beta = bias[:n], 1
	}
	if k == 0 || alpha == 0 {
		if bias != nil {
			for i := range m {
				copy(c[i*ldc:][:n], bias)
			}
		}
		gemmScale(m, n, beta, c, ldc)
		if relu {
			for i := range m {
				reluInPlace(c[i*ldc:][:n])
			}
		}
		return
	}

	g := gemmCallPool[T]().Get().(*gemmCall[T])
	if kern.direct != nil && !transA && alpha == 1 && m >= 2*kern.mr && gemmAliasedRows[T](lda) {
		a, lda = g.pad(a, lda, m, k)
	}
	g.bias, g.relu = bias, relu
	g.transA, g.transB = transA, transB
	g.alpha, g.beta = alpha, beta
	g.a, g.lda, g.b, g.ldb, g.c, g.ldc = a, lda, b, ldb, c, ldc
	g.kern = kern
	if 2*float64(m)*float64(n)*float64(k) < gemmSerialFlops {
		workers = 1
	}
	g.run(m, n, k, workers)
	g.a, g.b, g.c, g.bias, g.kern, g.relu = nil, nil, nil, nil, nil, false
	gemmCallPool[T]().Put(g)
}

// gemmAliasedRows reports whether rows lda elements of T apart are a multiple of 4 KB
// apart. The kernels that read A in place (direct) read one element of each of mr rows
// per step; at such a stride those rows fall in one set of a 64-set L1 (Zen 4's 32 KB,
// 8 ways), more lines than it has ways, and evict each other. The MLP's 1024-wide
// float32 products ran at 198 and 194 GFLOP/s (forward, input gradient; 256×1024×1024
// on the 2-core EPYC VM) against 214 and 211 with rows 1040 apart; transformer-large's
// bf16 2048×512×2048 products (rows of 2048 bf16) at 339–359 against 418–431.
func gemmAliasedRows[T any](lda int) bool {
	var t T
	return lda*int(unsafe.Sizeof(t))%4096 == 0
}

// gemmPadA copies op(A) with a stride that is not a multiple of 4 KB, for
// kernels that read it in place (pad): the values and the kernel calls are
// the same, so is the result (gemmAliasedRows). It lives in a pooled call, so
// that a steady-state call allocates nothing.
type gemmPadA[T any] struct {
	// aPad holds padK elements of each row of padSrc (stride padSrcLd) at
	// stride padLd, copied by padFn.
	aPad                  []T
	padSrc                []T
	padLd, padK, padSrcLd int
	padFn                 func(lo, hi int)
}

// pad copies the m×k matrix A (stride lda) into the pooled buffer with rows 64
// bytes more than k apart, in parallel, and returns the copy and its stride.
func (p *gemmPadA[T]) pad(a []T, lda, m, k int) ([]T, int) {
	if p.padFn == nil {
		p.padFn = func(lo, hi int) {
			for i := lo; i < hi; i++ {
				copy(p.aPad[i*p.padLd:][:p.padK], p.padSrc[i*p.padSrcLd:][:p.padK])
			}
		}
	}
	var t T
	p.padLd, p.padK, p.padSrc, p.padSrcLd = k+64/int(unsafe.Sizeof(t)), k, a, lda
	p.aPad = grow(p.aPad, (m-1)*p.padLd+k)
	ParallelFor(m, max(1, (1<<16/int(unsafe.Sizeof(t)))/k), p.padFn)
	p.padSrc = nil
	return p.aPad, p.padLd
}

func gemmCheck[T float32 | float64](name string, rows, cols int, x []T, ld int) {
	if ld < max(1, cols) {
		panic(gemmArgError(fmt.Sprintf("cpu: Gemm: ld%s=%d is less than max(1, %d)", name, ld, cols)))
	}
	if rows > 0 && cols > 0 && len(x) < (rows-1)*ld+cols {
		panic(gemmArgError(fmt.Sprintf("cpu: Gemm: len(%s)=%d is too short for %d×%d with stride %d", name, len(x), rows, cols, ld)))
	}
}

// gemmScale sets the m×n matrix C to beta·C, treating beta == 0 as an
// overwrite with zeros.
func gemmScale[T float32 | float64](m, n int, beta T, c []T, ldc int) {
	switch beta {
	case 1:
	case 0:
		for i := range m {
			clear(c[i*ldc:][:n])
		}
	default:
		for i := range m {
			row := c[i*ldc:][:n]
			for j := range row {
				row[j] *= beta
			}
		}
	}
}

// gemmCall is the state of one Gemm call, shared by its tasks. It is pooled,
// together with its packed-B buffer and its bound methods, so that a
// steady-state call allocates nothing.
type gemmCall[T float32 | float64] struct {
	gemmBlocks
	transA, transB bool
	alpha, beta    T
	a, b, c        []T
	lda, ldb, ldc  int
	kern           *gemmKernel[T]
	// bias, where not nil, is the row every row of C starts from (beta is
	// then 1): the first k slice's kernels store bias + sum, or it is
	// copied into the tile right before the kernel adds to it.
	bias []T
	// relu, where set, applies max(0, v) to each block of C by the task
	// that computed it, right after its last k slice (reluRows).
	relu bool

	bPack []T
	// gemmPadA copies A off a stride that is a multiple of 4 KB.
	gemmPadA[T]

	// colTasks, where positive, is the number of column tasks of a call run
	// by colTask instead of the shared blocking loop; colTaskFn runs a range
	// of them. colPackA is set when the column tasks pack all of op(A)
	// rather than read it in place.
	colTasks  int
	colTaskFn func(lo, hi int)
	colPackA  bool

	// rowTasks, where positive, is the number of row tasks of a call run
	// by rowTask; rowTaskFn runs a range of them.
	rowTasks  int
	rowTaskFn func(lo, hi int)
}

// fillBias copies the bias row into the rows×cols block of C at (i, j).
func (g *gemmCall[T]) fillBias(i, j, rows, cols int) {
	src := g.bias[j:][:cols]
	for r := range rows {
		copy(g.c[(i+r)*g.ldc+j:][:cols], src)
	}
}

// reluRows applies the fused ReLU to rows [i0, i1) by columns [j0, j1) of C:
// reluInPlace, the arithmetic of Unary's Relu (vecRelu for float32).
func (g *gemmCall[T]) reluRows(i0, i1, j0, j1 int) {
	for i := i0; i < i1; i++ {
		reluInPlace(g.c[i*g.ldc+j0:][:j1-j0])
	}
}

// gemmScratch is per-task scratch: the packed A block, a row task's own
// packed B panels and an edge tile.
type gemmScratch[T float32 | float64] struct {
	aPack []T
	bPack []T
	edge  []T
	// negZero is an edge tile of -0, copied into edge before each use.
	negZero []T
	// zeros is a row of +0s: the start row of the kernels that store +0 +
	// the sum (fnStart, directStart, rowsFn, rowsDirect).
	zeros []T
}

// growEdge sizes the edge tile (and its -0 original) to n elements.
func (s *gemmScratch[T]) growEdge(n int) {
	s.edge = gemmGrow(s.edge, n)
	if len(s.negZero) != n {
		s.negZero = gemmGrow(s.negZero, n)
		for x := range s.negZero {
			s.negZero[x] = T(math.Copysign(0, -1))
		}
	}
}

// growZeros sizes the row of +0s to n elements.
func (s *gemmScratch[T]) growZeros(n int) {
	if len(s.zeros) != n {
		s.zeros = make([]T, n)
	}
}

var (
	gemmCalls32, gemmCalls64     = newGemmCallPool[float32](), newGemmCallPool[float64]()
	gemmScratch32, gemmScratch64 = sync.Pool{New: func() any { return new(gemmScratch[float32]) }}, sync.Pool{New: func() any { return new(gemmScratch[float64]) }}
)

func newGemmCallPool[T float32 | float64]() *sync.Pool {
	return &sync.Pool{New: func() any {
		g := new(gemmCall[T])
		g.onBlock = func() {
			g.packGrain = max(1, 16384/(g.kc*g.nr))
			if !g.transB && g.kern.packRowsWide != nil {
				// Wide packing reads each row of the chunk's panels at
				// once: two chunks per worker.
				g.packGrain = max(g.packGrain, g.nPanels/(2*g.workers))
			}
		}
		g.packFn = func(lo, hi int) {
			g.packBPanels(g.bPack[lo*g.kc*g.nr:], g.kc*g.nr, g.jc/g.nr+lo, g.jc/g.nr+hi, g.pc, g.kc)
		}
		g.taskFn = func(lo, hi int) {
			for t := lo; t < hi; t++ {
				g.task(t)
			}
		}
		g.colTaskFn = func(lo, hi int) {
			for t := lo; t < hi; t++ {
				g.colTask(t)
			}
		}
		g.rowTaskFn = func(lo, hi int) {
			for t := lo; t < hi; t++ {
				g.rowTask(t)
			}
		}
		return g
	}}
}

func gemmCallPool[T float32 | float64]() *sync.Pool {
	var zero T
	if _, ok := any(zero).(float32); ok {
		return gemmCalls32
	}
	return gemmCalls64
}

func gemmScratchPool[T float32 | float64]() *sync.Pool {
	var zero T
	if _, ok := any(zero).(float32); ok {
		return &gemmScratch32
	}
	return &gemmScratch64
}

func gemmCeilDiv(a, b int) int { return (a + b - 1) / b }

// gemmGrow returns buf resliced to n elements, reallocating only when too small.
func gemmGrow[T float32 | float64](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

func (g *gemmCall[T]) run(m, n, k, workers int) {
	mr, nr := g.kern.mr, g.kern.nr
	g.plan(m, n, k, mr, nr, workers, gemmSizes{kc: gemmKC, mc: gemmMC, nc: gemmNC})
	g.bPack = gemmGrow(g.bPack, g.kcMax*gemmCeilDiv(g.ncMax, nr)*nr)
	switch g.schedule() {
	case gemmColTasks, gemmColTasksPacked:
		g.colTasks = max(1, min(gemmCeilDiv(n, nr)/2, gemmColTasksPerWorker*g.workers))
		ParallelFor(g.colTasks, 1, g.colTaskFn)
	case gemmRowTasks:
		g.rowTasks = g.workers
		ParallelFor(g.rowTasks, 1, g.rowTaskFn)
	default:
		g.loop()
	}
}

// The schedules of a planned call: the blocking loop (two parallel phases
// per k slice), column tasks reading op(A) in place or packing it, row
// tasks. Each gives every tile the same kernel calls in the same order.
const (
	gemmLoop = iota
	gemmColTasks
	gemmColTasksPacked
	gemmRowTasks
)

// schedule picks the schedule of a planned call and sets colPackA.
func (g *gemmCall[T]) schedule() int {
	m, n, mr, workers := g.m, g.n, g.kern.mr, g.workers
	nPanels := gemmCeilDiv(n, g.kern.nr)
	direct := g.kern.direct != nil && !g.transA && g.alpha == 1
	g.colPackA = false
	// Fewer rows than a panel, packed, against a row-major op(B) that the
	// row kernel reads in place (the weight gradient of a 10-class layer):
	// column tasks on any number of workers, for they pack no B.
	if !direct && m < mr && m <= gemmColMaxM && n <= gemmNC && !g.transB && g.kern.rowsFnB != nil {
		g.colPackA = true
		return gemmColTasksPacked
	}
	if workers <= 1 {
		return gemmLoop
	}
	// Few rows read in place (the MLP's forward and input-gradient
	// products): column tasks, each over every k slice, instead of the
	// loop's two parallel phases (pack B, then row tasks) per k slice.
	// One row panel not read in place (the MLP's 10-class weight gradient,
	// m = 10): column tasks too, each packing that panel as every loop task
	// would (the loop splits no rows then).
	// Rows not read in place, at most twice gemmColMaxM and no more than
	// the columns (the transformers' FFN2 weight gradients: m = 128 or 512
	// by n = 4m, k = the tokens): column tasks too, each packing all of
	// op(A) (no more than the B it packs) and only its own B panels, in one
	// parallel phase instead of the loop's two per k slice.
	if n <= gemmNC && nPanels >= 2*workers {
		if direct && m <= gemmColMaxM {
			return gemmColTasks
		}
		if !direct && (m <= min(mr, gemmColMaxM) || m <= min(n, 2*gemmColMaxM)) {
			g.colPackA = true
			return gemmColTasksPacked
		}
	}
	// Few columns read against many rows in place (the MLP's 10-class
	// forward, n = 10): row tasks, each packing the few B panels itself,
	// instead of the loop's B packing on one worker while the others wait
	// and two phases per k slice.
	if direct && nPanels <= gemmRowMaxPanels*workers && g.mPanels >= 2*workers {
		return gemmRowTasks
	}
	return gemmLoop
}

// rowTask computes row task t of a call with row tasks: a share of C's
// row panels by all its columns, slice by k slice in ascending order. It
// packs every B panel of each k slice into its own scratch (a few: the
// panels stay in the worker's caches, and no worker waits for another's
// packing) and reads the row panels of A in place (packing only a partial
// last one where the row kernels cannot read it), so that the call needs
// one parallel phase; each tile gets the kernel calls of the blocking loop
// in the same order, so the result has the same bits.
func (g *gemmCall[T]) rowTask(t int) {
	mr, nr := g.kern.mr, g.kern.nr
	mp0, mp1 := t*g.mPanels/g.rowTasks, (t+1)*g.mPanels/g.rowTasks
	if mp0 >= mp1 {
		return
	}
	i0, i1 := mp0*mr, min(mp1*mr, g.m)
	nPanels := gemmCeilDiv(g.n, nr)
	sp := gemmScratchPool[T]()
	s := sp.Get().(*gemmScratch[T])
	s.aPack = gemmGrow(s.aPack, mr*g.kcMax)
	s.bPack = gemmGrow(s.bPack, nPanels*g.kcMax*nr)
	s.growEdge(mr * nr)
	s.growZeros(nr)
	last := (mp1 - 1) * mr
	partial := i1-last < mr && g.kern.rowsDirect == nil
	for pc := 0; pc < g.k; pc += g.kcMax {
		kc := min(g.kcMax, g.k-pc)
		zero := pc == 0 && g.beta == 0 && g.kern.fnStart != nil && g.kern.directStart != nil
		if pc == 0 && !zero {
			gemmScale(i1-i0, g.n, g.beta, g.c[i0*g.ldc:], g.ldc)
		}
		g.packBPanels(s.bPack, g.kcMax*nr, 0, nPanels, pc, kc)
		var ap []T
		if partial {
			ap = s.aPack[:kc*mr]
			g.packA(ap, last, i1-last, pc, kc)
		}
		fill := pc == 0 && g.bias != nil
		// relu: on the last k slice, each row panel is final once its
		// tiles are computed, and still in cache.
		relu := g.relu && pc+kc == g.k
		for r := mp0; r < mp1; r++ {
			for q := range nPanels {
				g.tile(s, r*mr, q*nr, ap, s.bPack[q*g.kcMax*nr:][:kc*nr], pc, kc, true, zero, fill)
			}
			if relu {
				g.reluRows(r*mr, min(r*mr+mr, g.m), 0, g.n)
			}
		}
	}
	sp.Put(s)
}

// colTask computes column task t of a call with column tasks: all m rows
// of C by a share of its NR-column micro-panels, slice by k slice in
// ascending order. It packs its own B panels and reads every row panel of A
// in place (packing only a partial last one), so that the call needs one
// parallel phase; each tile gets the kernel calls of the blocking loop in
// the same order, so the result has the same bits.
func (g *gemmCall[T]) colTask(t int) {
	mr, nr := g.kern.mr, g.kern.nr
	nPanels := gemmCeilDiv(g.n, nr)
	np0, np1 := t*nPanels/g.colTasks, (t+1)*nPanels/g.colTasks
	if np0 >= np1 {
		return
	}
	j0, j1 := np0*nr, min(np1*nr, g.n)
	sp := gemmScratchPool[T]()
	s := sp.Get().(*gemmScratch[T])
	mPanels := g.mPanels
	s.aPack = gemmGrow(s.aPack, mr*g.kcMax)
	if g.colPackA {
		s.aPack = gemmGrow(s.aPack, mPanels*mr*g.kcMax)
	}
	s.growEdge(mr * nr)
	s.growZeros(nr)
	lastRow := (mPanels - 1) * mr
	// A partial last row panel is packed unless the row kernels read it in
	// place; all of op(A) where it is not read in place.
	partial := g.m-lastRow < mr && g.kern.rowsDirect == nil && !g.colPackA
	// Fewer rows than a panel, packed: whole panels of a row-major op(B)
	// are read in place by the row kernel (only a partial last one is
	// packed).
	inB := g.colPackA && !g.transB && g.m < mr && g.kern.rowsFnB != nil
	whole := np1
	if inB {
		whole = min(np1, g.n/nr)
	}
	chunk := np1 - np0
	if w := gemmRowOrderWords; w > 0 {
		chunk = max(1, w/(g.kcMax*nr))
	}
	for pc := 0; pc < g.k; pc += g.kcMax {
		kc := min(g.kcMax, g.k-pc)
		zero := pc == 0 && g.beta == 0 && g.kern.fnStart != nil && g.kern.directStart != nil
		if pc == 0 && !zero {
			gemmScale(g.m, j1-j0, g.beta, g.c[j0:], g.ldc)
		}
		if !inB {
			g.packBPanels(g.bPack[np0*g.kcMax*nr:], g.kcMax*nr, np0, np1, pc, kc)
		} else if whole < np1 {
			g.packB(g.bPack[whole*g.kcMax*nr:][:kc*nr], whole*nr, pc, kc)
		}
		var ap []T
		if partial {
			ap = s.aPack[:kc*mr]
			g.packA(ap, lastRow, g.m-lastRow, pc, kc)
		}
		if g.colPackA {
			g.packA(s.aPack, 0, g.m, pc, kc)
		}
		fill := pc == 0 && g.bias != nil
		// relu: on the last k slice, each row panel's chunk of tiles is
		// final once computed, and still in cache.
		relu := g.relu && pc+kc == g.k
		for q0 := np0; q0 < np1; q0 += chunk {
			q1 := min(np1, q0+chunk)
			for r := range mPanels {
				if g.colPackA {
					ap = s.aPack[r*kc*mr:][:kc*mr]
				}
				for q := q0; q < q1; q++ {
					if inB && q < whole {
						g.tileRowsB(s, q*nr, ap, pc, kc, zero, fill)
						continue
					}
					g.tile(s, r*mr, q*nr, ap, g.bPack[q*g.kcMax*nr:][:kc*nr], pc, kc, !g.colPackA, zero, fill)
				}
				if relu {
					g.reluRows(r*mr, min(r*mr+mr, g.m), q0*nr, min(q1*nr, g.n))
				}
			}
		}
	}
	sp.Put(s)
}

// packBPanels packs B micro-panels [q0, q1) of columns q0*nr..., depth
// [pc, pc+kc), panel q at dst[(q-q0)*stride:]: packB for each, whole
// panels of a row-major op(B) side by side where the kernel can.
func (g *gemmCall[T]) packBPanels(dst []T, stride, q0, q1, pc, kc int) {
	nr := g.kern.nr
	if !g.transB && g.kern.packRowsWide != nil {
		whole := min(q1, g.n/nr) - q0
		if whole > 1 {
			g.kern.packRowsWide(dst, g.b[pc*g.ldb+q0*nr:], g.ldb, kc, whole, stride)
			q0 += whole
			dst = dst[whole*stride:]
		}
	}
	for q := q0; q < q1; q++ {
		g.packB(dst[(q-q0)*stride:][:kc*nr], q*nr, pc, kc)
	}
}

// packB packs the B micro-panel of columns [j0, j0+nr), depth [pc, pc+kc):
// dst[p*nr + j] = op(B)[pc+p][j0+j], zero beyond n.
func (g *gemmCall[T]) packB(dst []T, j0, pc, kc int) {
	nr := g.kern.nr
	cols := min(nr, g.n-j0)
	b, ldb := g.b, g.ldb
	if !g.transB {
		if g.kern.packRows != nil {
			g.kern.packRows(dst, b[pc*ldb+j0:], ldb, kc, cols)
			return
		}
		for p := range kc {
			d := dst[p*nr:][:nr]
			copy(d, b[(pc+p)*ldb+j0:][:cols])
			clear(d[cols:])
		}
		return
	}
	if g.kern.packTrans != nil && cols == nr {
		g.kern.packTrans(dst, b[j0*ldb+pc:], ldb, kc)
		return
	}
	// op(B)[p][j] = B[j][p]: walk four stored rows at once, scattering with
	// stride nr.
	j := 0
	for ; j+4 <= cols; j += 4 {
		s0 := b[(j0+j)*ldb+pc:][:kc]
		s1 := b[(j0+j+1)*ldb+pc:][:len(s0)]
		s2 := b[(j0+j+2)*ldb+pc:][:len(s0)]
		s3 := b[(j0+j+3)*ldb+pc:][:len(s0)]
		for p := range s0 {
			d := dst[p*nr+j:][:4]
			d[0], d[1], d[2], d[3] = s0[p], s1[p], s2[p], s3[p]
		}
	}
	for ; j < cols; j++ {
		for p, v := range b[(j0+j)*ldb+pc:][:kc] {
			dst[p*nr+j] = v
		}
	}
	if cols < nr {
		for p := range kc {
			clear(dst[p*nr+cols:][:nr-cols])
		}
	}
}

// packA packs rows [i0, i0+rows) of op(A), depth [pc, pc+kc), scaled by
// alpha, into mr-row micro-panels: dst[q*kc*mr + p*mr + i] =
// alpha·op(A)[i0+q*mr+i][pc+p], zero beyond the last row.
func (g *gemmCall[T]) packA(dst []T, i0, rows, pc, kc int) {
	mr, alpha := g.kern.mr, g.alpha
	a, lda := g.a, g.lda
	q0 := 0
	if g.transA && g.kern.packATransWide != nil && !math.IsNaN(float64(alpha)) && rows >= mr {
		// Whole panels side by side: each stored row of A read once.
		q0 = rows / mr
		g.kern.packATransWide(dst[:q0*kc*mr], a[pc*lda+i0:], lda, kc, q0, alpha)
	}
	for q := q0; q*mr < rows; q++ {
		d := dst[q*kc*mr:][:kc*mr]
		r0 := i0 + q*mr
		nrow := min(mr, rows-q*mr)
		if !g.transA {
			// Walk four rows at once: four read streams, one 4-wide write
			// per p.
			i := 0
			for ; i+4 <= nrow; i += 4 {
				s0 := a[(r0+i)*lda+pc:][:kc]
				s1 := a[(r0+i+1)*lda+pc:][:len(s0)]
				s2 := a[(r0+i+2)*lda+pc:][:len(s0)]
				s3 := a[(r0+i+3)*lda+pc:][:len(s0)]
				for p := range s0 {
					dd := d[p*mr+i:][:4]
					dd[0], dd[1], dd[2], dd[3] = alpha*s0[p], alpha*s1[p], alpha*s2[p], alpha*s3[p]
				}
			}
			for ; i < nrow; i++ {
				for p, v := range a[(r0+i)*lda+pc:][:kc] {
					d[p*mr+i] = alpha * v
				}
			}
			if nrow < mr {
				for p := range kc {
					clear(d[p*mr+nrow:][:mr-nrow])
				}
			}
			continue
		}
		// op(A)[i][p] = A[p][i]: each stored row gives one p for all i.
		if g.kern.packATrans != nil && !math.IsNaN(float64(alpha)) {
			g.kern.packATrans(d, a[pc*lda+r0:], lda, kc, nrow, alpha)
			continue
		}
		for p := range kc {
			dd := d[p*mr:][:mr]
			src := a[(pc+p)*lda+r0:][:nrow]
			for i, v := range src {
				dd[i] = alpha * v
			}
			clear(dd[nrow:])
		}
	}
}

// gemmPackATransWideGo is packATransWide's pure-Go twin for mr-row panels:
// packA's loop for a transposed op(A) on panels whole panels side by side,
// dst[q*kc*mr + p*mr + i] = alpha·src[p*ld + q*mr + i].
func gemmPackATransWideGo[T float32 | float64](mr int, dst, src []T, ld, kc, panels int, alpha T) {
	for q := range panels {
		d := dst[q*kc*mr:][:kc*mr]
		for p := range kc {
			for i, v := range src[p*ld+q*mr:][:mr] {
				d[p*mr+i] = alpha * v
			}
		}
	}
}

// task computes task t of the current (jc, pc) block: a disjoint block of
// C rows and columns.
func (g *gemmCall[T]) task(t int) {
	mr, nr := g.kern.mr, g.kern.nr
	mp0, mp1, np0, np1 := g.taskPanels(t)
	i0, i1 := mp0*mr, min(mp1*mr, g.m)
	j0, j1 := g.jc+np0*nr, min(g.jc+np1*nr, g.n)
	if i0 >= i1 || j0 >= j1 {
		return
	}
	c, ldc := g.c, g.ldc
	// zero: the first k slice overwrites C (beta == 0) without clearing it
	// first: whole tiles and whole-width partial row panels with the
	// kernel's start variants from +0s, edge tiles by clearing their part
	// of C before adding.
	zero := g.pc == 0 && g.beta == 0 && g.kern.fnStart != nil && g.kern.directStart != nil
	if g.pc == 0 && !zero {
		gemmScale(i1-i0, j1-j0, g.beta, c[i0*ldc+j0:], ldc)
	}

	sp := gemmScratchPool[T]()
	s := sp.Get().(*gemmScratch[T])
	kc := g.kc
	s.aPack = gemmGrow(s.aPack, (mp1-mp0)*mr*kc)
	s.growEdge(mr * nr)
	s.growZeros(nr)
	// The kernel reads whole row panels of A in place where it can (no
	// transpose, no scaling): only a last, partial panel is packed then,
	// unless the row kernels read it in place too.
	direct := g.kern.direct != nil && !g.transA && g.alpha == 1
	if !direct {
		g.packA(s.aPack, i0, i1-i0, g.pc, kc)
	} else if last := (mp1 - 1) * mr; i1-last < mr && g.kern.rowsDirect == nil {
		g.packA(s.aPack[(mp1-1-mp0)*kc*mr:], last, i1-last, g.pc, kc)
	}

	// fill: the first k slice starts each tile of C from the bias row.
	fill := g.pc == 0 && g.bias != nil
	// Row order: each row panel of A (12×KC, 24 KB, stays in L1) against a
	// chunk of B micro-panels (stays in L2); column order: each B
	// micro-panel (32×KC, 64 KB, more than L1) against every row panel of
	// the task. The schedule alone: every tile gets the same kernel calls.
	// relu: on the last k slice, the ReLU follows each B micro-panel's
	// column of tiles (column order) or each row panel's chunk (row order).
	relu := g.relu && g.last
	if gemmRowOrderWords <= 0 {
		for q := np0; q < np1; q++ {
			for r := mp0; r < mp1; r++ {
				g.tile(s, r*mr, g.jc+q*nr, s.aPack[(r-mp0)*kc*mr:][:kc*mr], g.bPack[q*kc*nr:][:kc*nr], g.pc, kc, direct, zero, fill)
			}
			if relu {
				g.reluRows(i0, i1, g.jc+q*nr, min(g.jc+q*nr+nr, g.n))
			}
		}
	} else {
		chunk := max(1, gemmRowOrderWords/(kc*nr))
		for q0 := np0; q0 < np1; q0 += chunk {
			q1 := min(np1, q0+chunk)
			for r := mp0; r < mp1; r++ {
				for q := q0; q < q1; q++ {
					g.tile(s, r*mr, g.jc+q*nr, s.aPack[(r-mp0)*kc*mr:][:kc*mr], g.bPack[q*kc*nr:][:kc*nr], g.pc, kc, direct, zero, fill)
				}
				if relu {
					g.reluRows(r*mr, min(r*mr+mr, g.m), g.jc+q0*nr, min(g.jc+q1*nr, g.n))
				}
			}
		}
	}
	sp.Put(s)
}

// tile runs the kernel on the micro-tile of C at (i, j), depth [pc, pc+kc),
// with B micro-panel bp and, where A is not read in place, A micro-panel ap
// (unused, and may be nil, for whole rows read in place): direct reads A in
// place, zero and fill say how the first k slice starts C (from +0s, from
// the bias row).
func (g *gemmCall[T]) tile(s *gemmScratch[T], i, j int, ap, bp []T, pc, kc int, direct, zero, fill bool) {
	mr, nr := g.kern.mr, g.kern.nr
	c, ldc := g.c, g.ldc
	cols := min(nr, g.n-j)
	rows := min(mr, g.m-i)
	if rows < mr && (g.kern.rowsFn != nil || direct && g.kern.rowsDirect != nil) {
		g.tileRows(s, i, j, rows, cols, ap, bp, pc, kc, direct && g.kern.rowsDirect != nil, zero, fill)
		return
	}
	if rows == mr && cols == nr {
		// A whole tile: the kernel updates C, or stores start + the sum on
		// a first k slice from +0s or the bias.
		var start []T
		if zero {
			start = s.zeros
		} else if fill && g.kern.fnStart != nil && g.kern.directStart != nil {
			start = g.bias[j:][:nr]
		} else if fill {
			g.fillBias(i, j, mr, nr)
		}
		switch {
		case direct && start != nil:
			g.kern.directStart(kc, g.a[i*g.lda+pc:], g.lda, bp, c[i*ldc+j:], ldc, start)
		case direct:
			g.kern.direct(kc, g.a[i*g.lda+pc:], g.lda, bp, c[i*ldc+j:], ldc)
		case start != nil:
			g.kern.fnStart(kc, ap, bp, c[i*ldc+j:], ldc, start)
		default:
			g.kern.fn(kc, ap, bp, c[i*ldc+j:], ldc)
		}
		return
	}
	// Edge tile: run the kernel on a scratch tile of -0 (so that the
	// kernel leaves exactly its accumulators there, signed zeros
	// included) and add the valid part: this rounds exactly as a
	// direct update of C would.
	e := s.edge
	copy(e, s.negZero)
	half := 2*cols <= nr && g.kern.fnHalf != nil
	switch {
	case direct && rows == mr && half && g.kern.directHalf != nil:
		g.kern.directHalf(kc, g.a[i*g.lda+pc:], g.lda, bp, e, nr)
	case direct && rows == mr:
		g.kern.direct(kc, g.a[i*g.lda+pc:], g.lda, bp, e, nr)
	case half && !direct:
		g.kern.fnHalf(kc, ap, bp, e, nr)
	default:
		g.kern.fn(kc, ap, bp, e, nr)
	}
	g.addEdge(e, nr, i, j, rows, cols, zero, fill)
}

// tileRows is tile for a tile of rows < mr rows, with the row kernels: in
// place (A read in place) or from the packed panel ap. A whole-width tile
// is updated in C, from +0 (zero) or the bias (fill) on the first k slice;
// a narrower one goes through the edge tile as in tile.
func (g *gemmCall[T]) tileRows(s *gemmScratch[T], i, j, rows, cols int, ap, bp []T, pc, kc int, inPlace, zero, fill bool) {
	nr := g.kern.nr
	c, ldc := g.c[i*g.ldc+j:], g.ldc
	var start []T
	if cols < nr {
		c, ldc = s.edge[:rows*nr], nr
		copy(c, s.negZero)
	} else if zero {
		start = s.zeros
	} else if fill {
		start = g.bias[j:][:nr]
	}
	if inPlace {
		g.kern.rowsDirect(rows, kc, g.a[i*g.lda+pc:], g.lda, bp, c, ldc, start)
	} else {
		g.kern.rowsFn(rows, kc, ap, bp, c, ldc, start)
	}
	if cols < nr {
		g.addEdge(c, nr, i, j, rows, cols, zero, fill)
	}
}

// tileRowsB is tileRows for the whole-width tile of all g.m < mr rows at
// column j, with op(A) packed in ap and the B panel read in place from a
// row-major op(B) (rowsFnB): what tileRows leaves with the panel packed.
func (g *gemmCall[T]) tileRowsB(s *gemmScratch[T], j int, ap []T, pc, kc int, zero, fill bool) {
	var start []T
	if zero {
		start = s.zeros
	} else if fill {
		start = g.bias[j:][:g.kern.nr]
	}
	g.kern.rowsFnB(g.m, kc, ap, g.b[pc*g.ldb+j:], g.ldb, g.c[j:], g.ldc, start)
}

// addEdge adds the rows×cols valid part of an edge tile e (row stride nr) to
// C at (i, j), clearing C there first when zero is set or filling it with the
// bias when fill is: the update a kernel would have made on a whole tile.
func (g *gemmCall[T]) addEdge(e []T, nr, i, j, rows, cols int, zero, fill bool) {
	for ii := range rows {
		dst := g.c[(i+ii)*g.ldc+j:][:cols]
		if zero {
			clear(dst)
		} else if fill {
			copy(dst, g.bias[j:][:cols])
		}
		for jj, v := range e[ii*nr:][:cols] {
			dst[jj] += v
		}
	}
}
