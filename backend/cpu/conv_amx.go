package cpu

import (
	"math"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// The AMX forward convolution on the stacked image, which needs no B panels.
//
// An AMX B tile is 16 pair rows read with one row stride. convForward's B panels
// (pair step p = a channel pair at a tap, nr positions) cannot be read in place:
// the channel pairs of a tap are planes apart, the taps are rows or columns apart.
// Here each image is first interleaved into channel pairs, xpp[cp][pos] =
// pair(xp[2cp][pos], xp[2cp+1][pos]), then stacked: row r = cp·KH + kh of xr holds
// xpp[cp] from kh·DilationH·wp on, L pair words. Pair step (kw, r) of the wide
// output position q is then xr[r·L + kw·DilationW + q]: for a fixed kw the rows r
// are L words apart, so the k order kw, then r (each kw's rows padded with zero rows
// to a multiple of 16), makes every k tile a B tile read in place at offset
// (r0·L + kw·DilationW + q0)·4 (convAMXKernel32x32, all panels of a row panel
// in one call). Building xr costs KH copies
// of the image's pairs, against one interleave per tap and panel for the packed
// B panels; the zero rows cost AMX work, so the layout is taken where they add at
// most a quarter to the k tiles (convStackable: the Fashion CNN's second
// convolution, 240 pair steps against 208, and its input gradient, 400 against
// 400; not its first, Cin = 1, 80 against 16).
//
// The k order and tiles differ from convForward's, so the bits may too; the
// machine kernel equals its pure-Go twin (convAMXStackGo) bit for bit.

// convStackKernel runs np panels under one AMX tile configuration: panel j adds to
// the 32×32 float32 tile at c[j*cPanel:] (row stride ldc) the product of kt k tiles
// of A — row i of k tile t is a[j*aPanel+i*aRow+t*aTile:][:16] — and of B — pair
// row r of k tile t is b[j*bPanel+offs[t]+r*bStride:][:32] — accumulating onto C as
// gemmAMXKernelGo does with add. Strides and offsets count uint32 words.
type convStackKernel func(np, kt int, a []uint32, aRow, aTile, aPanel int, b []uint32, offs []int, bStride, bPanel int, c []float32, ldc, cPanel int)

// convAMXStackGo is the pure-Go twin of convAMXKernel32x32 on kern's arithmetic:
// each panel's A and B tiles copied into packed panels, then kern.fn.
func convAMXStackGo(kern *gemmBF16Kernel) convStackKernel {
	return func(np, kt int, a []uint32, aRow, aTile, aPanel int, b []uint32, offs []int, bStride, bPanel int, c []float32, ldc, cPanel int) {
		ap := make([]uint32, kt*amxTileK*amxMR)
		bp := make([]uint32, kt*amxTileK*amxNR)
		for j := range np {
			for t := range kt {
				for i := range amxMR {
					copy(ap[amxAt(i, t*amxTileK, amxMR, amxTileK):][:amxTileK], a[j*aPanel+i*aRow+t*aTile:][:amxTileK])
				}
				for r := range amxTileK {
					copy(bp[(t*amxTileK+r)*amxNR:][:amxNR], b[j*bPanel+offs[t]+r*bStride:][:amxNR])
				}
			}
			kern.fn(kt*amxTileK, ap, bp, c[j*cPanel:], ldc, true)
		}
	}
}

// convStackable reports whether convForward takes the stacked layout for a with o:
// an AMX kernel, and zero rows adding at most a quarter to the k tiles.
func convStackable(o *convOps[half.BFloat16, uint32], a backend.Conv2dArgs) bool {
	if o.stack == nil {
		return false
	}
	cg := a.C / a.Groups
	rpad := gemmCeilDiv((cg+1)/2*a.KH, amxTileK) * amxTileK
	tiles := gemmCeilDiv(gemmCeilDiv(cg*a.KH*a.KW, 2), amxTileK)
	return 4*a.KW*rpad <= 5*tiles*amxTileK
}

// convForwardStacked is convForward on the stacked image (see above).
func convForwardStacked(o *convOps[half.BFloat16, uint32], y, x, w, bias []half.BFloat16, a backend.Conv2dArgs) {
	s := newConvShape(a, false)
	ncp := (s.cg + 1) / 2
	rows := ncp * a.KH
	rpad := gemmCeilDiv(rows, amxTileK) * amxTileK
	tpk := rpad / amxTileK // k tiles per kw
	kt := a.KW * tpk
	rp := gemmCeilDiv(s.og, amxMR)
	npan := gemmCeilDiv(s.nq, amxNR)
	ldc := npan * amxNR
	L := ldc + (a.KW-1)*a.DilationW
	P := s.hp * s.wp
	kk := a.KH * a.KW
	// The weights as A panels: group g, row panel r at (g·rp + r)·blk.
	blk := amxMR * kt * amxTileK
	wa := make([]uint32, a.Groups*rp*blk)
	for g := range a.Groups {
		for r := range rp {
			d := wa[(g*rp+r)*blk:][:blk]
			for i := range min(amxMR, s.og-r*amxMR) {
				wr := w[(g*s.og+r*amxMR+i)*s.cg*kk:][:s.cg*kk]
				for p := range kt * amxTileK {
					kw, rr := p/rpad, p%rpad
					if rr >= rows {
						continue
					}
					c0, kh := 2*(rr/a.KH), rr%a.KH
					var hi half.BFloat16
					if c0+1 < s.cg {
						hi = wr[(c0+1)*kk+kh*a.KW+kw]
					}
					d[amxAt(i, p, amxMR, amxTileK)] = pair(wr[c0*kk+kh*a.KW+kw], hi)
				}
			}
		}
	}
	// Word offsets of the k tiles' B tiles at position 0.
	boff := make([]int, kt)
	for t := range boff {
		kw, r0 := t/tpk, t%tpk*amxTileK
		boff[t] = r0*L + kw*a.DilationW
	}
	init := make([]float32, a.O)
	for i := range init {
		init[i] = float32(math.Copysign(0, -1)) // as GemmBF16 with beta 0 stores acc itself
		if bias != nil {
			init[i] = bias[i].Float32()
		}
	}
	rowInit := convRowInit(init, a.Groups, s.og, rp*amxMR)
	ParallelFor(a.N, 1, func(lo, hi int) {
		sc := convScratchBF16.Get().(*convScratch[half.BFloat16, uint32])
		defer convScratchBF16.Put(sc)
		// a: the pair image xpp (ncp planes and a tail of L words), b: xr. Their
		// padding is zero, and stays so: every image writes the same words.
		sc.a = grow(sc.a, ncp*P+L)
		clear(sc.a)
		xpp := sc.a[:ncp*P+L]
		sc.b = grow(sc.b, rpad*L)
		clear(sc.b)
		xr := sc.b[:rpad*L]
		sc.c = grow(sc.c, rp*amxMR*ldc)
		for n := lo; n < hi; n++ {
			for g := range a.Groups {
				for cp := range ncp {
					c0 := g*s.cg + 2*cp
					for h := range a.H {
						d := xpp[cp*P+(h+a.PadH)*s.wp+a.PadW:][:a.W]
						xl := x[((n*a.C+c0)*a.H+h)*a.W:][:a.W]
						if 2*cp+1 < s.cg {
							xh := x[((n*a.C+c0+1)*a.H+h)*a.W:][:a.W]
							for j, v := range xl {
								d[j] = pair(v, xh[j])
							}
							continue
						}
						for j, v := range xl {
							d[j] = uint32(v)
						}
					}
					for kh := range a.KH {
						copy(xr[(cp*a.KH+kh)*L:][:L], xpp[cp*P+kh*a.DilationH*s.wp:][:L])
					}
				}
				convFill(sc.c, ldc, rowInit[g*rp*amxMR:][:rp*amxMR], ldc, rp*amxMR)
				for r := range rp {
					o.stack(npan, kt, wa[(g*rp+r)*blk:][:blk], amxTileK, amxMR*amxTileK, 0,
						xr, boff, L, amxNR, sc.c[r*amxMR*ldc:], ldc, amxNR)
				}
				// Each channel's output rows, rounded straight into y (o.store's
				// rounding, half.Float32ToBFloat16, row by row).
				ohw := a.OH * a.OW
				for oc := range s.og {
					convNarrow(y[(n*a.O+g*s.og+oc)*ohw:][:ohw], sc.c[oc*ldc:], s.wp, a.OW, a.OH)
				}
			}
		}
	})
}
