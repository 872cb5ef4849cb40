package cpu

import "github.com/gamp-ml/gamp/backend"

// ReLUGradColSum implements backend.ReLUGradColSumer for float32 operands where the
// column sums run on the vector layer (reduceColsSum's route): each task takes a strip
// of columns and, block of rows by block of rows (reduceCols' blocks, which depend on
// the shape alone), masks the block's rows (vecMask, as UnaryBackward's Relu) and sums
// its columns while they are in L1 (colSumF32, adding the block sums in block order),
// so that GX is written once and not read back from memory. Each element and each
// column sum has the bits of UnaryBackward then Reduce: the same operations in the same
// order.
func (b *Backend) ReLUGradColSum(gx, gy, y, gb backend.Storage, rows, cols int) bool {
	gxs, gys, ys, gbs := st(gx), st(gy), st(y), st(gb)
	for _, s := range []*storage{gxs, gys, ys, gbs} {
		if s.dt != backend.Float32 {
			return false
		}
	}
	if !vecAVX512OK() || rows <= 0 || cols <= 1 {
		// One column: Reduce sums a contiguous row (reduceRows), another order.
		return false
	}
	n := rows * cols
	elemCheckLen("ReLUGradColSum", "gx", gxs, n)
	elemCheckLen("ReLUGradColSum", "gy", gys, n)
	elemCheckLen("ReLUGradColSum", "y", ys, n)
	elemCheckLen("ReLUGradColSum", "gb", gbs, cols)
	gxf, gyf, yf := gxs.f32()[:n], gys.f32()[:n], ys.f32()[:n]
	blk := max(1, redBlock/min(cols, chunk)) // reduceCols' blocks of rows
	w := min(cols, chunk)
	if want := 2 * Workers(); want > 1 && (cols+w-1)/w < want {
		// A few strips per worker, of at least 64 columns (reduceColsSum's split).
		w = min(w, max(64, ((cols+want-1)/want+63)&^63))
	}
	nstrip := (cols + w - 1) / w
	ParallelFor(nstrip, max(1, grainElems/(rows*w)), func(lo, hi int) {
		var vals [chunk]float64
		for sp := lo; sp < hi; sp++ {
			c0 := sp * w
			a := vals[:min(w, cols-c0)]
			for j0 := 0; j0 < rows; j0 += blk {
				k := min(blk, rows-j0)
				for j := j0; j < j0+k; j++ {
					off := j*cols + c0
					vecBinary(vecMask, gxf[off:off+len(a)], gyf[off:off+len(a)], yf[off:off+len(a)])
				}
				off := j0*cols + c0
				colSumF32(a, gxf[off:off+(k-1)*cols+len(a)], cols, k, j0 > 0)
			}
			reduceFinish(backend.Sum, gbs, c0, a, nil, rows)
		}
	})
	return true
}
