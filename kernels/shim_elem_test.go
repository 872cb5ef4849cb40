package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
	"github.com/gamp-ml/gamp/kernels"
)

// castInputs returns src values for a cast test from dtype src: every bit pattern of
// the half types, rounding ties (and their neighbours) of every narrower type for the
// wider ones, and random values.
func castInputs(src backend.DType) *buf {
	r := newRand(uint64(src))
	switch src {
	case backend.Float16, backend.BFloat16:
		b := newBuf(src, 1<<16)
		for i := range b.u16() {
			b.u16()[i] = uint16(i)
		}
		return b
	case backend.Float32, backend.Float64:
		var v []float64
		f32 := func(u uint32) float64 { return float64(math.Float32frombits(u)) }
		for h := 0; h < 1<<16; h += 7 {
			x := half.Float16(h).Float64()
			next := half.Float16(h + 1).Float64()
			if !math.IsNaN(x) && !math.IsInf(x, 0) && !math.IsNaN(next) {
				mid := (x + next) / 2 // exact in float32 and float64
				v = append(v, x, mid, math.Nextafter(mid, math.Inf(1)), math.Nextafter(mid, math.Inf(-1)))
				if src == backend.Float32 {
					m := math.Float32bits(float32(mid))
					v = append(v, f32(m+1), f32(m-1))
				}
			}
			u := uint32(h) << 16 // a BFloat16, then its tie and neighbours
			v = append(v, f32(u), f32(u|0x8000), f32(u|0x8001), f32(u|0x7fff), f32(u|0x0001))
		}
		for range 4096 {
			v = append(v, f32(r.Uint32()), math.Float64frombits(r.Uint64()))
		}
		// float64 values rounding once to float32 (ties and neighbours).
		for range 512 {
			m := float64(math.Float32frombits(r.Uint32()&0x7f7fffff | 0x00800000))
			t := m + math.Abs(m)*0x1p-24 // the float32 tie above m (m normal)
			v = append(v, t, math.Nextafter(t, 0), math.Nextafter(t, math.Inf(1)))
		}
		v = append(v, specials...)
		return bufOf(src, v)
	case backend.Int32:
		v := []float64{0, 1, -1, 2147483647, -2147483648, 1<<24 + 1, -(1<<24 + 1), 65504, 65520, 1e9}
		for range 1000 {
			v = append(v, float64(int32(r.Uint32())))
		}
		return bufOf(src, v)
	case backend.Int64:
		b := newBuf(src, 1008)
		vs := []int64{0, 1, -1, 1<<53 + 1, -(1<<53 + 1), 1<<62 + 12345, -1 << 63, 1<<63 - 1}
		for i := range b.i64() {
			if i < len(vs) {
				b.i64()[i] = vs[i]
			} else {
				b.i64()[i] = int64(r.Uint64()) >> r.IntN(63)
			}
		}
		return b
	case backend.Bool:
		b := newBuf(src, 64)
		for i := range b.b8() {
			b.b8()[i] = i%3 == 0
		}
		return b
	}
	panic("bad dtype")
}

// castable drops inputs whose conversion to dst is unspecified (NaN, infinite or out of
// range to an integer type) and evens the length.
func castable(b *buf, dst backend.DType) *buf {
	lim := math.Inf(1)
	switch dst {
	case backend.Int32:
		lim = 2147483647
	case backend.Int64:
		lim = 0x1p63 - 1024
	}
	var keep []int
	for i := 0; i < b.n; i++ {
		x := b.at(i)
		if !math.IsInf(lim, 0) && (math.IsNaN(x) || math.Abs(x) >= lim) {
			continue
		}
		keep = append(keep, i)
	}
	keep = keep[:len(keep)&^1]
	out := newBuf(b.dt, len(keep))
	sz := b.dt.Size()
	for j, i := range keep {
		copy(out.raw()[j*sz:(j+1)*sz], b.raw()[i*sz:(i+1)*sz])
	}
	return out
}

