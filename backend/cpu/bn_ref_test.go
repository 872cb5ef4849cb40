package cpu

import (
	"math"

	"github.com/gamp-ml/gamp/backend"
)

// The batch-norm kernels as they were before bnGroups and bnCache (every pass reading
// and converting the storage again, all channels' statistics before any output): the
// reference the group-wise kernels must equal bit for bit (bn_groups_test.go).

// bnTilesRef calls fn with each tile of channels [lo, hi), in order.
func bnTilesRef(a *backend.NormArgs, lo, hi int, fn func(t bnTile)) {
	if a.S == 0 {
		return
	}
	ch := make([]int, 0, chunk)
	if a.S >= chunk {
		for c := lo; c < hi; c++ {
			for s0 := 0; s0 < a.S; s0 += chunk {
				ch = ch[:min(chunk, a.S-s0)]
				for j := range ch {
					ch[j] = c - lo
				}
				fn(bnTile{c*a.S + s0, ch})
			}
		}
		return
	}
	per := chunk / a.S
	for c0 := lo; c0 < hi; c0 += per {
		ch = ch[:0]
		for c := c0; c < min(hi, c0+per); c++ {
			for range a.S {
				ch = append(ch, c-lo)
			}
		}
		fn(bnTile{c0 * a.S, ch})
	}
}

// batchNormRef is batchNorm before bnGroups.
func batchNormRef[C numeric](a *backend.NormArgs, x, y *storage, p *bnParams, relu bool) {
	cnt, stride := a.N*a.S, a.C*a.S
	xr, yr := elemRunOf[C](x), elemRunOf[C](y)
	ParallelFor(a.C, max(1, grainElems/max(cnt, 1)), func(lo, hi int) {
		k := hi - lo
		mean, invstd := make([]float64, k), make([]float64, k)
		buf := make([]C, chunk)
		if a.Training {
			// Two passes: the mean, then the mean squared deviation from it.
			sum, sq := make([]float64, k), make([]float64, k)
			acc, em := make([]float64, chunk), make([]float64, chunk)
			bnTilesRef(a, lo, hi, func(t bnTile) {
				m := len(t.ch)
				clear(acc[:m])
				for n := 0; n < a.N; n++ {
					accAdd(acc[:m], xr.read(buf[:m], t.off+n*stride))
				}
				for j, c := range t.ch {
					sum[c] += acc[j]
				}
			})
			for i := range mean {
				mean[i] = sum[i] / float64(cnt)
			}
			bnTilesRef(a, lo, hi, func(t bnTile) {
				m := len(t.ch)
				clear(acc[:m])
				for j, c := range t.ch {
					em[j] = mean[c]
				}
				for n := 0; n < a.N; n++ {
					accDev(accSq, acc[:m], nil, xr.read(buf[:m], t.off+n*stride), em[:m])
				}
				for j, c := range t.ch {
					sq[c] += acc[j]
				}
			})
			for i := range k {
				c := lo + i
				v := sq[i] / float64(cnt)
				invstd[i] = 1 / math.Sqrt(v+a.Eps)
				if p.rm != nil {
					p.rm[c] = float32((1-a.Momentum)*float64(p.rm[c]) + a.Momentum*mean[i])
				}
				if p.rv != nil {
					unbiased := v * float64(cnt) / float64(cnt-1)
					p.rv[c] = float32((1-a.Momentum)*float64(p.rv[c]) + a.Momentum*unbiased)
				}
			}
		} else {
			for i := range k {
				mean[i] = float64(p.rm[lo+i])
				invstd[i] = 1 / math.Sqrt(float64(p.rv[lo+i])+a.Eps)
			}
		}
		cm, scale, shift := make([]C, k), make([]C, k), make([]C, k)
		for i := range k {
			c := lo + i
			if p.sm != nil {
				p.sm[c] = float32(mean[i])
			}
			if p.si != nil {
				p.si[c] = float32(invstd[i])
			}
			cm[i] = C(mean[i])
			scale[i] = C(invstd[i] * param(p.w, c, 1))
			shift[i] = C(param(p.bias, c, 0))
		}
		// y = (x − mean)·(invstd·w) + b; subtracting first keeps a large mean from
		// cancelling against the shift.
		em, es, eb, ob := make([]C, chunk), make([]C, chunk), make([]C, chunk), make([]C, chunk)
		bnTilesRef(a, lo, hi, func(t bnTile) {
			m := len(t.ch)
			for j, c := range t.ch {
				em[j], es[j], eb[j] = cm[c], scale[c], shift[c]
			}
			for n := 0; n < a.N; n++ {
				off := t.off + n*stride
				o := yr.out(ob[:m], off)
				bnAffineRef(o, xr.read(buf[:m], off), em, es, eb)
				if relu {
					reluInPlace(o)
				}
				yr.flush(off, o)
			}
		})
	})
}

