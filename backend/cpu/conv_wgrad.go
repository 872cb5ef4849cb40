package cpu

import (
	"sync/atomic"

	"github.com/gamp-ml/gamp/half"
)

// convWeightGradTaps is convWeightGrad with the roles of the operands swapped: it
// computes gwᵀ, the taps as the rows (A) and the output channels as the columns
// (B). B, gy of the image transposed (into pairs for bf16), is then packed once per
// pixel slice for every tap panel instead of being A packed anew per row panel, and
// the tiles fit other shapes: for 32 output channels and 400 taps the 12×32 float32
// tile computes 408×32 instead of 36×416 (convTapsFirst). For AMX (rowsA), whose A
// holds each row's pixel pairs side by side, a tap's row is one copy of consecutive
// elements of the padded image (convTapRows, then convStackKernel over every tap
// panel in one call) instead of a transposing
// gather per pixel pair. The products x·gy and gy·x are the same numbers, the
// slices are those of convWeightGradRows, and each element goes through the same
// additions in the same order: the result is bit for bit that of
// convWeightGradRows with the same kernel (TestConvWeightGradTaps).
func convWeightGradTaps[E float32 | half.BFloat16, P float32 | uint32](o *convOps[E, P], gw, x, gy []E, s *convShape) bool {
	return convWeightGradTapsFn(o, convWGradOf(o, gw, x, gy), s)
}

