package tensor

import (
	"github.com/gamp-ml/gamp/backend"
)

var (
	opConv2d    = defOp("conv2d", LowerPrecision)
	opMaxPool2d = defOp("max_pool2d", Passthrough)
	opAvgPool2d = defOp("avg_pool2d", Passthrough)
)

// ConvOptions are the geometry options of Conv2d. Zero values select PyTorch's
// defaults: stride 1, padding 0, dilation 1, one group.
type ConvOptions struct {
	Stride, Padding, Dilation [2]int
	Groups                    int
}

// Conv2d is the 2-D cross-correlation of torch.nn.functional.conv2d: x [N, C, H, W],
// w [O, C/groups, KH, KW] and b [O] (nil: no bias) give [N, O, OH, OW] with
// OH = ⌊(H + 2·padding − dilation·(KH−1) − 1)/stride⌋ + 1 (OW likewise). Half inputs
// accumulate in float32; under autocast it runs in the low dtype. It runs the backend's
// direct kernels (backend.Convolver) where they cover the geometry, and otherwise
// unfolds x with Im2Col and runs one batched GEMM per group; either way a convolution
// holds on to no more than x and w for backward.
func Conv2d(x, w, b *Tensor, o ConvOptions) *Tensor {
	return resolve(opConv2d, x, w, b).conv2d(x, w, b, o)
}

// convGeom is a validated Conv2d geometry.
type convGeom struct {
	backend.ConvArgs
	O, G int
	// pointwise: a 1×1 kernel with stride 1 and no padding, whose Im2Col is x itself.
	pointwise bool
}

// ckk is the number of rows of the unfolded input, C·KH·KW; ohw the number of columns.
func (g *convGeom) ckk() int { return g.C * g.KH * g.KW }
func (g *convGeom) ohw() int { return g.OH * g.OW }

// orDefault returns v, or def when v is zero.
func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// convOutSize is PyTorch's output length of a convolution along one axis (≤ 0 when
// the dilated kernel does not fit in the padded input).
func convOutSize(in, k, stride, pad, dil int) int {
	return (in+2*pad-dil*(k-1)-1)/stride + 1
}

func (c *Context) convGeometry(in []*Tensor, o ConvOptions) convGeom {
	x, w, b := in[0], in[1], in[2]
	const name = "conv2d"
	if x.Dim() != 4 {
		fail(name, in, "input must be 4-d [N, C, H, W], got %d-d (Unsqueeze(0) makes a batch of one image)", x.Dim())
	}
	if w.Dim() != 4 {
		fail(name, in, "weight must be 4-d [out channels, in channels/groups, KH, KW], got %d-d", w.Dim())
	}
	if !x.dtype.IsFloat() || w.dtype != x.dtype || (b != nil && b.dtype != x.dtype) {
		fail(name, in, "input, weight and bias must share one floating dtype; Cast them (or run under autocast)")
	}
	g := convGeom{G: orDefault(o.Groups, 1), O: w.shape[0]}
	g.N, g.C, g.H, g.W = x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	g.KH, g.KW = w.shape[2], w.shape[3]
	g.StrideH, g.StrideW = orDefault(o.Stride[0], 1), orDefault(o.Stride[1], 1)
	g.DilationH, g.DilationW = orDefault(o.Dilation[0], 1), orDefault(o.Dilation[1], 1)
	g.PadH, g.PadW = o.Padding[0], o.Padding[1]
	switch {
	case g.G < 1:
		fail(name, in, "groups %d must be at least 1 (0 means 1)", g.G)
	case g.StrideH < 1 || g.StrideW < 1:
		fail(name, in, "stride %v must be positive (0 means 1)", o.Stride)
	case g.DilationH < 1 || g.DilationW < 1:
		fail(name, in, "dilation %v must be positive (0 means 1)", o.Dilation)
	case g.PadH < 0 || g.PadW < 0:
		fail(name, in, "padding %v must not be negative", o.Padding)
	case g.KH < 1 || g.KW < 1 || g.O < 1:
		fail(name, in, "weight shape %v has an empty dimension", w.shape)
	case g.C%g.G != 0:
		fail(name, in, "input channels %d are not divisible by groups %d", g.C, g.G)
	case g.O%g.G != 0:
		fail(name, in, "output channels %d (weight dimension 0) are not divisible by groups %d", g.O, g.G)
	case w.shape[1]*g.G != g.C:
		fail(name, in, "weight expects %d input channels (%d per group × %d groups) but the input has %d; check the layer's in_channels or the input layout [N, C, H, W]", w.shape[1]*g.G, w.shape[1], g.G, g.C)
	case b != nil && (b.Dim() != 1 || b.shape[0] != g.O):
		fail(name, in, "bias must be [%d] (one per output channel), got %v", g.O, b.shape)
	}
	g.OH = convOutSize(g.H, g.KH, g.StrideH, g.PadH, g.DilationH)
	g.OW = convOutSize(g.W, g.KW, g.StrideW, g.PadW, g.DilationW)
	if g.OH < 1 || g.OW < 1 {
		fail(name, in, "the kernel %d×%d (dilation %d×%d) is larger than the padded input %d×%d; pad the input or use a smaller kernel",
			g.KH, g.KW, g.DilationH, g.DilationW, g.H+2*g.PadH, g.W+2*g.PadW)
	}
	g.pointwise = g.KH == 1 && g.KW == 1 && g.StrideH == 1 && g.StrideW == 1 && g.PadH == 0 && g.PadW == 0
	return g
}