// batchNormBackwardRef is batchNormBackward before bnGroups.
func batchNormBackwardRef[C numeric](a *backend.NormArgs, x, gy, gx, y *storage, p *bnParams) {
	cnt, stride := float64(a.N*a.S), a.C*a.S
	xr, gyr, gxr := elemRunOf[C](x), elemRunOf[C](gy), elemRunOf[C](gx)
	var yr elemRun[C]
	if y != nil {
		yr = elemRunOf[C](y)
	}
	ParallelFor(a.C, max(1, grainElems/max(a.N*a.S, 1)), func(lo, hi int) {
		k := hi - lo
		mean, invstd := make([]float64, k), make([]float64, k)
		for i := range k {
			if a.Training {
				mean[i], invstd[i] = float64(p.sm[lo+i]), float64(p.si[lo+i])
			} else {
				mean[i] = float64(p.rm[lo+i])
				invstd[i] = 1 / math.Sqrt(float64(p.rv[lo+i])+a.Eps)
			}
		}
		gb, xb := make([]C, chunk), make([]C, chunk)
		var yb []C
		if y != nil {
			yb = make([]C, chunk)
		}
		// readGY reads a tile of gy, masked by the ReLU output when there is one.
		readGY := func(m, off int) []C {
			g := gyr.read(gb[:m], off)
			if y == nil {
				return g
			}
			// Into gb: g may be the caller's gy itself.
			reluMask(gb[:m], g, yr.read(yb[:m], off))
			return gb[:m]
		}
		// sg = Σ gy and sgx = Σ gy·(x − mean), per channel.
		sg, sgx := make([]float64, k), make([]float64, k)
		if a.Training || p.gw != nil || p.gb != nil {
			acc1, acc2, em := make([]float64, chunk), make([]float64, chunk), make([]float64, chunk)
			bnTilesRef(a, lo, hi, func(t bnTile) {
				m := len(t.ch)
				clear(acc1[:m])
				clear(acc2[:m])
				for j, c := range t.ch {
					em[j] = mean[c]
				}
				for n := 0; n < a.N; n++ {
					off := t.off + n*stride
					g := readGY(m, off)
					accAdd(acc1[:m], g)
					accDev(accProd, acc2[:m], g, xr.read(xb[:m], off), em[:m])
				}
				for j, c := range t.ch {
					sg[c] += acc1[j]
					sgx[c] += acc2[j]
				}
			})
		}
		// gx = ca·gy + cb·(x − mean) + cc.
		ca, cb, cc, cm := make([]C, k), make([]C, k), make([]C, k), make([]C, k)
		for i := range k {
			c := lo + i
			if p.gw != nil {
				p.gw[c] = float32(sgx[i] * invstd[i])
			}
			if p.gb != nil {
				p.gb[c] = float32(sg[i])
			}
			f := param(p.w, c, 1) * invstd[i]
			ca[i], cm[i] = C(f), C(mean[i])
			if a.Training {
				cb[i] = C(-f * invstd[i] * invstd[i] * sgx[i] / cnt)
				cc[i] = C(-f * sg[i] / cnt)
			}
		}
		ea, eb, ec, em := make([]C, chunk), make([]C, chunk), make([]C, chunk), make([]C, chunk)
		ob, tb := make([]C, chunk), make([]C, chunk)
		bnTilesRef(a, lo, hi, func(t bnTile) {
			m := len(t.ch)
			for j, c := range t.ch {
				ea[j], eb[j], ec[j], em[j] = ca[c], cb[c], cc[c], cm[c]
			}
			for n := 0; n < a.N; n++ {
				off := t.off + n*stride
				g, xs := readGY(m, off), xr.read(xb[:m], off)
				o := gxr.out(ob[:m], off)
				bnGradRef(o, g, xs, ea, eb, ec, em, tb)
				gxr.flush(off, o)
			}
		})
	})
}

// bnAffineRef is bnAffine as the vecOp passes it was.
func bnAffineRef[C numeric](o, v, m, s, b []C) {
	if of, ok := any(o).([]float32); ok {
		n := len(of)
		vecBinary(vecSub, of, any(v).([]float32), any(m).([]float32)[:n])
		vecBinary(vecMul, of, of, any(s).([]float32)[:n])
		vecBinary(vecAdd, of, of, any(b).([]float32)[:n])
		return
	}
	for j := range o {
		o[j] = C((v[j]-m[j])*s[j]) + b[j]
	}
}

// bnGradRef is bnGrad as the vecOp passes it was.
func bnGradRef[C numeric](o, g, x, ea, eb, ec, em, t []C) {
	n := len(o)
	if of, ok := any(o).([]float32); ok {
		tf := any(t).([]float32)[:n]
		vecBinary(vecSub, tf, any(x).([]float32), any(em).([]float32)[:n])
		vecBinary(vecMul, tf, any(eb).([]float32)[:n], tf)
		vecBinary(vecMul, of, any(ea).([]float32)[:n], any(g).([]float32))
		vecBinary(vecAdd, of, of, tf)
		vecBinary(vecAdd, of, of, any(ec).([]float32)[:n])
		return
	}
	for j := range o {
		o[j] = C(C(ea[j]*g[j])+C(eb[j]*(x[j]-em[j]))) + ec[j]
	}
}