// convWeightGradTapsFn is convWeightGradTaps reading and writing through io.
func convWeightGradTapsFn[E float32 | half.BFloat16, P float32 | uint32](o *convOps[E, P], io convWGradIO[E, P], s *convShape) bool {
	// packA packs the A panel of the taps at offs (w ≤ mr of them), st steps
	// padded to kcs: for AMX, rows of pairs side by side (all tap panels of a
	// pixel slice, then one stack call runs them), else the micro-kernel's panel.
	var packA func(ap []P, xp []E, offs []int, st, kcs int)
	switch {
	case o.rowsIn != nil:
		// No A panel: the kernel reads the taps' runs in place.
	case o.rowsA:
		packA = func(ap []P, xp []E, offs []int, st, kcs int) {
			convTapRows(any(ap).([]uint32), any(xp).([]half.BFloat16), offs, st, kcs)
		}
	default:
		packA = func(ap []P, xp []E, offs []int, st, kcs int) {
			o.gather(ap, xp, offs, st, len(offs), o.mr)
			clear(ap[st*o.mr:])
		}
	}
	mp := gemmCeilDiv(s.k, o.mr)          // tap panels of a group
	ldw := gemmCeilDiv(s.og, o.nr) * o.nr // output channels of a group, padded
	partLen := s.Groups * mp * o.mr * ldw
	ldq := s.nq + s.nq%2
	nSl := gemmCeilDiv(ldq, convWGradPixels)
	per := gemmCeilDiv(ldq, nSl)
	per += per % 2
	chunks := max(1, min(s.N, convWGradChunks, convWGradPartials/partLen))
	parts := convParts(chunks * partLen)
	defer convPartsPool.Put(&parts)
	pool := convScratchPool[E, P]()
	np := ldw / o.nr
	var nonFinite atomic.Bool
	ParallelFor(chunks, 1, func(lo, hi int) {
		sc := pool.Get().(*convScratch[E, P])
		defer pool.Put(sc)
		sc.xp = grow(sc.xp, s.xpLen)
		clear(sc.xp)
		sc.gy = grow(sc.gy, s.og*ldq+per)
		clear(sc.gy)
		maxSteps := o.pad(o.steps(per))
		var tileOffs []int // for AMX: the B tiles of a packed panel, 16 pair rows each (per worker)
		if o.rowsA {
			sc.a = grow(sc.a, mp*o.mr*maxSteps)
			tileOffs = make([]int, maxSteps/o.tileK)
			for t := range tileOffs {
				tileOffs[t] = t * o.tileK * o.nr
			}
		} else {
			sc.a = grow(sc.a, o.mr*maxSteps)
		}
		sc.b = grow(sc.b, np*o.nr*maxSteps)
		offs := make([]int, o.mr)
		gyRows := make([]int, o.nr)
		for ch := lo; ch < hi; ch++ {
			part := parts[ch*partLen:][:partLen]
			for n := ch * s.N / chunks; n < (ch+1)*s.N/chunks; n++ {
				if nonFinite.Load() || !io.image(s, sc, n) {
					nonFinite.Store(true)
					return
				}
				for g := range s.Groups {
					io.gy(s, sc, ldq, n, g)
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
							if o.rowsIn != nil {
								for j := range np {
									o.rowsIn(st, sc.xp, offs[:w], sc.b[j*o.nr*kcs:][:o.nr*kcs], pg[it*o.mr*ldw+j*o.nr:], ldw)
								}
								continue
							}
							if o.rowsA {
								packA(sc.a[it*o.mr*kcs:][:o.mr*kcs], sc.xp, offs[:w], st, kcs)
								continue
							}
							ap := sc.a[:o.mr*kcs]
							packA(ap, sc.xp, offs[:w], st, kcs)
							for j := range np {
								o.kern(kcs, ap, sc.b[j*o.nr*kcs:][:o.nr*kcs], pg[it*o.mr*ldw+j*o.nr:], ldw)
							}
						}
						if o.rowsA {
							// Every tap panel against each column panel: one call.
							ua, ub := any(sc.a).([]uint32), any(sc.b).([]uint32)
							for j := range np {
								o.stack(mp, kcs/o.tileK, ua[:mp*o.mr*kcs], kcs, o.tileK, o.mr*kcs,
									ub[j*o.nr*kcs:][:o.nr*kcs], tileOffs, o.nr, 0, pg[j*o.nr:], ldw, o.mr*ldw)
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
			io.store(r, row)
		}
	})
	return true
}

// convTapsFirst reports whether convWeightGrad takes convWeightGradTaps: always
// for AMX (its A is the cheaper to pack), else where its tiles compute fewer
// elements (ties to the taps, whose B is packed once).
func convTapsFirst[E float32 | half.BFloat16, P float32 | uint32](o *convOps[E, P], s *convShape) bool {
	if o.rowsA || o.rowsIn != nil {
		return true
	}
	pad := func(n, m int) int { return gemmCeilDiv(n, m) * m }
	return pad(s.k, o.mr)*pad(s.og, o.nr) <= pad(s.og, o.mr)*pad(s.k, o.nr)
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

// convRowsMR is the rows of the in-place-rows kernels.
const convRowsMR = 8

// convF32Rows returns the float32 weight-gradient ops on the in-place-rows kernel
// for og output channels (16 or 32 columns), nil without it.
func convF32Rows(og int) *convOps[float32, float32] {
	k, nr := convRowsF32x32, 32
	if og <= 16 {
		k, nr = convRowsF32x16, 16
	}
	if k == nil {
		return nil
	}
	o := *convF32
	o.mr, o.nr, o.rowsIn = convRowsMR, nr, k
	return &o
}

// convF32WGrad returns the float32 weight-gradient ops for og output channels:
// the in-place-rows kernel where there is one, else convF32. Both add each
// element's products in the same order: the choice changes no bit.
func convF32WGrad(og int) *convOps[float32, float32] {
	if o := convF32Rows(og); o != nil {
		return o
	}
	return convF32
}

// convBF16WGrad returns the bf16 weight-gradient ops for og output channels: the
// VDPBF16PS in-place-rows kernel (the taps' pairs broadcast straight from the
// padded image, no A gather) where there is one, else convBF16. Both add each
// element's pair products in the same order: the choice changes no bit.
func convBF16WGrad(og int) *convOps[half.BFloat16, uint32] {
	k, nr := convRowsPairs32, 32
	if og <= 16 {
		k, nr = convRowsPairs16, 16
	}
	if convBF16 == nil || k == nil {
		return convBF16
	}
	o := *convBF16
	o.mr, o.nr, o.rowsIn = convRowsMR, nr, k
	return &o
}
