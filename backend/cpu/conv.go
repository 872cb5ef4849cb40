package cpu

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// Convolution without an unfolded input (backend.Convolver), for unit strides.
//
// Each image is copied once into a zero-padded buffer xp [C, H+2·PadH, wp] (plus a
// zero tail), row h's W elements at columns PadW … PadW+W−1. The rows share their
// side padding: wp = W + g with g = max(PadW, 2·PadW − (KW−1)·DilationW) zero
// columns between one row's data and the next's, not 2·PadW. A tap reaching past
// the right edge of a row reads the next row's first columns, which are zero (the
// reach is at most 2·PadW − 1 − g < PadW of them), and wp ≥ OW. The output is
// computed on the "wide" grid of OH rows of the padded width wp: wide position q =
// oh·wp + ow. There, kernel tap t = (c, kh, kw) reads xp[off_t + q] with off_t =
// c·hp·wp + kh·DilationH·wp + kw·DilationW, so the im2col row of a tap over any
// run of positions is a contiguous run of xp. The
// float32 kernel on AVX-512 (convKernel12x32AVX512) reads those runs in place; the
// others get a GEMM B micro-panel (nr positions × every tap) packed straight from the
// image with one contiguous copy per tap (bf16: one pair interleave per tap for all
// channel pairs), in cache, and run the GEMM micro-kernels (gemmKernel32, VDPBF16PS
// or AMX for bf16); the weights are the A panels.
// The wp − OW wide columns past each output row are computed and discarded (7 % and
// 14 % more arithmetic for 5×5 kernels on 28- and 14-wide images; 14 % and 29 %
// before the rows shared their padding), which is what buys the contiguous runs.
//
// The input gradient of a unit-stride convolution is the same kernel applied to gy
// with the weights transposed per group and flipped, and padding
// Dilation·(K−1) − Pad. The weight gradient is a GEMM with the pixels as its inner
// dimension: A is gy on the wide grid (zero in the discarded columns), B gathers, for
// nr taps, their runs of xp. It sums fixed chunks of the batch into float32 partial
// sums, added in chunk order, so the result does not depend on the worker count.

// convMaxF32Steps and convMaxBF16Steps bound the k steps one micro-kernel call
// accumulates before adding its tile to C: those of Gemm (gemmKC) for float32, so
// that the forward result equals the Im2Col + Gemm one, and 2048 pairs for bf16.
const (
	convMaxF32Steps  = gemmKC
	convMaxBF16Steps = 2048
	// convWGradChunks is the most batch chunks the weight gradient sums apart.
	convWGradChunks = 16
	// convWGradPixels bounds the pixels (the inner dimension) of one weight-gradient
	// micro-kernel call.
	convWGradPixels = 512
	// convWGradPartials bounds the float32 partial sums of the weight gradient
	// (64 MiB).
	convWGradPartials = 16 << 20
)

// convShape is a validated unit-stride convolution geometry and its padded layout.
type convShape struct {
	backend.Conv2dArgs
	hp, wp int   // padded input plane
	cg, og int   // input and output channels per group
	k      int   // taps per group, cg·KH·KW
	nq     int   // wide output positions, OH·wp
	xpLen  int   // padded image: C planes and a zero tail the last panel may read
	offs   []int // xp offset of each tap of group 0, in the packed k order
	// kidx is the natural index c·KH·KW + kh·KW + kw of each packed k. paired: k
	// runs over the channels fastest (k = (kh·KW + kw)·cg + c), so that a bf16
	// pair is two channels at one tap, a plane apart: then one call packs the
	// pairs of every channel at a tap.
	kidx   []int
	paired bool
}

// newConvShape returns a's layout; paired asks for the channel-fastest k order,
// which it takes when the groups have an even number of channels.
func newConvShape(a backend.Conv2dArgs, paired bool) convShape {
	s := convShape{Conv2dArgs: a}
	s.hp, s.wp = a.H+2*a.PadH, a.W+max(a.PadW, 2*a.PadW-(a.KW-1)*a.DilationW)
	s.cg, s.og = a.C/a.Groups, a.O/a.Groups
	s.k = s.cg * a.KH * a.KW
	s.nq = a.OH * s.wp
	// The highest read is the last group's last tap plus the last position of the
	// last 32-wide panel (or of the even-padded pixel range).
	s.xpLen = a.C*s.hp*s.wp + (a.KW-1)*a.DilationW + 64
	s.paired = paired && s.cg%2 == 0
	s.offs, s.kidx = make([]int, 0, s.k), make([]int, 0, s.k)
	kk := a.KH * a.KW
	tap := func(c, t int) {
		s.offs = append(s.offs, c*s.hp*s.wp+(t/a.KW)*a.DilationH*s.wp+(t%a.KW)*a.DilationW)
		s.kidx = append(s.kidx, c*kk+t)
	}
	if s.paired {
		for t := range kk {
			for c := range s.cg {
				tap(c, t)
			}
		}
		return s
	}
	for c := range s.cg {
		for t := range kk {
			tap(c, t)
		}
	}
	return s
}

// convSupported reports whether the direct kernels cover a (unit strides, a
// consistent geometry) and dt. bf16 needs the VDPBF16PS micro-kernel: without it
// the Im2Col path, which widens to the float32 GEMM, is faster than the Go twin.
// float16 runs the float32 kernels on operands widened as they are read
// (conv_f16.go), so it goes wherever float32 does.
func convSupported(a backend.Conv2dArgs, dt backend.DType) bool {
	if dt != backend.Float32 && dt != backend.Float16 && (dt != backend.BFloat16 || convBF16 == nil) {
		return false
	}
	if a.StrideH != 1 || a.StrideW != 1 || a.Groups < 1 || a.C%a.Groups != 0 || a.O%a.Groups != 0 {
		return false
	}
	checkConv("Conv2d", a.ConvArgs)
	return a.N > 0 && a.OH > 0 && a.OW > 0
}

