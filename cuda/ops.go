package cuda

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/cuda/internal/cu"
	"github.com/gamp-ml/gamp/kernels"
)

// The kernels of backend.Backend on the GPU. Each method validates on the caller's
// goroutine (misuse panics there, naming the op), then queues one or a few kernels on
// the compute stream. Kernels compute what the CPU backend computes, with the same
// formulas (package kernels); the conformance suite checks them against float64
// references with per-dtype tolerances.

// ptr is the device address of s, or 0 for a nil storage (an optional operand).
func (b *Backend) ptr(s backend.Storage) uint64 {
	if s == nil {
		return 0
	}
	return b.st(s).blk.addr
}

func (b *Backend) fail(op, format string, args ...any) {
	panic(fmt.Sprintf("cuda:%d: %s: %s", b.d.index, op, fmt.Sprintf(format, args...)))
}

func (b *Backend) checkLen(op, what string, s *Storage, n int) {
	if n < 0 || s.n < n {
		b.fail(op, "%s holds %d elements, need %d", what, s.n, n)
	}
}

func (b *Backend) checkFloat(op, what string, s *Storage) {
	if !s.dt.IsFloat() {
		b.fail(op, "%s is %s, want a floating dtype", what, s.dt)
	}
}

// layouts converts views sharing one shape into kernel Layouts.
func (b *Backend) layouts(op string, views ...backend.View) ([]kernels.Layout, int64) {
	for i, v := range views {
		st := b.st(v.S)
		if len(v.Shape) != len(v.Strides) {
			b.fail(op, "view %d has %d strides for %d dimensions", i, len(v.Strides), len(v.Shape))
		}
		// The farthest element the view reaches must lie in its storage.
		lo, hi := v.Offset, v.Offset
		empty := false
		for k, d := range v.Shape {
			if d == 0 {
				empty = true
			}
			if d > 0 {
				if s := v.Strides[k]; s >= 0 {
					hi += (d - 1) * s
				} else {
					lo += (d - 1) * s
				}
			}
		}
		if !empty && (lo < 0 || hi >= st.n) {
			b.fail(op, "view %d (shape %v, strides %v, offset %d) reaches outside its storage of %d elements", i, v.Shape, v.Strides, v.Offset, st.n)
		}
	}
	ls, n, err := kernels.NewLayouts(views...)
	if err != nil {
		b.fail(op, "%v", err)
	}
	return ls, n
}

// temp allocates scratch storage for the duration of an op; it panics with the typed
// OOM error when the device is full (tensor.CatchOOM recovers it).
func (b *Backend) temp(dt backend.DType, n int) *Storage {
	s, err := b.Alloc(dt, n)
	if err != nil {
		panic(err)
	}
	return s.(*Storage)
}

// as returns v converted to dtype dt (a dense copy when it differs) and a release func.
func (b *Backend) as(v backend.View, dt backend.DType) (backend.View, func()) {
	if v.S.DType() == dt {
		return v, func() {}
	}
	t := b.temp(dt, v.Numel())
	d := backend.Dense(t, 0, v.Shape...)
	b.Copy(d, v)
	return d, func() { b.Free(t) }
}

// Copy implements backend.Backend: a dense copy of one dtype is a device memcpy, the
// rest the copy kernel (strided, broadcasting, converting with round to nearest even).
func (b *Backend) Copy(dst, src backend.View) {
	d, s := b.st(dst.S), b.st(src.S)
	ls, n := b.layouts("Copy", dst, src)
	if n == 0 {
		return
	}
	if d.dt == s.dt && ls[0].NDim == 1 && ls[0].Stride[0] == 1 && ls[1].Stride[0] == 1 {
		bytes := uint64(n) * uint64(d.dt.Size())
		// Addresses now: the storages may be freed (on this goroutine) before the
		// worker runs the copy.
		dp, sp := d.at(dst.Offset), s.at(src.Offset)
		b.d.post(func() {
			b.d.must("Copy", cu.MemcpyDtoDAsync(dp, sp, bytes, b.d.compute))
		})
		return
	}
	b.launch(kernels.Name("copy", d.dt, s.dt), n, d.blk.addr, s.blk.addr, n, ls[0], ls[1])
}

// Fill implements backend.Backend.
func (b *Backend) Fill(dst backend.View, v float64) {
	d := b.st(dst.S)
	ls, n := b.layouts("Fill", dst)
	b.launch(kernels.Name("fill", d.dt), n, d.blk.addr, n, ls[0], v)
}

