package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/backend/backendtest"
	"github.com/gamp-ml/gamp/backend/cpu"
)

// TestEmulatedMatchesCPU runs ops on the emulated device and on the CPU backend and
// compares the results bit for bit where package kernels promises it (kernels/doc.go:
// every kernel but the transcendentals and the tree-ordered sums of softmax and the
// norms): casts and strided, broadcast copies, fills, the arithmetic unary ops and
// their gradients, binary ops and comparisons with broadcasting and mixed dtypes,
// where, reductions, indexing, one-hot, im2col/col2im, pooling and uniform draws.
// NaNs compare equal whatever their payload; every other value by its bits.
func TestEmulatedMatchesCPU(t *testing.T) {
	g := needEmulated(t)
	c, err := cpu.New(0)
	if err != nil {
		t.Fatal(err)
	}
	p := pair{g: g, c: c}
	before := g.MemoryStats().Allocated
	t.Run("Copy", p.testCopy)
	t.Run("Fill", p.testFill)
	t.Run("Rand", p.testRand)
	t.Run("Unary", p.testUnary)
	t.Run("UnaryBackward", p.testUnaryBackward)
	t.Run("Binary", p.testBinary)
	t.Run("Where", p.testWhere)
	t.Run("Reduce", p.testReduce)
	t.Run("LayerNormParams", p.testLayerNormParams)
	t.Run("Index", p.testIndex)
	t.Run("Conv", p.testConv)
	t.Run("Optim", p.testOptim)
	t.Run("OptimHalfWeights", p.testOptimHalfWeights)
	t.Run("Scaler", p.testScaler)
	t.Run("Stats", func(t *testing.T) {
		// Every temporary the ops above allocated has been freed.
		if a := g.MemoryStats().Allocated; a != before {
			t.Errorf("%d bytes allocated after freeing everything, %d before", a, before)
		}
	})
}

// pair runs the same op on the emulated GPU (g) and the CPU backend (c).
type pair struct{ g, c backend.Backend }

// st is one operand on both backends.
type st [2]backend.Storage

// up uploads vals (rounded to dt) to both backends.
func (p pair) up(t *testing.T, dt backend.DType, vals []float64) st {
	t.Helper()
	return st{backendtest.Upload(t, p.g, dt, vals), backendtest.Upload(t, p.c, dt, vals)}
}

// garbage allocates n elements of dt on both backends, filled with the same non-zero
// pattern (so that an element a kernel forgets to write shows).
func (p pair) garbage(t *testing.T, dt backend.DType, n int) st {
	t.Helper()
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i%7) - 3.25
		if dt == backend.Bool {
			v[i] = float64(i % 2)
		}
	}
	return p.up(t, dt, v)
}

func (p pair) free(ss ...st) {
	for _, s := range ss {
		p.g.Free(s[0])
		p.c.Free(s[1])
	}
}

// run calls f once per backend with that backend's operands.
func (p pair) run(f func(b backend.Backend, i int)) {
	f(p.g, 0)
	f(p.c, 1)
}

// bits downloads s's raw bits, one uint64 per element.
func bits(t *testing.T, b backend.Backend, s backend.Storage) []uint64 {
	t.Helper()
	return backendtest.Bits(t, b, s)
}

// isNaN reports whether raw bits v of dt are a NaN.
func isNaN(dt backend.DType, v uint64) bool {
	switch dt {
	case backend.Float32:
		return v&0x7f800000 == 0x7f800000 && v&0x7fffff != 0
	case backend.Float64:
		return math.IsNaN(math.Float64frombits(v))
	case backend.Float16:
		return v&0x7c00 == 0x7c00 && v&0x3ff != 0
	case backend.BFloat16:
		return v&0x7f80 == 0x7f80 && v&0x7f != 0
	}
	return false
}

// same fails unless the two backends' s hold the same bits.
func (p pair) same(t *testing.T, what string, s st) {
	t.Helper()
	got, want := bits(t, p.g, s[0]), bits(t, p.c, s[1])
	dt := s[0].DType()
	bad := 0
	for i := range want {
		if got[i] == want[i] || isNaN(dt, got[i]) && isNaN(dt, want[i]) {
			continue
		}
		if bad < 5 {
			gv := backendtest.Download(t, p.g, s[0])[i]
			wv := backendtest.Download(t, p.c, s[1])[i]
			t.Errorf("%s: element %d is %v (%#x) on the GPU, %v (%#x) on the CPU", what, i, gv, got[i], wv, want[i])
		}
		bad++
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements differ", what, bad, len(want))
	}
}

