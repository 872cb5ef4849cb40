// Package backendtest is the conformance suite every gamp backend runs: one line in the
// backend's tests,
//
//	func TestConformance(t *testing.T) { backendtest.Run(t, b) }
//
// checks every kernel in every dtype it supports against plain float64 reference
// loops written here, with per-dtype tolerances. It is exported so that an out-of-tree
// backend can run it too (as gonum's blas/testblas is).
package backendtest

import (
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// FloatDTypes are the floating dtypes every kernel must support.
var FloatDTypes = []backend.DType{backend.Float32, backend.Float64, backend.Float16, backend.BFloat16}

type group struct {
	name string
	fn   func(t *testing.T, b backend.Backend)
}

var (
	groupsMu sync.Mutex
	groups   []group
)

// register adds a named group of checks to the suite (called from init in each file).
func register(name string, fn func(t *testing.T, b backend.Backend)) {
	groupsMu.Lock()
	defer groupsMu.Unlock()
	groups = append(groups, group{name, fn})
}

// Run runs the whole conformance suite against b.
func Run(t *testing.T, b backend.Backend) {
	groupsMu.Lock()
	gs := append([]group(nil), groups...)
	groupsMu.Unlock()
	sort.Slice(gs, func(i, j int) bool { return gs[i].name < gs[j].name })
	for _, g := range gs {
		t.Run(g.name, func(t *testing.T) { g.fn(t, b) })
	}
}

// Tol is the relative tolerance for comparing a kernel's result in dt with a float64
// reference computed from the same (already rounded) inputs: a few units in the last
// place of the storage type.
func Tol(dt backend.DType) float64 {
	switch dt {
	case backend.Float64:
		return 1e-12
	case backend.Float32:
		return 2e-6
	case backend.Float16:
		return 2e-3
	case backend.BFloat16:
		return 1.6e-2
	}
	return 0
}

// Round returns v rounded to dt (as storing it in dt would).
func Round(dt backend.DType, v float64) float64 {
	switch dt {
	case backend.Float32:
		return float64(float32(v))
	case backend.Float16:
		return half.Float16FromFloat64(v).Float64()
	case backend.BFloat16:
		return half.BFloat16FromFloat64(v).Float64()
	case backend.Int32:
		return float64(int32(v))
	case backend.Int64:
		return float64(int64(v))
	case backend.Bool:
		if v != 0 {
			return 1
		}
		return 0
	}
	return v
}

// Upload allocates storage of dt on b holding vals (rounded to dt).
func Upload(t testing.TB, b backend.Backend, dt backend.DType, vals []float64) backend.Storage {
	t.Helper()
	s, err := b.Alloc(dt, len(vals))
	if err != nil {
		t.Fatalf("Alloc(%s, %d): %v", dt, len(vals), err)
	}
	switch dt {
	case backend.Float32:
		v := make([]float32, len(vals))
		for i, x := range vals {
			v[i] = float32(x)
		}
		b.Upload(s, 0, v)
	case backend.Float64:
		b.Upload(s, 0, append([]float64(nil), vals...))
	case backend.Float16:
		v := make([]half.Float16, len(vals))
		half.Float64ToFloat16(v, vals)
		b.Upload(s, 0, v)
	case backend.BFloat16:
		v := make([]half.BFloat16, len(vals))
		half.Float64ToBFloat16(v, vals)
		b.Upload(s, 0, v)
	case backend.Int32:
		v := make([]int32, len(vals))
		for i, x := range vals {
			v[i] = int32(x)
		}
		b.Upload(s, 0, v)
	case backend.Int64:
		v := make([]int64, len(vals))
		for i, x := range vals {
			v[i] = int64(x)
		}
		b.Upload(s, 0, v)
	case backend.Bool:
		v := make([]bool, len(vals))
		for i, x := range vals {
			v[i] = x != 0
		}
		b.Upload(s, 0, v)
	default:
		t.Fatalf("Upload: dtype %s", dt)
	}
	return s
}

// Download reads all of s as float64.
func Download(t testing.TB, b backend.Backend, s backend.Storage) []float64 {
	t.Helper()
	if err := b.Synchronize(); err != nil {
		t.Fatalf("Synchronize: %v", err)
	}
	n := s.Len()
	out := make([]float64, n)
	switch s.DType() {
	case backend.Float32:
		v := make([]float32, n)
		b.Download(v, s, 0)
		for i, x := range v {
			out[i] = float64(x)
		}
	case backend.Float64:
		b.Download(out, s, 0)
	case backend.Float16:
		v := make([]half.Float16, n)
		b.Download(v, s, 0)
		half.Float16ToFloat64(out, v)
	case backend.BFloat16:
		v := make([]half.BFloat16, n)
		b.Download(v, s, 0)
		half.BFloat16ToFloat64(out, v)
	case backend.Int32:
		v := make([]int32, n)
		b.Download(v, s, 0)
		for i, x := range v {
			out[i] = float64(x)
		}
	case backend.Int64:
		v := make([]int64, n)
		b.Download(v, s, 0)
		for i, x := range v {
			out[i] = float64(x)
		}
	case backend.Bool:
		v := make([]bool, n)
		b.Download(v, s, 0)
		for i, x := range v {
			if x {
				out[i] = 1
			}
		}
	}
	return out
}

// Rounded returns vals rounded to dt: the inputs a kernel in dt actually sees.
func Rounded(dt backend.DType, vals []float64) []float64 {
	out := make([]float64, len(vals))
	for i, v := range vals {
		out[i] = Round(dt, v)
	}
	return out
}

// RandVals returns n values uniform in [lo, hi) from a seeded source.
func RandVals(seed uint64, n int, lo, hi float64) []float64 {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	out := make([]float64, n)
	for i := range out {
		out[i] = lo + (hi-lo)*r.Float64()
	}
	return out
}

// Close reports whether got matches want within tolerance rel (relative to max(|want|,
// scale)); NaN matches NaN and infinities must match exactly.
func Close(got, want, rel, scale float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	if math.IsInf(want, 0) || math.IsInf(got, 0) {
		return got == want
	}
	return math.Abs(got-want) <= rel*math.Max(math.Max(math.Abs(want), scale), 1e-30)
}

// ExpectClose fails t at the first element of got that is not Close to want.
func ExpectClose(t testing.TB, what string, got, want []float64, rel, scale float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !Close(got[i], want[i], rel, scale) {
			t.Fatalf("%s: element %d = %v, want %v (rel tol %g, scale %g)", what, i, got[i], want[i], rel, scale)
		}
	}
}