// Arange implements backend.Backend.
func (b *Backend) Arange(dst backend.Storage, n int, start, step float64) {
	d := b.st(dst)
	b.checkLen("Arange", "dst", d, n)
	b.launch(kernels.Name("arange", d.dt), int64(n), d.blk.addr, int64(n), start, step)
}

func (b *Backend) random(op, family string, dst backend.Storage, n int, r backend.RNG, p0, p1 float64) {
	d := b.st(dst)
	b.checkLen(op, "dst", d, n)
	b.checkFloat(op, "dst", d)
	b.launch(kernels.Name(family, d.dt), int64(n), d.blk.addr, int64(n), r.Seed, r.Offset, p0, p1)
}

// RandUniform implements backend.Backend with the CPU backend's counter-based
// generator: the same (seed, offset) gives the same numbers on both devices.
func (b *Backend) RandUniform(dst backend.Storage, n int, r backend.RNG, lo, hi float64) {
	b.random("RandUniform", "rand_uniform", dst, n, r, lo, hi)
}

// RandNormal implements backend.Backend.
func (b *Backend) RandNormal(dst backend.Storage, n int, r backend.RNG, mean, std float64) {
	b.random("RandNormal", "rand_normal", dst, n, r, mean, std)
}

// Bernoulli implements backend.Backend (dropout masks replay in checkpoint recompute).
func (b *Backend) Bernoulli(dst backend.Storage, n int, r backend.RNG, p, scale float64) {
	b.random("Bernoulli", "bernoulli", dst, n, r, p, scale)
}

// Unary implements backend.Backend.
func (b *Backend) Unary(op backend.UnaryOp, dst, src backend.Storage, n int, p0, p1 float64) {
	if int(op) >= backend.NumUnaryOps {
		b.fail("Unary", "unknown op %d", op)
	}
	d, s := b.st(dst), b.st(src)
	b.checkLen("Unary", "dst", d, n)
	b.checkLen("Unary", "src", s, n)
	b.checkFloat("Unary", "dst", d)
	b.checkFloat("Unary", "src", s)
	if s.dt != d.dt {
		rt := runDType(d.dt, s.dt)
		v, free := b.as(backend.Dense(s, 0, n), rt)
		defer free()
		if rt != d.dt {
			// The CPU backend computes in rt, wider than dst, and rounds once into dst.
			t := b.temp(rt, n)
			defer b.Free(t)
			b.Unary(op, t, v.S, n, p0, p1)
			b.Copy(backend.Dense(d, 0, n), backend.Dense(t, 0, n))
			return
		}
		s = v.S.(*Storage)
	}
	b.launch(kernels.Name("unary", d.dt), int64(n), d.blk.addr, s.blk.addr, int64(n), int32(op), p0, p1)
}