var (
	allDTypes   = []backend.DType{backend.Float32, backend.Float64, backend.Float16, backend.BFloat16, backend.Int32, backend.Int64, backend.Bool}
	floatDTypes = backendtest.FloatDTypes
)

// specials are values that exercise conversions: signed zeros, infinities, NaN, the
// half-precision limits, subnormals and rounding ties of every narrower type.
var specials = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.5, -2.5, 3, 1e-3, 0.1, -0.7, 7, -100,
	65504, 65519.99, 65520, -1e5, 6e-8, 3e-8, 2.9802322387695312e-08, 1e-40, -1e-45, 1e-300,
	3.4e38, 3.5e38, -1e308, 1 + 1.0/2048, 1 + 3.0/2048, 1 + 1.0/256, 1 + 3.0/256, 1 + 0x1p-11 + 0x1p-22,
	math.Inf(1), math.Inf(-1), math.NaN(),
}

// values returns n inputs for dt: the specials that fit it (finite and in range for the
// integer and bool types, whose conversion of others is unspecified), then random ones.
func values(seed uint64, n int, dts ...backend.DType) []float64 {
	integer := false
	for _, dt := range dts {
		integer = integer || !dt.IsFloat()
	}
	var v []float64
	for _, x := range specials {
		if !integer || !math.IsNaN(x) && math.Abs(x) < 1<<31 {
			v = append(v, x)
		}
	}
	r := backendtest.RandVals(seed, n, -4, 4)
	for i := 0; len(v) < n; i++ {
		x := r[i] * math.Pow(10, float64(i%5-2))
		if integer {
			x = math.Round(r[i] * 50)
		}
		v = append(v, x)
	}
	return v[:n]
}

func dense(s backend.Storage, shape ...int) backend.View { return backend.Dense(s, 0, shape...) }

func (p pair) testCopy(t *testing.T) {
	for _, sdt := range allDTypes {
		for _, ddt := range allDTypes {
			name := fmt.Sprintf("%s→%s", sdt, ddt)
			src := p.up(t, sdt, values(1, 5*7, sdt, ddt))
			// dense, converting where the dtypes differ (a memcpy where they do not)
			dst := p.garbage(t, ddt, 35)
			p.run(func(b backend.Backend, i int) { b.Copy(dense(dst[i], 35), dense(src[i], 35)) })
			p.same(t, name+" dense", dst)
			// a transposed view into the middle of a larger destination
			dst2 := p.garbage(t, ddt, 40)
			p.run(func(b backend.Backend, i int) {
				b.Copy(backend.Dense(dst2[i], 3, 7, 5),
					backend.View{S: src[i], Shape: []int{7, 5}, Strides: []int{1, 7}})
			})
			p.same(t, name+" transposed", dst2)
			// one row broadcast to every row, from an offset
			dst3 := p.garbage(t, ddt, 4*6)
			p.run(func(b backend.Backend, i int) {
				b.Copy(dense(dst3[i], 4, 6), backend.View{S: src[i], Offset: 9, Shape: []int{4, 6}, Strides: []int{0, 1}})
			})
			p.same(t, name+" broadcast", dst3)
			p.free(src, dst, dst2, dst3)
		}
	}
	// Dense same-dtype copies (a memcpy) between offsets.
	for _, dt := range allDTypes {
		src := p.up(t, dt, values(3, 20, dt))
		dst := p.garbage(t, dt, 24)
		p.run(func(b backend.Backend, i int) { b.Copy(backend.Dense(dst[i], 7, 3, 5), backend.Dense(src[i], 4, 3, 5)) })
		p.same(t, "dense "+dt.String()+" at offsets", dst)
		p.free(src, dst)
	}
	// A strided same-dtype copy with more than one dimension left after merging.
	src := p.up(t, backend.Float32, values(2, 2*3*4*5, backend.Float32))
	dst := p.garbage(t, backend.Float32, 2*3*4*5)
	p.run(func(b backend.Backend, i int) {
		b.Copy(dense(dst[i], 2, 3, 4, 5), backend.View{S: src[i], Shape: []int{2, 3, 4, 5}, Strides: []int{60, 1, 15, 3}})
	})
	p.same(t, "float32 permuted 4-D", dst)
	p.free(src, dst)
}

