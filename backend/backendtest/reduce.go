package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

func init() {
	register("Reduce", testReduce)
	register("Softmax", testSoftmax)
	register("SoftmaxBackward", testSoftmaxBackward)
}

var reduceOps = []struct {
	op   backend.ReduceOp
	name string
}{
	{backend.Sum, "Sum"}, {backend.Mean, "Mean"}, {backend.Max, "Max"}, {backend.Min, "Min"},
	{backend.ArgMax, "ArgMax"}, {backend.ArgMin, "ArgMin"},
}

// reduceShapes are [outer, n, inner]: contiguous rows short and long (split into
// blocks), many short rows, inner > 1 with column chunks and with long reduced axes.
var reduceShapes = [][3]int{
	{1, 1, 1}, {3, 5, 1}, {2, 7, 3}, {1, 100000, 1}, {64, 33, 17}, {3000, 3, 1},
	{1, 40000, 3}, {2, 5, 1500}, {5, 1, 4},
}

// minNormal is the smallest positive normal value of dt: the absolute error any result
// may carry from gradual underflow.
func minNormal(dt backend.DType) float64 {
	switch dt {
	case backend.Float16:
		return 0x1p-14
	case backend.Float64:
		return 0x1p-1022
	}
	return 0x1p-126
}

// expectWithin fails t at the first i where got[i] is farther than tol[i] from
// want[i]; NaN matches NaN and infinities must match exactly.
func expectWithin(t testing.TB, what string, got, want, tol []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values, want %d", what, len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		var ok bool
		switch {
		case math.IsNaN(w):
			ok = math.IsNaN(g)
		case math.IsInf(w, 0) || math.IsInf(g, 0):
			ok = g == w
		default:
			ok = math.Abs(g-w) <= tol[i]
		}
		if !ok {
			t.Fatalf("%s: element %d = %v, want %v (tolerance %g)", what, i, g, w, tol[i])
		}
	}
}

// expectPanic fails t unless f panics.
func expectPanic(t testing.TB, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: did not panic", what)
		}
	}()
	f()
}

// reduceRef reduces x [outer, n, inner] over n in float64: the values (the extreme for
// Arg ops too), the first indices of the extremes, and for Sum/Mean the sum of |terms|.
func reduceRef(op backend.ReduceOp, x []float64, outer, n, inner int) (vals, idx, abs []float64) {
	vals, idx, abs = make([]float64, outer*inner), make([]float64, outer*inner), make([]float64, outer*inner)
	for o := 0; o < outer; o++ {
		for c := 0; c < inner; c++ {
			k := o*inner + c
			at := func(j int) float64 { return x[(o*n+j)*inner+c] }
			switch op {
			case backend.Sum, backend.Mean:
				var s, a float64
				for j := 0; j < n; j++ {
					s += at(j)
					a += math.Abs(at(j))
				}
				if op == backend.Mean {
					s, a = s/float64(n), a/float64(n)
				}
				vals[k], abs[k] = s, a
			default:
				better := func(v, m float64) bool { return v > m }
				if op == backend.Min || op == backend.ArgMin {
					better = func(v, m float64) bool { return v < m }
				}
				m, mi := at(0), 0
				for j := 1; j < n && !math.IsNaN(m); j++ {
					if v := at(j); math.IsNaN(v) || better(v, m) {
						m, mi = v, j
					}
				}
				vals[k], idx[k] = m, float64(mi)
			}
		}
	}
	return vals, idx, abs
}

// sumSlack is how far a sum may drift, relative to the sum of |terms|, from rounding
// during accumulation: float64 accumulation for float32/float64, float32 at least for
// half inputs.
func sumSlack(dt backend.DType) float64 {
	if dt.IsHalf() {
		return 1e-5
	}
	return 1e-12
}