// TestShimCast copies between every pair of dtypes, contiguous (different dtypes) and
// through a transposed destination (every pair), and compares with the CPU backend.
func TestShimCast(t *testing.T) {
	s := loadShim(t)
	for _, sdt := range allDTypes {
		all := castInputs(sdt)
		for _, ddt := range allDTypes {
			src := castable(all, ddt)
			n := src.n
			ss := up(src)
			for _, transposed := range []bool{false, true} {
				if !transposed && ddt == sdt {
					continue // a raw copy on both: the launcher uses cuMemcpy
				}
				m := n / 2
				dv := view(nil, 0, []int{n}, []int{1})
				sv := view(ss, 0, []int{n}, []int{1})
				if transposed {
					dv = view(nil, 0, []int{m, 2}, []int{1, m})
					sv = view(ss, 0, []int{m, 2}, []int{2, 1})
				}
				ds, _ := cpuB().Alloc(ddt, max(n, 1))
				dv.S = ds
				cpuB().Copy(dv, sv)
				want := down(ds, n)
				got := newBuf(ddt, n)
				ls, cnt := layouts(t, dv, sv)
				s.run(t, kernels.Name("copy", ddt, sdt), got.ptr(), src.ptr(), cnt, ls[0], ls[1])
				sameBits(t, kernels.Name("copy", ddt, sdt), got, want)
			}
			cpuB().Free(ss)
		}
	}
}

// TestShimCopyStrided copies broadcast, permuted and offset views.
func TestShimCopyStrided(t *testing.T) {
	s := loadShim(t)
	r := newRand(7)
	cases := []struct {
		dst, src backend.DType
		shape    []int
		dOff     int
		dStr     []int
		sOff     int
		sStr     []int
		srcLen   int
	}{
		{backend.Float32, backend.Float16, []int{4, 3, 5}, 2, []int{15, 5, 1}, 3, []int{5, 0, 1}, 23},
		{backend.Float64, backend.Float32, []int{4, 3, 5}, 0, []int{1, 20, 4}, 1, []int{15, 5, 1}, 61},
		{backend.BFloat16, backend.Float64, []int{2, 3, 4, 5}, 1, []int{60, 20, 5, 1}, 0, []int{0, 5, 0, 1}, 15},
		{backend.Float16, backend.Float16, []int{6, 7}, 5, []int{1, 6}, 0, []int{7, 1}, 42},
		{backend.Int64, backend.Float32, []int{3, 1, 4}, 0, []int{4, 4, 1}, 2, []int{0, 9, 2}, 9},
		{backend.Bool, backend.BFloat16, []int{2, 2, 2, 2, 2, 2, 2, 2}, 0, []int{128, 64, 32, 16, 8, 4, 2, 1},
			0, []int{1, 2, 4, 8, 16, 32, 64, 128}, 256},
	}
	for _, c := range cases {
		srcB := bufOf(c.src, randVals(r, c.srcLen+c.sOff, false))
		dn := c.dOff + 1
		for i, d := range c.shape {
			dn += (d - 1) * c.dStr[i]
		}
		base := bufOf(c.dst, randVals(r, dn, false))
		ss, ds := up(srcB), up(base)
		dv, sv := view(ds, c.dOff, c.shape, c.dStr), view(ss, c.sOff, c.shape, c.sStr)
		cpuB().Copy(dv, sv)
		want := down(ds, dn)
		cpuB().Free(ss)
		got := base.clone()
		ls, n := layouts(t, dv, sv)
		name := kernels.Name("copy", c.dst, c.src)
		s.run(t, name, got.ptr(), srcB.ptr(), n, ls[0], ls[1])
		sameBits(t, name, got, want)
	}
}

func TestShimFillArange(t *testing.T) {
	s := loadShim(t)
	for _, dt := range allDTypes {
		vals := []float64{0.1, math.Copysign(0, -1), 1e-50, 70000, 3.7, -2, 1e10, math.NaN(), math.Inf(-1)}
		if dt.IsInt() {
			vals = []float64{0.1, -2.9, 70000, 1e9, -7}
		}
		for _, v := range vals {
			const n = 300
			base := newBuf(dt, n)
			ds := up(base)
			dv := view(ds, 4, []int{3, 19}, []int{95, 5}) // every fifth of three rows
			cpuB().Fill(dv, v)
			want := down(ds, n)
			got := base.clone()
			ls, cnt := layouts(t, dv)
			s.run(t, kernels.Name("fill", dt), got.ptr(), cnt, ls[0], v)
			sameBits(t, kernels.Name("fill", dt), got, want)
		}
		for _, a := range [][2]float64{{-3.5, 0.37}, {0, 1}, {65000, 7.25}, {1e30, -3e28}} {
			const n = 1000
			ds, _ := cpuB().Alloc(dt, n)
			cpuB().Arange(ds, n, a[0], a[1])
			want := down(ds, n)
			if dt.IsInt() && math.Abs(a[0]) > 1e9 {
				continue
			}
			got := newBuf(dt, n)
			s.run(t, kernels.Name("arange", dt), got.ptr(), int64(n), a[0], a[1])
			sameBits(t, kernels.Name("arange", dt), got, want)
		}
	}
}