func (p pair) testFill(t *testing.T) {
	for _, dt := range allDTypes {
		for _, v := range []float64{0, 1.5, -2, 65520, 1 + 0x1p-11 + 0x1p-22, math.Inf(-1)} {
			if !dt.IsFloat() && (math.IsInf(v, 0) || v != math.Trunc(v)) {
				continue
			}
			dst := p.garbage(t, dt, 30)
			p.run(func(b backend.Backend, i int) {
				b.Fill(backend.View{S: dst[i], Offset: 1, Shape: []int{4, 3}, Strides: []int{7, 2}}, v)
			})
			p.same(t, fmt.Sprintf("Fill %s %v strided", dt, v), dst)
			p.free(dst)
		}
		dst := p.garbage(t, dt, 50)
		p.run(func(b backend.Backend, i int) { b.Arange(dst[i], 40, -3, 0.25) })
		p.same(t, fmt.Sprintf("Arange %s", dt), dst)
		p.free(dst)
	}
}

func (p pair) testRand(t *testing.T) {
	for _, dt := range floatDTypes {
		r := backend.RNG{Seed: 42, Offset: 1000}
		dst := p.garbage(t, dt, 3000)
		p.run(func(b backend.Backend, i int) { b.RandUniform(dst[i], 2999, r, -2, 3) })
		p.same(t, "RandUniform "+dt.String(), dst)
		p.run(func(b backend.Backend, i int) { b.Bernoulli(dst[i], 2999, r, 0.3, 1/0.7) })
		p.same(t, "Bernoulli "+dt.String(), dst)
		// Box–Muller goes through log, sqrt and cos: equal within their last bits.
		p.run(func(b backend.Backend, i int) { b.RandNormal(dst[i], 2999, r, 1, 2) })
		backendtest.ExpectClose(t, "RandNormal "+dt.String(), backendtest.Download(t, p.g, dst[0]),
			backendtest.Download(t, p.c, dst[1]), backendtest.Tol(dt), 1e-300)
		p.free(dst)
	}
}

// testScaler checks the multi-tensor unscale (one flag per gradient, one wait) and the
// non-finite count against the CPU backend.
func (p pair) testScaler(t *testing.T) {
	gm, ok := p.g.(backend.MultiUnscaler)
	if !ok {
		t.Fatal("the CUDA backend is not a backend.MultiUnscaler")
	}
	dts := []backend.DType{backend.Float16, backend.Float32, backend.BFloat16, backend.Float64, backend.Float16, backend.Float32}
	var gs []st
	var ns []int
	for k, dt := range dts {
		n := 100 + 37*k
		v := backendtest.RandVals(uint64(40+k), n, -1e3, 1e3)
		switch k {
		case 1:
			v[n-1] = math.Inf(-1)
		case 3:
			v[5] = math.NaN()
		case 4:
			v[0] = 70000 // +Inf once rounded to float16
		}
		gs = append(gs, p.up(t, dt, v))
		ns = append(ns, n)
	}
	var gg []backend.Storage
	for _, g := range gs {
		gg = append(gg, g[0])
	}
	found := gm.UnscaleCheckMulti(gg, ns, 1.0/1024)
	for k, g := range gs {
		want := p.c.UnscaleCheck(g[1], ns[k], 1.0/1024)
		if found[k] != want {
			t.Errorf("gradient %d (%s): found %v on the GPU, %v on the CPU", k, dts[k], found[k], want)
		}
		p.same(t, fmt.Sprintf("unscaled gradient %d (%s)", k, dts[k]), g)
		gi, gn, gmax := p.g.CountNonFinite(g[0], ns[k])
		ci, cn, cmax := p.c.CountNonFinite(g[1], ns[k])
		if gi != ci || gn != cn || gmax != cmax {
			t.Errorf("CountNonFinite of gradient %d (%s): %d, %d, %v on the GPU; %d, %d, %v on the CPU", k, dts[k], gi, gn, gmax, ci, cn, cmax)
		}
		p.free(g)
	}
}