// UnaryBackward implements backend.Backend.
func (b *Backend) UnaryBackward(op backend.UnaryOp, gx, gy, x, y backend.Storage, n int, p0, p1 float64) {
	if int(op) >= backend.NumUnaryOps {
		b.fail("UnaryBackward", "unknown op %d", op)
	}
	g, gyS := b.st(gx), b.st(gy)
	b.checkLen("UnaryBackward", "gx", g, n)
	b.checkLen("UnaryBackward", "gy", gyS, n)
	if gyS.dt != g.dt {
		b.fail("UnaryBackward", "gy is %s, gx %s", gyS.dt, g.dt)
	}
	usesX, usesY := kernels.UnaryGradUses(op)
	var a uint64
	recompute := int32(0)
	switch {
	case usesY && y != nil:
		a = b.ptr(y)
	case usesY || usesX:
		if x == nil {
			b.fail("UnaryBackward", "%d needs the input x", op)
		}
		a = b.ptr(x)
		recompute = int32(boolInt(usesY))
	}
	for _, s := range []backend.Storage{x, y} {
		if s != nil {
			c := b.st(s)
			b.checkLen("UnaryBackward", "x/y", c, n)
			if c.dt != g.dt {
				b.fail("UnaryBackward", "x/y is %s, gx %s", c.dt, g.dt)
			}
		}
	}
	b.launch(kernels.Name("unary_backward", g.dt), int64(n), g.blk.addr, gyS.blk.addr, a, int64(n), int32(op), p0, p1, recompute)
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// Binary implements backend.Backend. Operands of mixed dtypes are computed as the CPU
// backend computes them (see runDType): converted exactly to dst's dtype, or computed
// in the wider compute type and rounded once into dst; comparisons of two dtypes run
// in their compute type.
func (b *Backend) Binary(op backend.BinaryOp, dst, x, y backend.View) {
	if int(op) >= backend.NumBinaryOps {
		b.fail("Binary", "unknown op %d", op)
	}
	d := b.st(dst.S)
	xdt, ydt := b.st(x.S).dt, b.st(y.S).dt
	family, cdt := "binary", d.dt
	if op.IsComparison() {
		if d.dt != backend.Bool {
			b.fail("Binary", "comparison writes bool, dst is %s", d.dt)
		}
		family, cdt = "compare", xdt
		if xdt != ydt {
			cdt = backend.ComputeDType(xdt, ydt)
		}
	} else if rt := runDType(d.dt, xdt, ydt); rt != d.dt {
		b.layouts("Binary", dst, x, y) // validate before computing into a temporary
		t := b.temp(rt, dst.Numel())
		defer b.Free(t)
		tv := backend.Dense(t, 0, dst.Shape...)
		b.Binary(op, tv, x, y)
		b.Copy(dst, tv)
		return
	}
	x, fx := b.as(x, cdt)
	defer fx()
	y, fy := b.as(y, cdt)
	defer fy()
	ls, n := b.layouts("Binary", dst, x, y)
	b.launch(kernels.Name(family, cdt), n, d.blk.addr, b.ptr(x.S), b.ptr(y.S), n, ls[0], ls[1], ls[2], int32(op))
}

// exactIn reports whether every value of dtype from converts to dtype to exactly.
func exactIn(from, to backend.DType) bool {
	switch {
	case from == to:
		return true
	case to == backend.Float64:
		return from != backend.Int64
	case to == backend.Float32:
		return from.IsHalf() || from == backend.Bool
	case to == backend.Int64:
		return from == backend.Int32 || from == backend.Bool
	case to == backend.Int32, to.IsHalf():
		return from == backend.Bool
	}
	return false
}

// runDType is the dtype to run an elementwise kernel writing dst in, given its operands'
// dtypes, so that the result is the CPU backend's, which converts every operand to the
// compute type of all of them, computes there and rounds once into dst: dst's own dtype
// when every operand converts to it exactly and its kernels compute in that type; else
// the compute type, wider than dst (the caller rounds the result into dst).
func runDType(dst backend.DType, operands ...backend.DType) backend.DType {
	w := backend.ComputeDType(append(operands, dst)...)
	if backend.ComputeDType(dst) != w {
		return w
	}
	for _, o := range operands {
		if !exactIn(o, dst) {
			return w
		}
	}
	return dst
}

// Where implements backend.Backend.
func (b *Backend) Where(dst, cond, x, y backend.View) {
	d := b.st(dst.S)
	cond, fc := b.as(cond, backend.Bool)
	defer fc()
	x, fx := b.as(x, d.dt)
	defer fx()
	y, fy := b.as(y, d.dt)
	defer fy()
	ls, n := b.layouts("Where", dst, cond, x, y)
	b.launch(kernels.Name("where", d.dt), n, d.blk.addr, b.ptr(cond.S), b.ptr(x.S), b.ptr(y.S), n, ls[0], ls[1], ls[2], ls[3])
}

// Reduce implements backend.Backend. Sums accumulate in float64 in the CPU backend's
// order, so they are bit-identical to it; a src of another dtype than dst is converted
// to dst's dtype first when that is exact (a Sum of Bool counting into Int64), else
// reduced in float64 and the result rounded into dst, as the CPU backend rounds it.
func (b *Backend) Reduce(op backend.ReduceOp, dst, src backend.Storage, outer, n, inner int) {
	d, s := b.st(dst), b.st(src)
	if outer < 0 || n < 0 || inner < 0 {
		b.fail("Reduce", "geometry [%d, %d, %d]", outer, n, inner)
	}
	b.checkLen("Reduce", "src", s, outer*n*inner)
	b.checkLen("Reduce", "dst", d, outer*inner)
	arg := op == backend.ArgMax || op == backend.ArgMin
	if arg && d.dt != backend.Int64 {
		b.fail("Reduce", "ArgMax/ArgMin write Int64, dst is %s", d.dt)
	}
	if n == 0 && op != backend.Sum && op != backend.Mean {
		b.fail("Reduce", "reduction of an empty axis has no identity")
	}
	if !arg && s.dt != d.dt {
		if !exactIn(s.dt, d.dt) {
			// The CPU backend reduces in float64 (or in float32, exactly) and rounds the
			// result once into dst: reduce in float64, then convert.
			v, free := b.as(backend.Dense(s, 0, outer*n*inner), backend.Float64)
			defer free()
			t := b.temp(backend.Float64, outer*inner)
			defer b.Free(t)
			b.Reduce(op, t, v.S, outer, n, inner)
			b.Copy(backend.Dense(d, 0, outer*inner), backend.Dense(t, 0, outer*inner))
			return
		}
		v, free := b.as(backend.Dense(s, 0, outer*n*inner), d.dt)
		defer free()
		s = v.S.(*Storage)
	}
	var dp, ip uint64 = d.blk.addr, 0
	if arg {
		dp, ip = 0, d.blk.addr
	}
	if inner == 1 {
		b.launch(kernels.Name("reduce_rows", s.dt), int64(outer), dp, ip, s.blk.addr, int64(outer), int64(n), int32(op))
		return
	}
	if (op == backend.Sum || op == backend.Mean) && s.dt.IsFloat() && b.reduceColsSplit(d, s, outer, n, inner, op == backend.Mean) {
		return
	}
	b.launch(kernels.Name("reduce_cols", s.dt), int64(outer*inner), dp, ip, s.blk.addr, int64(outer), int64(n), int64(inner), int32(op))
}

// reduceColsSplit runs a column sum (or mean) in two stages where reduce_cols' thread
// per output element would leave the GPU idle (fewer than 2^16 of them) and the rows
// make two blocks or more: a thread per (row block, element) for the block sums, then
// a thread per element folding them in block order, in waves of at most 2^22 partial
// sums. The same operations in the same order as reduce_cols, so the same bits (a bias
// gradient over BERT-base's 8192 rows × 3072 took 1.1–1.7 ms on an H100 with 3072
// threads). It reports false, launching nothing, where reduce_cols should run.
func (b *Backend) reduceColsSplit(d, s *Storage, outer, n, inner int, mean bool) bool {
	oi := int64(outer) * int64(inner)
	rows := int64(max(1, 16384/min(inner, 1024)))
	nblk := (int64(n) + rows - 1) / rows
	if n == 0 || nblk < 2 || oi >= 1<<16 {
		return false
	}
	nbw := min(nblk, max(1, (1<<22)/oi))
	part := b.temp(backend.Float64, int(nbw*oi))
	defer b.Free(part)
	var total uint64
	if nbw < nblk {
		t := b.temp(backend.Float64, int(oi))
		defer b.Free(t)
		total = t.blk.addr
	}
	meanFlag := int32(0)
	if mean {
		meanFlag = 1
	}
	for b0 := int64(0); b0 < nblk; b0 += nbw {
		w := min(nbw, nblk-b0)
		b.launch(kernels.Name("reduce_cols_partial", s.dt), w*oi, part.blk.addr, s.blk.addr, int64(outer), int64(n),
			int64(inner), rows, b0, w)
		first, last := int32(0), int32(0)
		if b0 == 0 {
			first = 1
		}
		if b0+w == nblk {
			last = 1
		}
		b.launch(kernels.Name("reduce_cols_fold", s.dt), oi, d.blk.addr, total, part.blk.addr, oi, int64(n), w, first, last,
			meanFlag)
	}
	return true
}

// Softmax implements backend.Backend (one block per row, float64 inside).
func (b *Backend) Softmax(dst, src backend.Storage, outer, n int, log bool) {
	d, s := b.st(dst), b.st(src)
	b.checkLen("Softmax", "dst", d, outer*n)
	b.checkLen("Softmax", "src", s, outer*n)
	if d.dt != s.dt {
		b.fail("Softmax", "dst is %s, src %s", d.dt, s.dt)
	}
	b.launch(kernels.Name("softmax", d.dt), int64(outer), d.blk.addr, s.blk.addr, int64(outer), int64(n), int32(boolInt(log)))
}

// SoftmaxBackward implements backend.Backend.
func (b *Backend) SoftmaxBackward(gx, gy, y backend.Storage, outer, n int, log bool) {
	g, gyS, yS := b.st(gx), b.st(gy), b.st(y)
	for _, s := range []*Storage{g, gyS, yS} {
		b.checkLen("SoftmaxBackward", "operand", s, outer*n)
		if s.dt != g.dt {
			b.fail("SoftmaxBackward", "mixed dtypes %s and %s", s.dt, g.dt)
		}
	}
	b.launch(kernels.Name("softmax_backward", g.dt), int64(outer), g.blk.addr, gyS.blk.addr, yS.blk.addr, int64(outer), int64(n), int32(boolInt(log)))
}

// checkIndexDType panics unless s holds Int32 or Int64 indices.
func (b *Backend) checkIndexDType(op string, s *Storage) {
	if s.dt != backend.Int32 && s.dt != backend.Int64 {
		b.fail(op, "indices are %s, want int32 or int64", s.dt)
	}
}

// launchChecked launches a kernel whose last parameter is an int* "bad index" flag and
// panics, as the CPU backend does, when it was set. The flag costs one wait for the
// stream: the price of reporting a bad label where it was passed.
func (b *Backend) launchChecked(op, name string, work int64, args ...any) {
	if work <= 0 {
		return
	}
	k := kernel(name)
	var bad int32
	b.d.do(func() {
		flag := b.d.scratch
		b.d.must(op, cu.MemsetD32Async(flag, 0, 1, b.d.compute))
		b.d.launchNow(k, work, append(args, uint64(flag))...)
		var pin runtime.Pinner
		pin.Pin(&bad)
		defer pin.Unpin()
		b.d.must(op, cu.MemcpyDtoHAsync(unsafe.Pointer(&bad), flag, 4, b.d.compute))
		b.d.must(op, cu.StreamSynchronize(b.d.compute))
	})
	if bad != 0 {
		b.fail(op, "an index is out of range")
	}
}

// OneHot implements backend.Backend.
func (b *Backend) OneHot(dst, labels backend.Storage, n, classes int, on, off float64) {
	d, l := b.st(dst), b.st(labels)
	b.checkIndexDType("OneHot", l)
	b.checkLen("OneHot", "labels", l, n)
	b.checkLen("OneHot", "dst", d, n*classes)
	b.launchChecked("OneHot", kernels.Name("one_hot", d.dt, l.dt), int64(n*classes), d.blk.addr, l.blk.addr, int64(n), int64(classes), on, off)
}

func (b *Backend) checkConv(op string, a backend.ConvArgs) {
	if a.N < 0 || a.C < 0 || a.H <= 0 || a.W <= 0 || a.KH <= 0 || a.KW <= 0 || a.StrideH <= 0 || a.StrideW <= 0 ||
		a.PadH < 0 || a.PadW < 0 || a.DilationH <= 0 || a.DilationW <= 0 || a.OH <= 0 || a.OW <= 0 {
		b.fail(op, "bad geometry %+v", a)
	}
}

// Im2Col implements backend.Backend.
func (b *Backend) Im2Col(dst, src backend.Storage, a backend.ConvArgs) {
	b.checkConv("Im2Col", a)
	d, s := b.st(dst), b.st(src)
	cols := a.N * a.C * a.KH * a.KW * a.OH * a.OW
	b.checkLen("Im2Col", "dst", d, cols)
	b.checkLen("Im2Col", "src", s, a.N*a.C*a.H*a.W)
	if d.dt != s.dt {
		b.fail("Im2Col", "dst is %s, src %s", d.dt, s.dt)
	}
	b.launch(kernels.Name("im2col", d.dt), int64(cols), d.blk.addr, s.blk.addr, kernels.NewConv2d(a))
}

// Col2Im implements backend.Backend (a gather per image element: no atomics, so the sum
// order is fixed).
func (b *Backend) Col2Im(dst, src backend.Storage, a backend.ConvArgs) {
	b.checkConv("Col2Im", a)
	d, s := b.st(dst), b.st(src)
	img := a.N * a.C * a.H * a.W
	b.checkLen("Col2Im", "dst", d, img)
	b.checkLen("Col2Im", "src", s, a.N*a.C*a.KH*a.KW*a.OH*a.OW)
	if d.dt != s.dt {
		b.fail("Col2Im", "dst is %s, src %s", d.dt, s.dt)
	}
	b.launch(kernels.Name("col2im", d.dt), int64(img), d.blk.addr, s.blk.addr, kernels.NewConv2d(a))
}

func (b *Backend) checkPool(op string, a backend.PoolArgs) {
	if a.N < 0 || a.C < 0 || a.H <= 0 || a.W <= 0 || a.KH <= 0 || a.KW <= 0 || a.StrideH <= 0 || a.StrideW <= 0 ||
		a.PadH < 0 || a.PadW < 0 || a.OH <= 0 || a.OW <= 0 || (a.Kind != backend.MaxPool && a.Kind != backend.AvgPool) {
		b.fail(op, "bad geometry %+v", a)
	}
}

// Pool implements backend.Backend.
func (b *Backend) Pool(dst, index, src backend.Storage, a backend.PoolArgs) {
	b.checkPool("Pool", a)
	d, s := b.st(dst), b.st(src)
	out := a.N * a.C * a.OH * a.OW
	b.checkLen("Pool", "dst", d, out)
	b.checkLen("Pool", "src", s, a.N*a.C*a.H*a.W)
	var ip uint64
	if a.Kind == backend.MaxPool {
		if index == nil {
			b.fail("Pool", "max pooling needs an index storage")
		}
		ix := b.st(index)
		if ix.dt != backend.Int64 {
			b.fail("Pool", "index is %s, want int64", ix.dt)
		}
		b.checkLen("Pool", "index", ix, out)
		ip = ix.blk.addr
	}
	b.launch(kernels.Name("pool_forward", d.dt), int64(out), d.blk.addr, ip, s.blk.addr, kernels.NewPool2d(a))
}

// PoolBackward implements backend.Backend.
func (b *Backend) PoolBackward(gx, gy, index backend.Storage, a backend.PoolArgs) {
	b.checkPool("PoolBackward", a)
	g, gyS := b.st(gx), b.st(gy)
	img := a.N * a.C * a.H * a.W
	b.checkLen("PoolBackward", "gx", g, img)
	b.checkLen("PoolBackward", "gy", gyS, a.N*a.C*a.OH*a.OW)
	var ip uint64
	if a.Kind == backend.MaxPool {
		if index == nil {
			b.fail("PoolBackward", "max pooling needs the forward's index")
		}
		ip = b.ptr(index)
	}
	b.launch(kernels.Name("pool_backward", g.dt), int64(img), g.blk.addr, gyS.blk.addr, ip, kernels.NewPool2d(a))
}

// checkStats panics unless the optional FP32 statistics storages hold n elements.
func (b *Backend) checkStats(op string, n int, ss ...backend.Storage) {
	for _, s := range ss {
		if s == nil {
			continue
		}
		c := b.st(s)
		if c.dt != backend.Float32 {
			b.fail(op, "statistics and affine parameters are float32, got %s", c.dt)
		}
		b.checkLen(op, "statistics", c, n)
	}
}

// BatchNorm implements backend.Backend (one block per channel, FP32 statistics).
func (b *Backend) BatchNorm(a backend.NormArgs) {
	x, y := b.st(a.X), b.st(a.Y)
	b.checkLen("BatchNorm", "x", x, a.N*a.C*a.S)
	b.checkLen("BatchNorm", "y", y, a.N*a.C*a.S)
	b.checkStats("BatchNorm", a.C, a.Weight, a.Bias, a.RunningMean, a.RunningVar, a.SaveMean, a.SaveInvStd)
	b.launch(kernels.Name("batch_norm", x.dt), int64(a.C), y.blk.addr, b.ptr(a.RunningMean), b.ptr(a.RunningVar),
		b.ptr(a.SaveMean), b.ptr(a.SaveInvStd), x.blk.addr, b.ptr(a.Weight), b.ptr(a.Bias),
		int64(a.N), int64(a.C), int64(a.S), a.Momentum, a.Eps, int32(boolInt(a.Training)))
}

// BatchNormBackward implements backend.Backend.
func (b *Backend) BatchNormBackward(a backend.NormArgs) {
	x, gy, gx := b.st(a.X), b.st(a.GY), b.st(a.GX)
	for _, s := range []*Storage{x, gy, gx} {
		b.checkLen("BatchNormBackward", "x/gy/gx", s, a.N*a.C*a.S)
	}
	b.checkStats("BatchNormBackward", a.C, a.Weight, a.SaveMean, a.SaveInvStd, a.RunningMean, a.RunningVar, a.GWeight, a.GBias)
	b.launch(kernels.Name("batch_norm_backward", x.dt), int64(a.C), gx.blk.addr, b.ptr(a.GWeight), b.ptr(a.GBias),
		gy.blk.addr, x.blk.addr, b.ptr(a.Weight), b.ptr(a.SaveMean), b.ptr(a.SaveInvStd), b.ptr(a.RunningMean), b.ptr(a.RunningVar),
		int64(a.N), int64(a.C), int64(a.S), a.Eps, int32(boolInt(a.Training)))
}

// LayerNorm implements backend.Backend (one block per row).
func (b *Backend) LayerNorm(a backend.NormArgs) {
	x, y := b.st(a.X), b.st(a.Y)
	b.checkLen("LayerNorm", "x", x, a.N*a.C)
	b.checkLen("LayerNorm", "y", y, a.N*a.C)
	b.checkStats("LayerNorm", a.C, a.Weight, a.Bias)
	b.checkStats("LayerNorm", a.N, a.SaveMean, a.SaveInvStd)
	b.launch(kernels.Name("layer_norm", x.dt), int64(a.N), y.blk.addr, b.ptr(a.SaveMean), b.ptr(a.SaveInvStd),
		x.blk.addr, b.ptr(a.Weight), b.ptr(a.Bias), int64(a.N), int64(a.C), a.Eps)
}

// LayerNormBackward implements backend.Backend: gx per row, then the parameter
// gradients per column (no atomics).
func (b *Backend) LayerNormBackward(a backend.NormArgs) {
	x, gy, gx := b.st(a.X), b.st(a.GY), b.st(a.GX)
	for _, s := range []*Storage{x, gy, gx} {
		b.checkLen("LayerNormBackward", "x/gy/gx", s, a.N*a.C)
	}
	b.checkStats("LayerNormBackward", a.C, a.Weight, a.GWeight, a.GBias)
	b.checkStats("LayerNormBackward", a.N, a.SaveMean, a.SaveInvStd)
	b.launch(kernels.Name("layer_norm_backward", x.dt), int64(a.N), gx.blk.addr, gy.blk.addr, x.blk.addr,
		b.ptr(a.Weight), b.ptr(a.SaveMean), b.ptr(a.SaveInvStd), int64(a.N), int64(a.C))
	if a.GWeight != nil || a.GBias != nil {
		b.layerNormParams(a, x, gy)
	}
}

// layerNormParams sums GWeight and GBias over the rows in the CPU backend's row blocks
// (at most 64). With two blocks or more and fewer than 2^16 columns it runs in two
// stages — a thread per (block, column) for the partial sums, then a thread per column
// folding them in block order — instead of layer_norm_backward_params's thread per
// column: the same bits, with the whole GPU at work (BERT-base's 8192 × 768 rows took
// 2.7 ms on an H100 with 768 threads).
func (b *Backend) layerNormParams(a backend.NormArgs, x, gy *Storage) {
	rows, cols := int64(a.N), int64(a.C)
	nb := min((rows*cols+32767)/32768, rows, 64)
	nb = max(nb, 1)
	per := (rows + nb - 1) / nb
	if per > 0 {
		nb = (rows + per - 1) / per
	}
	if nb < 2 || cols >= 1<<16 {
		b.launch(kernels.Name("layer_norm_backward_params", x.dt), cols, b.ptr(a.GWeight), b.ptr(a.GBias),
			gy.blk.addr, x.blk.addr, b.ptr(a.SaveMean), b.ptr(a.SaveInvStd), rows, cols)
		return
	}
	pw, pb := b.temp(backend.Float64, int(nb*cols)), b.temp(backend.Float64, int(nb*cols))
	defer b.Free(pw)
	defer b.Free(pb)
	b.launch(kernels.Name("layer_norm_params_partial", x.dt), nb*cols, pw.blk.addr, pb.blk.addr, gy.blk.addr,
		x.blk.addr, b.ptr(a.SaveMean), b.ptr(a.SaveInvStd), rows, cols, per, int64(0), nb)
	b.launch("layer_norm_params_fold", cols, b.ptr(a.GWeight), b.ptr(a.GBias), uint64(0), uint64(0),
		pw.blk.addr, pb.blk.addr, cols, nb, int32(1), int32(1))
}

// IndexSelect implements backend.Backend.
func (b *Backend) IndexSelect(dst, src, idx backend.Storage, outer, n, inner, m int) {
	d, s, ix := b.st(dst), b.st(src), b.st(idx)
	b.checkIndexDType("IndexSelect", ix)
	b.checkLen("IndexSelect", "idx", ix, m)
	b.checkLen("IndexSelect", "src", s, outer*n*inner)
	b.checkLen("IndexSelect", "dst", d, outer*m*inner)
	if d.dt != s.dt {
		b.fail("IndexSelect", "dst is %s, src %s", d.dt, s.dt)
	}
	b.launchChecked("IndexSelect", kernels.Name("index_select", d.dt, ix.dt), int64(outer*m*inner), d.blk.addr, s.blk.addr, ix.blk.addr,
		int64(outer), int64(n), int64(inner), int64(m))
}

// IndexAdd implements backend.Backend deterministically: the indices are grouped on
// the host (one small download), and each destination row sums its sources in index
// order, so the result equals the CPU backend's bit for bit and never depends on
// atomics' timing.
func (b *Backend) IndexAdd(dst, src, idx backend.Storage, outer, n, inner, m int) {
	d, s, ix := b.st(dst), b.st(src), b.st(idx)
	b.checkIndexDType("IndexAdd", ix)
	b.checkLen("IndexAdd", "idx", ix, m)
	b.checkLen("IndexAdd", "src", s, outer*m*inner)
	b.checkLen("IndexAdd", "dst", d, outer*n*inner)
	if d.dt != s.dt {
		b.fail("IndexAdd", "dst is %s, src %s", d.dt, s.dt)
	}
	if m == 0 || outer == 0 || inner == 0 {
		return
	}
	var order, starts []int64
	var err error
	if ix.dt == backend.Int32 {
		h := make([]int32, m)
		b.Download(h, ix, 0)
		order, starts, err = kernels.GroupIndex(h, n)
	} else {
		h := make([]int64, m)
		b.Download(h, ix, 0)
		order, starts, err = kernels.GroupIndex(h, n)
	}
	if err != nil {
		b.fail("IndexAdd", "%v", err)
	}
	os, ss := b.temp(backend.Int64, len(order)), b.temp(backend.Int64, len(starts))
	defer b.Free(os)
	defer b.Free(ss)
	b.Upload(os, 0, order)
	b.Upload(ss, 0, starts)
	groups := int64(len(starts) - 1)
	b.launch(kernels.Name("index_add_sorted", d.dt, ix.dt), int64(outer)*groups*int64(inner), d.blk.addr, s.blk.addr, ix.blk.addr,
		os.blk.addr, ss.blk.addr, groups, int64(outer), int64(n), int64(inner), int64(m))
}

// UnscaleCheck implements backend.Backend with the multi-tensor kernel over one tensor.
func (b *Backend) UnscaleCheck(g backend.Storage, n int, inv float32) bool {
	return b.UnscaleCheckMulti([]backend.Storage{g}, []int{n}, inv)[0]
}

// UnscaleCheckMulti implements backend.MultiUnscaler: every gradient is unscaled in
// place by one kernel per dtype and the found-inf flags come back in one wait, not one
// per gradient. found[i] reports gradient i (exactly, from a per-gradient flag).
func (b *Backend) UnscaleCheckMulti(gs []backend.Storage, ns []int, inv float32) []bool {
	if len(gs) != len(ns) {
		b.fail("UnscaleCheckMulti", "%d gradients, %d lengths", len(gs), len(ns))
	}
	found := make([]bool, len(gs))
	if len(gs) == 0 {
		return found
	}
	ptrs := make([]uint64, len(gs))
	lens := make([]int64, len(gs))
	for i, g := range gs {
		s := b.st(g)
		b.checkLen("UnscaleCheck", "gradient", s, ns[i])
		b.checkFloat("UnscaleCheck", "gradient", s)
		ptrs[i], lens[i] = s.blk.addr, int64(ns[i])
	}
	// Device arrays: pointers, lengths, and one int flag per gradient.
	pd := b.temp(backend.Int64, len(gs))
	ld := b.temp(backend.Int64, len(gs))
	fd := b.temp(backend.Int32, len(gs)) // zeroed by Alloc
	defer b.Free(pd)
	defer b.Free(ld)
	defer b.Free(fd)
	b.Upload(pd, 0, int64s(ptrs))
	b.Upload(ld, 0, lens)
	for i, g := range gs {
		s := b.st(g)
		// One launch per gradient over its own pointer entry keeps the per-gradient flag;
		// all launches are queued back to back with no wait between them.
		b.launch(kernels.Name("unscale_check", s.dt), max(lens[i], 1), pd.blk.addr+uint64(8*i), ld.blk.addr+uint64(8*i), int32(1), inv, fd.blk.addr+uint64(4*i))
	}
	flags := make([]int32, len(gs))
	b.Download(flags, fd, 0)
	for i, f := range flags {
		found[i] = f != 0
	}
	return found
}

func int64s(u []uint64) []int64 {
	return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(u))), len(u))
}

// CountNonFinite implements backend.Backend.
func (b *Backend) CountNonFinite(src backend.Storage, n int) (inf, nan int, maxAbs float64) {
	s := b.st(src)
	b.checkLen("CountNonFinite", "src", s, n)
	b.checkFloat("CountNonFinite", "src", s)
	out := b.temp(backend.Int64, 3) // zeroed
	defer b.Free(out)
	b.launch(kernels.Name("count_nonfinite", s.dt), int64(n), s.blk.addr, int64(n), out.blk.addr)
	h := make([]int64, 3)
	b.Download(h, out, 0)
	return int(h[0]), int(h[1]), *(*float64)(unsafe.Pointer(&h[2]))
}
