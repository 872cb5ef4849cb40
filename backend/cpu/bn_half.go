package cpu

import (
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// The batch-norm passes on bfloat16 and float16 storages, reading and writing the
// 16-bit elements in the AVX-512 loops themselves (bn_amd64.go) instead of converting
// them to float32 in bulk first: the kernels call them where bnHalfOf says so. Each
// equals, bit for bit, its float32 pass (vec_bn.go, the vector layer) on the operands
// widened to float32, with the output rounded as half.Float32ToBFloat16 or
// half.Float32ToFloat16 rounds it; where the loops cannot run, the data go through
// those float32 passes sixteen elements at a time.

// bnHalfOf returns s's elements when the half loops serve it (bfloat16 or float16 data
// on a CPU with AVX-512), with bf for bfloat16; ok is false otherwise.
func bnHalfOf(s *storage) (u []uint16, bf, ok bool) {
	if s == nil || !vecAVX512OK() || (s.dt != backend.BFloat16 && s.dt != backend.Float16) {
		return nil, false, false
	}
	return s.u16(), s.dt == backend.BFloat16, true
}

// halfWiden sets dst[i] to src[i] widened to float32 (exact), bfloat16 when bf, else
// float16.
func halfWiden(bf bool, dst []float32, src []uint16) {
	for i, v := range src {
		if bf {
			dst[i] = half.BFloat16(v).Float32()
		} else {
			dst[i] = half.Float16(v).Float32()
		}
	}
}

// halfRound sets dst[i] to src[i] rounded to bfloat16 when bf, else float16, as the
// bulk conversions of package half round.
func halfRound(bf bool, dst []uint16, src []float32) {
	for i, v := range src {
		if bf {
			dst[i] = uint16(half.BFloat16FromFloat32(v))
		} else {
			dst[i] = uint16(half.Float16FromFloat32(v))
		}
	}
}

// bnHalfHead returns how many leading elements of n the AVX-512 loops take: all of
// them (the last n mod 16 under masks) where they can run.
func bnHalfHead(n int) int {
	if vecAVX512OK() {
		return n
	}
	return 0
}

// bnAccHalf sets acc[i] += float64(x[i]) (accAdd on x widened), prefetching x's
// elements pf elements ahead (a hint: pf may reach past x).
func bnAccHalf(bf bool, acc []float64, x []uint16, pf int) {
	n := len(x)
	acc = acc[:n]
	k := bnHalfHead(n)
	if k > 0 {
		bnAccHalfRun(bf, &acc[0], &x[0], k, 2*pf)
	}
	var w [16]float32
	for ; k < n; k += 16 {
		e := min(n, k+16)
		halfWiden(bf, w[:e-k], x[k:e])
		vecAccF64(acc[k:e], w[:e-k])
	}
}

// bnDevSqHalf sets acc[i] = FMA(d, d, acc[i]) with d = float64(x[i]) − m[i] (accDev's
// accSq on x widened).
func bnDevSqHalf(bf bool, acc []float64, x []uint16, m []float64) {
	n := len(x)
	acc, m = acc[:n], m[:n]
	k := bnHalfHead(n)
	if k > 0 {
		bnDevSqHalfRun(bf, &acc[0], &x[0], &m[0], k)
	}
	var w [16]float32
	for ; k < n; k += 16 {
		e := min(n, k+16)
		halfWiden(bf, w[:e-k], x[k:e])
		vecAccDevF64(accSq, acc[k:e], nil, w[:e-k], m[k:e])
	}
}

// bnAffineHalf is bnAffineF32 on v widened, o rounded. o may be v.
func bnAffineHalf(bf bool, o, v []uint16, m, s, b []float32, relu bool) {
	n := len(o)
	v, m, s, b = v[:n], m[:n], s[:n], b[:n]
	k := bnHalfHead(n)
	if k > 0 {
		bnAffineHalfRun(bf, &o[0], &v[0], &m[0], &s[0], &b[0], k, relu)
	}
	var w [16]float32
	for ; k < n; k += 16 {
		e := min(n, k+16)
		t := w[:e-k]
		halfWiden(bf, t, v[k:e])
		bnAffineVec(t, t, m[k:e], s[k:e], b[k:e], relu)
		halfRound(bf, o[k:e], t)
	}
}

// bnSumsHalf is bnSumsF32 on g, y (nil: no mask) and x widened, without storing the
// masked g, prefetching g, y and x pf elements ahead as bnAccHalf does.
func bnSumsHalf(bf bool, acc1, acc2 []float64, g, y, x []uint16, m []float64, pf int) {
	n := len(g)
	acc1, acc2, x, m = acc1[:n], acc2[:n], x[:n], m[:n]
	if y != nil {
		y = y[:n]
	}
	k := bnHalfHead(n)
	if k > 0 {
		var yp *uint16
		if y != nil {
			yp = &y[0]
		}
		bnSumsHalfRun(bf, &acc1[0], &acc2[0], &g[0], yp, &x[0], &m[0], k, 2*pf)
	}
	var gw, yw, xw [16]float32
	for ; k < n; k += 16 {
		e := min(n, k+16)
		gt, xt := gw[:e-k], xw[:e-k]
		halfWiden(bf, gt, g[k:e])
		halfWiden(bf, xt, x[k:e])
		var ot, yt []float32
		if y != nil {
			ot, yt = gt, yw[:e-k]
			halfWiden(bf, yt, y[k:e])
		}
		bnSumsVec(ot, acc1[k:e], acc2[k:e], gt, yt, xt, m[k:e])
	}
}

// bnGradHalf is bnGradF32 on g (masked first, as bnSumsF32 masks it, when y is not
// nil) and x widened, o rounded. o may be g, y or x.
func bnGradHalf(bf bool, o, g, y, x []uint16, ea, eb, ec, em []float32) {
	n := len(o)
	g, x, ea, eb, ec, em = g[:n], x[:n], ea[:n], eb[:n], ec[:n], em[:n]
	if y != nil {
		y = y[:n]
	}
	k := bnHalfHead(n)
	if k > 0 {
		var yp *uint16
		if y != nil {
			yp = &y[0]
		}
		bnGradHalfRun(bf, &o[0], &g[0], yp, &x[0], &ea[0], &eb[0], &ec[0], &em[0], k)
	}
	var gw, yw, xw, tw [16]float32
	for ; k < n; k += 16 {
		e := min(n, k+16)
		gt, xt := gw[:e-k], xw[:e-k]
		halfWiden(bf, gt, g[k:e])
		halfWiden(bf, xt, x[k:e])
		if y != nil {
			yt := yw[:e-k]
			halfWiden(bf, yt, y[k:e])
			vecBinary(vecMask, gt, gt, yt)
		}
		bnGradVec(gt, gt, xt, ea[k:e], eb[k:e], ec[k:e], em[k:e], tw[:e-k])
		halfRound(bf, o[k:e], gt)
	}
}