// convOps are the element-type-specific pieces of the direct convolution: E is the
// data type, P the packed type the micro-kernel reads (a float32, or a pair of bf16).
type convOps[E float32 | half.BFloat16, P float32 | uint32] struct {
	mr, nr   int
	maxSteps int
	pairs    bool // one P holds two consecutive k values
	// tileK: every call's steps are a multiple of it (zero-padded); rowsA: the A
	// panel is laid out as AMX tiles load it (see aAt) instead of a[p*mr+i].
	tileK int
	rowsA bool
	// kern adds to the mr×nr float32 tile at c (row stride ldc) the product of
	// an A panel a[p*mr+i] and a B panel b[p*nr+j], p < steps.
	kern func(steps int, a, b []P, c []float32, ldc int)
	// direct, when not nil, is kern reading B row p in place at b[offs[p]/4:]
	// (offs in bytes), so the forward packs no B panel (convKernelGo's loop).
	// The caller has checked that every offset is a non-negative multiple of 4
	// and at most maxOff (convOffsets); direct checks maxOff against len(b).
	// For float32 b is the padded image itself; for bf16 pairs it is the image
	// interleaved into channel pairs (sc.xpp), which needs the paired k order.
	direct func(steps int, a []P, b []P, offs []int, maxOff int, c []float32, ldc int)
	// directNarrow, where set (bf16), is direct for a forward whose k steps are
	// one slice: the tile from zero, row i's starting value init[i] added last,
	// rounded to bf16 into c (convPairKernelNarrowGo), so that no float32
	// accumulator rows are filled, added to and narrowed.
	directNarrow func(steps int, a []P, b []P, offs []int, maxOff int, c []half.BFloat16, ldc int, init []float32)
	// gather packs the weight-gradient B panel: row p of dst holds step p of w
	// runs of src starting at offs[i] (convGatherF32Go, convGatherPairsGo).
	gather func(dst []P, src []E, offs []int, steps, w, stride int)
	// rows packs the weight-gradient A panel the same way from rows of src with
	// stride ld (convPackRowsTF32, gemmBF16PackGatherRows), or, with rowsA, as
	// rows of len(dst)/stride steps, zero-padded (convPairRows).
	rows func(dst []P, src []E, ld, steps, w, stride int)
	// stack, for AMX kernels, is the kernel of convForwardStacked and of the
	// weight gradient with the taps as rows.
	stack convStackKernel
	// rowsIn, where set, is the weight gradient's kernel with the taps as mr rows
	// read in place: c[i*ldc+j] += Σ_p x[offs[i]+p] · b[p*nr+j] (convKernelRowsGo),
	// so that A needs no panel.
	rowsIn func(steps int, x []E, offs []int, b []P, c []float32, ldc int)
	// tapRow packs one step of a forward B panel: nr positions of the one or two
	// taps at src and src[d:] (d < 0: no second tap).
	tapRow func(dst []P, src []E, d int)
	// pairRun packs len(dst)/nr steps of a forward B panel whose step p pairs the
	// nr positions at src[2p·ld] and src[(2p+1)·ld] (bf16 only).
	pairRun func(dst []P, src []E, ld, steps int)
	// store rounds a float32 row to E.
	store func(dst []E, src []float32)
	// finite reports whether no element is Inf or NaN.
	finite func(x []E) bool
	// pack packs element v and u (the next k, or zero) into a P.
	pack func(v, u E) P
}

// pad rounds steps up to the kernel's k tile.
func (o *convOps[E, P]) pad(steps int) int {
	return gemmCeilDiv(steps, o.tileK) * o.tileK
}

// aAt is the index of row i, step p of an A panel: a[p*mr+i], or with rowsA the
// AMX layout, per k tile the mr rows of tileK pairs side by side.
func (o *convOps[E, P]) aAt(i, p int) int {
	if o.rowsA {
		return amxAt(i, p, o.mr, o.tileK)
	}
	return p*o.mr + i
}

// amxAt is the index of row i, step p of an AMX A panel of mr rows (packAMXA's
// layout): k tile p/tk holds mr rows of tk pairs.
func amxAt(i, p, mr, tk int) int { return (p/tk)*mr*tk + i*tk + p%tk }

func (o *convOps[E, P]) steps(k int) int {
	if o.pairs {
		return (k + 1) / 2
	}
	return k
}

// slices splits steps into equal slices of at most maxSteps: the split depends on
// the shape alone.
func (o *convOps[E, P]) slices(steps int) (n, per int) {
	n = gemmCeilDiv(steps, o.maxSteps)
	return n, gemmCeilDiv(steps, n)
}

var (
	convF32 = &convOps[float32, float32]{mr: gemmKernel32.mr, nr: gemmKernel32.nr, maxSteps: convMaxF32Steps, tileK: 1,
		kern: gemmKernel32.fn, direct: convDirectF32, rows: convPackRowsTF32, gather: convGatherF32,
		tapRow: func(dst, src []float32, _ int) {
			if len(dst) == 32 {
				*(*[32]float32)(dst) = *(*[32]float32)(src) // inline moves, no memmove call
				return
			}
			copy(dst, src[:len(dst)])
		},
		store:  func(dst, src []float32) { copy(dst, src) },
		finite: half.AllFinite32,
		pack:   func(v, _ float32) float32 { return v },
	}
	// convF32x16 is convF32 on the in-place 16×16 kernel (nil without it).
	convF32x16 = func() *convOps[float32, float32] {
		if convDirectF32x16 == nil {
			return nil
		}
		o := *convF32
		o.mr, o.nr, o.direct = 16, 16, convDirectF32x16
		return &o
	}()
	// convF32x8 is convF32 on the in-place 8×32 kernel (nil without it).
	convF32x8 = func() *convOps[float32, float32] {
		if convDirectF32x8 == nil {
			return nil
		}
		o := *convF32
		o.mr, o.nr, o.direct = 8, 32, convDirectF32x8
		return &o
	}()
	// convBF16 is nil where the CPU lacks VDPBF16PS.
	convBF16 = newConvBF16(convBF16Kernel)
	// convBF16Direct, convBF16Directx16 and convBF16Directx8 are convBF16 on the
	// in-place VDPBF16PS kernels of a 12×32, 16×16 and 8×32 tile (nil without
	// them): the forward reads its B rows from the image interleaved into channel
	// pairs instead of packing B panels. They need the paired k order (an even
	// number of channels per group): convBF16For.
	convBF16Direct    = convBF16Tile(12, 32, convDirectPairs, convDirectPairsNarrow)
	convBF16Directx16 = convBF16Tile(16, 16, convDirectPairsx16, convDirectPairsx16Narrow)
	convBF16Directx8  = convBF16Tile(8, 32, convDirectPairsx8, convDirectPairsx8Narrow)
)

