package cpu

import (
	"math"
	"sync"
	"unsafe"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// The float32 and bf16 fused attention: FlashAttention-2's forward and backward over
// attnBlock×attnBlock tiles of one (batch, head) at a time, the tile and the head's
// accumulators (O, or dQ, dK, dV: T·D float32 each) in a per-worker scratch reused from
// head to head, nothing allocated per block.
//
// The scores S = Q·Kᵀ are kept unscaled in a float32 tile; the softmax takes
// p = exp(fma(s, scale, -shift)) with the float32 exponential of attention_exp.go,
// shift = scale·(running row maximum) in the forward pass and the saved log-sum-exp in
// the backward one; masked keys are exact zeros. Row maxima, sums, the rescaling of O
// and the log-sum-exp are float32. dQ and dK are accumulated unscaled and multiplied by
// scale once.
//
// Products, by storage type L, call the GEMM micro-kernels directly on one worker: each
// head's B operands (Kᵀ and V forward; Kᵀ, Vᵀ, K, Q and dO backward) are packed once
// per head in the kernel's panel layout (attnB), and A is read in place where the
// kernel can, else packed per row panel:
//   - float32 (and float16, widened once per head): gemmKernel32; Q, dO, P and dS are
//     read in place by its direct form, Pᵀ and dSᵀ down the tile's columns by the
//     strided form (attnStridedT; packed by attnPackT where there is none); outputs and
//     gradients accumulate in the float32 storage itself;
//   - bf16: bf16 products with float32 accumulation, the BF16 GEMM micro-kernels
//     (AMX where the process may use it, reading A in place, else VDPBF16PS, else their
//     pure-Go twin). As FlashAttention does on GPUs, the probabilities P (for P·V and
//     Pᵀ·dO) and the score gradients dS = P∘(dP - δ) (for dS·K and dSᵀ·Q) are rounded
//     to bf16 before their products, inside the exp and dS row loops; the softmax
//     statistics, δ = rowsum(dO∘O) and every accumulator stay float32, and the
//     outputs are rounded to bf16 once. That costs a relative error of about 2^-9 per
//     probability, averaged over the keys (TestAttentionBF16Numerics bounds the
//     results against the float64 kernel).

// attnLow is the element type of the operands a product reads.
type attnLow interface{ float32 | half.BFloat16 }

// attnWork is one worker's scratch for one call: views of the head's operands, its
// float32 accumulators, the score tiles and the packing buffers.
type attnWork[L attnLow] struct {
	t, d int
	// Buffers for operands whose storage is not L (float16 widened to float32).
	qb, kb, vb, ob, gb []L
	acc, gk, gv        []float32 // O (forward) or dQ; dK, dV
	tile, dp           []float32 // scores/probabilities, dP/dS: attnBlock² each
	pLow, dsLow        []L       // P and dS rounded to L (bf16 only)
	m, l               []float32
	mx, shift, sums    []float32 // per row of a tile: maximum, exp shift, sum
	// amx: the AMX tiles are configured on this thread (attnAMXAcquire), the products
	// run attnAMXHeld*.
	amx bool
	// With masked set, mul leaves out the micro-kernel tiles whose every element (r, c)
	// has c - r > diag: the causally masked scores, which nothing reads.
	masked bool
	diag   int
	// With pfA set, mulF32 prefetches the next row panel of the A it reads in place
	// (Q and dO, whose rows come from L2; not the tiles, which are in L1).
	pfA        bool
	lse, delta []float32 // per row of the head
	seen       []bool    // per key block: dK and dV written (backwardHead)
	// The next head's prefetch (planPrefetch): pfStep rows per product, the rows
	// before pfRow issued.
	pf            []attnPF
	pfRow, pfStep int
	// float16 rows gathered from, or rounded for, operands whose rows are not
	// contiguous (bf16 ones are read and rounded in place).
	hfRows []half.Float16
	// bf16 products.
	kern  *gemmBF16Kernel
	aPack []uint32
	aF    []float32
	aRows []float32 // mulF32: a last row panel of A, copied for the direct form
	edge  []float32
	// The head's B operands, packed once: Kᵀ (scores), V (P·V), Vᵀ (dP), K (dS·K),
	// Q (dSᵀ·Q), dO (Pᵀ·dO).
	bKt, bV, bVt, bK, bQ, bG attnB
}

var attnWorks32, attnWorksBF16 sync.Pool

// attnBF16Kernel is the bf16 micro-kernel of the products (tests swap in its twin).
var attnBF16Kernel = gemmBF16KernelBest

func getAttnWork[L attnLow](t, d int, backward bool) *attnWork[L] {
	var zero L
	pool := &attnWorks32
	if _, ok := any(zero).(half.BFloat16); ok {
		pool = &attnWorksBF16
	}
	w, _ := pool.Get().(*attnWork[L])
	if w == nil {
		w = new(attnWork[L])
	}
	w.t, w.d = t, d
	n := t * d
	w.acc = grow(w.acc, n)
	if backward {
		w.gk, w.gv = grow(w.gk, n), grow(w.gv, n)
		w.dp = grow(w.dp, attnBlock*attnBlock)
		w.delta = grow(w.delta, t)
	}
	w.tile = grow(w.tile, attnBlock*attnBlock)
	if _, ok := any(w.pLow).([]half.BFloat16); ok {
		w.pLow, w.dsLow = grow(w.pLow, attnBlock*attnBlock), grow(w.dsLow, attnBlock*attnBlock)
	}
	w.m, w.l = grow(w.m, attnBlock), grow(w.l, attnBlock)
	w.mx, w.shift, w.sums = grow(w.mx, attnBlock), grow(w.shift, attnBlock), grow(w.sums, attnBlock)
	w.lse = grow(w.lse, t)
	w.kern = attnBF16Kernel
	return w
}

func putAttnWork[L attnLow](w *attnWork[L]) {
	var zero L
	if _, ok := any(zero).(half.BFloat16); ok {
		attnWorksBF16.Put(w)
	} else {
		attnWorks32.Put(w)
	}
}

// view returns head h of s (place p) as L and its row stride: the storage itself when
// its dtype is L, else a contiguous copy widened into *buf.
func (w *attnWork[L]) view(s *storage, p attnPlace, h int, buf *[]L) ([]L, int) {
	var zero L
	off, n := p.at(h), p.span(w.t, w.d)
	switch any(zero).(type) {
	case float32:
		if s.dt == backend.Float32 {
			return any(s.f32()[off : off+n]).([]L), p.row
		}
		*buf = grow(*buf, w.t*w.d)
		w.widen(any(*buf).([]float32), s, p, h)
		return *buf, w.d
	default:
		if s.dt != backend.BFloat16 {
			panic("cpu: attention: bf16 path with " + s.dt.String() + " storage")
		}
		return any(s.bf16()[off : off+n]).([]L), p.row
	}
}

// lowRow returns row r (cols wide) of buf, a bf16 tile that P or dS is rounded into as
// it is computed; nil for float32, whose products read the float32 tiles.
func (w *attnWork[L]) lowRow(buf []L, r, cols int) []half.BFloat16 {
	if b, ok := any(buf).([]half.BFloat16); ok {
		return b[r*attnBlock:][:cols]
	}
	return nil
}

// lowTile returns the tile the products read: t itself for float32, else buf.
func (w *attnWork[L]) lowTile(t []float32, buf []L) []L {
	if lt, ok := any(t).([]L); ok {
		return lt
	}
	return buf
}

// lowBF16 reports whether the products read bf16 (L is half.BFloat16).
func (w *attnWork[L]) lowBF16() bool {
	var zero L
	_, ok := any(zero).(half.BFloat16)
	return ok
}

// lowTileBF16 returns buf, a bf16 tile that P or dS is rounded into as it is computed;
// nil for float32, whose products read the float32 tiles.
func (w *attnWork[L]) lowTileBF16(buf []L) []half.BFloat16 {
	b, _ := any(buf).([]half.BFloat16)
	return b
}

// attnClear clears row and, when not nil, its bf16 copy.
func attnClear(row []float32, lo []half.BFloat16) {
	clear(row)
	clear(lo)
}

// attnB is a B operand packed once per head for the micro-kernel: np panels of nr
// columns, each steps k steps deep (float32: f[q*steps*nr + p*nr + j]; bf16: pairs of k
// values, u[...] likewise, steps a multiple of the kernel's k tile). A product over the
// k values [k0, k0+k) reads steps from k0 (k0/2 for pairs) of each panel: k0 is a
// multiple of attnBlock and a block's end is the operand's end or a multiple of
// attnBlock, so no pair straddles two blocks.
type attnB struct {
	f     []float32
	u     []uint32
	steps int
	// view, where set, is the float32 operand itself, already in the panel layout
	// (one panel, not transposed, row stride nr): nothing is copied then.
	view []float32
}

// panels returns the float32 panels.
func (b *attnB) panels() []float32 {
	if b.view != nil {
		return b.view
	}
	return b.f
}

// packB packs op(X) (k×n; X row-major with stride ld, stored n×k when trans) into b.
func (w *attnWork[L]) packB(b *attnB, x []L, ld, k, n int, trans bool) {
	if xf, ok := any(x).([]float32); ok {
		nr := gemmKernel32.nr
		np := gemmCeilDiv(n, nr)
		b.steps = k
		b.view = nil
		if !trans && n == nr && ld == nr {
			b.view = xf[:k*nr]
			return
		}
		b.f = grow(b.f, np*k*nr)
		attnPackF32(gemmKernel32, b.f, xf, ld, k, n, trans)
		return
	}
	xb := any(x).([]half.BFloat16)
	kern := w.kern
	nr, t := kern.nr, max(kern.tileK, 1)
	np := gemmCeilDiv(n, nr)
	b.steps = gemmCeilDiv(gemmCeilDiv(k, 2), t) * t
	b.u = grow(b.u, np*b.steps*nr)
	for q := range np {
		j0 := q * nr
		cols := min(nr, n-j0)
		panel := b.u[q*b.steps*nr:][:b.steps*nr]
		if !trans {
			packPairs(panel, xb[j0:], ld, k, cols, nr, false)
		} else {
			packPairs(panel, xb[j0*ld:], ld, k, cols, nr, true)
		}
		clear(panel[(k+1)/2*nr:])
	}
}

// attnPackF32 packs op(X) (k×n; X row-major with stride ld, stored n×k when trans)
// into dst as gemmCeilDiv(n, nr) panels of kern.nr columns, k steps deep, the columns
// past n zero: attnPackF32Go's words, whole panels copied by the kernel's own packing
// loops (packRowsWide, packRows, packTrans) where it has them.
func attnPackF32(kern *gemmKernel[float32], dst, x []float32, ld, k, n int, trans bool) {
	nr := kern.nr
	if k == 0 || n == 0 {
		return
	}
	q := 0
	if !trans && kern.packRowsWide != nil && n >= nr {
		q = n / nr
		kern.packRowsWide(dst, x, ld, k, q, k*nr)
	}
	for ; q*nr < n; q++ {
		j0 := q * nr
		cols := min(nr, n-j0)
		panel := dst[q*k*nr:][:k*nr]
		switch {
		case !trans && kern.packRows != nil:
			kern.packRows(panel, x[j0:], ld, k, cols)
		case trans && cols == nr && kern.packTrans != nil:
			kern.packTrans(panel, x[j0*ld:], ld, k)
		default:
			attnPackPanelGo(panel, x, ld, k, j0, cols, nr, trans)
		}
	}
}

// attnPackF32Go is attnPackF32 in Go, panel by panel.
func attnPackF32Go(nr int, dst, x []float32, ld, k, n int, trans bool) {
	for q := 0; q*nr < n; q++ {
		j0 := q * nr
		attnPackPanelGo(dst[q*k*nr:][:k*nr], x, ld, k, j0, min(nr, n-j0), nr, trans)
	}
}

// attnPackPanelGo packs columns [j0, j0+cols) of op(X) (see attnPackF32) into panel,
// k rows of nr, zero beyond cols.
func attnPackPanelGo(panel, xf []float32, ld, k, j0, cols, nr int, trans bool) {
	if !trans {
		for p := range k {
			d := panel[p*nr:][:nr]
			copy(d, xf[p*ld+j0:][:cols])
			clear(d[cols:])
		}
		return
	}
	if cols < nr {
		clear(panel)
	}
	// Four stored rows at once: four read streams, one 4-wide write per p.
	j := 0
	for ; j+4 <= cols; j += 4 {
		s0 := xf[(j0+j)*ld:][:k]
		s1 := xf[(j0+j+1)*ld:][:k]
		s2 := xf[(j0+j+2)*ld:][:k]
		s3 := xf[(j0+j+3)*ld:][:k]
		for p := range s0 {
			d := panel[p*nr+j:][:4]
			d[0], d[1], d[2], d[3] = s0[p], s1[p], s2[p], s3[p]
		}
	}
	for ; j < cols; j++ {
		for p, v := range xf[(j0+j)*ld:][:k] {
			panel[p*nr+j] = v
		}
	}
}

// mul sets C = op(A)·B' (or adds it to C, add) for float32 C (m×n, stride ldc), where
// op(A) is m×k (A row-major with stride lda, stored k×m when transA) and B' is columns
// [n0, n0+n) and k values [k0, k0+k) of the packed b; n0 is a multiple of the
// kernel's nr.
func (w *attnWork[L]) mul(transA bool, m, n, k int, a []L, lda int, b *attnB, n0, k0 int, add bool, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		if !add {
			for i := range m {
				clear(c[i*ldc:][:n])
			}
		}
		return
	}
	if af, ok := any(a).([]float32); ok {
		w.mulF32(transA, m, n, k, af, lda, b, n0, k0, add, c, ldc)
		return
	}
	w.mulBF16(transA, m, n, k, any(a).([]half.BFloat16), lda, b, n0, k0, add, c, ldc)
}

