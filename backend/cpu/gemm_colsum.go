package cpu

import (
	"fmt"

	"github.com/gamp-ml/gamp/backend"
)

// The row sums of op(A) inside the GEMM (MatMulArgs.SumA): a linear layer's bias
// gradient, the column sums of g2 [rows, out], taken from the weight gradient's
// product g2ᵀ·x, whose tasks read every element of g2 when they pack op(A) = g2ᵀ.
// Each task sums the stored rows [pc, pc+kc) of its columns [i0, i1) of g2 right
// after packing them, while they are in its cache, instead of a Reduce pass reading
// g2 from L3 or memory again.
//
// The bits are Reduce's (reduceColsSum, then reduceFinish): each column is summed in
// float64 over blocks of gemmSumABlock(m) stored rows, each block from +0 in
// ascending row order (colSumF32), the block sums added in ascending order, the total
// rounded once. colSumRange cuts those same blocks at the k slices' edges and carries
// a block that spans an edge in a second accumulator, so that every column sees the
// same additions in the same order whatever the slicing; only the task that owns a
// column on the first column block (jc = 0, tj = 0) sums it, slice after slice.
// NaN payloads aside: which of two NaNs a column keeps depends, in Reduce too, on
// whether the vector loop or its Go twin sums it, that is on where the column falls
// in a strip (Reduce's strips follow the worker count). gemmSumABlock must follow
// reduceColsSum's blocks; TestGemmSumABits has columns whose float32 sums show them.

// gemmSumA is a call's state for the row sums of op(A): out, where not nil, takes
// them (m values); acc holds each row's finished blocks, blk the open one.
type gemmSumA[T float32 | float64] struct {
	out      []T
	acc, blk []float64
	block    int
}

// gemmSumABlock is the number of stored rows reduceColsSum sums from +0 before
// adding them to a column's total, for m columns: a function of the shape alone.
func gemmSumABlock(m int) int { return max(1, redBlock/min(m, chunk)) }

// gemmSumAFits reports whether gemmWithSumA sums op(A) of these arguments as Reduce
// does: float32, op(A) transposed (its rows are stored columns, reduced by
// reduceColsSum; one column takes reduceRows, with another order) and Reduce on its
// vector loop. MatMul runs Reduce itself otherwise.
func gemmSumAFits(dt backend.DType, transA bool, m, k int) bool {
	return dt == backend.Float32 && transA && m >= 2 && k >= 1 && vecAVX512OK()
}

// gemmSumAInPack checks the row-sum arguments of gemmWithSumA and, where the GEMM
// will pack no op(A) (n = 0, alpha 0), computes the sums at once; it reports whether
// the GEMM's tasks are to sum it.
func gemmSumAInPack[T float32 | float64](transA bool, m, n, k int, alpha T, a []T, lda int, sumA []T) bool {
	if _, ok := any(a).([]float32); !ok || !transA || m < 2 || k < 1 || len(sumA) < m {
		panic(gemmArgError(fmt.Sprintf("cpu: Gemm: the row sums of op(A) want float32, a transposed A, m ≥ 2, k ≥ 1 and m values (transA %v, m=%d, k=%d, %d values)", transA, m, k, len(sumA))))
	}
	gemmCheck("A", k, m, a, lda)
	if n > 0 && alpha != 0 {
		return true
	}
	var s gemmSumA[T]
	s.set(sumA, m)
	s.rows(a, lda, 0, m, 0, k, k)
	return false
}

// set makes out (m values, or nil: none) the destination of the sums and sizes the
// accumulators.
func (s *gemmSumA[T]) set(out []T, m int) {
	s.out = out
	if out == nil {
		return
	}
	s.out = out[:m]
	s.block = gemmSumABlock(m)
	s.acc = gemmGrowF64(s.acc, m)
	s.blk = gemmGrowF64(s.blk, m)
}

func gemmGrowF64(buf []float64, n int) []float64 {
	if cap(buf) < n {
		return make([]float64, n)
	}
	return buf[:n]
}

// rows adds stored rows [r0, r1) (of k) of columns [i0, i1) of A to the sums,
// rows [0, r0) of those columns having been added before, and stores the
// columns' totals once r1 is k.
func (g *gemmSumA[T]) rows(a []T, lda, i0, i1, r0, r1, k int) {
	x := any(a).([]float32)[i0:]
	colSumRange(g.acc[i0:i1], g.blk[i0:i1], x, lda, r0, r1, k, g.block)
	if r1 == k {
		// reduceFinish's rounding (storeF64).
		for i, v := range g.acc[i0:i1] {
			g.out[i0+i] = T(v)
		}
	}
}

