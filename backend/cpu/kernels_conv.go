package cpu

import (
	"fmt"

	"github.com/gamp-ml/gamp/backend"
)

// Im2Col implements backend.Backend. Row c·KH·KW + ki·KW + kj, column oh·OW + ow of
// sample n in dst [N, C·KH·KW, OH·OW] receives input pixel
// (oh·StrideH − PadH + ki·DilationH, ow·StrideW − PadW + kj·DilationW) of plane (n, c),
// or 0 where that lies in the padding. It moves raw elements, so it is exact for every
// dtype and needs no conversion for half data.
func (b *Backend) Im2Col(dst, src backend.Storage, a backend.ConvArgs) {
	d, s := convOperands("Im2Col", dst, src, a)
	switch s.dt.Size() {
	case 1:
		im2col(d.b8(), s.b8(), a)
	case 2:
		im2col(d.u16(), s.u16(), a)
	case 4:
		im2col(d.i32(), s.i32(), a)
	case 8:
		im2col(d.i64(), s.i64(), a)
	default:
		panic("cpu: Im2Col: bad dtype " + s.dt.String())
	}
}

// Col2Im implements backend.Backend: the adjoint of Im2Col. dst [N, C, H, W] is
// overwritten with the sum of every column entry of src that Im2Col would have copied
// from that pixel, accumulated per plane in a fixed order (so the result does not
// depend on the worker count) and rounded once on store.
func (b *Backend) Col2Im(dst, src backend.Storage, a backend.ConvArgs) {
	s, d := convOperands("Col2Im", src, dst, a)
	if !d.dt.IsFloat() {
		panic("cpu: Col2Im: dtype " + d.dt.String() + " is not floating point")
	}
	if computeF64(d.dt) {
		col2im[float64](d, s, a)
	} else {
		col2im[float32](d, s, a)
	}
}

// convOperands checks a's geometry and the storages of an Im2Col-shaped pair: cols
// [N, C·KH·KW, OH·OW] and img [N, C, H, W].
func convOperands(op string, cols, img backend.Storage, a backend.ConvArgs) (*storage, *storage) {
	checkConv(op, a)
	c, m := st(cols), st(img)
	if c == nil || m == nil {
		panic("cpu: " + op + ": nil storage")
	}
	if c.dt != m.dt {
		panic(fmt.Sprintf("cpu: %s: columns are %s but the image is %s", op, c.dt, m.dt))
	}
	if n := a.N * a.C * a.H * a.W; m.n < n {
		panic(fmt.Sprintf("cpu: %s: image storage holds %d elements, geometry needs N·C·H·W = %d", op, m.n, n))
	}
	if n := a.N * a.C * a.KH * a.KW * a.OH * a.OW; c.n < n {
		panic(fmt.Sprintf("cpu: %s: column storage holds %d elements, geometry needs N·C·KH·KW·OH·OW = %d", op, c.n, n))
	}
	return c, m
}

// checkConv panics unless a is a consistent convolution geometry.
func checkConv(op string, a backend.ConvArgs) {
	switch {
	case a.N < 0 || a.C < 0 || a.H < 0 || a.W < 0:
		panic(fmt.Sprintf("cpu: %s: negative input size %d×%d×%d×%d", op, a.N, a.C, a.H, a.W))
	case a.KH < 1 || a.KW < 1:
		panic(fmt.Sprintf("cpu: %s: kernel %d×%d must be at least 1×1", op, a.KH, a.KW))
	case a.StrideH < 1 || a.StrideW < 1:
		panic(fmt.Sprintf("cpu: %s: stride %d×%d must be at least 1 (1 for none)", op, a.StrideH, a.StrideW))
	case a.DilationH < 1 || a.DilationW < 1:
		panic(fmt.Sprintf("cpu: %s: dilation %d×%d must be at least 1 (1 for none)", op, a.DilationH, a.DilationW))
	case a.PadH < 0 || a.PadW < 0:
		panic(fmt.Sprintf("cpu: %s: negative padding %d×%d", op, a.PadH, a.PadW))
	}
	oh := convOut(a.H, a.KH, a.StrideH, a.PadH, a.DilationH)
	ow := convOut(a.W, a.KW, a.StrideW, a.PadW, a.DilationW)
	if a.OH != oh || a.OW != ow {
		panic(fmt.Sprintf("cpu: %s: output %d×%d does not match the geometry, which gives %d×%d", op, a.OH, a.OW, oh, ow))
	}
}