func testReduce(t *testing.T, b backend.Backend) {
	for si, sh := range reduceShapes {
		outer, n, inner := sh[0], sh[1], sh[2]
		for _, dt := range FloatDTypes {
			for _, withNaN := range []bool{false, true} {
				x := Rounded(dt, RandVals(uint64(si*10+1), outer*n*inner, -1, 1))
				if withNaN {
					// A NaN in every other (outer, inner) column, twice in some.
					for k := 0; k < outer*inner; k += 2 {
						o, c := k/inner, k%inner
						j := (k*7919 + 2*n/3) % n
						x[(o*n+j)*inner+c] = math.NaN()
						if k%4 == 0 && j+1 < n {
							x[(o*n+j+1)*inner+c] = math.NaN()
						}
					}
				}
				src := Upload(t, b, dt, x)
				for _, r := range reduceOps {
					if withNaN && (r.op == backend.Sum || r.op == backend.Mean) {
						continue
					}
					what := fmt.Sprintf("%s %s [%d, %d, %d] nan=%v", r.name, dt, outer, n, inner, withNaN)
					vals, idx, abs := reduceRef(r.op, x, outer, n, inner)
					switch r.op {
					case backend.ArgMax, backend.ArgMin:
						dst := fillGarbage(t, b, backend.Int64, outer*inner)
						b.Reduce(r.op, dst, src, outer, n, inner)
						ExpectClose(t, what, Download(t, b, dst), idx, 0, 0)
						Free(b, dst)
					case backend.Max, backend.Min:
						dst := fillGarbage(t, b, dt, outer*inner)
						b.Reduce(r.op, dst, src, outer, n, inner)
						ExpectClose(t, what, Download(t, b, dst), vals, 0, 0)
						Free(b, dst)
					default:
						dst := fillGarbage(t, b, dt, outer*inner)
						b.Reduce(r.op, dst, src, outer, n, inner)
						tol := make([]float64, len(vals))
						for i := range tol {
							tol[i] = Tol(dt)*math.Abs(vals[i]) + sumSlack(dt)*abs[i]
						}
						got := Download(t, b, dst)
						expectWithin(t, what, got, Rounded(dt, vals), tol)
						// Same bits on a second run, however the work was split.
						b.Reduce(r.op, dst, src, outer, n, inner)
						again := Download(t, b, dst)
						for i := range got {
							if math.Float64bits(got[i]) != math.Float64bits(again[i]) {
								t.Fatalf("%s: element %d is %v on one run and %v on another", what, i, got[i], again[i])
							}
						}
						Free(b, dst)
					}
				}
				Free(b, src)
			}
		}
	}
	testReduceEmpty(t, b)
}

// testReduceEmpty checks n = 0: Sum writes 0, Mean NaN, the others have no identity.
func testReduceEmpty(t *testing.T, b backend.Backend) {
	for _, dt := range FloatDTypes {
		src, err := b.Alloc(dt, 0)
		if err != nil {
			t.Fatal(err)
		}
		dst := fillGarbage(t, b, dt, 6)
		b.Reduce(backend.Sum, dst, src, 3, 0, 2)
		ExpectClose(t, "Sum over n=0 "+dt.String(), Download(t, b, dst), make([]float64, 6), 0, 0)
		b.Reduce(backend.Mean, dst, src, 3, 0, 2)
		nans := []float64{math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()}
		ExpectClose(t, "Mean over n=0 "+dt.String(), Download(t, b, dst), nans, 0, 0)
		expectPanic(t, "Max over n=0 "+dt.String(), func() { b.Reduce(backend.Max, dst, src, 3, 0, 2) })
		idx := fillGarbage(t, b, backend.Int64, 6)
		expectPanic(t, "ArgMin over n=0 "+dt.String(), func() { b.Reduce(backend.ArgMin, idx, src, 3, 0, 2) })
		Free(b, src, dst, idx)
	}
}

// softmaxShapes are [outer, n]; rows longer than 1024 cross the kernels' chunks.
var softmaxShapes = [][2]int{{1, 1}, {3, 7}, {4, 1000}, {3, 1025}, {2, 5000}, {300, 10}}