// convBF16Tile returns convBF16 with an mr×nr tile and the direct kernels of that
// tile (narrow may be nil), nil without convBF16 or direct.
func convBF16Tile(mr, nr int, direct func(steps int, a, b []uint32, offs []int, maxOff int, c []float32, ldc int),
	narrow func(steps int, a, b []uint32, offs []int, maxOff int, c []half.BFloat16, ldc int, init []float32)) *convOps[half.BFloat16, uint32] {
	if convBF16 == nil || direct == nil {
		return nil
	}
	o := *convBF16
	o.mr, o.nr, o.direct, o.directNarrow = mr, nr, direct, narrow
	return &o
}

// convBF16For returns the bf16 forward ops for og output and cg input channels per
// group: the direct kernels' tile chosen as convF32For chooses (the VDPBF16PS
// tiles are bound as the float32 ones are, a pair step for a k step), else
// convBF16 (B panels packed per tap pair). All add each element's pair products in
// the same order: the choice changes no bit of the result. (For one channel per
// group the direct ops also replace convForwardWiden's float32 arithmetic: half
// the instructions, other bits.)
func convBF16For(og int) *convOps[half.BFloat16, uint32] {
	if convBF16Direct == nil {
		return convBF16
	}
	return convTileFor(og, convBF16Direct, convBF16Directx8, convBF16Directx16)
}

// convF32For returns the float32 ops for og output channels per group: of the
// 12×32, 8×32 and 16×16 in-place tiles, the one whose computed rows cost least. Per
// k step the 32-column tiles are bound by their FMAs (24 FMAs, 14 loads; 16 and
// 10), a cycle per row and 32 columns, the 16×16 one by its 17 loads for 16 FMAs,
// 17/16 of that: so 8×32 for 16 and 32 channels (16 and 32 rows against 24 and 36;
// 16 % and 9 % less CPU on the Fashion CNN's second convolution's input gradient
// and forward than the 16×16 and 12×32 tiles). All add each element's products in
// the same order, so the choice changes no bit of the result.
func convF32For(og int) *convOps[float32, float32] {
	return convTileFor(og, convF32, convF32x8, convF32x16)
}

// convTileFor returns, of base (a 12×32 tile) and the 8×32 and 16×16 tiles x8 and
// x16 (each may be nil), the one whose computed rows cost least for og rows: 16
// per row for the 32-column tiles, 17 for the 16×16 one (see convF32For).
func convTileFor[E float32 | half.BFloat16, P float32 | uint32](og int, base, x8, x16 *convOps[E, P]) *convOps[E, P] {
	best, cost := base, 16*gemmCeilDiv(og, base.mr)*base.mr
	for _, c := range []struct {
		o *convOps[E, P]
		f int
	}{{x8, 16}, {x16, 17}} {
		if c.o == nil {
			continue
		}
		if k := c.f * gemmCeilDiv(og, c.o.mr) * c.o.mr; k < cost {
			best, cost = c.o, k
		}
	}
	return best
}

// newConvBF16 returns the bf16 ops on micro-kernel kern (nil for nil).
func newConvBF16(kern *gemmBF16Kernel) *convOps[half.BFloat16, uint32] {
	if kern == nil {
		return nil
	}
	rows := gemmBF16PackGatherRows
	var stack convStackKernel
	if kern.rowsA {
		if stack = convAMXStack(kern); stack == nil {
			stack = convAMXStackGo(kern)
		}
		rows = func(dst []uint32, src []half.BFloat16, ld, steps, w, stride int) {
			convPairRows(dst, src, ld, steps, w, stride, kern.tileK)
		}
	}
	return &convOps[half.BFloat16, uint32]{mr: kern.mr, nr: kern.nr, maxSteps: convMaxBF16Steps, pairs: true,
		tileK: kern.tileK, rowsA: kern.rowsA, stack: stack,
		kern: func(steps int, a, b []uint32, c []float32, ldc int) { kern.fn(steps, a, b, c, ldc, true) },
		rows: rows, gather: convGatherPairs,
		tapRow: func(dst []uint32, src []half.BFloat16, d int) {
			if d < 0 {
				for j, v := range src[:len(dst)] {
					dst[j] = uint32(v)
				}
				return
			}
			gemmBF16PackPairRows(dst, src, d, 1, len(dst), len(dst))
		},
		pairRun: func(dst []uint32, src []half.BFloat16, ld, steps int) {
			w := len(dst) / steps
			gemmBF16PackPairRows(dst, src, ld, steps, w, w)
		},
		store:  half.Float32ToBFloat16,
		finite: allFiniteBF16,
		pack:   pair,
	}
}

// convPackRowsTF32 packs steps columns of w ≤ stride rows of src (row stride ld)
// as a panel: dst[p*stride+i] = src[i*ld+p], zero for i ≥ w.
func convPackRowsTF32(dst, src []float32, ld, steps, w, stride int) {
	dst = dst[:steps*stride]
	i := 0
	for ; i+4 <= w; i += 4 {
		s0 := src[i*ld:][:steps]
		s1 := src[(i+1)*ld:][:steps]
		s2 := src[(i+2)*ld:][:steps]
		s3 := src[(i+3)*ld:][:steps]
		for p := range s0 {
			d := dst[p*stride+i:][:4]
			d[0], d[1], d[2], d[3] = s0[p], s1[p], s2[p], s3[p]
		}
	}
	for ; i < w; i++ {
		for p, v := range src[i*ld:][:steps] {
			dst[p*stride+i] = v
		}
	}
	if w < stride {
		for p := range steps {
			clear(dst[p*stride+w:][:stride-w])
		}
	}
}

// convPairRows packs steps pairs of w ≤ stride rows of src (row stride ld) as an
// AMX A panel of stride rows and len(dst)/stride steps (k tiles of tk pairs):
// dst[amxAt(i, p, stride, tk)] = pair(src[i*ld+2p], src[i*ld+2p+1]), zero for
// p ≥ steps or i ≥ w.
func convPairRows(dst []uint32, src []half.BFloat16, ld, steps, w, stride, tk int) {
	clear(dst)
	for t0 := 0; t0 < steps; t0 += tk {
		n := min(tk, steps-t0)
		for i := range w {
			d := dst[amxAt(i, t0, stride, tk):][:n]
			r := src[i*ld+2*t0:][:2*n]
			for p := range d {
				d[p] = pair(r[2*p], r[2*p+1])
			}
		}
	}
}