// mulF32 is mul with gemmKernel32, the tiles summed from zero in ascending k and added
// to C (set, not added, when add is false), as mulF32Ref does it bit for bit:
//   - A is read in place by the kernel's direct form where it has one (whole row
//     panels, not transposed); a last panel of fewer rows is copied into w.aRows
//     first (the direct form reads every row of a panel; the rows past m hold stale
//     values, which reach only the tile rows that are dropped); a transposed A is
//     read in place down its columns by attnStridedT when n fills whole column
//     panels, else packed per row panel (attnPackT); with w.pfA the next row panel
//     of an A read in place is prefetched to L1 (attnPrefetchPanel);
//   - with add false, whole tiles run the kernel's storing forms (what the adding ones
//     leave on a C of +0s), edge tiles (past m or n) clear their part of C before
//     adding; tiles left out (masked) are not written;
//   - an edge tile is computed on w.edge by a storing form (or on a cleared w.edge)
//     and its valid part added to C with vecBinary.
//
// Without the storing forms or the direct form (or with attnStoreFirst cleared) it is
// mulF32Ref.
func (w *attnWork[L]) mulF32(transA bool, m, n, k int, a []float32, lda int, b *attnB, n0, k0 int, add bool, c []float32, ldc int) {
	kern := gemmKernel32
	if !attnZeroKernels(kern) || kern.direct == nil {
		w.mulF32Ref(transA, m, n, k, a, lda, b, n0, k0, add, c, ldc)
		return
	}
	mr, nr := kern.mr, kern.nr
	w.aF = grow(w.aF, k*mr)
	w.edge = grow(w.edge, mr*nr)
	ap := w.aF
	q0 := n0 / nr
	np := gemmCeilDiv(n, nr)
	for i0 := 0; i0 < m; i0 += mr {
		rows := min(mr, m-i0)
		direct := !transA
		ar, lar := a[i0*lda:], lda
		// A partial row panel runs the row kernels on C for its whole column panels.
		rowKern := rows < mr && attnRowsFn != nil && attnRowsDirect != nil
		// A transposed A with whole column panels is read in place down its columns.
		strided := transA && attnStridedT != nil && n%nr == 0
		switch {
		case strided:
		case transA:
			attnPackT(ap, a[i0:], lda, k, rows, mr)
		case rowKern && n%nr == 0:
		case rows < mr:
			w.aRows = grow(w.aRows, mr*k)
			for i := range rows {
				copy(w.aRows[i*k:][:k], a[(i0+i)*lda:][:k])
			}
			ar, lar = w.aRows, k
		}
		if direct && w.pfA && attnPrefetchA && i0+mr < m {
			// The next row panel of A, toward L1 while this one computes.
			attnPrefetchPanel(a[(i0+mr)*lda:], lda, min(mr, m-i0-mr), k)
		}
		for q := range np {
			j0 := q * nr
			cols := min(nr, n-j0)
			if w.masked && j0-(i0+rows-1) > w.diag {
				continue
			}
			bp := b.panels()[(q0+q)*b.steps*nr+k0*nr:][:k*nr]
			if strided {
				var start []float32
				if !add {
					start = attnZeroRow
				}
				attnStridedT(rows, k, a[i0:], 1, lda, bp, c[i0*ldc+j0:], ldc, start)
				continue
			}
			if rowKern && cols == nr {
				var start []float32
				if !add {
					start = attnZeroRow
				}
				if direct {
					attnRowsDirect(rows, k, a[i0*lda:], lda, bp, c[i0*ldc+j0:], ldc, start)
				} else {
					attnRowsFn(rows, k, ap, bp, c[i0*ldc+j0:], ldc, start)
				}
				continue
			}
			edge := rows < mr || cols < nr
			ct, ldt := c[i0*ldc+j0:], ldc
			if edge {
				ct, ldt = w.edge, nr
			}
			switch {
			case direct && (edge || !add):
				attnStoreDirect(k, ar, lar, bp, ct, ldt)
			case direct:
				kern.direct(k, ar, lar, bp, ct, ldt)
			case edge || !add:
				attnStoreFn(k, ap, bp, ct, ldt)
			default:
				kern.fn(k, ap, bp, ct, ldt)
			}
			if edge {
				for r := range rows {
					dst := c[(i0+r)*ldc+j0:][:cols]
					if !add {
						clear(dst)
					}
					vecBinary(vecAdd, dst, dst, w.edge[r*nr:][:cols])
				}
			}
		}
	}
}

