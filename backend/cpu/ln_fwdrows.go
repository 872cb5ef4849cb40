package cpu

import "math"

// lnFwdRowsMax bounds the rows of one lnFwdRows call: its statistics go through
// arrays of this size on the caller's stack when SaveMean or SaveInvStd is nil.
const lnFwdRowsMax = 64

// lnFwdRows is layerNormRow's float32 affine forward of the len(ms) rows of width n
// in x (y may be x), each row's float32 mean and invstd stored in ms and is, in
// AVX-512 calls (lnFwdRows2AVX512 on the pairs of rows, lnFwdRowsAVX512 on an odd last
// one) with the same bits as lnFwdRowsGo. It reports false, doing nothing, where
// those calls cannot run (no AVX-512, n not a positive multiple of 16); then the
// caller takes the row path.
func lnFwdRows(y, x, w, b, ms, is []float32, eps float64, n int) bool {
	rows := len(ms)
	if rows == 0 || n <= 0 || n&15 != 0 {
		return false
	}
	y, x, w, b, is = y[:rows*n], x[:rows*n], w[:n], b[:n], is[:rows]
	return lnFwdRowsRun(&y[0], &x[0], &w[0], &b[0], &ms[0], &is[0], eps, n, rows)
}

// lnFwdRowsHalf is lnFwdRows with y in bfloat16 (bf) or float16, each result rounded
// as it is stored, on the leading pairs of the len(ms) rows: it returns how many rows
// it did, an even number (0 where the AVX-512 calls cannot run); the rest, an odd last
// row among them, are the caller's. Its twin is lnFwdRowsGo followed by the half
// package's rounding.
func lnFwdRowsHalf(bf bool, y []uint16, x, w, b, ms, is []float32, eps float64, n int) int {
	rows := len(ms)
	if rows < 2 || n <= 0 || n&15 != 0 {
		return 0
	}
	y, x, w, b, is = y[:rows*n], x[:rows*n], w[:n], b[:n], is[:rows]
	return lnFwdRowsHalfRun(bf, &y[0], &x[0], &w[0], &b[0], &ms[0], &is[0], eps, n, rows)
}

// lnFwdRowsGo is the twin of lnFwdRowsAVX512 on the pure-Go lane loops: rowStats's
// statistics (lnStatsGo's) and vecLnFwd's loop (vecLnFwdGo), row by row.
func lnFwdRowsGo(y, x, w, b, ms, is []float32, eps float64, n int) {
	for r := range ms {
		xr, yr := x[r*n:(r+1)*n], y[r*n:(r+1)*n]
		var s, d [16]float64
		vecSumF64Go(&s, xr)
		mean := vecFold(&s) / float64(n)
		vecDevSqF64Go(&d, xr, mean)
		sq := vecFold(&d)
		invstd := 1 / math.Sqrt(sq/float64(n)+eps)
		ms[r], is[r] = float32(mean), float32(invstd)
		vecLnFwdGo(yr, xr, w, b, ms[r], is[r])
	}
}