// convGatherF32Go is convPackRowsTF32 with row i at src[offs[i]]:
// dst[p*stride+i] = src[offs[i]+p], zero for i ≥ w.
func convGatherF32Go(dst, src []float32, offs []int, steps, w, stride int) {
	dst = dst[:steps*stride]
	i := 0
	for ; i+4 <= w; i += 4 {
		s0 := src[offs[i]:][:steps]
		s1 := src[offs[i+1]:][:steps]
		s2 := src[offs[i+2]:][:steps]
		s3 := src[offs[i+3]:][:steps]
		for p := range s0 {
			d := dst[p*stride+i:][:4]
			d[0], d[1], d[2], d[3] = s0[p], s1[p], s2[p], s3[p]
		}
	}
	for ; i < w; i++ {
		for p, v := range src[offs[i]:][:steps] {
			dst[p*stride+i] = v
		}
	}
	if w < stride {
		for p := range steps {
			clear(dst[p*stride+w:][:stride-w])
		}
	}
}

// convGatherPairsGo is the pure-Go twin of convGatherPairs: row p of dst holds
// pair p of each gathered row, dst[p*stride+i] = pair(src[offs[i]+2p],
// src[offs[i]+2p+1]), zero for i ≥ w.
func convGatherPairsGo(dst []uint32, src []half.BFloat16, offs []int, steps, w, stride int) {
	dst = dst[:steps*stride]
	for i := range w {
		s := src[offs[i]:][:2*steps]
		for p := range steps {
			dst[p*stride+i] = pair(s[2*p], s[2*p+1])
		}
	}
	if w < stride {
		for p := range steps {
			clear(dst[p*stride+w:][:stride-w])
		}
	}
}

// convScratch is one task's buffers. tmp holds an image or a group of gy widened
// from float16 (conv_f16.go) before its rows are copied into xp or gy.
type convScratch[E float32 | half.BFloat16, P float32 | uint32] struct {
	xp, gy, tmp []E
	a, b        []P
	// xpp is a group of the padded image interleaved into channel pairs, for the
	// bf16 direct kernels.
	xpp []P
	c   []float32
	c16 []half.BFloat16 // the narrowing kernels' rows
}

var (
	convScratchF32  = sync.Pool{New: func() any { return new(convScratch[float32, float32]) }}
	convScratchBF16 = sync.Pool{New: func() any { return new(convScratch[half.BFloat16, uint32]) }}
)

// convZeros holds zero bf16 elements for convZerosBF16.
var convZeros []half.BFloat16

var convZerosMu sync.Mutex

// convZerosBF16 returns n zero bf16 elements (shared: read only).
func convZerosBF16(n int) []half.BFloat16 {
	convZerosMu.Lock()
	defer convZerosMu.Unlock()
	if len(convZeros) < n {
		convZeros = make([]half.BFloat16, max(n, 2*len(convZeros)))
	}
	return convZeros[:n]
}

// convInterleaveGo sets dst[i] = pair(lo[i], hi[i]): two channel planes as one
// plane of bf16 pairs, lo in the low halves.
func convInterleaveGo(dst []uint32, lo, hi []half.BFloat16) {
	lo, hi = lo[:len(dst)], hi[:len(dst)]
	for i := range dst {
		dst[i] = pair(lo[i], hi[i])
	}
}

func convScratchPool[E float32 | half.BFloat16, P float32 | uint32]() *sync.Pool {
	var zero E
	if _, ok := any(zero).(float32); ok {
		return &convScratchF32
	}
	return &convScratchBF16
}

// padImage copies the C planes of one image into xp, whose padding and tail are
// already zero.
func padImage[E float32 | half.BFloat16](s *convShape, xp, x []E) {
	for c := range s.C {
		convRows(xp[(c*s.hp+s.PadH)*s.wp+s.PadW:], s.wp, x[c*s.H*s.W:], s.W, s.W, s.H)
	}
}

// convRowsGo copies rows rows of n elements from src (row stride ls) to dst (row
// stride ld), in ascending order: the pure-Go twin of convRows.
func convRowsGo[T float32 | half.BFloat16](dst []T, ld int, src []T, ls, n, rows int) {
	for r := range rows {
		copy(dst[r*ld:][:n], src[r*ls:][:n])
	}
}

// convFillGo sets row r of dst (rows rows of n elements, ld apart) to v[r] in
// every element, by fillF32: the twin of convFill.
func convFillGo(dst []float32, ld int, v []float32, n, rows int) {
	for r := range rows {
		fillF32(dst[r*ld:][:n], v[r])
	}
}

// convNarrowGo rounds rows rows of n elements of src (row stride ls) to bf16 into
// dst (row stride ld), half.Float32ToBFloat16 a row.
func convNarrowGo(dst []half.BFloat16, ld int, src []float32, ls, n, rows int) {
	for r := range rows {
		half.Float32ToBFloat16(dst[r*ld:][:n], src[r*ls:][:n])
	}
}

// convNarrow rounds rows rows of n elements of src (row stride ls) to bf16 into the
// packed dst (convNarrowTo with row stride n).
func convNarrow(dst []half.BFloat16, src []float32, ls, n, rows int) {
	convNarrowTo(dst, n, src, ls, n, rows)
}

// convRowInit returns the starting value of each accumulator row: groups runs of
// rows values, row i of group g init[g·og+i] (zero past og), for convFill.
func convRowInit(init []float32, groups, og, rows int) []float32 {
	v := make([]float32, groups*rows)
	for g := range groups {
		copy(v[g*rows:][:min(rows, og)], init[g*og:])
	}
	return v
}

// convPlan is the A operand of a forward convolution and how its k steps are
// sliced: block ((g·rp + r)·nSl + sl)·blk holds rows g·og + r·mr … of slice sl,
// pair-packed for bf16 and zero past the group's rows, past k and up to the k tile.
type convPlan[P float32 | uint32] struct {
	a            []P
	rp, nSl, per int // row panels per group, k slices and steps per slice
	steps, blk   int
}