// attnPrefetchA lets mulF32 prefetch the next row panel of an A it reads in place;
// tests and benchmarks clear it to compare.
var attnPrefetchA = true

// attnPrefetchPanel issues a PREFETCHT0 for the lines of rows rows of k values of a
// (row stride lda, a[0] the first). It changes nothing.
func attnPrefetchPanel(a []float32, lda, rows, k int) {
	if rows <= 0 || k <= 0 {
		return
	}
	_ = a[(rows-1)*lda+k-1]
	// One line more than k values need when the rows do not start on a line.
	attnPrefetchRowsL1((*byte)(unsafe.Pointer(&a[0])), 4*lda, rows, (4*k+63)/64+1)
}

// mulF32Ref is mulF32 with the kernels' adding forms only: C cleared first unless add,
// A packed per row panel unless the direct form reads whole ones in place, edge tiles
// computed on a cleared w.edge and added element by element. It is the reference
// mulF32 is tested against, and runs where the kernel lacks the storing or direct forms.
func (w *attnWork[L]) mulF32Ref(transA bool, m, n, k int, a []float32, lda int, b *attnB, n0, k0 int, add bool, c []float32, ldc int) {
	kern := gemmKernel32
	mr, nr := kern.mr, kern.nr
	if !add {
		for i := range m {
			clear(c[i*ldc:][:n])
		}
	}
	w.aF = grow(w.aF, k*mr)
	w.edge = grow(w.edge, mr*nr)
	ap := w.aF
	q0 := n0 / nr
	np := gemmCeilDiv(n, nr)
	for i0 := 0; i0 < m; i0 += mr {
		rows := min(mr, m-i0)
		direct := kern.direct != nil && !transA && rows == mr
		if !direct && transA {
			attnPackT(ap, a[i0:], lda, k, rows, mr)
		} else if !direct {
			for p := range k {
				d := ap[p*mr:][:mr]
				for i := range rows {
					d[i] = a[(i0+i)*lda+p]
				}
				clear(d[rows:])
			}
		}
		for q := range np {
			j0 := q * nr
			cols := min(nr, n-j0)
			if w.masked && j0-(i0+rows-1) > w.diag {
				continue
			}
			bp := b.panels()[(q0+q)*b.steps*nr+k0*nr:][:k*nr]
			ct, ldt := c[i0*ldc+j0:], ldc
			if rows < mr || cols < nr {
				ct, ldt = w.edge, nr
				clear(ct)
			}
			if direct {
				kern.direct(k, a[i0*lda:], lda, bp, ct, ldt)
			} else {
				kern.fn(k, ap, bp, ct, ldt)
			}
			if rows < mr || cols < nr {
				for r := range rows {
					src := w.edge[r*nr:][:cols]
					dst := c[(i0+r)*ldc+j0:][:cols]
					for j, v := range src {
						dst[j] += v
					}
				}
			}
		}
	}
}