// softmaxInputs returns x [outer, n] rounded to dt. Row 0 sits near +1e4, row 1 near
// -1e4 and row 2 mixes both, which overflows exp unless the maximum is subtracted.
func softmaxInputs(dt backend.DType, seed uint64, outer, n int) []float64 {
	x := RandVals(seed, outer*n, -5, 5)
	for i := range x {
		switch r := i / n; r {
		case 0:
			x[i] += 1e4
		case 1:
			x[i] -= 1e4
		case 2:
			if i%2 == 0 {
				x[i] += 1e4
			} else {
				x[i] -= 1e4
			}
		}
	}
	return Rounded(dt, x)
}

// softmaxRef returns softmax (or log-softmax) of each row of x in float64.
func softmaxRef(x []float64, outer, n int, log bool) []float64 {
	y := make([]float64, len(x))
	for r := 0; r < outer; r++ {
		row := x[r*n : (r+1)*n]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, v)
		}
		var s float64
		for _, v := range row {
			s += math.Exp(v - m)
		}
		for i, v := range row {
			if log {
				y[r*n+i] = v - m - math.Log(s)
			} else {
				y[r*n+i] = math.Exp(v-m) / s
			}
		}
	}
	return y
}

func testSoftmax(t *testing.T, b backend.Backend) {
	for si, sh := range softmaxShapes {
		outer, n := sh[0], sh[1]
		for _, dt := range FloatDTypes {
			x := softmaxInputs(dt, uint64(si+20), outer, n)
			src := Upload(t, b, dt, x)
			for _, log := range []bool{false, true} {
				what := fmt.Sprintf("Softmax(log=%v) %s [%d, %d]", log, dt, outer, n)
				want := softmaxRef(x, outer, n, log)
				tol := make([]float64, len(want))
				for i, w := range want {
					// The row's log-sum may differ by float64 rounding of its sum.
					tol[i] = Tol(dt)*math.Abs(w) + 2e-16*float64(n) + minNormal(dt)
				}
				dst := fillGarbage(t, b, dt, outer*n)
				b.Softmax(dst, src, outer, n, log)
				expectWithin(t, what, Download(t, b, dst), Rounded(dt, want), tol)
				Free(b, dst)
			}
			Free(b, src)
		}
	}
}

func testSoftmaxBackward(t *testing.T, b backend.Backend) {
	for si, sh := range softmaxShapes {
		outer, n := sh[0], sh[1]
		for _, dt := range FloatDTypes {
			x := softmaxInputs(dt, uint64(si+40), outer, n)
			gy := Rounded(dt, RandVals(uint64(si+60), outer*n, -1, 1))
			for _, log := range []bool{false, true} {
				what := fmt.Sprintf("SoftmaxBackward(log=%v) %s [%d, %d]", log, dt, outer, n)
				y := Rounded(dt, softmaxRef(x, outer, n, log))
				want, tol := make([]float64, len(y)), make([]float64, len(y))
				for r := 0; r < outer; r++ {
					// dot: Σ gy·y (softmax) or Σ gy (log-softmax); abs: the same of |terms|.
					var dot, abs float64
					for i := r * n; i < (r+1)*n; i++ {
						if log {
							dot += gy[i]
							abs += math.Abs(gy[i])
						} else {
							dot += gy[i] * y[i]
							abs += math.Abs(gy[i] * y[i])
						}
					}
					for i := r * n; i < (r+1)*n; i++ {
						if log {
							e := math.Exp(y[i])
							want[i] = gy[i] - e*dot
							tol[i] = Tol(dt)*(math.Abs(want[i])+math.Abs(gy[i])+e*abs) + minNormal(dt)
						} else {
							want[i] = y[i] * (gy[i] - dot)
							tol[i] = Tol(dt)*(math.Abs(want[i])+y[i]*(math.Abs(gy[i])+abs)) + minNormal(dt)
						}
					}
				}
				ys, gys := Upload(t, b, dt, y), Upload(t, b, dt, gy)
				gx := fillGarbage(t, b, dt, outer*n)
				b.SoftmaxBackward(gx, gys, ys, outer, n, log)
				expectWithin(t, what, Download(t, b, gx), want, tol)
				Free(b, ys, gys, gx)
			}
		}
	}
}