// packWeights packs the weights w [O, k] of every group as the A operand.
func packWeights[E float32 | half.BFloat16, P float32 | uint32](o *convOps[E, P], s *convShape, w []E) convPlan[P] {
	var pl convPlan[P]
	pl.rp = gemmCeilDiv(s.og, o.mr)
	pl.steps = o.steps(s.k)
	pl.nSl, pl.per = o.slices(pl.steps)
	pl.blk = o.mr * o.pad(pl.per)
	pl.a = make([]P, s.Groups*pl.rp*pl.nSl*pl.blk)
	var zero E
	for g := range s.Groups {
		for r := range pl.rp {
			for i := range o.mr {
				row := r*o.mr + i
				if row >= s.og {
					continue // make leaves zeros
				}
				src := w[(g*s.og+row)*s.k:][:s.k]
				for p := range pl.steps {
					sl := p / pl.per
					d := pl.a[((g*pl.rp+r)*pl.nSl+sl)*pl.blk:][:pl.blk]
					v := zero
					if o.pairs {
						v, u := src[s.kidx[2*p]], zero
						if 2*p+1 < s.k {
							u = src[s.kidx[2*p+1]]
						}
						d[o.aAt(i, p-sl*pl.per)] = o.pack(v, u)
						continue
					}
					d[o.aAt(i, p-sl*pl.per)] = o.pack(src[s.kidx[p]], v)
				}
			}
		}
	}
	return pl
}

// convForward computes y = x ⋆ w + bias on the wide grid (see the top of the
// file); bias may be nil.
func convForward[E float32 | half.BFloat16, P float32 | uint32](o *convOps[E, P], y, x, w, bias []E, a backend.Conv2dArgs) {
	convForwardWith(o, y, x, w, bias, a, true)
}

// convForwardWith is convForward; without mayWiden bf16 never takes
// convForwardWiden (the tests' packed reference).
func convForwardWith[E float32 | half.BFloat16, P float32 | uint32](o *convOps[E, P], y, x, w, bias []E, a backend.Conv2dArgs, mayWiden bool) {
	if ob, ok := any(o).(*convOps[half.BFloat16, uint32]); ok {
		b := func(v []E) []half.BFloat16 { return any(v).([]half.BFloat16) }
		if mayWiden && convWidens(a) && ob.direct == nil {
			convForwardWiden(b(y), b(x), b(w), b(bias), a)
			return
		}
		if convStackable(ob, a) {
			convForwardStacked(ob, b(y), b(x), b(w), b(bias), a)
			return
		}
	}
	load := func(s *convShape, sc *convScratch[E, P], n int) { padImage(s, sc.xp, x[n*s.C*s.H*s.W:]) }
	yf, isF32 := any(y).([]float32)
	store := func(s *convShape, n, oc int, cr []float32) {
		yc := y[(n*s.O+oc)*s.OH*s.OW:][:s.OH*s.OW]
		if o.pairs {
			// The wide grid's output rows rounded straight into the plane
			// (convNarrow: o.store's rounding, the short rows' tails under
			// masks), one pass.
			convNarrow(any(yc).([]half.BFloat16), cr, s.wp, s.OW, s.OH)
			return
		}
		if isF32 {
			convRows(yf[(n*s.O+oc)*s.OH*s.OW:][:s.OH*s.OW], s.OW, cr, s.wp, s.OW, s.OH)
			return
		}
		for oh := range s.OH {
			o.store(yc[oh*s.OW:][:s.OW], cr[oh*s.wp:][:s.OW])
		}
	}
	var storeHalf func(s *convShape, n, oc int, cr []half.BFloat16)
	if yb, ok := any(y).([]half.BFloat16); ok {
		// The narrowing kernels' rows, already rounded: the wide grid's columns
		// dropped.
		storeHalf = func(s *convShape, n, oc int, cr []half.BFloat16) {
			convRows(yb[(n*s.O+oc)*s.OH*s.OW:][:s.OH*s.OW], s.OW, cr, s.wp, s.OW, s.OH)
		}
	}
	convForwardFn(o, w, bias, a, load, store, storeHalf)
}

// convUseNarrow lets convForwardFn take the narrowing kernels (convOps.directNarrow)
// where it may; the tests turn it off to compare.
var convUseNarrow = true