// mulBF16 is mul with w.kern on bf16 operands: A packed per row panel as the kernel
// reads it (odd k padded with a zero), or read in place by the AMX kernel (whole row
// panels, not transposed, k a multiple of its k tile); each tile summed from zero pair
// steps in ascending k and stored or added (float32 addition; the AMX kernel
// accumulates onto C) to C.
func (w *attnWork[L]) mulBF16(transA bool, m, n, k int, a []half.BFloat16, lda int, b *attnB, n0, k0 int, add bool, c []float32, ldc int) {
	kern := w.kern
	if kern.fnDirect8 != nil && !transA && m%8 == 0 && k%2 == 0 && !w.amx && attnRows8 {
		w.mulBF16Rows8(m, n, k, a, lda, b, n0, k0, add, c, ldc)
		return
	}
	mr, nr := kern.mr, kern.nr
	t := max(kern.tileK, 1)
	kc2 := gemmCeilDiv(gemmCeilDiv(k, 2), t) * t
	w.aPack = grow(w.aPack, kc2*mr)
	w.edge = grow(w.edge, mr*nr)
	ap := w.aPack
	q0 := n0 / nr
	np := gemmCeilDiv(n, nr)
	for i0 := 0; i0 < m; i0 += mr {
		rows := min(mr, m-i0)
		// A read in place: the AMX kernel's tiles (attnAMXDirect) or a kernel's
		// fnDirect.
		direct := !transA && rows == mr && k%(2*t) == 0 && (kern.rowsA && attnAMXDirectOK(kern) || !kern.rowsA && kern.fnDirect != nil)
		switch {
		case direct:
		case kern.rowsA && !transA:
			packAMXA(ap, a[i0*lda:], lda, k, kc2, rows, true)
		case kern.rowsA:
			packAMXA(ap, a[i0:], lda, k, kc2, rows, false)
		case !transA:
			packPairs(ap, a[i0*lda:], lda, k, rows, mr, true)
			clear(ap[(k+1)/2*mr:])
		default:
			packPairs(ap, a[i0:], lda, k, rows, mr, false)
			clear(ap[(k+1)/2*mr:])
		}
		for q := range np {
			j0 := q * nr
			cols := min(nr, n-j0)
			if w.masked && j0-(i0+rows-1) > w.diag {
				continue
			}
			bp := b.u[(q0+q)*b.steps*nr+k0/2*nr:][:kc2*nr]
			ct, ldt, addt := c[i0*ldc+j0:], ldc, add
			if rows < mr || cols < nr {
				ct, ldt, addt = w.edge, nr, false
			}
			switch {
			case direct && w.amx:
				attnAMXHeldDirect(kc2, a[i0*lda:], lda, bp, ct, ldt, addt)
			case direct && kern.rowsA:
				attnAMXDirect(kc2, a[i0*lda:], lda, bp, ct, ldt, addt)
			case direct:
				kern.fnDirect(kc2, a[i0*lda:], lda, bp, ct, ldt, addt)
			case w.amx:
				attnAMXHeldFn(kc2, ap, bp, ct, ldt, addt)
			default:
				kern.fn(kc2, ap, bp, ct, ldt, addt)
			}
			if rows == mr && cols == nr {
				continue
			}
			w.addEdge(rows, cols, add, c[i0*ldc+j0:], ldc)
		}
	}
}

// attnRows8 lets mulBF16 run a kernel's 8-row form (fnDirect8) where the rows
// allow; tests clear it to compare.
var attnRows8 = true