// Free releases storages at the end of a check.
func Free(b backend.Backend, ss ...backend.Storage) {
	for _, s := range ss {
		if s != nil {
			b.Free(s)
		}
	}
}

// Bits downloads s's raw bits, one uint64 per element (for bit-for-bit comparisons
// between backends).
func Bits(t testing.TB, b backend.Backend, s backend.Storage) []uint64 {
	t.Helper()
	n := s.Len()
	out := make([]uint64, n)
	switch s.DType() {
	case backend.Float32:
		v := make([]float32, n)
		b.Download(v, s, 0)
		for i, x := range v {
			out[i] = uint64(math.Float32bits(x))
		}
	case backend.Float64:
		v := make([]float64, n)
		b.Download(v, s, 0)
		for i, x := range v {
			out[i] = math.Float64bits(x)
		}
	case backend.Float16, backend.BFloat16:
		v := make([]uint16, n)
		b.Download(v, s, 0)
		for i, x := range v {
			out[i] = uint64(x)
		}
	case backend.Int32:
		v := make([]int32, n)
		b.Download(v, s, 0)
		for i, x := range v {
			out[i] = uint64(uint32(x))
		}
	case backend.Int64:
		v := make([]int64, n)
		b.Download(v, s, 0)
		for i, x := range v {
			out[i] = uint64(x)
		}
	case backend.Bool:
		v := make([]bool, n)
		b.Download(v, s, 0)
		for i, x := range v {
			if x {
				out[i] = 1
			}
		}
	default:
		t.Fatalf("bits of %s", s.DType())
	}
	return out
}