// convForwardFn is convForward reading image n into the zero-padded sc.xp with load
// (which may use sc.tmp) and storing output channel oc of image n, on the wide grid
// in cr (OH rows of wp), with store; or, where storeHalf is not nil, the ops have a
// narrowing kernel and the k steps are one slice, from the rows the kernel rounded
// to bf16, with storeHalf (the same bits: each element is its starting value plus
// the same sum, rounded as store rounds).
func convForwardFn[E float32 | half.BFloat16, P float32 | uint32](o *convOps[E, P], w, bias []E, a backend.Conv2dArgs,
	load func(s *convShape, sc *convScratch[E, P], n int), store func(s *convShape, n, oc int, cr []float32),
	storeHalf func(s *convShape, n, oc int, cr []half.BFloat16)) {
	s := newConvShape(a, o.pairs)
	pl := packWeights(o, &s, w)
	rp, steps, nSl, per := pl.rp, pl.steps, pl.nSl, pl.per
	npan := gemmCeilDiv(s.nq, o.nr)
	ldc := npan * o.nr
	direct := o.direct != nil
	var offB []int // byte offsets of the k steps' B rows, for o.direct
	maxOff := 0    // their maximum
	plane := s.hp * s.wp
	// The pair image of a group for the bf16 direct kernels. Paired k order:
	// the channel pairs interleaved, cg/2 planes and a zero tail that the last
	// panel of the last taps may read (discarded columns). Otherwise a pair
	// step pairs two taps d elements apart in the padded group (or a tap with
	// zero, d < 0), and each distance d of dists has a shifted pair image of
	// glen words, word i the pair of elements i and i+d.
	xppLen := s.cg/2*plane + (a.KW-1)*a.DilationW + 64
	glen := s.cg*plane + (a.KW-1)*a.DilationW + 64
	var dists []int
	if direct {
		offB = make([]int, steps)
		for p := range offB {
			v := s.offs[p]
			switch {
			case o.pairs && s.paired:
				// Pair step p is channels c, c+1 (c even) at one tap: in the
				// pair image, plane c/2 of the same tap.
				v = s.offs[2*p] - (2*p%s.cg)/2*plane
			case o.pairs:
				d := -1
				if 2*p+1 < s.k {
					d = s.offs[2*p+1] - s.offs[2*p]
				}
				at := slices.Index(dists, d)
				if at < 0 {
					at, dists = len(dists), append(dists, d)
				}
				v = at*glen + s.offs[2*p]
			}
			if v < 0 {
				panic("cpu: convForward: negative tap offset")
			}
			offB[p] = 4 * v
			maxOff = max(maxOff, 4*v)
		}
		if o.pairs && !s.paired {
			xppLen = len(dists) * glen
		}
	}
	init := make([]float32, s.O) // each row's start: the bias, or a zero that keeps acc's bits
	for i := range init {
		switch {
		case bias != nil:
			init[i] = toF32(bias[i])
		case o.pairs:
			init[i] = float32(math.Copysign(0, -1)) // as GemmBF16 with beta 0 stores acc itself
		}
	}
	rowInit := convRowInit(init, s.Groups, s.og, rp*o.mr)
	narrow := direct && o.directNarrow != nil && storeHalf != nil && nSl == 1 && convUseNarrow
	pool := convScratchPool[E, P]()
	ParallelFor(s.N, 1, func(lo, hi int) {
		sc := pool.Get().(*convScratch[E, P])
		defer pool.Put(sc)
		sc.xp = grow(sc.xp, s.xpLen)
		clear(sc.xp)
		sc.b = grow(sc.b, o.pad(per)*o.nr)
		if narrow {
			sc.c16 = grow(sc.c16, rp*o.mr*ldc)
		} else {
			sc.c = grow(sc.c, rp*o.mr*ldc)
		}
		if direct && o.pairs {
			sc.xpp = grow(sc.xpp, xppLen)
			clear(sc.xpp[:xppLen])
		}
		for n := lo; n < hi; n++ {
			load(&s, sc, n)
			for g := range s.Groups {
				xg := sc.xp[g*s.cg*plane:]
				var src []P // the direct kernels' B rows
				if direct {
					if o.pairs {
						xw := any(xg).([]half.BFloat16)
						xpp := any(sc.xpp).([]uint32)
						if s.paired {
							for cp := range s.cg / 2 {
								convInterleave(xpp[cp*plane:][:plane], xw[2*cp*plane:][:plane], xw[(2*cp+1)*plane:][:plane])
							}
						}
						for i, d := range dists {
							if d < 0 {
								convInterleave(xpp[i*glen:][:glen], xw[:glen], convZerosBF16(glen))
								continue
							}
							// Words past glen − d pair with past the group: they
							// stay zero (only discarded columns read them).
							convInterleave(xpp[i*glen:][:glen-d], xw[:glen-d], xw[d:glen])
						}
						src = sc.xpp[:xppLen]
					} else {
						src = any(xg).([]P)
					}
				}
				if !narrow {
					convFill(sc.c, ldc, rowInit[g*rp*o.mr:][:rp*o.mr], ldc, rp*o.mr)
				}
				for q := range npan {
					q0 := q * o.nr
					for sl := range nSl {
						p0, p1 := sl*per, min((sl+1)*per, steps)
						if direct {
							for r := range rp {
								ap := pl.a[((g*rp+r)*nSl+sl)*pl.blk:][:(p1-p0)*o.mr]
								if narrow {
									o.directNarrow(p1-p0, ap, src[q0:], offB[p0:p1], maxOff, sc.c16[r*o.mr*ldc+q0:], ldc, rowInit[(g*rp+r)*o.mr:][:o.mr])
									continue
								}
								o.direct(p1-p0, ap, src[q0:], offB[p0:p1], maxOff, sc.c[r*o.mr*ldc+q0:], ldc)
							}
							continue
						}
						kcs := o.pad(p1 - p0)
						bp := sc.b[:kcs*o.nr]
						clear(bp[(p1-p0)*o.nr:])
						for p := p0; p < p1; p++ {
							dst := bp[(p-p0)*o.nr:][:o.nr]
							if s.paired {
								// The pairs of channels 2j, 2j+1 at one tap, for
								// every j left at this tap: one call.
								cp, cpairs := p%(s.cg/2), s.cg/2
								run := min(p1-p, cpairs-cp)
								o.pairRun(bp[(p-p0)*o.nr:][:run*o.nr], xg[s.offs[2*p]+q0:], s.hp*s.wp, run)
								p += run - 1
								continue
							}
							if o.pairs {
								t0 := s.offs[2*p]
								d := -1
								if 2*p+1 < s.k {
									d = s.offs[2*p+1] - t0
								}
								o.tapRow(dst, xg[t0+q0:], d)
							} else {
								o.tapRow(dst, xg[s.offs[p]+q0:], -1)
							}
						}
						for r := range rp {
							ap := pl.a[((g*rp+r)*nSl+sl)*pl.blk:][:kcs*o.mr]
							o.kern(kcs, ap, bp, sc.c[r*o.mr*ldc+q0:], ldc)
						}
					}
				}
				for oc := range s.og {
					if narrow {
						storeHalf(&s, n, g*s.og+oc, sc.c16[oc*ldc:][:s.OH*s.wp])
						continue
					}
					store(&s, n, g*s.og+oc, sc.c[oc*ldc:][:s.OH*s.wp])
				}
			}
		}
	})
}

// fillF32 sets every element of x to v, by doubling copies (memmove's vector
// moves) rather than one store per element.
func fillF32(x []float32, v float32) {
	if len(x) == 0 {
		return
	}
	x[0] = v
	for n := 1; n < len(x); n *= 2 {
		copy(x[n:], x[:n])
	}
}

// toF32 widens a float32 or bf16 value.
func toF32[E float32 | half.BFloat16](v E) float32 {
	switch x := any(v).(type) {
	case float32:
		return x
	case half.BFloat16:
		return x.Float32()
	}
	panic("unreachable")
}

// inputGradArgs returns the forward geometry whose output is the input gradient of
// a (unit strides): gy as the image, O and C swapped, padding Dilation·(K−1) − Pad.
// ok is false when that padding would be negative.
func inputGradArgs(a backend.Conv2dArgs) (backend.Conv2dArgs, bool) {
	ph, pw := a.DilationH*(a.KH-1)-a.PadH, a.DilationW*(a.KW-1)-a.PadW
	if ph < 0 || pw < 0 {
		return a, false
	}
	d := a
	d.C, d.H, d.W, d.O = a.O, a.OH, a.OW, a.C
	d.PadH, d.PadW = ph, pw
	d.OH, d.OW = a.H, a.W
	return d, true
}