// gemmOperand is a batch of matrices read in place from a dense tensor: element (i, j)
// of item k lies at off + k·stride + i·ld + j, or + j·ld + i when trans is set.
type gemmOperand struct {
	t               *Tensor
	off, ld, stride int
	trans           bool
}

// gemmRaw computes C[i] = op(A[i])·op(B[i]) + beta·C[i] for i < batch, with op(A)
// m×k and op(B) k×n. Unlike gemmInto it takes explicit strides for C, so one call can
// write a group's channels inside a wider output.
func gemmRaw(batch, m, n, k int, a, b, out gemmOperand, beta float32) {
	out.t.ref.b.MatMul(backend.MatMulArgs{
		A: a.t.ref.s, B: b.t.ref.s, C: out.t.ref.s,
		OffA: a.off, OffB: b.off, OffC: out.off,
		Batch: batch, M: m, N: n, K: k,
		TransA: a.trans, TransB: b.trans,
		LDA: a.ld, LDB: b.ld, LDC: out.ld,
		StrideA: a.stride, StrideB: b.stride, StrideC: out.stride,
		Alpha: 1, Beta: beta,
	})
}

// im2col returns x unfolded to [N, C·KH·KW, OH·OW] (x itself for a pointwise kernel).
func (c *Context) im2col(xd *Tensor, g *convGeom) *Tensor {
	if g.pointwise {
		return xd
	}
	col := allocOut(c, xd.dtype, xd.device, Shape{g.N, g.ckk(), g.ohw()})
	xd.ref.b.Im2Col(col.ref.s, xd.ref.s, g.ConvArgs)
	return col
}

func (c *Context) conv2d(x, w, b *Tensor, o ConvOptions) *Tensor {
	in := c.prep(opConv2d, x, w, b)
	x, w, b = in[0], in[1], in[2]
	g := c.convGeometry(in, o)
	xd, wd := x.dense(c), w.dense(c)
	out := allocOut(c, x.dtype, x.device, Shape{g.N, g.O, g.OH, g.OW})
	cv, _ := x.ref.b.(backend.Convolver)
	if cv == nil || !c.convDirect(cv, out, xd, wd, b, &g) {
		c.convIm2Col(out, xd, wd, b, &g)
	}

	return c.record(opConv2d, out, in, func(bc *Context, gy *Tensor) []*Tensor {
		gd := gy.dense(bc)
		var gx, gw, gb *Tensor
		if b != nil && b.requiresGrad {
			gb = bc.reduceRaw(backend.Sum, gd, []int{0, 2, 3}, false)
		}
		if w.requiresGrad {
			gw = allocOut(bc, xd.dtype, xd.device, w.shape)
			if cv == nil || !cv.Conv2dWeightGrad(gw.ref.s, xd.ref.s, gd.ref.s, g.direct()) {
				bc.convWeightGrad(gw, xd, gd, &g)
			}
		}
		if x.requiresGrad {
			gx = allocOut(bc, x.dtype, x.device, x.shape)
			if cv == nil || !cv.Conv2dInputGrad(gx.ref.s, gd.ref.s, wd.ref.s, g.direct()) {
				bc.convInputGrad(gx, gd, wd, &g)
			}
		}
		return []*Tensor{gx, gw, gb}
	})
}

// direct returns g as the arguments of a backend.Convolver.
func (g *convGeom) direct() backend.Conv2dArgs {
	return backend.Conv2dArgs{ConvArgs: g.ConvArgs, O: g.O, Groups: g.G}
}