// mulBF16Rows8 is mulBF16 for m a multiple of 8, A not transposed and k even,
// with the kernel's 8-row form reading A in place: the same sums, tile by tile
// (each C element is its pair steps summed from zero in ascending k, then
// stored or added), with no edge rows.
func (w *attnWork[L]) mulBF16Rows8(m, n, k int, a []half.BFloat16, lda int, b *attnB, n0, k0 int, add bool, c []float32, ldc int) {
	kern := w.kern
	nr, kc2 := kern.nr, k/2
	w.edge = grow(w.edge, kern.mr*nr)
	q0 := n0 / nr
	np := gemmCeilDiv(n, nr)
	for i0 := 0; i0 < m; i0 += 8 {
		for q := range np {
			j0 := q * nr
			cols := min(nr, n-j0)
			if w.masked && j0-(i0+7) > w.diag {
				continue
			}
			bp := b.u[(q0+q)*b.steps*nr+k0/2*nr:][:kc2*nr]
			if cols == nr {
				kern.fnDirect8(kc2, a[i0*lda:], lda, bp, c[i0*ldc+j0:], ldc, add)
				continue
			}
			kern.fnDirect8(kc2, a[i0*lda:], lda, bp, w.edge, nr, false)
			w.addEdge(8, cols, add, c[i0*ldc+j0:], ldc)
		}
	}
}

// addEdge adds the rows×cols corner of w.edge (row stride nr) to c (row
// stride ldc), or copies it there without add.
func (w *attnWork[L]) addEdge(rows, cols int, add bool, c []float32, ldc int) {
	nr := w.kern.nr
	for r := range rows {
		src := w.edge[r*nr:][:cols]
		dst := c[r*ldc:][:cols]
		if add {
			vecBinary(vecAdd, dst, dst, src)
		} else {
			copy(dst, src)
		}
	}
}

// attnForwardF32 is the forward pass for float32, float16 (L float32) and bf16 (L bf16)
// storage.
func attnForwardF32[L attnLow](a *backend.AttentionArgs, ops []*storage, pl []attnPlace, lseS *storage) {
	q, k, v, o := ops[0], ops[1], ops[2], ops[3]
	t, d := a.T, a.D
	scale := float32(a.Scale)
	ParallelFor(a.BH, 1, func(lo, hi int) {
		w := getAttnWork[L](t, d, false)
		defer putAttnWork(w)
		if w.amx = w.lowBF16() && attnAMXAcquire(w.kern); w.amx {
			defer attnAMXRelease()
		}
		for h := lo; h < hi; h++ {
			w.planPrefetch(ops[:3], pl, h+1, hi, 2)
			var x attnHead[L]
			x.q, x.lq = w.view(q, pl[0], h, &w.qb)
			x.k, x.lk = w.view(k, pl[1], h, &w.kb)
			x.v, x.lv = w.view(v, pl[2], h, &w.vb)
			out, ldo := attnOut(o, pl[3], h, t, d, w.acc)
			w.forwardHead(a.Causal, scale, &x, out, ldo)
			w.flush(o, pl[3], h, out)
			store(lseS, h*t, 1, w.lse[:t])
		}
	})
}

// widen loads head h of s (place p) into the contiguous dst as float32. Rows of a half
// storage that are not contiguous are gathered first, so the conversion is one call.
func (w *attnWork[L]) widen(dst []float32, s *storage, p attnPlace, h int) {
	t, d := w.t, w.d
	if p.row == d || s.dt != backend.Float16 {
		attnLoad(dst, s, p, h, t, d)
		return
	}
	w.hfRows = grow(w.hfRows, t*d)
	attnGather(w.hfRows, s.f16()[p.at(h):], p.row, t, d)
	half.Float16ToFloat32(dst[:t*d], w.hfRows[:t*d])
}

// flush stores head h's float32 result buf (contiguous, from attnOut) into s (place
// p) unless attnOut placed it in s itself. bf16 rows that are not contiguous are
// rounded straight into place; float16 ones are rounded in one call and then
// scattered.
func (w *attnWork[L]) flush(s *storage, p attnPlace, h int, buf []float32) {
	t, d := w.t, w.d
	switch {
	case s.dt == backend.Float32:
	case p.row == d:
		store(s, p.at(h), 1, buf[:t*d])
	case s.dt == backend.BFloat16:
		// Rounded straight into the strided rows (convNarrowTo: the rounding of
		// half.Float32ToBFloat16), no contiguous copy scattered row by row.
		convNarrowTo(s.bf16()[p.at(h):], p.row, buf, d, d, t)
	case s.dt == backend.Float16:
		w.hfRows = grow(w.hfRows, t*d)
		half.Float32ToFloat16(w.hfRows[:t*d], buf[:t*d])
		attnScatter(s.f16()[p.at(h):], p.row, w.hfRows, t, d)
	default:
		attnStore(s, p, h, t, d, buf)
	}
}

// attnPF is the prefetch of one operand of the next head: attnPrefetchRows' arguments
// less the rows, which planPrefetch and prefetchStep hand out a slice at a time.
type attnPF struct {
	p             unsafe.Pointer // row 0's first byte
	stride, lines int
}

// attnPrefetchOf returns the prefetch of head h of s (place p, t rows of d); ok is
// false when there is nothing to fetch.
func attnPrefetchOf(s *storage, p attnPlace, h, t, d int) (f attnPF, ok bool) {
	if t == 0 || d == 0 {
		return f, false
	}
	sz := s.dt.Size()
	off := p.at(h) * sz
	raw := s.rawBytes()
	if off >= len(raw) {
		return f, false
	}
	// The lines a row covers from its offset in its first line: the same for every
	// row when the row stride is a whole number of lines, else one more for rows
	// that start further in.
	stride := p.row * sz
	lines := (off%64 + d*sz + 63) / 64
	if stride%64 != 0 {
		lines++
	}
	return attnPF{p: unsafe.Pointer(&raw[off]), stride: stride, lines: lines}, true
}

// planPrefetch plans the prefetch of head h of ops (places pl) toward the cache while
// the current head computes, nothing when h ≥ hi (the worker's last head is current):
// forwardHead and backwardHead issue it a slice of rows before each of the products
// (prefetchStep), products of them per block step, rather than in one burst, which
// stalls on the line fill buffers. It changes nothing.
func (w *attnWork[L]) planPrefetch(ops []*storage, pl []attnPlace, h, hi, products int) {
	w.pf, w.pfRow = w.pf[:0], 0
	if h >= hi {
		return
	}
	for i, s := range ops {
		if f, ok := attnPrefetchOf(s, pl[i], h, w.t, w.d); ok {
			w.pf = append(w.pf, f)
		}
	}
	nb := gemmCeilDiv(w.t, attnBlock)
	w.pfStep = gemmCeilDiv(w.t, max(nb*nb*products, 1))
}