// colSumRange adds rows [r0, r1) of the k-row window x (len(acc) columns, rows ld
// apart) to the column sums acc, rows [0, r0) having been added before: the
// arithmetic of colSumF32 over the whole window in blocks of block rows (add after
// the first), cut at r0 and r1. A block cut by r0 or r1 is summed in blk, from +0 in
// row order as colSumF32 sums it, and added to acc (or copied, the first) once
// complete. blk's rows after the first go one at a time, as blk + (+0 + x): a sum
// from +0 is never -0 (round to nearest), so this is blk + x, NaNs included (the
// first operand's NaN, as VADDPD and ADDSD keep it).
func colSumRange(acc, blk []float64, x []float32, ld, r0, r1, k, block int) {
	for r := r0; r < r1; {
		bs := r / block * block
		be := min(bs+block, k)
		e := min(be, r1)
		switch {
		case r == bs && e == be:
			colSumF32(acc, x[r*ld:], ld, e-r, r > 0)
			r = e
			continue
		case r == bs:
			colSumF32(blk, x[r*ld:], ld, e-r, false)
		default:
			for j := r; j < e; j++ {
				colSumF32(blk, x[j*ld:], ld, 1, true)
			}
		}
		if e == be {
			if bs == 0 {
				copy(acc, blk)
			} else {
				for c, v := range blk {
					acc[c] += v
				}
			}
		}
		r = e
	}
}

// sumATask sums, for a loop task of column share tj in the block of columns from jc,
// its rows [i0, i1) of the op(A) it has just packed for k slice [pc, pc+kc): on the
// first column block, by the tasks of the first column share (one per row range,
// run in slice order), the others packing the same rows.
func (g *gemmCall[T]) sumATask(jc, tj, i0, i1, pc, kc int) {
	if g.sum.out != nil && jc == 0 && tj == 0 {
		g.sum.rows(g.a, g.lda, i0, i1, pc, pc+kc, g.k)
	}
}

// sumAColTask sums, for column task t that has just packed all of op(A) for k
// slice [pc, pc+kc), every row: by task 0 alone.
func (g *gemmCall[T]) sumAColTask(t, pc, kc int) {
	if g.sum.out != nil && t == 0 {
		g.sum.rows(g.a, g.lda, 0, g.m, pc, pc+kc, g.k)
	}
}

// sumAUnpacked sums op(A) on its own for the schedules whose tasks pack no op(A)
// (column and row tasks reading it in place: none with a transposed A today).
func (g *gemmCall[T]) sumAUnpacked(schedule int) {
	if g.sum.out != nil && (schedule == gemmColTasks || schedule == gemmRowTasks) {
		g.sum.rows(g.a, g.lda, 0, g.m, 0, g.k, g.k)
	}
}

// GemmSumA implements backend.GemmSumA: MatMul takes MatMulArgs.SumA for float32,
// from the weight gradient's pack where gemmSumAFits and with Reduce otherwise.
func (b *Backend) GemmSumA(dt backend.DType) bool { return dt == backend.Float32 }

// matMulSumA returns the slice the float32 GEMM is to store the row sums of op(A) in
// (a.SumA from a.OffSumA) where it can (gemmSumAFits, one batch item); otherwise it
// runs Reduce Sum on each item's op(A) itself and returns nil.
func (b *Backend) matMulSumA(a backend.MatMulArgs, lda int) []float32 {
	if a.SumA == nil {
		return nil
	}
	A, S := st(a.A), st(a.SumA)
	if !b.GemmSumA(S.dt) || S.dt != st(a.C).dt || a.OffSumA < 0 || a.OffSumA+a.Batch*a.M > S.n {
		panic(fmt.Sprintf("cpu: MatMul: SumA %s (offset %d, %d elements) wants %d values of %s (GemmSumA says yes)", S.dt, a.OffSumA, S.n, a.Batch*a.M, st(a.C).dt))
	}
	if a.Batch == 1 && a.N > 0 && gemmSumAFits(A.dt, a.TransA, a.M, a.K) {
		return S.f32()[a.OffSumA:][:a.M]
	}
	if a.M == 0 || a.Batch == 0 {
		return nil
	}
	// op(A) of each item, copied dense as the tensor Reduce would read it: K×M
	// (transposed) or M×K, reduced over K.
	rows, cols, outer, inner := a.M, a.K, a.M, 1
	if a.TransA {
		rows, cols, outer, inner = a.K, a.M, 1, a.M
	}
	tmp, err := b.Alloc(A.dt, max(rows*cols, 1))
	if err != nil {
		panic(err)
	}
	defer b.Free(tmp)
	sums, err := b.Alloc(S.dt, a.M)
	if err != nil {
		panic(err)
	}
	defer b.Free(sums)
	for i := range a.Batch {
		if rows*cols > 0 {
			b.Copy(backend.Dense(tmp, 0, rows, cols), backend.View{S: a.A, Offset: a.OffA + i*a.StrideA, Shape: []int{rows, cols}, Strides: []int{lda, 1}})
		}
		b.Reduce(backend.Sum, sums, tmp, outer, a.K, inner)
		b.Copy(backend.Dense(a.SumA, a.OffSumA+i*a.M, a.M), backend.Dense(sums, 0, a.M))
	}
	return nil
}
