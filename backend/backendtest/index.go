package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

func init() {
	register("OneHot", testOneHot)
	register("IndexSelect", testIndexSelect)
	register("IndexAdd", testIndexAdd)
}

// indexDTypes are the dtypes labels and indices may have.
var indexDTypes = []backend.DType{backend.Int32, backend.Int64}

// randIndices returns m integers in [0, n) (as float64, for Upload), with repeats.
func randIndices(seed uint64, m, n int) []float64 {
	v := RandVals(seed, m, 0, float64(n))
	for i := range v {
		v[i] = math.Min(math.Floor(v[i]), float64(n-1))
	}
	return v
}

func testOneHot(t *testing.T, b backend.Backend) {
	shapes := [][2]int{{0, 5}, {1, 1}, {7, 3}, {300, 10}, {5, 1500}, {3000, 37}}
	for si, sh := range shapes {
		n, classes := sh[0], sh[1]
		labels := randIndices(uint64(si+80), n, classes)
		for _, lt := range indexDTypes {
			ls := Upload(t, b, lt, labels)
			for _, dt := range FloatDTypes {
				on, off := 0.9, 0.1/float64(classes)
				want := make([]float64, n*classes)
				for i := range want {
					want[i] = Round(dt, off)
				}
				for i, l := range labels {
					want[i*classes+int(l)] = Round(dt, on)
				}
				dst := fillGarbage(t, b, dt, n*classes)
				b.OneHot(dst, ls, n, classes, on, off)
				ExpectClose(t, fmt.Sprintf("OneHot %s labels %s [%d, %d]", dt, lt, n, classes), Download(t, b, dst), want, 0, 0)
				Free(b, dst)
			}
			Free(b, ls)
		}
	}
	for _, lt := range indexDTypes {
		for _, bad := range []float64{4, -1} {
			ls := Upload(t, b, lt, []float64{0, 3, bad})
			dst := fillGarbage(t, b, backend.Float32, 3*4)
			expectPanic(t, fmt.Sprintf("OneHot with label %v of 4 classes (%s)", bad, lt), func() {
				b.OneHot(dst, ls, 3, 4, 1, 0)
				_ = b.Synchronize()
			})
			Free(b, ls, dst)
		}
	}
}

// indexShapes are (outer, n, inner, m) for IndexSelect and IndexAdd: repeated indices,
// rows longer than a chunk, m = 0, many single-element rows.
var indexShapes = [][4]int{
	{1, 5, 1, 8}, {3, 7, 4, 10}, {2, 50, 1500, 3}, {1, 10, 3, 0}, {4, 1000, 1, 5000},
	{1, 100, 64, 2000}, {2, 3, 5, 1},
}

// indexSelectRef gathers x [outer, n, inner] into [outer, m, inner].
func indexSelectRef(x, idx []float64, outer, n, inner int) []float64 {
	m := len(idx)
	out := make([]float64, outer*m*inner)
	for o := 0; o < outer; o++ {
		for j, k := range idx {
			copy(out[(o*m+j)*inner:(o*m+j+1)*inner], x[(o*n+int(k))*inner:(o*n+int(k)+1)*inner])
		}
	}
	return out
}

func testIndexSelect(t *testing.T, b backend.Backend) {
	for si, sh := range indexShapes {
		outer, n, inner, m := sh[0], sh[1], sh[2], sh[3]
		idx := randIndices(uint64(si+90), m, n)
		for _, it := range indexDTypes {
			is := Upload(t, b, it, idx)
			for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.Float16, backend.BFloat16, backend.Int64} {
				x := Rounded(dt, RandVals(uint64(si+91), outer*n*inner, -100, 100))
				src := Upload(t, b, dt, x)
				dst := fillGarbage(t, b, dt, outer*m*inner)
				b.IndexSelect(dst, src, is, outer, n, inner, m)
				want := indexSelectRef(x, idx, outer, n, inner)
				ExpectClose(t, fmt.Sprintf("IndexSelect %s idx %s %v", dt, it, sh), Download(t, b, dst), want, 0, 0)
				Free(b, src, dst)
			}
			Free(b, is)
		}
	}
	for _, it := range indexDTypes {
		for _, bad := range []float64{5, -1} {
			is := Upload(t, b, it, []float64{0, bad, 2})
			src := fillGarbage(t, b, backend.Float32, 2*5*3)
			dst := fillGarbage(t, b, backend.Float32, 2*3*3)
			expectPanic(t, fmt.Sprintf("IndexSelect with index %v of 5 (%s)", bad, it), func() {
				b.IndexSelect(dst, src, is, 2, 5, 3, 3)
				_ = b.Synchronize()
			})
			Free(b, is, src, dst)
		}
	}
}

func testIndexAdd(t *testing.T, b backend.Backend) {
	shapes := append(append([][4]int(nil), indexShapes...), [4]int{1, 6, 2, 10}) // the last with sorted indices
	for si, sh := range shapes {
		outer, n, inner, m := sh[0], sh[1], sh[2], sh[3]
		idx := randIndices(uint64(si+100), m, n)
		if si == len(shapes)-1 {
			for j := range idx {
				idx[j] = float64(j * n / m)
			}
		}
		for _, it := range indexDTypes {
			is := Upload(t, b, it, idx)
			for _, dt := range FloatDTypes {
				what := fmt.Sprintf("IndexAdd %s idx %s %v", dt, it, sh)
				d0 := Rounded(dt, RandVals(uint64(si+101), outer*n*inner, -1, 1))
				x := Rounded(dt, RandVals(uint64(si+102), outer*m*inner, -1, 1))
				want := append([]float64(nil), d0...)
				tol := make([]float64, len(d0))
				for i, v := range d0 {
					tol[i] = math.Abs(v)
				}
				for o := 0; o < outer; o++ {
					for j, k := range idx {
						for c := 0; c < inner; c++ {
							p := (o*n+int(k))*inner + c
							v := x[(o*m+j)*inner+c]
							want[p] += v
							tol[p] += math.Abs(v)
						}
					}
				}
				for i := range tol {
					tol[i] = Tol(dt)*tol[i] + minNormal(dt)
				}
				src := Upload(t, b, dt, x)
				dst := Upload(t, b, dt, d0)
				b.IndexAdd(dst, src, is, outer, n, inner, m)
				got := Download(t, b, dst)
				expectWithin(t, what, got, want, tol)
				// Deterministic: the same inputs give the same bits.
				dst2 := Upload(t, b, dt, d0)
				b.IndexAdd(dst2, src, is, outer, n, inner, m)
				for i, v := range Download(t, b, dst2) {
					if math.Float64bits(v) != math.Float64bits(got[i]) {
						t.Fatalf("%s: element %d is %v on one run and %v on another", what, i, got[i], v)
					}
				}
				Free(b, src, dst, dst2)
			}
			Free(b, is)
		}
	}
	for _, it := range indexDTypes {
		for _, bad := range []float64{5, -1} {
			is := Upload(t, b, it, []float64{0, bad, 2})
			src := fillGarbage(t, b, backend.Float32, 2*3*3)
			dst := fillGarbage(t, b, backend.Float32, 2*5*3)
			expectPanic(t, fmt.Sprintf("IndexAdd with index %v of 5 (%s)", bad, it), func() {
				b.IndexAdd(dst, src, is, 2, 5, 3, 3)
				_ = b.Synchronize()
			})
			Free(b, is, src, dst)
		}
	}
}