// prefetchStep issues the planned prefetch of the next n rows (fewer at the end).
func (w *attnWork[L]) prefetchStep(n int) {
	n = min(n, w.t-w.pfRow)
	if n <= 0 || len(w.pf) == 0 {
		return
	}
	for _, f := range w.pf {
		attnPrefetchRows((*byte)(unsafe.Add(f.p, w.pfRow*f.stride)), f.stride, n, f.lines)
	}
	w.pfRow += n
}

// attnGather copies t rows of d from src (row stride ld) into the contiguous dst.
func attnGather[T any](dst, src []T, ld, t, d int) {
	for r := range t {
		copy(dst[r*d:(r+1)*d], src[r*ld:][:d])
	}
}

// attnScatter copies the contiguous src (t rows of d) into dst with row stride ld.
func attnScatter[T any](dst []T, ld int, src []T, t, d int) {
	for r := range t {
		copy(dst[r*ld:][:d], src[r*d:(r+1)*d])
	}
}

// attnHead is one head's operands as the products read them, each with its row stride.
type attnHead[L attnLow] struct {
	q, k, v, o, g      []L
	lq, lk, lv, lo, lg int
}

// attnOut returns where head h's float32 result (t rows of d) for s (place p) is
// accumulated, and its row stride: the storage itself when it is float32, else the
// contiguous scratch.
func attnOut(s *storage, p attnPlace, h, t, d int, scratch []float32) ([]float32, int) {
	if s.dt == backend.Float32 {
		off := p.at(h)
		return s.f32()[off : off+p.span(t, d)], p.row
	}
	return scratch[:t*d], d
}

// forwardHead computes one head's output into out (T·D) and its log-sum-exp into w.lse.
// out's rows have stride ldo.
func (w *attnWork[L]) forwardHead(causal bool, scale float32, x *attnHead[L], out []float32, ldo int) {
	t, d := w.t, w.d
	q, lq := x.q, x.lq
	ninf := float32(math.Inf(-1))
	w.packB(&w.bKt, x.k, x.lk, d, t, true)
	w.packB(&w.bV, x.v, x.lv, t, d, false)
	// With first, the first P·V product of a query block stores its rows of out
	// instead of adding to cleared ones: nothing reads them before (update rescales
	// a row only once its sum is not 0).
	first := w.storeFirst()
	for i0 := 0; i0 < t; i0 += attnBlock {
		rows := min(attnBlock, t-i0)
		acc := out[i0*ldo:]
		for r := range rows {
			if !first {
				clear(acc[r*ldo:][:d])
			}
			w.m[r], w.l[r] = ninf, 0
		}
		end := attnKeyEnd(causal, i0, rows, t)
		for j0 := 0; j0 < end; j0 += attnBlock {
			cols := min(attnBlock, end-j0)
			w.prefetchStep(w.pfStep)
			w.masked, w.diag, w.pfA = causal && attnSkipMasked, i0-j0, true
			w.mul(false, rows, cols, d, q[i0*lq:], lq, &w.bKt, j0, 0, false, w.tile, attnBlock)
			w.masked, w.pfA = false, false
			w.softmaxTile(causal, scale, i0, j0, rows, cols, acc, ldo)
			p := w.lowTile(w.tile, w.pLow)
			w.prefetchStep(w.pfStep)
			w.mul(false, rows, d, cols, p, attnBlock, &w.bV, 0, j0, !first || j0 > 0, acc, ldo)
		}
		for r := range rows {
			ar := acc[r*ldo:][:d]
			if w.l[r] == 0 {
				// A row with no visible key (possible only with -Inf scores):
				// output 0, and an LSE of -Inf (attnLSERows) makes its probabilities 0
				// in backward.
				clear(ar)
				continue
			}
			vecScalar(vecMulS, ar, ar, 1/w.l[r])
		}
		attnLSERows(w.lse[i0:i0+rows], w.m[:rows], w.l[:rows])
	}
	w.prefetchStep(t)
}

// softmaxTile turns the score tile of query block i0 (rows) and key block j0 (cols)
// into probabilities (P, and its bf16 rounding for bf16) with the running row maxima
// w.m and sums w.l, rescaling the rows of acc (stride ldo) as a maximum grows: the
// rows' maxima and exponentials over the whole tile in one call each (attnMaxTile,
// attnExpTile), or row by row (softmaxRows) when a row's visible scores are all -Inf
// or NaN.
func (w *attnWork[L]) softmaxTile(causal bool, scale float32, i0, j0, rows, cols int, acc []float32, ldo int) {
	if !attnTileSoftmax {
		w.softmaxRows(causal, scale, i0, j0, rows, cols, acc, ldo)
		return
	}
	ninf := float32(math.Inf(-1))
	vis0 := cols
	if causal {
		vis0 = i0 - j0 + 1
	}
	attnMaxTile(w.tile, attnBlock, rows, cols, vis0, w.mx)
	for r := range rows {
		vis := min(max(r+vis0, 0), cols)
		// A shift of -Inf makes attnExpTile clear the row: no visible key, or every
		// visible score -Inf (nothing to add; no NaN from -Inf - -Inf).
		w.shift[r] = ninf
		if vis == 0 {
			continue
		}
		mNew := max(w.m[r], scale*w.mx[r])
		if math.IsInf(float64(mNew), -1) {
			if attnHasNaN(w.tile[r*attnBlock:][:vis]) {
				w.softmaxRows(causal, scale, i0, j0, rows, cols, acc, ldo)
				return
			}
			continue
		}
		w.shift[r] = mNew
	}
	attnExpTile(w.tile, attnBlock, rows, cols, vis0, w.shift, scale, w.lowTileBF16(w.pLow), w.sums)
	for r := range rows {
		if mNew := w.shift[r]; !math.IsInf(float64(mNew), -1) {
			w.update(r, mNew, w.sums[r], acc[r*ldo:][:w.d])
		}
	}
}

// attnSkipMasked lets the score products leave out fully masked tiles; tests clear it.
var attnSkipMasked = true

// attnStoreFirst lets the float32 products store their first contribution to a block
// of C (the kernel's storing forms) instead of clearing C and adding; tests clear it
// to compare.
var attnStoreFirst = true