// exactUnary are the unary ops without a transcendental function (kernels/doc.go).
var exactUnary = []struct {
	op     backend.UnaryOp
	p0, p1 float64
}{
	{backend.Neg, 0, 0}, {backend.Sqrt, 0, 0}, {backend.Rsqrt, 0, 0}, {backend.Abs, 0, 0}, {backend.Sign, 0, 0},
	{backend.Relu, 0, 0}, {backend.Square, 0, 0}, {backend.Recip, 0, 0}, {backend.AddScalar, 0.1, 0},
	{backend.MulScalar, 1.0 / 3, 0}, {backend.Clamp, -0.5, 2}, {backend.RSubScalar, 1, 0},
}

func (p pair) testUnary(t *testing.T) {
	type io struct{ dst, src backend.DType }
	var cases []io
	for _, dt := range floatDTypes {
		cases = append(cases, io{dt, dt})
	}
	// Mixed dtypes: the CPU computes in the wider type (float32 for two half types) and
	// rounds once into dst.
	cases = append(cases, io{backend.Float32, backend.Float16}, io{backend.Float16, backend.Float32},
		io{backend.Float32, backend.Float64}, io{backend.Float16, backend.BFloat16}, io{backend.BFloat16, backend.Float64})
	for _, c := range cases {
		src := p.up(t, c.src, values(3, 500, c.src))
		for _, u := range exactUnary {
			dst := p.garbage(t, c.dst, 501)
			p.run(func(b backend.Backend, i int) { b.Unary(u.op, dst[i], src[i], 500, u.p0, u.p1) })
			p.same(t, fmt.Sprintf("Unary %d %s→%s", u.op, c.src, c.dst), dst)
			p.free(dst)
		}
		p.free(src)
	}
}

func (p pair) testUnaryBackward(t *testing.T) {
	for _, dt := range floatDTypes {
		x := p.up(t, dt, values(4, 300, dt))
		gy := p.up(t, dt, backendtest.RandVals(5, 300, -2, 2))
		for _, u := range exactUnary {
			y := p.garbage(t, dt, 300)
			p.run(func(b backend.Backend, i int) { b.Unary(u.op, y[i], x[i], 300, u.p0, u.p1) })
			gx := p.garbage(t, dt, 301)
			p.run(func(b backend.Backend, i int) { b.UnaryBackward(u.op, gx[i], gy[i], x[i], y[i], 300, u.p0, u.p1) })
			p.same(t, fmt.Sprintf("UnaryBackward %d %s", u.op, dt), gx)
			p.free(y, gx)
		}
		p.free(x, gy)
	}
}

func (p pair) testBinary(t *testing.T) {
	type io struct{ dst, x, y backend.DType }
	var cases []io
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.Float16, backend.BFloat16, backend.Int32, backend.Int64} {
		cases = append(cases, io{dt, dt, dt})
	}
	cases = append(cases, io{backend.Float32, backend.Float16, backend.Float32}, io{backend.Float16, backend.Float32, backend.Float16},
		io{backend.Float32, backend.Float64, backend.Float32}, io{backend.Float32, backend.BFloat16, backend.Float16},
		io{backend.Float64, backend.Int32, backend.Float32})
	ops := []backend.BinaryOp{backend.Add, backend.Sub, backend.Mul, backend.Div, backend.Maximum, backend.Minimum,
		backend.Eq, backend.Ne, backend.Lt, backend.Le, backend.Gt, backend.Ge}
	for _, c := range cases {
		xv := values(6, 4*5, c.x, c.dst)
		yv := values(7, 3*5, c.y, c.dst)
		if !c.dst.IsFloat() || !c.x.IsFloat() || !c.y.IsFloat() {
			for i := range yv { // no integer division by zero
				if yv[i] == 0 {
					yv[i] = 3
				}
			}
		}
		x, y := p.up(t, c.x, xv), p.up(t, c.y, yv)
		for _, op := range ops {
			ddt := c.dst
			if op.IsComparison() {
				ddt = backend.Bool
			}
			dst := p.garbage(t, ddt, 4*3*5)
			// [4, 1, 5] op [1, 3, 5] → [4, 3, 5], y read backwards along its last axis
			p.run(func(b backend.Backend, i int) {
				b.Binary(op, dense(dst[i], 4, 3, 5),
					backend.View{S: x[i], Shape: []int{4, 3, 5}, Strides: []int{5, 0, 1}},
					backend.View{S: y[i], Offset: 4, Shape: []int{4, 3, 5}, Strides: []int{0, 5, -1}})
			})
			p.same(t, fmt.Sprintf("Binary %d %s·%s→%s", op, c.x, c.y, ddt), dst)
			p.free(dst)
		}
		p.free(x, y)
	}
}