// TestShimRand checks that the GPU's draws are the CPU backend's: uniform and Bernoulli
// bit for bit; normal within 1 ulp (log and cos come from glibc here and from Go's math
// there; the GPU uses libdevice).
func TestShimRand(t *testing.T) {
	s := loadShim(t)
	rng := backend.RNG{Seed: 0xdeadbeef12345, Offset: 977}
	const n = 5000
	for _, dt := range floatDTypes {
		ds, _ := cpuB().Alloc(dt, n)
		cpuB().RandUniform(ds, n, rng, -2, 3)
		want := down(ds, n)
		got := newBuf(dt, n)
		s.run(t, kernels.Name("rand_uniform", dt), got.ptr(), int64(n), rng.Seed, rng.Offset, -2.0, 3.0)
		sameBits(t, kernels.Name("rand_uniform", dt), got, want)

		ds, _ = cpuB().Alloc(dt, n)
		cpuB().Bernoulli(ds, n, rng, 0.3, 1/0.7)
		want = down(ds, n)
		got = newBuf(dt, n)
		s.run(t, kernels.Name("bernoulli", dt), got.ptr(), int64(n), rng.Seed, rng.Offset, 0.3, 1/0.7)
		sameBits(t, kernels.Name("bernoulli", dt), got, want)

		ds, _ = cpuB().Alloc(dt, n)
		cpuB().RandNormal(ds, n, rng, 1, 2)
		want = down(ds, n)
		got = newBuf(dt, n)
		s.run(t, kernels.Name("rand_normal", dt), got.ptr(), int64(n), rng.Seed, rng.Offset, 1.0, 2.0)
		if d := closeTo(t, kernels.Name("rand_normal", dt), got, want, mathULP(dt)); d > 0 {
			t.Logf("rand_normal_%s: %d of %d draws differ (at most %d ulp; libm against Go's math)", kernels.Suffix(dt), d, n, mathULP(dt))
		}
	}
}

type unaryCase struct {
	op     backend.UnaryOp
	p0, p1 float64
	exact  bool // arithmetic (or correctly rounded) on both sides: bit-identical
}

var unaryCases = []unaryCase{
	{backend.Neg, 0, 0, true}, {backend.Exp, 0, 0, false}, {backend.Log, 0, 0, false},
	{backend.Sqrt, 0, 0, true}, {backend.Rsqrt, 0, 0, true}, {backend.Abs, 0, 0, true},
	{backend.Sign, 0, 0, true}, {backend.Relu, 0, 0, true}, {backend.Gelu, 0, 0, false},
	{backend.GeluTanh, 0, 0, false}, {backend.Tanh, 0, 0, false}, {backend.Sigmoid, 0, 0, false},
	{backend.Square, 0, 0, true}, {backend.Recip, 0, 0, true}, {backend.AddScalar, 0.1, 0, true},
	{backend.MulScalar, -3.3, 0, true}, {backend.PowScalar, 2, 0, true}, {backend.PowScalar, 0.5, 0, false},
	{backend.PowScalar, 3, 0, false}, {backend.PowScalar, -1.5, 0, false}, {backend.PowScalar, 0, 0, true},
	{backend.Clamp, -0.5, 2, true}, {backend.Clamp, math.Inf(-1), 0.25, true}, {backend.RSubScalar, 1.25, 0, true},
}