// attnZeroKernels reports whether gemmKernel32 has the storing forms mulF32 runs for a
// C it sets (add false; attnStoreFn and attnStoreDirect) and attnStoreFirst allows them.
func attnZeroKernels(kern *gemmKernel[float32]) bool {
	return attnStoreFirst && kern == gemmKernel32 && attnStoreFn != nil && attnStoreDirect != nil
}

// storeFirst reports whether forwardHead and backwardHead set each block of their
// float32 outputs with its first product instead of clearing it and adding: L is
// float32 and mulF32 has the storing kernels. (The bf16 products keep clearing.)
func (w *attnWork[L]) storeFirst() bool {
	return !w.lowBF16() && attnZeroKernels(gemmKernel32)
}

// attnTileSoftmax selects softmaxTile's whole-tile calls; tests clear it to compare
// them with softmaxRows.
var attnTileSoftmax = true

// softmaxRows is softmaxTile row by row.
func (w *attnWork[L]) softmaxRows(causal bool, scale float32, i0, j0, rows, cols int, acc []float32, ldo int) {
	for r := range rows {
		row := w.tile[r*attnBlock : r*attnBlock+cols]
		lo := w.lowRow(w.pLow, r, cols)
		vis := attnVisible(causal, i0+r, j0, cols)
		if vis == 0 {
			attnClear(row, lo)
			continue
		}
		mNew := max(w.m[r], scale*attnMax(row[:vis]))
		if math.IsInf(float64(mNew), -1) && !attnHasNaN(row[:vis]) {
			// Every visible score is -Inf: nothing to add (no NaN from -Inf - -Inf).
			attnClear(row, lo)
			continue
		}
		sum := attnExpRow(row[:vis], lo, scale, mNew)
		if lo != nil {
			lo = lo[vis:]
		}
		attnClear(row[vis:], lo)
		w.update(r, mNew, sum, acc[r*ldo:][:w.d])
	}
}

// update takes row r's new maximum mNew and the sum of its block's exponentials: the
// running sum, and the row's accumulated output ar, are rescaled by exp(m - mNew).
func (w *attnWork[L]) update(r int, mNew, sum float32, ar []float32) {
	if w.l[r] != 0 && w.m[r] == mNew && mNew <= math.MaxFloat32 {
		// exp(0) is 1: nothing to rescale, l·1 is l. (+Inf - +Inf is NaN, below.)
		w.l[r] += sum
	} else if w.l[r] != 0 {
		alpha := float32(math.Exp(float64(w.m[r] - mNew)))
		if alpha != 1 {
			vecScalar(vecMulS, ar, ar, alpha)
		}
		w.l[r] = w.l[r]*alpha + sum
	} else {
		w.l[r] = sum
	}
	w.m[r] = mNew
}

// attnBackwardF32 is the backward pass for float32, float16 and bf16 storage.
func attnBackwardF32[L attnLow](a *backend.AttentionArgs, ops []*storage, pl []attnPlace, lseS *storage) {
	q, k, v, o, gO, gQ, gK, gV := ops[0], ops[1], ops[2], ops[3], ops[4], ops[5], ops[6], ops[7]
	t, d := a.T, a.D
	scale := float32(a.Scale)
	ParallelFor(a.BH, 1, func(lo, hi int) {
		w := getAttnWork[L](t, d, true)
		defer putAttnWork(w)
		if w.amx = w.lowBF16() && attnAMXAcquire(w.kern); w.amx {
			defer attnAMXRelease()
		}
		for h := lo; h < hi; h++ {
			w.planPrefetch(ops[:5], pl, h+1, hi, 5)
			load(w.lse[:t], lseS, h*t, 1)
			var x attnHead[L]
			x.q, x.lq = w.view(q, pl[0], h, &w.qb)
			x.k, x.lk = w.view(k, pl[1], h, &w.kb)
			x.v, x.lv = w.view(v, pl[2], h, &w.vb)
			x.o, x.lo = w.view(o, pl[3], h, &w.ob)
			x.g, x.lg = w.view(gO, pl[4], h, &w.gb)
			var gr attnGrads
			gr.q, gr.lq = attnOut(gQ, pl[5], h, t, d, w.acc)
			gr.k, gr.lk = attnOut(gK, pl[6], h, t, d, w.gk)
			gr.v, gr.lv = attnOut(gV, pl[7], h, t, d, w.gv)
			w.backwardHead(a.Causal, scale, &x, &gr)
			w.flush(gQ, pl[5], h, gr.q)
			w.flush(gK, pl[6], h, gr.k)
			w.flush(gV, pl[7], h, gr.v)
		}
	})
}

// attnGrads is where one head's float32 dQ, dK and dV accumulate, with their row
// strides.
type attnGrads struct {
	q, k, v    []float32
	lq, lk, lv int
}

// attnScaleRows multiplies the t rows of d of x (row stride ld) by s.
func attnScaleRows(x []float32, ld, t, d int, s float32) {
	if ld == d {
		vecScalar(vecMulS, x[:t*d], x[:t*d], s)
		return
	}
	for r := range t {
		row := x[r*ld:][:d]
		vecScalar(vecMulS, row, row, s)
	}
}

// attnClearRows clears the t rows of d of x (row stride ld).
func attnClearRows(x []float32, ld, t, d int) {
	if ld == d {
		clear(x[:t*d])
		return
	}
	for r := range t {
		clear(x[r*ld:][:d])
	}
}

// attnPackTGo packs rows ≤ mr columns of the k×? row-major src (stride ld) as a
// transposed A panel: dst[p*mr+i] = src[p*ld+i] for i < rows, 0 up to mr.
func attnPackTGo(dst, src []float32, ld, k, rows, mr int) {
	for p := range k {
		d := dst[p*mr:][:mr]
		copy(d, src[p*ld:][:rows])
		clear(d[rows:])
	}
}

// attnDot returns Σ x_c·y_c in float32: four running sums (c mod 4), then
// (s0 + s1) + (s2 + s3); each product is rounded before it is added (the conversions
// keep the compiler from fusing them into FMAs, as attnDeltaF32AVX does not).
func attnDot(x, y []float32) float32 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float32
	c := 0
	for ; c+4 <= len(x); c += 4 {
		s0 += float32(x[c] * y[c])
		s1 += float32(x[c+1] * y[c+1])
		s2 += float32(x[c+2] * y[c+2])
		s3 += float32(x[c+3] * y[c+3])
	}
	for ; c < len(x); c++ {
		s0 += float32(x[c] * y[c])
	}
	return (s0 + s1) + (s2 + s3)
}