// convOut is the output length of a convolution along one axis (0 when the dilated
// kernel does not fit in the padded input).
func convOut(in, k, stride, pad, dil int) int {
	span := in + 2*pad - dil*(k-1) - 1
	if span < 0 {
		return 0
	}
	return span/stride + 1
}

// validRange returns the range [lo, hi) of output positions o < out whose input
// position o·stride + offset lies inside [0, in).
func validRange(out, stride, offset, in int) (lo, hi int) {
	if offset < 0 {
		lo = (-offset + stride - 1) / stride
	}
	if last := in - 1 - offset; last >= 0 {
		hi = last/stride + 1
	}
	hi = min(hi, out)
	return min(lo, hi), hi
}

// convShifted reports whether a has unit strides and OW = W (as a "same" convolution
// does), so that each kernel position (ki, kj) maps output (oh, ow) to input
// (oh, ow) + shift, shift = offH·W + offW, over whole runs of rows: one copy (or add)
// per kernel position, the columns that fall outside the image fixed up after.
func convShifted(a backend.ConvArgs) bool {
	return a.StrideH == 1 && a.StrideW == 1 && a.OW == a.W
}

// im2colShifted fills row, the OH·W columns of one kernel position, from plane in:
// rows [hLo, hHi) and columns [wLo, wHi) are inside the image, the rest is padding.
func im2colShifted[T any](row, in []T, w, shift, hLo, hHi, wLo, wHi int) {
	lo, hi := hLo*w, hHi*w
	clear(row[:lo])
	clear(row[hi:])
	if hLo >= hHi || wLo >= wHi {
		clear(row[lo:hi])
		return
	}
	// The copy may reach outside in only at the padding columns of the first and last
	// row, which are cleared below.
	a := min(max(lo, -shift), hi)
	b := max(min(hi, len(in)-shift), a)
	clear(row[lo:a])
	clear(row[b:hi])
	copy(row[a:b], in[a+shift:b+shift])
	if wLo == 0 && wHi == w {
		return
	}
	var zero T
	for oh := hLo; oh < hHi; oh++ {
		r := row[oh*w : (oh+1)*w]
		for i := range wLo {
			r[i] = zero
		}
		for i := wHi; i < w; i++ {
			r[i] = zero
		}
	}
}

// col2imShifted adds row, the OH·W columns of one kernel position, into plane acc,
// Col2Im's adjoint of im2colShifted. It zeroes row's padding columns first so that the
// rows add as one run: adding +0 leaves every accumulator as it was (a sum that starts
// at +0 is never -0).
func col2imShifted[C numeric](acc, row []C, w, shift, hLo, hHi, wLo, wHi int) {
	if hLo >= hHi || wLo >= wHi {
		return
	}
	if wLo > 0 || wHi < w {
		var zero C
		for oh := hLo; oh < hHi; oh++ {
			r := row[oh*w : (oh+1)*w]
			for i := range wLo {
				r[i] = zero
			}
			for i := wHi; i < w; i++ {
				r[i] = zero
			}
		}
	}
	a := min(max(hLo*w, -shift), hHi*w)
	b := max(min(hHi*w, len(acc)-shift), a)
	addTo(acc[a+shift:b+shift], row[a:b])
}