func (p pair) testWhere(t *testing.T) {
	for _, dt := range allDTypes {
		cond := p.up(t, backend.Bool, []float64{1, 0, 0, 1, 1})
		x := p.up(t, dt, values(8, 6*5, dt))
		y := p.up(t, backend.Float32, values(9, 6, dt))
		dst := p.garbage(t, dt, 30)
		p.run(func(b backend.Backend, i int) {
			b.Where(dense(dst[i], 6, 5), backend.View{S: cond[i], Shape: []int{6, 5}, Strides: []int{0, 1}},
				dense(x[i], 6, 5), backend.View{S: y[i], Shape: []int{6, 5}, Strides: []int{1, 0}})
		})
		p.same(t, "Where "+dt.String(), dst)
		p.free(cond, x, y, dst)
	}
}

func (p pair) testReduce(t *testing.T) {
	// {2, 600, 40} and {1, 70, 1100} sum their columns in two stages (2 and 5 row blocks).
	shapes := [][3]int{{3, 5, 1}, {2, 7, 3}, {2, 3000, 1}, {3, 40, 70}, {1, 1, 4}, {2, 600, 40}, {1, 70, 1100}}
	ops := []backend.ReduceOp{backend.Sum, backend.Mean, backend.Max, backend.Min, backend.ArgMax, backend.ArgMin}
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.Float16, backend.BFloat16, backend.Int32, backend.Int64} {
		for si, sh := range shapes {
			outer, n, inner := sh[0], sh[1], sh[2]
			v := backendtest.RandVals(uint64(10+si), outer*n*inner, -3, 3)
			if dt.IsFloat() && si == 1 {
				v[4], v[9] = math.NaN(), math.Inf(1)
			}
			if !dt.IsFloat() {
				for i := range v {
					v[i] = math.Round(v[i] * 20)
				}
			}
			src := p.up(t, dt, v)
			for _, op := range ops {
				ddt := dt
				if op == backend.ArgMax || op == backend.ArgMin {
					ddt = backend.Int64
				}
				dst := p.garbage(t, ddt, outer*inner)
				p.run(func(b backend.Backend, i int) { b.Reduce(op, dst[i], src[i], outer, n, inner) })
				p.same(t, fmt.Sprintf("Reduce %d %s %v", op, dt, sh), dst)
				p.free(dst)
			}
			p.free(src)
		}
	}
	// Mixed dtypes: the CPU backend reduces in float64 (float32 for the max and min of
	// half and float32 data) and rounds once into dst.
	for _, c := range [][2]backend.DType{{backend.Float32, backend.Float16}, {backend.Float16, backend.Float32},
		{backend.Float64, backend.Float32}, {backend.Float32, backend.BFloat16}, {backend.Int64, backend.Float32},
		{backend.Int32, backend.Int64}, {backend.Float16, backend.BFloat16}} {
		v := values(20, 3*700*2, c[0])
		src := p.up(t, c[0], v)
		for _, op := range ops[:4] {
			for _, sh := range [][3]int{{6, 700, 1}, {3, 700, 2}} {
				dst := p.garbage(t, c[1], sh[0]*sh[2])
				p.run(func(b backend.Backend, i int) { b.Reduce(op, dst[i], src[i], sh[0], sh[1], sh[2]) })
				p.same(t, fmt.Sprintf("Reduce %d %s→%s %v", op, c[0], c[1], sh), dst)
				p.free(dst)
			}
		}
		p.free(src)
	}
	// A count: Sum of Bool into Int64.
	src := p.up(t, backend.Bool, []float64{1, 0, 1, 1, 0, 1, 1, 1, 0, 0, 1, 0})
	dst := p.garbage(t, backend.Int64, 4)
	p.run(func(b backend.Backend, i int) { b.Reduce(backend.Sum, dst[i], src[i], 2, 3, 2) })
	p.same(t, "Sum bool→int64", dst)
	p.free(src, dst)
}