// attnDeltaF32Go sets delta[i] = attnDot(g[i*lg:][:d], o[i*lo:][:d]) for i < t: the
// float32 softmax backward's row terms, the twin of attnDeltaF32AVX.
func attnDeltaF32Go(delta, g []float32, lg int, o []float32, lo int, t, d int) {
	for i := range t {
		delta[i] = attnDot(g[i*lg:][:d], o[i*lo:][:d])
	}
}

// attnDotBF16 is attnDot of x and y widened to float32 (exactly), widening each
// element as it is read.
func attnDotBF16(x, y []half.BFloat16) float32 {
	y = y[:len(x)]
	f := func(b half.BFloat16) float32 { return math.Float32frombits(uint32(b) << 16) }
	var s0, s1, s2, s3 float32
	c := 0
	for ; c+4 <= len(x); c += 4 {
		s0 += f(x[c]) * f(y[c])
		s1 += f(x[c+1]) * f(y[c+1])
		s2 += f(x[c+2]) * f(y[c+2])
		s3 += f(x[c+3]) * f(y[c+3])
	}
	for ; c < len(x); c++ {
		s0 += f(x[c]) * f(y[c])
	}
	return (s0 + s1) + (s2 + s3)
}

// attnHasNaN reports whether x holds a NaN.
func attnHasNaN(x []float32) bool {
	for _, v := range x {
		if v != v {
			return true
		}
	}
	return false
}

// backwardHead computes one head's dQ, dK and dV (T·D each) into gq, gk and gv.
func (w *attnWork[L]) backwardHead(causal bool, scale float32, x *attnHead[L], gr *attnGrads) {
	t, d := w.t, w.d
	q, lq, g, lg := x.q, x.lq, x.g, x.lg
	gq, gk, gv := gr.q, gr.k, gr.v
	// With first, the first product into each block of dQ, dK and dV stores it
	// instead of adding to cleared rows (w.seen marks the key blocks written).
	first := w.storeFirst()
	if !first {
		attnClearRows(gq, gr.lq, t, d)
		attnClearRows(gk, gr.lk, t, d)
		attnClearRows(gv, gr.lv, t, d)
	}
	nb := gemmCeilDiv(t, attnBlock)
	w.seen = grow(w.seen, nb)
	clear(w.seen[:nb])
	// delta_i = Σ_c dO_ic·O_ic: the softmax backward's row term.
	if gb, ok := any(g).([]half.BFloat16); ok {
		attnDeltaBF16(w.delta, gb, lg, any(x.o).([]half.BFloat16), x.lo, t, d)
	} else {
		attnDeltaF32(w.delta, any(g).([]float32), lg, any(x.o).([]float32), x.lo, t, d)
	}
	w.packB(&w.bKt, x.k, x.lk, d, t, true)
	w.packB(&w.bVt, x.v, x.lv, d, t, true)
	w.packB(&w.bK, x.k, x.lk, t, d, false)
	w.packB(&w.bQ, q, lq, t, d, false)
	w.packB(&w.bG, g, lg, t, d, false)
	for i0 := 0; i0 < t; i0 += attnBlock {
		rows := min(attnBlock, t-i0)
		end := attnKeyEnd(causal, i0, rows, t)
		for j0 := 0; j0 < end; j0 += attnBlock {
			cols := min(attnBlock, end-j0)
			// P = exp(scale·Q_i·K_jᵀ - lse_i), masked entries 0.
			w.prefetchStep(w.pfStep)
			w.masked, w.diag, w.pfA = causal && attnSkipMasked, i0-j0, true
			w.mul(false, rows, cols, d, q[i0*lq:], lq, &w.bKt, j0, 0, false, w.tile, attnBlock)
			w.masked, w.pfA = false, false
			vis0 := cols
			if causal {
				vis0 = i0 - j0 + 1
			}
			attnExpTile(w.tile, attnBlock, rows, cols, vis0, w.lse[i0:], scale, w.lowTileBF16(w.pLow), nil)
			p := w.lowTile(w.tile, w.pLow)
			addK := !first || w.seen[j0/attnBlock]
			w.seen[j0/attnBlock] = true
			// dV_j += Pᵀ·dO_i
			w.prefetchStep(w.pfStep)
			w.mul(true, cols, d, rows, p, attnBlock, &w.bG, 0, i0, addK, gv[j0*gr.lv:], gr.lv)
			// dP = dO_i·V_jᵀ, then dS = P∘(dP - delta_i) in place of dP.
			w.prefetchStep(w.pfStep)
			w.pfA = true
			w.mul(false, rows, cols, d, g[i0*lg:], lg, &w.bVt, j0, 0, false, w.dp, attnBlock)
			w.pfA = false
			attnDSTile(w.dp, w.tile, attnBlock, rows, cols, w.delta[i0:], w.lowTileBF16(w.dsLow))
			ds := w.lowTile(w.dp, w.dsLow)
			// dQ_i += dS·K_j; dK_j += dSᵀ·Q_i (scaled at the end)
			w.prefetchStep(w.pfStep)
			w.mul(false, rows, d, cols, ds, attnBlock, &w.bK, 0, j0, !first || j0 > 0, gq[i0*gr.lq:], gr.lq)
			w.prefetchStep(w.pfStep)
			w.mul(true, cols, d, rows, ds, attnBlock, &w.bQ, 0, i0, addK, gk[j0*gr.lk:], gr.lk)
		}
	}
	if first {
		// Key blocks no query block saw (none: each query block starts at key 0, and
		// a causal one reaches its own keys) still get their zeros.
		for jb, ok := range w.seen[:nb] {
			if !ok {
				j0 := jb * attnBlock
				cols := min(attnBlock, t-j0)
				attnClearRows(gk[j0*gr.lk:], gr.lk, cols, d)
				attnClearRows(gv[j0*gr.lv:], gr.lv, cols, d)
			}
		}
	}
	w.prefetchStep(t)
	attnScaleRows(gq, gr.lq, t, d, scale)
	attnScaleRows(gk, gr.lk, t, d, scale)
}