func im2col[T any](dst, src []T, a backend.ConvArgs) {
	kk, hw, ohw := a.KH*a.KW, a.H*a.W, a.OH*a.OW
	ParallelFor(a.N*a.C, max(1, grainElems/max(kk*ohw, 1)), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			in := src[p*hw : (p+1)*hw]
			out := dst[p*kk*ohw : (p+1)*kk*ohw]
			for ki := 0; ki < a.KH; ki++ {
				offH := ki*a.DilationH - a.PadH
				hLo, hHi := validRange(a.OH, a.StrideH, offH, a.H)
				for kj := 0; kj < a.KW; kj++ {
					offW := kj*a.DilationW - a.PadW
					wLo, wHi := validRange(a.OW, a.StrideW, offW, a.W)
					row := out[(ki*a.KW+kj)*ohw:][:ohw]
					if convShifted(a) {
						im2colShifted(row, in, a.W, offH*a.W+offW, hLo, hHi, wLo, wHi)
						continue
					}
					for oh := 0; oh < a.OH; oh++ {
						r := row[oh*a.OW:][:a.OW]
						if oh < hLo || oh >= hHi || wLo == wHi {
							clear(r)
							continue
						}
						clear(r[:wLo])
						clear(r[wHi:])
						irow := in[(oh*a.StrideH+offH)*a.W:][:a.W]
						iw := wLo*a.StrideW + offW
						if a.StrideW == 1 {
							copy(r[wLo:wHi], irow[iw:])
							continue
						}
						for ow := wLo; ow < wHi; ow++ {
							r[ow] = irow[iw]
							iw += a.StrideW
						}
					}
				}
			}
		}
	})
}

func col2im[C numeric](d, s *storage, a backend.ConvArgs) {
	kk, hw, ohw := a.KH*a.KW, a.H*a.W, a.OH*a.OW
	ParallelFor(a.N*a.C, max(1, grainElems/max(kk*ohw, 1)), func(lo, hi int) {
		acc := make([]C, hw)
		row := make([]C, ohw)
		for p := lo; p < hi; p++ {
			clear(acc)
			for ki := 0; ki < a.KH; ki++ {
				offH := ki*a.DilationH - a.PadH
				hLo, hHi := validRange(a.OH, a.StrideH, offH, a.H)
				for kj := 0; kj < a.KW; kj++ {
					offW := kj*a.DilationW - a.PadW
					wLo, wHi := validRange(a.OW, a.StrideW, offW, a.W)
					if hLo == hHi || wLo == wHi {
						continue
					}
					load(row, s, (p*kk+ki*a.KW+kj)*ohw, 1)
					if convShifted(a) {
						col2imShifted(acc, row, a.W, offH*a.W+offW, hLo, hHi, wLo, wHi)
						continue
					}
					for oh := hLo; oh < hHi; oh++ {
						r := row[oh*a.OW:][:a.OW]
						arow := acc[(oh*a.StrideH+offH)*a.W:][:a.W]
						iw := wLo*a.StrideW + offW
						if a.StrideW == 1 {
							addTo(arow[iw:][:wHi-wLo], r[wLo:wHi])
							continue
						}
						for ow := wLo; ow < wHi; ow++ {
							arow[iw] += r[ow]
							iw += a.StrideW
						}
					}
				}
			}
			store(d, p*hw, 1, acc)
		}
	})
}

// addTo sets dst[i] += src[i] for i < len(dst): the multiple of 16 on the vector layer
// for float32, the rest (col2im's rows are short) in the loop here.
func addTo[C numeric](dst, src []C) {
	src = src[:len(dst)]
	m := 0
	if d, ok := any(dst).([]float32); ok && vec != nil {
		if m = len(d) &^ 15; m > 0 {
			vecOpRun(vecAdd, &d[0], &d[0], &any(src).([]float32)[0], m)
		}
	}
	for i, v := range src[m:] {
		dst[m+i] += v
	}
}