func (p pair) testIndex(t *testing.T) {
	for _, ix := range []backend.DType{backend.Int32, backend.Int64} {
		idx := p.up(t, ix, []float64{3, 0, 3, 1, 4, 0, 3})
		labels := p.up(t, ix, []float64{2, 0, 4, 1})
		for _, dt := range floatDTypes {
			src := p.up(t, dt, values(11, 2*5*3, dt))
			dst := p.garbage(t, dt, 2*7*3)
			p.run(func(b backend.Backend, i int) { b.IndexSelect(dst[i], src[i], idx[i], 2, 5, 3, 7) })
			p.same(t, fmt.Sprintf("IndexSelect %s[%s]", dt, ix), dst)
			acc := p.up(t, dt, values(12, 2*5*3, dt))
			p.run(func(b backend.Backend, i int) { b.IndexAdd(acc[i], dst[i], idx[i], 2, 5, 3, 7) })
			p.same(t, fmt.Sprintf("IndexAdd %s[%s]", dt, ix), acc)
			oh := p.garbage(t, dt, 4*5)
			p.run(func(b backend.Backend, i int) { b.OneHot(oh[i], labels[i], 4, 5, 0.9, 0.025) })
			p.same(t, fmt.Sprintf("OneHot %s[%s]", dt, ix), oh)
			p.free(src, dst, acc, oh)
		}
		p.free(idx, labels)
	}
}

func (p pair) testConv(t *testing.T) {
	a := backend.ConvArgs{N: 2, C: 3, H: 6, W: 5, KH: 3, KW: 2, StrideH: 2, StrideW: 1, PadH: 1, PadW: 1, DilationH: 1, DilationW: 2}
	a.OH = (a.H+2*a.PadH-a.DilationH*(a.KH-1)-1)/a.StrideH + 1
	a.OW = (a.W+2*a.PadW-a.DilationW*(a.KW-1)-1)/a.StrideW + 1
	pa := backend.PoolArgs{Kind: backend.MaxPool, N: 2, C: 3, H: 6, W: 5, KH: 2, KW: 2, StrideH: 2, StrideW: 2, PadH: 1, PadW: 0, OH: 4, OW: 2}
	for _, dt := range floatDTypes {
		img := p.up(t, dt, values(13, a.N*a.C*a.H*a.W, dt))
		cols := p.garbage(t, dt, a.N*a.C*a.KH*a.KW*a.OH*a.OW)
		p.run(func(b backend.Backend, i int) { b.Im2Col(cols[i], img[i], a) })
		p.same(t, "Im2Col "+dt.String(), cols)
		back := p.garbage(t, dt, a.N*a.C*a.H*a.W)
		p.run(func(b backend.Backend, i int) { b.Col2Im(back[i], cols[i], a) })
		p.same(t, "Col2Im "+dt.String(), back)
		for _, kind := range []backend.PoolKind{backend.MaxPool, backend.AvgPool} {
			pa.Kind = kind
			out := p.garbage(t, dt, pa.N*pa.C*pa.OH*pa.OW)
			idx := p.garbage(t, backend.Int64, pa.N*pa.C*pa.OH*pa.OW)
			p.run(func(b backend.Backend, i int) { b.Pool(out[i], idx[i], img[i], pa) })
			p.same(t, fmt.Sprintf("Pool %d %s", kind, dt), out)
			if kind == backend.MaxPool {
				p.same(t, fmt.Sprintf("Pool %d %s index", kind, dt), idx)
			}
			gx := p.garbage(t, dt, pa.N*pa.C*pa.H*pa.W)
			p.run(func(b backend.Backend, i int) { b.PoolBackward(gx[i], out[i], idx[i], pa) })
			p.same(t, fmt.Sprintf("PoolBackward %d %s", kind, dt), gx)
			p.free(out, idx, gx)
		}
		p.free(img, cols, back)
	}
}