// convDirect runs the forward convolution on the backend's Convolver, reporting
// false when it has no kernel for the geometry.
func (c *Context) convDirect(cv backend.Convolver, out, xd, wd, b *Tensor, g *convGeom) bool {
	var bs backend.Storage
	var bd *Tensor
	if b != nil {
		bd = b.dense(c)
		bs = bd.ref.s
		defer releaseTemp(bd, b)
	}
	return cv.Conv2d(out.ref.s, xd.ref.s, wd.ref.s, bs, g.direct())
}

// convIm2Col computes the forward convolution into out by unfolding xd and running
// one batched GEMM per group.
func (c *Context) convIm2Col(out, xd, wd, b *Tensor, g *convGeom) {
	og, cg := g.O/g.G, g.ckk()/g.G // output channels and unfolded rows per group
	ohw := g.ohw()
	beta := float32(0)
	if b != nil {
		// Pre-fill with the bias broadcast over N, OH, OW; the GEMMs add onto it.
		bv := backend.View{S: b.ref.s, Offset: b.offset, Shape: out.shape, Strides: []int{0, b.strides[0], 0, 0}}
		out.ref.b.Copy(out.bview(), bv)
		beta = 1
	}
	col := c.im2col(xd, g)
	for k := 0; k < g.G; k++ {
		// out[n, group k] = W_k [og, cg] · col[n, rows of group k] [cg, ohw].
		gemmRaw(g.N, og, ohw, cg,
			gemmOperand{t: wd, off: k * og * cg, ld: cg},
			gemmOperand{t: col, off: k * cg * ohw, ld: ohw, stride: g.ckk() * ohw},
			gemmOperand{t: out, off: k * og * ohw, ld: ohw, stride: g.O * ohw}, beta)
	}
	releaseTemp(col, xd)
}

// convInputGrad computes gx from gd on the Im2Col path: gcol[n, group k] =
// W_kᵀ · gy[n, group k], folded back onto the image.
func (c *Context) convInputGrad(gx, gd, wd *Tensor, g *convGeom) {
	og, cg, ohw := g.O/g.G, g.ckk()/g.G, g.ohw()
	gcol := gx
	if !g.pointwise {
		gcol = allocOut(c, gx.dtype, gx.device, Shape{g.N, g.ckk(), ohw})
	}
	for k := 0; k < g.G; k++ {
		gemmRaw(g.N, cg, ohw, og,
			gemmOperand{t: wd, off: k * og * cg, ld: cg, trans: true},
			gemmOperand{t: gd, off: k * og * ohw, ld: ohw, stride: g.O * ohw},
			gemmOperand{t: gcol, off: k * cg * ohw, ld: ohw, stride: g.ckk() * ohw}, 0)
	}
	if gcol != gx {
		gx.ref.b.Col2Im(gx.ref.s, gcol.ref.s, g.ConvArgs)
		gcol.Release()
	}
}

// convWeightGrad writes gW = Σ_n gy[n]·col[n]ᵀ for every group into gw on the Im2Col
// path. The batch is folded into the GEMM's inner dimension (gy as [O, N·OH·OW], col
// as [C·KH·KW, N·OH·OW]), so each element is one float32-accumulated dot product:
// deterministic, and rounded to a half dtype once rather than once per image.
func (c *Context) convWeightGrad(gw, xd, gd *Tensor, g *convGeom) {
	og, cg, ohw := g.O/g.G, g.ckk()/g.G, g.ohw()
	col := c.im2col(xd, g)
	colT, gT := col, gd
	if g.N > 1 {
		colT = c.batchInner(col, g.N, g.ckk(), ohw)
		releaseTemp(col, xd)
		gT = c.batchInner(gd, g.N, g.O, ohw)
	}
	k := g.N * ohw
	// Batched over the groups: gW_k [og, cg] = gT_k [og, k] · colT_kᵀ [k, cg].
	gemmRaw(g.G, og, cg, k,
		gemmOperand{t: gT, ld: k, stride: og * k},
		gemmOperand{t: colT, ld: k, stride: cg * k, trans: true},
		gemmOperand{t: gw, ld: cg, stride: og * cg}, 0)
	releaseTemp(colT, xd)
	releaseTemp(gT, gd)
}

// batchInner copies a dense [n, rows, cols] tensor to a dense [rows, n·cols] one.
func (c *Context) batchInner(t *Tensor, n, rows, cols int) *Tensor {
	out := allocOut(c, t.dtype, t.device, Shape{rows, n * cols})
	src := backend.View{S: t.ref.s, Offset: t.offset, Shape: []int{rows, n, cols}, Strides: []int{cols, rows * cols, 1}}
	t.ref.b.Copy(backend.Dense(out.ref.s, 0, rows, n, cols), src)
	return out
}

