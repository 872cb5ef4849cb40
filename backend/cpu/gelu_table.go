package cpu

import (
	"sync"
	"unsafe"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// GELU on half data by table lookup. A BFloat16 or Float16 x has only 65,536 bit
// patterns, and the float32 GELU of vec_gelu.go is a function of x alone, so:
//
//   - forward, y of x's dtype: y = round(x·Φ(x)) is fwd[bits(x)], the result of the
//     float32 path (widen, vecGelu, round to half) for each pattern;
//   - backward: vecGelu computes gx = gy·T(x), T(x) = fma(x, φ(x), Φ(x)), one float32
//     multiply (the VMULPS at the end of vecgen's loop, geluGo's last line), so with
//     bwd[bits(x)] = T(x) in float32 (vecGelu with gy = 1: 1·T is T), gx =
//     round(float32(gy)·bwd[bits(x)]) for gy and gx of any dtype computed in float32.
//     Where T is NaN (x NaN or ±Inf) the result is T, as VMULPS returns its first
//     source, T, when both are NaN; otherwise the product's NaN is the hardware's, as
//     before.
//
// GeluTanh likewise: its forward is unaryApply's float64 formula rounded to float32
// and then to half, a function of x; its backward is float32(float64(gy)·d(x)), d
// from geluTanhGrad in float64, so bwd64[bits(x)] = d(x) gives it with the same
// multiply and roundings.
//
// The tables of an op and dtype are built once per process, on first use, by the
// float32 path itself (under a millisecond), so the results are those of that path
// bit for bit (TestGeluTable* check every pattern). The lookups are geluTabFwd,
// geluTabMul and geluTabBwdHalf: AVX-512 gathers (gelu_table_amd64.s) or their
// pure-Go twins; GeluTanh's backward is geluTanhTabMul, in Go.
type geluTable struct {
	once sync.Once
	// fwd has one spare entry: the AVX-512 loop gathers 32-bit words at 2-byte steps,
	// so the last pattern reads fwd[65535] and fwd[65536] (whose bits it drops).
	fwd   *[1<<16 + 1]uint16
	bwd   *[1 << 16]float32 // Gelu's T(x)
	bwd64 *[1 << 16]float64 // GeluTanh's d(x)
}

// geluTables are Gelu's (0) and GeluTanh's (1), each BFloat16's (0) and Float16's (1).
var geluTables [2][2]geluTable

// geluTableOf returns the tables of op (Gelu or GeluTanh) on dt, built on first use;
// nil unless op is one of those and dt a half dtype.
func geluTableOf(op backend.UnaryOp, dt backend.DType) *geluTable {
	var i, j int
	switch op {
	case backend.Gelu:
	case backend.GeluTanh:
		i = 1
	default:
		return nil
	}
	switch dt {
	case backend.BFloat16:
	case backend.Float16:
		j = 1
	default:
		return nil
	}
	t := &geluTables[i][j]
	t.once.Do(func() { t.build(op, dt) })
	return t
}

// build fills t from the float32 path: every pattern widened, unaryApply's forward
// rounded back to dt as storeF32 rounds; for Gelu vecGelu's backward with gy = 1, for
// GeluTanh geluTanhGrad. The patterns whose float32 steps go subnormal cost microcode
// assists, so the work is split over the workers.
func (t *geluTable) build(op backend.UnaryOp, dt backend.DType) {
	const n = 1 << 16
	fwd := new([n + 1]uint16)
	var bwd *[n]float32
	var bwd64 *[n]float64
	if op == backend.Gelu {
		bwd = new([n]float32)
	} else {
		bwd64 = new([n]float64)
	}
	ParallelFor(n, n/16, func(lo, hi int) {
		var bits [chunk]uint16
		var xs, ys [chunk]float32
		for c := lo; c < hi; c += chunk {
			m := min(chunk, hi-c)
			for i := range m {
				bits[i] = uint16(c + i)
			}
			x, y := xs[:m], ys[:m]
			if dt == backend.BFloat16 {
				half.BFloat16ToFloat32(x, u16As[half.BFloat16](bits[:m]))
			} else {
				half.Float16ToFloat32(x, u16As[half.Float16](bits[:m]))
			}
			unaryApply(op, y, x, 0, 0)
			if dt == backend.BFloat16 {
				half.Float32ToBFloat16(u16As[half.BFloat16](fwd[c:c+m]), y)
			} else {
				half.Float32ToFloat16(u16As[half.Float16](fwd[c:c+m]), y)
			}
			if op == backend.GeluTanh {
				for i, v := range x {
					bwd64[c+i] = geluTanhGrad(float64(v))
				}
				continue
			}
			for i := range y {
				y[i] = 1
			}
			vecGelu(bwd[c:c+m], x, y)
		}
	})
	t.fwd, t.bwd, t.bwd64 = fwd, bwd, bwd64
}

// u16As views 16-bit words as a 16-bit float type.
func u16As[H half.Float16 | half.BFloat16](b []uint16) []H {
	return unsafe.Slice((*H)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
}

// geluHalfForward computes op (Gelu or GeluTanh) of n elements of s into d by table
// lookup and reports true when both hold the same half dtype; otherwise it does
// nothing.
func geluHalfForward(op backend.UnaryOp, d, s *storage, n int) bool {
	if d.dt != s.dt {
		return false
	}
	t := geluTableOf(op, s.dt)
	if t == nil {
		return false
	}
	y, x := d.u16()[:n], s.u16()[:n]
	ParallelFor(n, grainElems, func(lo, hi int) {
		geluTabFwd(y[lo:hi], x[lo:hi], t.fwd)
	})
	return true
}

// geluHalfBackward computes op's (Gelu's or GeluTanh's) gx = gy·T(x) for n elements by
// table lookup and reports true when x holds a half dtype; otherwise it does nothing.
// gx and gy are any dtypes whose compute type is float32 (the caller checks).
func geluHalfBackward(op backend.UnaryOp, gx, gy, x *storage, n int) bool {
	t := geluTableOf(op, x.dt)
	if t == nil {
		return false
	}
	xb := x.u16()[:n]
	if op == backend.Gelu && gx.dt == x.dt && gy.dt == x.dt {
		// All three of one half dtype: one pass, converting in registers.
		gxb, gyb := gx.u16()[:n], gy.u16()[:n]
		ParallelFor(n, grainElems, func(lo, hi int) {
			geluTabBwdHalf(gxb[lo:hi], gyb[lo:hi], xb[lo:hi], t.bwd, x.dt == backend.BFloat16)
		})
		return true
	}
	gxr, gyr := elemRunOf[float32](gx), elemRunOf[float32](gy)
	ParallelFor(n, grainElems, func(lo, hi int) {
		var gb, ob [chunk]float32
		for c := lo; c < hi; c += chunk {
			m := min(chunk, hi-c)
			g := gyr.read(gb[:m], c)
			o := gxr.out(ob[:m], c)
			if op == backend.GeluTanh {
				geluTanhTabMul(o, g, xb[c:c+m], t.bwd64)
			} else {
				geluTabMul(o, g, xb[c:c+m], t.bwd)
			}
			gxr.flush(c, o)
		}
	})
	return true
}

// geluTabFwdGo is the twin of the forward lookup: dst[i] = tab[x[i]].
func geluTabFwdGo(dst, x []uint16, tab *[1<<16 + 1]uint16) {
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = tab[v]
	}
}

// geluTabMulGo is the twin of the backward lookup: dst[i] = g[i]·tab[x[i]] in
// float32, tab[x[i]] itself where that is NaN. dst may be g.
func geluTabMulGo(dst, g []float32, x []uint16, tab *[1 << 16]float32) {
	g = g[:len(dst)]
	x = x[:len(dst)]
	for i, v := range x {
		t := tab[v]
		p := g[i] * t
		if t != t {
			p = t
		}
		dst[i] = p
	}
}

// geluTanhTabMul sets dst[i] = float32(float64(g[i])·tab[x[i]]), unaryGrad's GeluTanh
// product. dst may be g.
func geluTanhTabMul(dst, g []float32, x []uint16, tab *[1 << 16]float64) {
	g = g[:len(dst)]
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] = float32(float64(g[i]) * tab[v])
	}
}

// geluTabBwdHalfGo is the twin of the backward on half gy and gx: geluTabMulGo on gy
// widened, each product rounded to gx's dtype, bfloat16 (bf) or float16, as package
// half rounds. gx may be gy or x.
func geluTabBwdHalfGo(gx, gy, x []uint16, tab *[1 << 16]float32, bf bool) {
	gy = gy[:len(gx)]
	x = x[:len(gx)]
	for i, v := range x {
		t := tab[v]
		var g float32
		if bf {
			g = half.BFloat16(gy[i]).Float32()
		} else {
			g = half.Float16(gy[i]).Float32()
		}
		p := g * t
		if t != t {
			p = t
		}
		if bf {
			gx[i] = uint16(half.BFloat16FromFloat32(p))
		} else {
			gx[i] = uint16(half.Float16FromFloat32(p))
		}
	}
}