// flipWeights returns w [O, C/G, KH, KW] as [C, O/G, KH, KW], per group, with each
// kernel rotated by 180°: the weights of the input-gradient convolution.
func flipWeights[E any](w []E, a backend.Conv2dArgs) []E {
	cg, og, kk := a.C/a.Groups, a.O/a.Groups, a.KH*a.KW
	out := make([]E, len(w[:a.O*cg*kk]))
	for g := range a.Groups {
		for o := range og {
			for c := range cg {
				src := w[((g*og+o)*cg+c)*kk:][:kk]
				dst := out[((g*cg+c)*og+o)*kk:][:kk]
				for t, v := range src {
					dst[kk-1-t] = v
				}
			}
		}
	}
	return out
}

// convWeightGrad computes gw = Σ_n gy[n] ⋆ x[n] (see the top of the file). It
// reports false, leaving gw untouched, when an image holds Inf or NaN: the wide grid
// would multiply it by the zeros of the discarded columns, making NaN where the exact
// sum has none. Each task checks its own images, so the check is no serial pass.
func convWeightGrad[E float32 | half.BFloat16, P float32 | uint32](o *convOps[E, P], gw, x, gy []E, a backend.Conv2dArgs) bool {
	return convWeightGradFn(o, convWGradOf(o, gw, x, gy), a)
}

// convWeightGradFn is convWeightGrad reading and writing through io.
func convWeightGradFn[E float32 | half.BFloat16, P float32 | uint32](o *convOps[E, P], io convWGradIO[E, P], a backend.Conv2dArgs) bool {
	s := newConvShape(a, false)
	if convTapsFirst(o, &s) {
		return convWeightGradTapsFn(o, io, &s)
	}
	return convWeightGradRowsFn(o, io, &s)
}

// convWGradIO is where the weight gradient reads its operands and writes gw.
type convWGradIO[E float32 | half.BFloat16, P float32 | uint32] struct {
	// image copies image n into sc.xp, whose padding and tail are zero, and
	// reports true; or reports false when the image holds Inf or NaN.
	image func(s *convShape, sc *convScratch[E, P], n int) bool
	// gy copies gy of image n's group g into sc.gy on the wide grid, output
	// channel oc at row oc·ldq (OH rows of wp; the discarded columns stay zero).
	gy func(s *convShape, sc *convScratch[E, P], ldq, n, g int)
	// store rounds row r of gw from its float32 sums.
	store func(r int, row []float32)
}

// convWGradOf returns the io of operands held in E itself.
func convWGradOf[E float32 | half.BFloat16, P float32 | uint32](o *convOps[E, P], gw, x, gy []E) convWGradIO[E, P] {
	return convWGradIO[E, P]{
		image: func(s *convShape, sc *convScratch[E, P], n int) bool {
			img := x[n*s.C*s.H*s.W:][:s.C*s.H*s.W]
			if !o.finite(img) {
				return false
			}
			padImage(s, sc.xp, img)
			return true
		},
		gy: func(s *convShape, sc *convScratch[E, P], ldq, n, g int) {
			for oc := range s.og {
				convRows(sc.gy[oc*ldq:], s.wp, gy[(n*s.O+g*s.og+oc)*s.OH*s.OW:], s.OW, s.OW, s.OH)
			}
		},
		store: func(r int, row []float32) { o.store(gw[r*len(row):][:len(row)], row) },
	}
}

// convWeightGradRows is convWeightGrad with the output channels as the rows of the
// product and the taps as its columns.
func convWeightGradRows[E float32 | half.BFloat16, P float32 | uint32](o *convOps[E, P], gw, x, gy []E, s *convShape) bool {
	return convWeightGradRowsFn(o, convWGradOf(o, gw, x, gy), s)
}