// testOptim compares the fused optimizer steps (backend.FusedOptimizer), which both
// backends promise equal to optim's composed ops bit for bit.
func (p pair) testOptim(t *testing.T) {
	gf, ok1 := p.g.(backend.FusedOptimizer)
	cf, ok2 := p.c.(backend.FusedOptimizer)
	if !ok1 || !ok2 {
		t.Fatal("a backend is not a backend.FusedOptimizer")
	}
	fs := [2]backend.FusedOptimizer{gf, cf}
	const n = 777
	for _, c := range []struct{ master, half backend.DType }{
		{backend.Float32, backend.Invalid}, {backend.Float64, backend.Invalid},
		{backend.Float32, backend.Float16}, {backend.Float32, backend.BFloat16},
	} {
		name := c.master.String()
		if c.half != backend.Invalid {
			name += "+" + c.half.String()
		}
		w := p.up(t, c.master, backendtest.RandVals(30, n, -1, 1))
		buf := p.garbage(t, c.master, n)
		m, v, vmax := p.garbage(t, c.master, n), p.up(t, c.master, make([]float64, n)), p.up(t, c.master, make([]float64, n))
		var half st
		if c.half != backend.Invalid {
			half = p.garbage(t, c.half, n)
		}
		hs := func(i int) backend.Storage {
			if half[i] == nil {
				return nil
			}
			return half[i]
		}
		for step := 1; step <= 3; step++ {
			g := p.up(t, c.master, backendtest.RandVals(uint64(31+step), n, -0.5, 0.5))
			for i, f := range fs {
				f.SGDStep(backend.SGDArgs{W: w[i], G: g[i], Buf: buf[i], Half: hs(i), N: n, LR: 0.1, Momentum: 0.9,
					Dampening: 0.1, WeightDecay: 1e-2, Nesterov: step == 2, First: step == 1})
			}
			p.same(t, fmt.Sprintf("SGD %s step %d weights", name, step), w)
			p.same(t, fmt.Sprintf("SGD %s step %d momentum", name, step), buf)
			if half[0] != nil {
				p.same(t, fmt.Sprintf("SGD %s step %d half copy", name, step), half)
			}
			for i, f := range fs {
				f.AdamStep(backend.AdamArgs{W: w[i], G: g[i], M: m[i], V: v[i], VMax: vmax[i], Half: hs(i), N: n,
					LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-2, Step: int64(step),
					Decoupled: step != 2, AMSGrad: true, Maximize: step == 3})
			}
			p.same(t, fmt.Sprintf("Adam %s step %d weights", name, step), w)
			p.same(t, fmt.Sprintf("Adam %s step %d moments", name, step), v)
			if half[0] != nil {
				p.same(t, fmt.Sprintf("Adam %s step %d half copy", name, step), half)
			}
			p.free(g)
		}
		p.free(w, buf, m, v, vmax)
		if half[0] != nil {
			p.free(half)
		}
	}
}

// testLayerNormParams compares the layer norm's weight and bias gradients, bit for bit,
// from the same saved statistics: one row block (one kernel) and several (two stages).
func (p pair) testLayerNormParams(t *testing.T) {
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.Float16, backend.BFloat16} {
		for _, sh := range [][2]int{{7, 300}, {300, 300}, {131, 1000}} {
			rows, cols := sh[0], sh[1]
			x := p.up(t, dt, backendtest.RandVals(31, rows*cols, -3, 3))
			gy := p.up(t, dt, backendtest.RandVals(32, rows*cols, -1, 1))
			w := p.up(t, backend.Float32, backendtest.RandVals(33, cols, 0.5, 1.5))
			mean := p.up(t, backend.Float32, backendtest.RandVals(34, rows, -0.1, 0.1))
			inv := p.up(t, backend.Float32, backendtest.RandVals(35, rows, 0.8, 1.2))
			gx := p.garbage(t, dt, rows*cols)
			gw, gb := p.garbage(t, backend.Float32, cols), p.garbage(t, backend.Float32, cols)
			p.run(func(b backend.Backend, i int) {
				b.LayerNormBackward(backend.NormArgs{X: x[i], GY: gy[i], GX: gx[i], Weight: w[i], SaveMean: mean[i],
					SaveInvStd: inv[i], GWeight: gw[i], GBias: gb[i], N: rows, C: cols, Eps: 1e-5})
			})
			p.same(t, fmt.Sprintf("LayerNormBackward %s %v gweight", dt, sh), gw)
			p.same(t, fmt.Sprintf("LayerNormBackward %s %v gbias", dt, sh), gb)
			p.free(x, gy, w, mean, inv, gx, gw, gb)
		}
	}
}