// --- pooling

// MaxPool2d is torch.nn.functional.max_pool2d on x [N, C, H, W]: the maximum of each
// kernel window (padding never wins; NaN always does). A zero stride component takes
// the kernel's; padding may be at most half the kernel. The output size uses floor
// mode. Backward routes each gradient to the position of its window's maximum.
func MaxPool2d(x *Tensor, kernel, stride, padding [2]int) *Tensor {
	return resolve(opMaxPool2d, x).pool2d(opMaxPool2d, x, kernel, stride, padding, false)
}

// AvgPool2d is torch.nn.functional.avg_pool2d on x [N, C, H, W] (floor mode). With
// countIncludePad the padded positions count in each window's divisor, as PyTorch's
// default; without it only the input positions do.
func AvgPool2d(x *Tensor, kernel, stride, padding [2]int, countIncludePad bool) *Tensor {
	return resolve(opAvgPool2d, x).pool2d(opAvgPool2d, x, kernel, stride, padding, countIncludePad)
}

func (c *Context) pool2d(op *Op, x *Tensor, kernel, stride, padding [2]int, includePad bool) *Tensor {
	in := c.prep(op, x)
	x = in[0]
	if x.Dim() != 4 {
		fail(op.Name(), in, "input must be 4-d [N, C, H, W], got %d-d (Unsqueeze(0) makes a batch of one image)", x.Dim())
	}
	if !x.dtype.IsFloat() {
		fail(op.Name(), in, "needs a floating-point tensor; Cast it first")
	}
	a := backend.PoolArgs{
		Kind: backend.AvgPool, N: x.shape[0], C: x.shape[1], H: x.shape[2], W: x.shape[3],
		KH: kernel[0], KW: kernel[1],
		StrideH: orDefault(stride[0], kernel[0]), StrideW: orDefault(stride[1], kernel[1]),
		PadH: padding[0], PadW: padding[1], CountIncludePad: includePad,
	}
	if op == opMaxPool2d {
		a.Kind = backend.MaxPool
	}
	switch {
	case a.KH < 1 || a.KW < 1:
		fail(op.Name(), in, "kernel %v must be at least 1×1", kernel)
	case a.StrideH < 1 || a.StrideW < 1:
		fail(op.Name(), in, "stride %v must be positive (0 means the kernel size)", stride)
	case a.PadH < 0 || a.PadW < 0 || 2*a.PadH > a.KH || 2*a.PadW > a.KW:
		fail(op.Name(), in, "padding %v must be between 0 and half the kernel %v", padding, kernel)
	case a.H+2*a.PadH < a.KH || a.W+2*a.PadW < a.KW:
		fail(op.Name(), in, "the kernel %v is larger than the padded input %d×%d", kernel, a.H+2*a.PadH, a.W+2*a.PadW)
	}
	a.OH = (a.H+2*a.PadH-a.KH)/a.StrideH + 1
	a.OW = (a.W+2*a.PadW-a.KW)/a.StrideW + 1
	xd := x.dense(c)
	out := allocOut(c, x.dtype, x.device, Shape{a.N, a.C, a.OH, a.OW})
	if r, ok := x.ref.b.(backend.MaxPoolRecomputer); ok && a.Kind == backend.MaxPool {
		// Backward finds the maxima again in the input, which the graph holds anyway,
		// rather than keeping an Int64 index.
		r.MaxPool(out.ref.s, xd.ref.s, a)
		out = c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
			gd := g.dense(bc)
			gx := allocOut(bc, g.dtype, g.device, x.shape)
			g.ref.b.(backend.MaxPoolRecomputer).MaxPoolBackward(gx.ref.s, gd.ref.s, xd.ref.s, a)
			return []*Tensor{gx}
		})
		if out.node == nil {
			releaseTemp(xd, x)
		}
		return out
	}
	var idx *Tensor
	var idxS backend.Storage
	if a.Kind == backend.MaxPool {
		idx = allocOut(c, Int64, x.device, out.shape)
		idxS = idx.ref.s
	}
	x.ref.b.Pool(out.ref.s, idxS, xd.ref.s, a)
	releaseTemp(xd, x)
	out = c.record(op, out, in, func(bc *Context, g *Tensor) []*Tensor {
		gd := g.dense(bc)
		gx := allocOut(bc, g.dtype, g.device, x.shape)
		g.ref.b.PoolBackward(gx.ref.s, gd.ref.s, idxS, a)
		return []*Tensor{gx}
	})
	if out.node == nil && idx != nil {
		idx.Release() // no backward will read it
	}
	return out
}