// convWeightGradRowsFn is convWeightGradRows reading and writing through io.
func convWeightGradRowsFn[E float32 | half.BFloat16, P float32 | uint32](o *convOps[E, P], io convWGradIO[E, P], s *convShape) bool {
	rp := gemmCeilDiv(s.og, o.mr)
	npT := gemmCeilDiv(s.k, o.nr)
	ldw := npT * o.nr
	partLen := s.Groups * rp * o.mr * ldw
	// Pixels of one image on the wide grid, even for pairs; equal slices.
	ldq := s.nq + s.nq%2
	nSl := gemmCeilDiv(ldq, convWGradPixels)
	per := gemmCeilDiv(ldq, nSl)
	per += per % 2
	// Fewer chunks for large weights, so that the partial sums stay within
	// convWGradPartials floats (a count that depends on the shapes alone).
	chunks := max(1, min(s.N, convWGradChunks, convWGradPartials/partLen))
	parts := convParts(chunks * partLen)
	defer convPartsPool.Put(&parts)
	pool := convScratchPool[E, P]()
	var nonFinite atomic.Bool
	ParallelFor(chunks, 1, func(lo, hi int) {
		sc := pool.Get().(*convScratch[E, P])
		defer pool.Put(sc)
		sc.xp = grow(sc.xp, s.xpLen)
		clear(sc.xp)
		sc.gy = grow(sc.gy, s.og*ldq+per)
		clear(sc.gy)
		maxSteps := o.pad(o.steps(per))
		sc.a = grow(sc.a, rp*o.mr*maxSteps)
		sc.b = grow(sc.b, o.nr*maxSteps)
		offs := make([]int, o.nr)
		for ch := lo; ch < hi; ch++ {
			part := parts[ch*partLen:][:partLen]
			for n := ch * s.N / chunks; n < (ch+1)*s.N/chunks; n++ {
				if nonFinite.Load() || !io.image(s, sc, n) {
					nonFinite.Store(true)
					return
				}
				for g := range s.Groups {
					// gy of the group on the wide grid; the discarded columns stay zero.
					io.gy(s, sc, ldq, n, g)
					pg := part[g*rp*o.mr*ldw:]
					xg := g * s.cg * s.hp * s.wp
					for q0 := 0; q0 < ldq; q0 += per {
						pix := min(per, ldq-q0)
						st := o.steps(pix)
						kcs := o.pad(st)
						for r := range rp {
							ap := sc.a[r*o.mr*kcs:][:o.mr*kcs]
							if o.rowsA {
								o.rows(ap, sc.gy[r*o.mr*ldq+q0:], ldq, st, min(o.mr, s.og-r*o.mr), o.mr)
								continue
							}
							o.rows(ap, sc.gy[r*o.mr*ldq+q0:], ldq, st, min(o.mr, s.og-r*o.mr), o.mr)
							clear(ap[st*o.mr:])
						}
						for jt := range npT {
							w := min(o.nr, s.k-jt*o.nr)
							for j := range w {
								offs[j] = xg + s.offs[jt*o.nr+j] + q0
							}
							bp := sc.b[:kcs*o.nr]
							o.gather(bp, sc.xp, offs, st, w, o.nr)
							clear(bp[st*o.nr:])
							for r := range rp {
								o.kern(kcs, sc.a[r*o.mr*kcs:][:o.mr*kcs], bp, pg[r*o.mr*ldw+jt*o.nr:], ldw)
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
	// Sum the chunks in order and round once, rows in parallel.
	ParallelFor(s.O, max(1, 4096/max(chunks*s.k, 1)), func(lo, hi int) {
		row := make([]float32, s.k)
		for r := lo; r < hi; r++ {
			g, oc := r/s.og, r%s.og
			src := parts[(g*rp*o.mr+oc)*ldw:][:s.k]
			copy(row, src)
			for ch := 1; ch < chunks; ch++ {
				vecBinary(vecAdd, row, row, parts[ch*partLen+(g*rp*o.mr+oc)*ldw:][:s.k])
			}
			io.store(r, row)
		}
	})
	return true
}

// convPartsPool holds the weight gradient's partial sums between calls: a fresh
// megabyte a call made the garbage collector run (and preempt the workers, AMX
// state and all) every few steps.
var convPartsPool sync.Pool

// convParts returns n zero float32s from convPartsPool.
func convParts(n int) []float32 {
	if p, ok := convPartsPool.Get().(*[]float32); ok && cap(*p) >= n {
		s := (*p)[:n]
		clear(s)
		return s
	}
	return make([]float32, n)
}

// Conv2d implements backend.Convolver for unit-stride float32, float16 (on the
// float32 kernels, conv_f16.go) and (where the CPU has VDPBF16PS) bf16 convolutions.
func (b *Backend) Conv2d(y, x, w, bias backend.Storage, a backend.Conv2dArgs) bool {
	X, W, Y := st(x), st(w), st(y)
	if !convSupported(a, X.dt) {
		return false
	}
	convCheck("Conv2d", a, X, W, Y, a.N*a.C*a.H*a.W, a.N*a.O*a.OH*a.OW)
	var B *storage
	if bias != nil {
		B = st(bias)
		if B.dt != X.dt || B.n < a.O {
			panic(fmt.Sprintf("cpu: Conv2d: bias is %s[%d], want %s[%d]", B.dt, B.n, X.dt, a.O))
		}
	}
	if X.dt == backend.Float32 {
		var bs []float32
		if B != nil {
			bs = B.f32()
		}
		convForward(convF32For(a.O/a.Groups), Y.f32(), X.f32(), W.f32(), bs, a)
		return true
	}
	if X.dt == backend.Float16 {
		var b32 []float32
		if B != nil {
			b32 = widenF16(B.f16()[:a.O])
		}
		convForwardF16(Y.f16(), X.f16(), widenF16(W.f16()[:a.O*(a.C/a.Groups)*a.KH*a.KW]), b32, a)
		return true
	}
	var bs []half.BFloat16
	if B != nil {
		bs = B.bf16()
	}
	convForward(convBF16For(a.O/a.Groups), Y.bf16(), X.bf16(), W.bf16(), bs, a)
	return true
}

// Conv2dInputGrad implements backend.Convolver: the forward kernel on gy with the
// flipped, transposed weights (unit strides, padding at most Dilation·(K−1)).
func (b *Backend) Conv2dInputGrad(gx, gy, w backend.Storage, a backend.Conv2dArgs) bool {
	GX, GY, W := st(gx), st(gy), st(w)
	if !convSupported(a, GY.dt) {
		return false
	}
	d, ok := inputGradArgs(a)
	if !ok {
		return false
	}
	convCheck("Conv2dInputGrad", a, GX, W, GY, a.N*a.C*a.H*a.W, a.N*a.O*a.OH*a.OW)
	if GY.dt == backend.Float32 {
		convForward(convF32For(a.C/a.Groups), GX.f32(), GY.f32(), flipWeights(W.f32(), a), nil, d)
		return true
	}
	if GY.dt == backend.Float16 {
		convForwardF16(GX.f16(), GY.f16(), widenF16(flipWeights(W.f16(), a)), nil, d)
		return true
	}
	convForward(convBF16For(d.O/d.Groups), GX.bf16(), GY.bf16(), flipWeights(W.bf16(), a), nil, d)
	return true
}

// Conv2dWeightGrad implements backend.Convolver. An image holding Inf or NaN takes
// the Im2Col path (see convWeightGrad).
func (b *Backend) Conv2dWeightGrad(gw, x, gy backend.Storage, a backend.Conv2dArgs) bool {
	GW, X, GY := st(gw), st(x), st(gy)
	if !convSupported(a, X.dt) {
		return false
	}
	convCheck("Conv2dWeightGrad", a, X, GW, GY, a.N*a.C*a.H*a.W, a.N*a.O*a.OH*a.OW)
	if X.dt == backend.Float32 {
		return convWeightGrad(convF32WGrad(a.O/a.Groups), GW.f32(), X.f32(), GY.f32(), a)
	}
	if X.dt == backend.Float16 {
		return convWeightGradF16(GW.f16(), X.f16(), GY.f16(), a)
	}
	return convWeightGrad(convBF16WGrad(a.O/a.Groups), GW.bf16(), X.bf16(), GY.bf16(), a)
}

// convCheck panics unless the image, weight and output storages share a dtype and
// hold the geometry's elements.
func convCheck(op string, a backend.Conv2dArgs, img, w, out *storage, nImg, nOut int) {
	if w.dt != img.dt || out.dt != img.dt {
		panic(fmt.Sprintf("cpu: %s: operands %s, %s, %s must share one dtype", op, img.dt, w.dt, out.dt))
	}
	nW := a.O * (a.C / a.Groups) * a.KH * a.KW
	if img.n < nImg || out.n < nOut || w.n < nW {
		panic(fmt.Sprintf("cpu: %s: storages of %d, %d and %d elements are too small for the geometry (%d, %d, %d)",
			op, img.n, w.n, out.n, nImg, nW, nOut))
	}
}

// allFiniteBF16 reports whether no element of x is Inf or NaN.
func allFiniteBF16(x []half.BFloat16) bool { return half.AllFiniteBF16(x) }