// TestShimUnary runs every unary op forward and backward (through x, through y, and
// recomputing y from x) in every float dtype. Transcendentals may differ by 1 ulp of
// the stored dtype (glibc against Go's math); the counts are logged.
func TestShimUnary(t *testing.T) {
	s := loadShim(t)
	r := newRand(11)
	vals := randVals(r, 3000, true)
	gvals := randVals(r, 3000, false)
	for _, dt := range floatDTypes {
		x, gy := bufOf(dt, vals), bufOf(dt, gvals)
		n := x.n
		xs, gs := up(x), up(gy)
		for _, c := range unaryCases {
			name := kernels.Name("unary", dt)
			tol := int64(0)
			// GELU in float32 and half data is float32 arithmetic on both sides (the
			// CPU's vec_gelu.go, copied in unary.cu): bit-identical too.
			if !c.exact && !(c.op == backend.Gelu && dt != backend.Float64) {
				tol = mathULP(dt)
			}
			ys, _ := cpuB().Alloc(dt, n)
			cpuB().Unary(c.op, ys, xs, n, c.p0, c.p1)
			want := down(ys, n)
			got := newBuf(dt, n)
			s.run(t, name, got.ptr(), x.ptr(), int64(n), int32(c.op), c.p0, c.p1)
			if d := closeTo(t, name+" op "+opName(c.op), got, want, tol); d > 0 {
				t.Logf("%s %s(%g): %d of %d differ (at most %d ulp)", name, opName(c.op), c.p0, d, n, tol)
			}

			// Backward, with a = x, a = y or a = x recomputed.
			useX, useY := kernels.UnaryGradUses(c.op)
			y := want // the CPU's forward output
			ysCPU := up(y)
			type variant struct {
				a         *buf
				cx, cy    backend.Storage
				recompute int32
			}
			vs := []variant{{nil, nil, nil, 0}}
			switch {
			case useX:
				vs = []variant{{x, xs, nil, 0}}
			case useY:
				vs = []variant{{y, nil, ysCPU, 0}, {x, xs, nil, 1}}
			}
			for _, v := range vs {
				gxs, _ := cpuB().Alloc(dt, n)
				cpuB().UnaryBackward(c.op, gxs, gs, v.cx, v.cy, n, c.p0, c.p1)
				want := down(gxs, n)
				got := newBuf(dt, n)
				var ap uint64
				if v.a != nil {
					ap = v.a.ptr()
				}
				bname := kernels.Name("unary_backward", dt)
				s.run(t, bname, got.ptr(), gy.ptr(), ap, int64(n), int32(c.op), c.p0, c.p1, v.recompute)
				if d := closeTo(t, bname+" op "+opName(c.op), got, want, tol); d > 0 {
					t.Logf("%s %s(%g) recompute=%d: %d of %d differ (at most %d ulp)", bname, opName(c.op), c.p0, v.recompute, d, n, tol)
				}
			}
			cpuB().Free(ysCPU)
		}
		cpuB().Free(xs)
		cpuB().Free(gs)
	}
}

// mathULP bounds the difference of a transcendental between the shim (glibc) and the
// CPU backend (Go's math) in ulps of the stored dtype: both compute in float64 and round
// once, so float32 and half results differ by at most 1 ulp. Float64 results carry the
// libraries' own errors, up to a few ulp for exp and tanh and more for Go's Pow on
// large results: 2^10 ulp is a relative bound of about 2.3e-13.
func mathULP(dt backend.DType) int64 {
	if dt == backend.Float64 {
		return 1 << 10
	}
	return 1
}

func opName(op backend.UnaryOp) string {
	return [...]string{"Neg", "Exp", "Log", "Sqrt", "Rsqrt", "Abs", "Sign", "Relu", "Gelu", "GeluTanh", "Tanh",
		"Sigmoid", "Square", "Recip", "AddScalar", "MulScalar", "PowScalar", "Clamp", "RSubScalar"}[op]
}

// intVals returns small integers without zero (integer division by zero converts an
// infinity, which is unspecified).
func intVals(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(r.IntN(13) - 6)
		if v[i] == 0 {
			v[i] = 3
		}
	}
	return v
}

