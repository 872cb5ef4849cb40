package cpu

import (
	"math"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// chunk is the number of elements a kernel converts to its compute type at a time: a few
// KiB of scratch that stays in L1.
const chunk = 1024

// grainElems is the smallest amount of elementwise work worth handing to another worker.
const grainElems = 1 << 15

// collapse merges adjacent dimensions that are contiguous in every operand and drops
// dimensions of size 1, so a strided loop runs over as few, as long rows as possible.
func collapse(shape []int, strides ...[]int) ([]int, [][]int) {
	var cs []int
	cst := make([][]int, len(strides))
	for d := 0; d < len(shape); d++ {
		if shape[d] == 1 {
			continue
		}
		if len(cs) > 0 {
			last := len(cs) - 1
			// The previous dimension's stride must be this one's times its size.
			ok := true
			for k := range strides {
				if cst[k][last] != strides[k][d]*shape[d] {
					ok = false
					break
				}
			}
			if ok {
				cs[last] *= shape[d]
				for k := range strides {
					cst[k][last] = strides[k][d]
				}
				continue
			}
		}
		cs = append(cs, shape[d])
		for k := range strides {
			cst[k] = append(cst[k], strides[k][d])
		}
	}
	if len(cs) == 0 {
		cs = []int{1}
		for k := range cst {
			cst[k] = []int{0}
		}
	}
	return cs, cst
}

// rowIter walks the rows (all but the last collapsed dimension) of a strided loop,
// keeping each operand's offset.
type rowIter struct {
	shape   []int
	strides [][]int
	idx     []int
	off     []int
}

func newRowIter(shape []int, strides [][]int, base []int, row int) *rowIter {
	it := &rowIter{shape: shape, strides: strides, idx: make([]int, len(shape)), off: append([]int(nil), base...)}
	// Decompose row into indices of dims [0, len-1).
	for d := len(shape) - 2; d >= 0; d-- {
		i := row % shape[d]
		row /= shape[d]
		it.idx[d] = i
		for k := range it.off {
			it.off[k] += i * strides[k][d]
		}
	}
	return it
}

func (it *rowIter) next() {
	for d := len(it.shape) - 2; d >= 0; d-- {
		it.idx[d]++
		for k := range it.off {
			it.off[k] += it.strides[k][d]
		}
		if it.idx[d] < it.shape[d] {
			return
		}
		for k := range it.off {
			it.off[k] -= it.idx[d] * it.strides[k][d]
		}
		it.idx[d] = 0
	}
}

// forRows runs fn over every row of the collapsed loop in parallel. fn gets the
// operands' offsets at the start of the row, and the row length.
func forRows(shape []int, views []backend.View, fn func(off []int, inner int, innerStrides []int)) {
	strides := make([][]int, len(views))
	base := make([]int, len(views))
	for i, v := range views {
		strides[i] = v.Strides
		base[i] = v.Offset
	}
	cs, cst := collapse(shape, strides...)
	inner := cs[len(cs)-1]
	innerStrides := make([]int, len(views))
	for k := range cst {
		innerStrides[k] = cst[k][len(cs)-1]
	}
	rows := 1
	for _, d := range cs[:len(cs)-1] {
		rows *= d
	}
	if rows == 1 {
		// One long row: split it into column ranges.
		ParallelFor(inner, grainElems, func(lo, hi int) {
			off := make([]int, len(base))
			for k := range base {
				off[k] = base[k] + lo*innerStrides[k]
			}
			fn(off, hi-lo, innerStrides)
		})
		return
	}
	grain := max(1, grainElems/max(inner, 1))
	ParallelFor(rows, grain, func(lo, hi int) {
		it := newRowIter(cs, cst, base, lo)
		for r := lo; r < hi; r++ {
			fn(it.off, inner, innerStrides)
			it.next()
		}
	})
}

// numeric is a kernel's compute type: float32 for float32 and half storage, float64 for
// float64 and integer storage.
type numeric interface{ float32 | float64 }

// computeF64 reports whether a set of dtypes must be computed in float64
// (backend.ComputeDType).
func computeF64(dts ...backend.DType) bool { return backend.ComputeDType(dts...) == backend.Float64 }

// load reads n elements of s starting at off with the given stride into dst.
func load[C numeric](dst []C, s *storage, off, stride int) {
	switch d := any(dst).(type) {
	case []float32:
		loadStridedF32(d, s, off, stride)
	case []float64:
		loadStridedF64(d, s, off, stride)
	}
}

// store writes src into s starting at off with the given stride.
func store[C numeric](s *storage, off, stride int, src []C) {
	switch d := any(src).(type) {
	case []float32:
		storeStridedF32(s, off, stride, d)
	case []float64:
		storeStridedF64(s, off, stride, d)
	}
}

func loadStridedF32(dst []float32, s *storage, off, stride int) {
	n := len(dst)
	switch {
	case n == 0:
	case stride == 1:
		s.loadF32(dst, off)
	case stride == 0:
		s.loadF32(dst[:1], off)
		v := dst[0]
		for i := range dst {
			dst[i] = v
		}
	default:
		// One dtype switch per run rather than per element (scalarF32).
		switch s.dt {
		case backend.Float32:
			src := s.f32()
			for i := range dst {
				dst[i] = src[off+i*stride]
			}
		case backend.Float16:
			src := s.f16()
			for i := range dst {
				dst[i] = src[off+i*stride].Float32()
			}
		case backend.BFloat16:
			src := s.bf16()
			for i := range dst {
				dst[i] = src[off+i*stride].Float32()
			}
		default:
			for i := range dst {
				dst[i] = scalarF32(s, off+i*stride)
			}
		}
	}
}

func loadStridedF64(dst []float64, s *storage, off, stride int) {
	n := len(dst)
	switch {
	case n == 0:
	case stride == 1:
		s.loadF64(dst, off)
	case stride == 0:
		s.loadF64(dst[:1], off)
		v := dst[0]
		for i := range dst {
			dst[i] = v
		}
	default:
		for i := range dst {
			dst[i] = scalarF64(s, off+i*stride)
		}
	}
}

func storeStridedF32(s *storage, off, stride int, src []float32) {
	if stride == 1 {
		s.storeF32(off, src)
		return
	}
	switch s.dt {
	case backend.Float32:
		d := s.f32()
		for i, v := range src {
			d[off+i*stride] = v
		}
	case backend.Float16:
		d := s.f16()
		for i, v := range src {
			d[off+i*stride] = half.Float16FromFloat32(v)
		}
	case backend.BFloat16:
		d := s.bf16()
		for i, v := range src {
			d[off+i*stride] = half.BFloat16FromFloat32(v)
		}
	default:
		for i, v := range src {
			s.storeF32(off+i*stride, []float32{v})
		}
	}
}

func storeStridedF64(s *storage, off, stride int, src []float64) {
	if stride == 1 {
		s.storeF64(off, src)
		return
	}
	for i, v := range src {
		s.storeF64(off+i*stride, []float64{v})
	}
}

// scalarF32 reads one element as float32.
func scalarF32(s *storage, i int) float32 {
	switch s.dt {
	case backend.Float32:
		return s.f32()[i]
	case backend.Float16:
		return s.f16()[i].Float32()
	case backend.BFloat16:
		return s.bf16()[i].Float32()
	}
	return float32(scalarF64(s, i))
}

// scalarF64 reads one element as float64.
func scalarF64(s *storage, i int) float64 {
	switch s.dt {
	case backend.Float64:
		return s.f64()[i]
	case backend.Float32:
		return float64(s.f32()[i])
	case backend.Float16:
		return s.f16()[i].Float64()
	case backend.BFloat16:
		return s.bf16()[i].Float64()
	case backend.Int32:
		return float64(s.i32()[i])
	case backend.Int64:
		return float64(s.i64()[i])
	case backend.Bool:
		return b2f[float64](s.b8()[i])
	}
	panic("cpu: bad dtype " + s.dt.String())
}

// Copy implements backend.Backend.
func (b *Backend) Copy(dst, src backend.View) {
	d, s := st(dst.S), st(src.S)
	checkShapes("Copy", dst.Shape, src.Shape)
	if d.dt == s.dt && dst.Contiguous() && src.Contiguous() {
		n := dst.Numel()
		sz := d.dt.Size()
		copy(d.rawBytes()[dst.Offset*sz:(dst.Offset+n)*sz], s.rawBytes()[src.Offset*sz:(src.Offset+n)*sz])
		return
	}
	if computeF64(d.dt, s.dt) {
		copyRows[float64](dst, src, d, s)
	} else {
		copyRows[float32](dst, src, d, s)
	}
}

func copyRows[C numeric](dst, src backend.View, d, s *storage) {
	if d.dt == s.dt && copyRowsSame(dst, src, d, s) {
		return
	}
	forRows(dst.Shape, []backend.View{dst, src}, func(off []int, inner int, is []int) {
		if is[0] == 1 && is[1] == 1 && convertContig(d, off[0], s, off[1], inner) {
			return
		}
		if d.dt == s.dt && copyStridedRaw(d, off[0], is[0], s, off[1], is[1], inner) {
			return
		}
		var buf [chunk]C
		for lo := 0; lo < inner; lo += chunk {
			m := min(chunk, inner-lo)
			load(buf[:m], s, off[1]+lo*is[1], is[1])
			store(d, off[0]+lo*is[0], is[0], buf[:m])
		}
	})
}

// copyStridedRaw copies n elements of s (from so, stride ss) to d (from do, stride ds),
// both of one dtype, without the round trip through the compute type, and reports
// whether it did: for Float32, Float64, Int32 and Bool that trip is the identity, and for
// the half types it only quiets a signalling NaN, which the copy here does too. Int64
// (which the trip rounds to float64) is left to the caller.
func copyStridedRaw(d *storage, do, ds int, s *storage, so, ss, n int) bool {
	switch d.dt {
	case backend.Float32, backend.Int32:
		copyStrided(d.i32(), do, ds, s.i32(), so, ss, n)
	case backend.Float64:
		copyStrided(d.f64(), do, ds, s.f64(), so, ss, n)
	case backend.Bool:
		copyStrided(d.b8(), do, ds, s.b8(), so, ss, n)
	case backend.Float16:
		copyStridedQuiet(d.u16(), do, ds, s.u16(), so, ss, n, 0x7c00, 0x0200)
	case backend.BFloat16:
		copyStridedQuiet(d.u16(), do, ds, s.u16(), so, ss, n, 0x7f80, 0x0040)
	default:
		return false
	}
	return true
}

func copyStrided[T any](d []T, do, ds int, s []T, so, ss, n int) {
	switch {
	case ds == 1 && ss == 1:
		copy(d[do:do+n], s[so:so+n])
	case ss == 0:
		fillStrided(d, do, ds, s[so], n)
	default:
		for i := range n {
			d[do+i*ds] = s[so+i*ss]
		}
	}
}

// fillStrided sets d[do + i·ds] = v for i < n; a contiguous run by doubling copies (a
// broadcast Copy, such as a convolution's bias, is mostly such runs).
func fillStrided[T any](d []T, do, ds int, v T, n int) {
	if n == 0 {
		return
	}
	if ds != 1 {
		for i := range n {
			d[do+i*ds] = v
		}
		return
	}
	r := d[do : do+n]
	r[0] = v
	for k := 1; k < n; k *= 2 {
		copy(r[k:], r[:k])
	}
}

// copyStridedQuiet is copyStrided for a half type whose infinity is inf and quiet bit
// quiet: a NaN (magnitude above inf) gets its quiet bit set, as converting it to
// float32 and back does.
func copyStridedQuiet(d []uint16, do, ds int, s []uint16, so, ss, n int, inf, quiet uint16) {
	if ss == 0 && n > 0 {
		v := s[so]
		if v&0x7fff > inf {
			v |= quiet
		}
		fillStrided(d, do, ds, v, n)
		return
	}
	for i := range n {
		v := s[so+i*ss]
		if v&0x7fff > inf {
			v |= quiet
		}
		d[do+i*ds] = v
	}
}

// convertContig copies the n contiguous elements of s at so into d at do and reports
// true when the dtypes are equal (a byte copy) or one is Float32 and the other a half
// type (a bulk conversion, rounding to nearest even); it does nothing and reports false
// for other pairs.
func convertContig(d *storage, do int, s *storage, so, n int) bool {
	switch {
	case d.dt == s.dt:
		sz := d.dt.Size()
		copy(d.rawBytes()[do*sz:(do+n)*sz], s.rawBytes()[so*sz:(so+n)*sz])
	case s.dt == backend.Float32 && d.dt.IsHalf():
		d.storeF32(do, s.f32()[so:so+n])
	case d.dt == backend.Float32 && s.dt.IsHalf():
		s.loadF32(d.f32()[do:do+n], so)
	default:
		return false
	}
	return true
}

// Fill implements backend.Backend.
func (b *Backend) Fill(dst backend.View, v float64) {
	d := st(dst.S)
	forRows(dst.Shape, []backend.View{dst}, func(off []int, inner int, is []int) {
		if computeF64(d.dt) {
			var buf [chunk]float64
			for i := range buf {
				buf[i] = v
			}
			for lo := 0; lo < inner; lo += chunk {
				m := min(chunk, inner-lo)
				store(d, off[0]+lo*is[0], is[0], buf[:m])
			}
			return
		}
		var buf [chunk]float32
		// Round once from float64 so Fill(0.1) on a half tensor equals casting 0.1.
		f := float32(v)
		switch d.dt {
		case backend.Float16:
			f = half.Float16FromFloat64(v).Float32()
		case backend.BFloat16:
			f = half.BFloat16FromFloat64(v).Float32()
		}
		for i := range buf {
			buf[i] = f
		}
		for lo := 0; lo < inner; lo += chunk {
			m := min(chunk, inner-lo)
			store(d, off[0]+lo*is[0], is[0], buf[:m])
		}
	})
}

// Binary implements backend.Backend.
func (b *Backend) Binary(op backend.BinaryOp, dst, x, y backend.View) {
	d, s1, s2 := st(dst.S), st(x.S), st(y.S)
	checkShapes("Binary", dst.Shape, x.Shape)
	checkShapes("Binary", dst.Shape, y.Shape)
	views := []backend.View{dst, x, y}
	switch {
	case computeF64(d.dt, s1.dt, s2.dt):
		binaryRows[float64](op, views, d, s1, s2)
	case op <= backend.Div:
		binaryRowsVec(vecOp(op-backend.Add)+vecAdd, views, d, s1, s2)
	default:
		binaryRows[float32](op, views, d, s1, s2)
	}
}

// binaryRowsVec is binaryRows[float32] for the arithmetic ops (op is vecAdd … vecDiv)
// on the vector layer. Float32 operands that are contiguous in a row are read and
// written where they lie, broadcast ones (stride 0) become the scalar of a vecScalar
// operation, and only the rest go through conversion buffers.
func binaryRowsVec(op vecOp, views []backend.View, d, s1, s2 *storage) {
	forRows(views[0].Shape, views, func(off []int, inner int, is []int) {
		// dst is written in place unless it shares storage with an input it does not
		// coincide with, which the buffers then keep apart as binaryRows does.
		outNative := d.dt == backend.Float32 && is[0] == 1
		if s1 == d && (off[1] != off[0] || is[1] != is[0]) || s2 == d && (off[2] != off[0] || is[2] != is[0]) {
			outNative = false
		}
		direct := func(s *storage, stride int) bool {
			return stride == 0 || stride == 1 && s.dt == backend.Float32
		}
		if halfRowOp(op, d, s1, s2, off, inner, is) {
			return
		}
		if outNative && direct(s1, is[1]) && direct(s2, is[2]) {
			// Nothing to convert: the whole row in one call, and no buffers to clear.
			var a1, b1 [1]float32
			a := f32Row(a1[:], s1, off[1], is[1], inner)
			b := f32Row(b1[:], s2, off[2], is[2], inner)
			binaryVec(op, d.f32()[off[0]:off[0]+inner], a, b, is[1] == 0, is[2] == 0)
			return
		}
		var ab, bb, ob [chunk]float32
		for lo := 0; lo < inner; lo += chunk {
			m := min(chunk, inner-lo)
			a := f32Row(ab[:], s1, off[1]+lo*is[1], is[1], m)
			b := f32Row(bb[:], s2, off[2]+lo*is[2], is[2], m)
			out := ob[:m]
			if outNative {
				out = d.f32()[off[0]+lo : off[0]+lo+m]
			}
			binaryVec(op, out, a, b, is[1] == 0, is[2] == 0)
			if !outNative {
				store(d, off[0]+lo*is[0], is[0], out)
			}
		}
	})
}

// halfRowOp runs one row of binaryRowsVec on the words of half data (halfOp), where
// the CPU has its AVX-512 loop and dst and both operands share one half dtype, dst is contiguous and each operand is
// contiguous or broadcast (not both), and dst does not overlap an operand it does not
// coincide with; it reports whether it did. The results are the buffered path's.
func halfRowOp(op vecOp, d, s1, s2 *storage, off []int, inner int, is []int) bool {
	f, ok := halfFmtOf(d.dt)
	if !ok || !vecAVX512OK() || s1.dt != d.dt || s2.dt != d.dt || is[0] != 1 || is[1] == 0 && is[2] == 0 {
		return false // (without the AVX-512 loop, the buffered path's AVX2 loops are faster)
	}
	for k, s := range []*storage{s1, s2} {
		if is[k+1] != 0 && is[k+1] != 1 || s == d && (off[k+1] != off[0] || is[k+1] != 1) {
			return false
		}
	}
	dst := d.u16()[off[0] : off[0]+inner]
	row := func(s *storage, o int) []uint16 { return s.u16()[o : o+inner] }
	switch {
	case is[2] == 0:
		halfOp(f, op+vecAddS-vecAdd, dst, row(s1, off[1]), nil, scalarF32(s2, off[2]))
	case is[1] == 0:
		// s op b: commuted for add and mul, reversed for sub and div (as binaryVec).
		rev := [...]vecOp{vecAddS, vecRSubS, vecMulS, vecRDivS}[op-vecAdd]
		halfOp(f, rev, dst, row(s2, off[2]), nil, scalarF32(s1, off[1]))
	default:
		halfOp(f, op, dst, row(s1, off[1]), row(s2, off[2]), 0)
	}
	return true
}

// binaryVec sets out = op(a, b) for op vecAdd … vecDiv, where a (b) holds one element
// broadcast over out when sa (sb) is set and len(out) elements otherwise.
func binaryVec(op vecOp, out, a, b []float32, sa, sb bool) {
	switch {
	case !sa && !sb:
		vecBinary(op, out, a, b)
	case sb && !sa:
		vecScalar(op+vecAddS-vecAdd, out, a, b[0])
	case sa && !sb:
		// s op b: commuted for add and mul, reversed for sub and div.
		rev := [...]vecOp{vecAddS, vecRSubS, vecMulS, vecRDivS}[op-vecAdd]
		vecScalar(rev, out, b, a[0])
	default:
		var v [1]float32
		vecOpGo(op, v[:], a[:1], b[:1])
		for i := range out {
			out[i] = v[0]
		}
	}
}

// f32Row returns m elements of s from off with the given stride as float32: the
// storage itself when it is Float32 and the stride 1, one element (the broadcast
// value, in buf[0]) when the stride is 0, and otherwise buf filled by conversion.
func f32Row(buf []float32, s *storage, off, stride, m int) []float32 {
	switch {
	case stride == 0:
		buf[0] = scalarF32(s, off)
		return buf[:1]
	case stride == 1 && s.dt == backend.Float32:
		return s.f32()[off : off+m]
	}
	load(buf[:m], s, off, stride)
	return buf[:m]
}

func binaryRows[C numeric](op backend.BinaryOp, views []backend.View, d, s1, s2 *storage) {
	forRows(views[0].Shape, views, func(off []int, inner int, is []int) {
		var a, c [chunk]C
		for lo := 0; lo < inner; lo += chunk {
			m := min(chunk, inner-lo)
			load(a[:m], s1, off[1]+lo*is[1], is[1])
			load(c[:m], s2, off[2]+lo*is[2], is[2])
			binaryApply(op, a[:m], a[:m], c[:m])
			store(d, off[0]+lo*is[0], is[0], a[:m])
		}
	})
}

// binaryApply computes dst = op(a, b) elementwise; dst may alias a.
func binaryApply[C numeric](op backend.BinaryOp, dst, a, b []C) {
	b = b[:len(a)]
	dst = dst[:len(a)]
	switch op {
	case backend.Add:
		for i := range a {
			dst[i] = a[i] + b[i]
		}
	case backend.Sub:
		for i := range a {
			dst[i] = a[i] - b[i]
		}
	case backend.Mul:
		for i := range a {
			dst[i] = a[i] * b[i]
		}
	case backend.Div:
		for i := range a {
			dst[i] = a[i] / b[i]
		}
	case backend.Pow:
		for i := range a {
			dst[i] = C(math.Pow(float64(a[i]), float64(b[i])))
		}
	case backend.Maximum:
		for i := range a {
			// NaN propagates, as torch.maximum.
			if a[i] != a[i] || a[i] > b[i] {
				dst[i] = a[i]
			} else {
				dst[i] = b[i]
			}
		}
	case backend.Minimum:
		for i := range a {
			if a[i] != a[i] || a[i] < b[i] {
				dst[i] = a[i]
			} else {
				dst[i] = b[i]
			}
		}
	case backend.Eq:
		for i := range a {
			dst[i] = b2f[C](a[i] == b[i])
		}
	case backend.Ne:
		for i := range a {
			dst[i] = b2f[C](a[i] != b[i])
		}
	case backend.Lt:
		for i := range a {
			dst[i] = b2f[C](a[i] < b[i])
		}
	case backend.Le:
		for i := range a {
			dst[i] = b2f[C](a[i] <= b[i])
		}
	case backend.Gt:
		for i := range a {
			dst[i] = b2f[C](a[i] > b[i])
		}
	case backend.Ge:
		for i := range a {
			dst[i] = b2f[C](a[i] >= b[i])
		}
	default:
		panic("cpu: unknown binary op")
	}
}

// Where implements backend.Backend.
func (b *Backend) Where(dst, cond, x, y backend.View) {
	d, c, s1, s2 := st(dst.S), st(cond.S), st(x.S), st(y.S)
	views := []backend.View{dst, cond, x, y}
	if computeF64(d.dt, s1.dt, s2.dt) {
		whereRows[float64](views, d, c, s1, s2)
	} else {
		whereRows[float32](views, d, c, s1, s2)
	}
}

func whereRows[C numeric](views []backend.View, d, c, s1, s2 *storage) {
	forRows(views[0].Shape, views, func(off []int, inner int, is []int) {
		var k, a, e [chunk]C
		for lo := 0; lo < inner; lo += chunk {
			m := min(chunk, inner-lo)
			load(k[:m], c, off[1]+lo*is[1], is[1])
			load(a[:m], s1, off[2]+lo*is[2], is[2])
			load(e[:m], s2, off[3]+lo*is[3], is[3])
			for i := 0; i < m; i++ {
				if k[i] == 0 {
					a[i] = e[i]
				}
			}
			store(d, off[0]+lo*is[0], is[0], a[:m])
		}
	})
}

func checkShapes(op string, a, b []int) {
	if len(a) != len(b) {
		panic("cpu: " + op + ": shape rank mismatch")
	}
	for i := range a {
		if a[i] != b[i] {
			panic("cpu: " + op + ": shape mismatch")
		}
	}
}

// copyRowsSame copies between views of one dtype whose innermost collapsed dimension is
// contiguous in both and which have more than one row of it — the head split and merge
// around attention, a transpose of whole rows — by a typed copy per row, and reports
// whether it did. A row copy is the raw copy convertContig makes of equal dtypes; the
// per-row calls of forRows cost more than moving a short row (64 bytes for 32 bfloat16s).
func copyRowsSame(dst, src backend.View, d, s *storage) bool {
	cs, cst := collapse(dst.Shape, dst.Strides, src.Strides)
	last := len(cs) - 1
	if last == 0 || cst[0][last] != 1 || cst[1][last] != 1 {
		return false
	}
	switch d.dt.Size() {
	case 1:
		copyRowsT(d.b8(), s.b8(), cs, cst, dst.Offset, src.Offset)
	case 2:
		copyRowsT(d.u16(), s.u16(), cs, cst, dst.Offset, src.Offset)
	case 4:
		copyRowsT(d.i32(), s.i32(), cs, cst, dst.Offset, src.Offset)
	case 8:
		copyRowsT(d.i64(), s.i64(), cs, cst, dst.Offset, src.Offset)
	default:
		return false
	}
	return true
}

// copyRowsT copies the rows of a collapsed loop (shape cs, strides cst[0] in d and
// cst[1] in s, the last dimension contiguous in both) on the worker pool, walking the
// outer indices with an odometer of its own.
func copyRowsT[T any](d, s []T, cs []int, cst [][]int, do, so int) {
	last := len(cs) - 1
	inner := cs[last]
	rows := 1
	for _, n := range cs[:last] {
		rows *= n
	}
	ParallelFor(rows, max(1, grainElems/inner), func(lo, hi int) {
		var idxBuf [8]int
		idx := idxBuf[:0]
		if last > len(idxBuf) {
			idx = make([]int, 0, last)
		}
		idx = idx[:last]
		od, os := do, so
		for k, r := last-1, lo; k >= 0; k-- {
			idx[k] = r % cs[k]
			r /= cs[k]
			od += idx[k] * cst[0][k]
			os += idx[k] * cst[1][k]
		}
		ds, ss := cst[0][last-1], cst[1][last-1]
		n0 := cs[last-1]
		for r := lo; r < hi; {
			// A run along the innermost outer dimension: fixed strides.
			run := min(n0-idx[last-1], hi-r)
			for range run {
				copy(d[od:od+inner], s[os:os+inner])
				od += ds
				os += ss
			}
			r += run
			idx[last-1] += run
			// Carry into the outer dimensions.
			for k := last - 1; k > 0 && idx[k] == cs[k]; k-- {
				od += cst[0][k-1] - cs[k]*cst[0][k]
				os += cst[1][k-1] - cs[k]*cst[1][k]
				idx[k] = 0
				idx[k-1]++
			}
		}
	})
}
