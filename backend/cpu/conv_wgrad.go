package cpu

import (
	"sync/atomic"

	"github.com/gamp-ml/gamp/half"
)

// convWeightGradTaps is convWeightGrad for the AMX layout (rowsA) with the roles of
// the operands swapped: it computes gwᵀ, the taps as the rows. Then the operand that
// depends on the taps is A, which AMX reads as rows of pixel pairs side by side, so
// that a tap's row is one copy of consecutive elements of the padded image
// (convTapRows, rowKern) instead of a transposing gather per pixel pair; and B, gy
// of the image transposed into pairs, is packed once per pixel slice for every tap
// panel instead of being A packed anew per row panel. The products x·gy and gy·x are
// the same float32 numbers, the slices and k tiles are those of convWeightGrad, and
// each element goes through the same additions in the same order: the result is
// bit for bit that of convWeightGrad with the same kernel (TestConvWeightGradTaps).
func convWeightGradTaps(o *convOps[half.BFloat16, uint32], gw, x, gy []half.BFloat16, s *convShape) bool {
	mp := gemmCeilDiv(s.k, o.mr)          // tap panels of a group
	ldw := gemmCeilDiv(s.og, o.nr) * o.nr // output channels of a group, padded
	partLen := s.Groups * mp * o.mr * ldw
	ldq := s.nq + s.nq%2
	nSl := gemmCeilDiv(ldq, convWGradPixels)
	per := gemmCeilDiv(ldq, nSl)
	per += per % 2
	chunks := max(1, min(s.N, convWGradChunks, convWGradPartials/partLen))
	parts := make([]float32, chunks*partLen)
	pool := convScratchPool[half.BFloat16, uint32]()
	np := ldw / o.nr
	var nonFinite atomic.Bool
	ParallelFor(chunks, 1, func(lo, hi int) {
		sc := pool.Get().(*convScratch[half.BFloat16, uint32])
		defer pool.Put(sc)
		sc.xp = grow(sc.xp, s.xpLen)
		clear(sc.xp)
		sc.gy = grow(sc.gy, s.og*ldq+per)
		clear(sc.gy)
		maxSteps := o.pad(o.steps(per))
		sc.a = grow(sc.a, o.mr*maxSteps)
		sc.b = grow(sc.b, np*o.nr*maxSteps)
		offs := make([]int, o.mr)
		gyRows := make([]int, o.nr)
		for ch := lo; ch < hi; ch++ {
			part := parts[ch*partLen:][:partLen]
			for n := ch * s.N / chunks; n < (ch+1)*s.N/chunks; n++ {
				img := x[n*s.C*s.H*s.W:][:s.C*s.H*s.W]
				if nonFinite.Load() || !o.finite(img) {
					nonFinite.Store(true)
					return
				}
				padImage(s, sc.xp, img)
				for g := range s.Groups {
					for oc := range s.og {
						src := gy[(n*s.O+g*s.og+oc)*s.OH*s.OW:]
						for oh := range s.OH {
							copy(sc.gy[oc*ldq+oh*s.wp:][:s.OW], src[oh*s.OW:][:s.OW])
						}
					}
					pg := part[g*mp*o.mr*ldw:]
					xg := g * s.cg * s.hp * s.wp
					for q0 := 0; q0 < ldq; q0 += per {
						pix := min(per, ldq-q0)
						st := o.steps(pix)
						kcs := o.pad(st)
						// B: the pixel pairs of gy, nr channels a panel.
						for j := range np {
							w := min(o.nr, s.og-j*o.nr)
							for i := range w {
								gyRows[i] = (j*o.nr+i)*ldq + q0
							}
							bp := sc.b[j*o.nr*kcs:][:o.nr*kcs]
							o.gather(bp, sc.gy, gyRows[:w], st, w, o.nr)
							clear(bp[st*o.nr:])
						}
						for it := range mp {
							w := min(o.mr, s.k-it*o.mr)
							for i := range w {
								offs[i] = xg + s.offs[it*o.mr+i] + q0
							}
							ap := sc.a[:o.mr*kcs]
							convTapRows(ap, sc.xp, offs[:w], st, kcs)
							for j := range np {
								o.rowKern(kcs, ap, sc.b[j*o.nr*kcs:][:o.nr*kcs], pg[it*o.mr*ldw+j*o.nr:], ldw)
							}
						}
					}
				}
			}
		}
	})
	if nonFinite.Load() {
		return false
	}
	// Sum the chunks in order and round once, transposing back to [O, k].
	ParallelFor(s.O, max(1, 4096/max(chunks*s.k, 1)), func(lo, hi int) {
		row := make([]float32, s.k)
		for r := lo; r < hi; r++ {
			g, oc := r/s.og, r%s.og
			base := g*mp*o.mr*ldw + oc
			for t := range row {
				row[t] = parts[base+t*ldw]
			}
			for ch := 1; ch < chunks; ch++ {
				p := parts[ch*partLen+base:]
				for t := range row {
					row[t] += p[t*ldw]
				}
			}
			o.store(gw[r*s.k:][:s.k], row)
		}
	})
	return true
}

// convTapRows packs the A operand of convWeightGradTaps as rows of lda pairs: row i
// holds the pairs of the run of src at offs[i], dst[i*lda+p] = pair(src[offs[i]+2p],
// src[offs[i]+2p+1]) for p < steps, zero for steps ≤ p < lda and for the rows
// len(offs) ≤ i < len(dst)/lda. A pair is two consecutive elements, so on a
// little-endian machine a row is one copy.
func convTapRows(dst []uint32, src []half.BFloat16, offs []int, steps, lda int) {
	for i, off := range offs {
		row := dst[i*lda:][:lda]
		s := src[off:][:2*steps]
		if littleEndian {
			copy(bf16Words(row[:steps]), s)
		} else {
			for p := range steps {
				row[p] = pair(s[2*p], s[2*p+1])
			}
		}
		clear(row[steps:])
	}
	clear(dst[len(offs)*lda:])
}