// TestShimBinary runs every binary op on every dtype with a permuted a and a broadcast
// b, writing the dtype itself and, for comparisons, bool.
func TestShimBinary(t *testing.T) {
	s := loadShim(t)
	r := newRand(13)
	shape := []int{6, 5, 7}
	for _, dt := range allDTypes {
		var av, bv []float64
		switch {
		case dt.IsFloat():
			av = randVals(r, 210, true)
			bv = randVals(r, 5, false)
			bv[1], bv[2] = math.NaN(), 0
			av[3], av[38] = 1, 1 // equal elements for the comparisons
		case dt == backend.Bool:
			av, bv = intVals(r, 210), []float64{0, 1, 0, 1, 1}
			for i := range av {
				av[i] = float64(int(av[i]) & 1)
			}
		default:
			av, bv = intVals(r, 210), intVals(r, 5)
		}
		a, b := bufOf(dt, av), bufOf(dt, bv)
		as, bs := up(a), up(b)
		aView := view(as, 0, shape, []int{1, 6, 30}) // a stored as [7,5,6]
		bView := view(bs, 0, shape, []int{0, 1, 0})  // b is [1,5,1]
		for op := backend.BinaryOp(0); int(op) < backend.NumBinaryOps; op++ {
			outs := []backend.DType{dt}
			if op.IsComparison() && dt != backend.Bool {
				outs = append(outs, backend.Bool)
			}
			for _, odt := range outs {
				ds, _ := cpuB().Alloc(odt, 210)
				dv := view(ds, 0, shape, []int{35, 7, 1})
				cpuB().Binary(op, dv, aView, bView)
				want := down(ds, 210)
				got := newBuf(odt, 210)
				ls, n := layouts(t, dv, aView, bView)
				family := "binary"
				if odt == backend.Bool && op.IsComparison() {
					family = "compare"
				}
				name := kernels.Name(family, dt)
				s.run(t, name, got.ptr(), a.ptr(), b.ptr(), n, ls[0], ls[1], ls[2], int32(op))
				if op == backend.Pow && dt.IsFloat() {
					if d := closeTo(t, name+" Pow", got, want, mathULP(dt)); d > 0 {
						t.Logf("%s Pow: %d of 210 differ (at most %d ulp)", name, d, mathULP(dt))
					}
				} else {
					sameBits(t, name+" op "+[...]string{"Add", "Sub", "Mul", "Div", "Pow", "Maximum", "Minimum", "Eq", "Ne", "Lt", "Le", "Gt", "Ge"}[op], got, want)
				}
			}
		}
		// where: cond broadcast along the last axis.
		cond := newBuf(backend.Bool, 42)
		for i := range cond.b8() {
			cond.b8()[i] = r.IntN(2) == 0
		}
		cs := up(cond)
		cView := view(cs, 0, shape, []int{7, 0, 1})
		ds, _ := cpuB().Alloc(dt, 210)
		dv := view(ds, 0, shape, []int{35, 7, 1})
		cpuB().Where(dv, cView, aView, bView)
		want := down(ds, 210)
		got := newBuf(dt, 210)
		ls, n := layouts(t, dv, cView, aView, bView)
		s.run(t, kernels.Name("where", dt), got.ptr(), cond.ptr(), a.ptr(), b.ptr(), n, ls[0], ls[1], ls[2], ls[3])
		sameBits(t, kernels.Name("where", dt), got, want)
		for _, st := range []backend.Storage{as, bs, cs} {
			cpuB().Free(st)
		}
	}
}

func TestShimOneHot(t *testing.T) {
	s := loadShim(t)
	const n, classes = 37, 11
	for _, ix := range []backend.DType{backend.Int32, backend.Int64} {
		labels := newBuf(ix, n)
		for i := 0; i < n; i++ {
			labels.set(i, float64((i*7)%classes))
		}
		ls := up(labels)
		for _, dt := range allDTypes {
			ds, _ := cpuB().Alloc(dt, n*classes)
			cpuB().OneHot(ds, ls, n, classes, 0.9, 0.01)
			want := down(ds, n*classes)
			got := newBuf(dt, n*classes)
			bad := newBuf(backend.Int32, 1)
			name := kernels.Name("one_hot", dt, ix)
			s.run(t, name, got.ptr(), labels.ptr(), int64(n), int64(classes), 0.9, 0.01, bad.ptr())
			sameBits(t, name, got, want)
			if bad.i32()[0] != 0 {
				t.Errorf("%s: bad flag set for valid labels", name)
			}
		}
		cpuB().Free(ls)
		// An out-of-range label raises the flag.
		labels.set(5, classes)
		got := newBuf(backend.Float32, n*classes)
		bad := newBuf(backend.Int32, 1)
		s.run(t, kernels.Name("one_hot", backend.Float32, ix), got.ptr(), labels.ptr(), int64(n), int64(classes), 1.0, 0.0, bad.ptr())
		if bad.i32()[0] != 1 {
			t.Errorf("one_hot: out-of-range label did not set the bad flag")
		}
	}
}
