package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/backend/cpu"
	"github.com/gamp-ml/gamp/half"
	"github.com/gamp-ml/gamp/internal/kernelshim"
	"github.com/gamp-ml/gamp/kernels"
)

// The g++ shim (package internal/kernelshim): every kernel compiled for the CPU, with
// one wrapper per kernel, generated from the Go table, that unpacks the parameter array
// Pack builds. A static_assert per wrapper makes a table that disagrees with the source
// a compile error, and the struct layouts are asserted against the Go mirrors.

var (
	shimOnce sync.Once
	shimLib  *shim
	shimErr  error
	shimDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shimDir != "" {
		os.RemoveAll(shimDir)
	}
	os.Exit(code)
}

type shim struct {
	handle uintptr
	mu     sync.Mutex
	syms   map[string]uintptr
}

// loadShim builds and opens the shim library once per test binary.
func loadShim(t *testing.T) *shim {
	t.Helper()
	gxx := needTool(t, "g++")
	shimOnce.Do(func() { shimLib, shimErr = buildShim(gxx) })
	if shimErr != nil {
		t.Fatal(shimErr)
	}
	return shimLib
}

func buildShim(gxx string) (*shim, error) {
	dir, err := os.MkdirTemp("", "gamp-kernels-shim-")
	if err != nil {
		return nil, err
	}
	shimDir = dir
	lib, err := kernelshim.BuildWith(gxx, dir)
	if err != nil {
		return nil, err
	}
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("dlopen %s: %v", lib, err)
	}
	return &shim{handle: h, syms: map[string]uintptr{}}, nil
}

func (s *shim) sym(name string) uintptr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.syms[name]; ok {
		return p
	}
	p, err := purego.Dlsym(s.handle, "call_"+name)
	if err != nil {
		panic(err)
	}
	s.syms[name] = p
	return p
}

// run launches kernel name under the shim with arguments packed by kernels.Pack: a
// small grid for grid-stride kernels (so that the stride loop runs), RowBlock threads
// for per-row ones.
func (s *shim) run(t *testing.T, name string, args ...any) {
	t.Helper()
	k, ok := kernels.Lookup(name)
	if !ok {
		t.Fatalf("no kernel %s", name)
	}
	a, err := k.Pack(args...)
	if err != nil {
		t.Fatal(err)
	}
	grid, block := 3, 64
	if k.Launch == kernels.PerRow {
		grid, block = 2, kernels.RowBlock
	}
	ptrs := a.Pointers()
	r, _, _ := purego.SyscallN(s.sym(name), uintptr(unsafe.Pointer(&ptrs[0])), uintptr(grid), uintptr(block))
	runtime.KeepAlive(a)
	runtime.KeepAlive(ptrs)
	for _, v := range args {
		runtime.KeepAlive(v)
	}
	if int32(r) != 0 {
		t.Fatalf("%s: the shim reported error %d", name, int32(r))
	}
}

// ---- host buffers ----------------------------------------------------------------

// buf is host memory a kernel runs on under the shim; its address is the "device
// pointer". Go's heap does not move, and callers keep buffers alive across a run.
type buf struct {
	dt backend.DType
	n  int
	w  []uint64
}

func newBuf(dt backend.DType, n int) *buf {
	w := make([]uint64, (n*dt.Size()+7)/8+1)
	escape = w // small buffers must not live on a goroutine stack, which moves
	return &buf{dt, n, w}
}

var escape any

func (b *buf) ptr() uint64 { return uint64(uintptr(unsafe.Pointer(&b.w[0]))) }

func (b *buf) raw() []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&b.w[0])), b.n*b.dt.Size()) }

func (b *buf) f32() []float32 { return unsafe.Slice((*float32)(unsafe.Pointer(&b.w[0])), b.n) }
func (b *buf) f64() []float64 { return unsafe.Slice((*float64)(unsafe.Pointer(&b.w[0])), b.n) }
func (b *buf) u16() []uint16  { return unsafe.Slice((*uint16)(unsafe.Pointer(&b.w[0])), b.n) }
func (b *buf) i32() []int32   { return unsafe.Slice((*int32)(unsafe.Pointer(&b.w[0])), b.n) }
func (b *buf) i64() []int64   { return unsafe.Slice((*int64)(unsafe.Pointer(&b.w[0])), b.n) }
func (b *buf) b8() []bool     { return unsafe.Slice((*bool)(unsafe.Pointer(&b.w[0])), b.n) }

// host returns the typed slice backend.Upload and Download take.
func (b *buf) host() any {
	switch b.dt {
	case backend.Float32:
		return b.f32()
	case backend.Float64:
		return b.f64()
	case backend.Float16, backend.BFloat16:
		return b.u16()
	case backend.Int32:
		return b.i32()
	case backend.Int64:
		return b.i64()
	case backend.Bool:
		return b.b8()
	}
	panic("bad dtype")
}

func (b *buf) clone() *buf {
	c := newBuf(b.dt, b.n)
	copy(c.w, b.w)
	return c
}

// at returns element i as float64.
func (b *buf) at(i int) float64 {
	switch b.dt {
	case backend.Float32:
		return float64(b.f32()[i])
	case backend.Float64:
		return b.f64()[i]
	case backend.Float16:
		return half.Float16(b.u16()[i]).Float64()
	case backend.BFloat16:
		return half.BFloat16(b.u16()[i]).Float64()
	case backend.Int32:
		return float64(b.i32()[i])
	case backend.Int64:
		return float64(b.i64()[i])
	case backend.Bool:
		if b.b8()[i] {
			return 1
		}
		return 0
	}
	panic("bad dtype")
}

// bits returns element i's raw bits.
func (b *buf) bits(i int) uint64 {
	sz := b.dt.Size()
	var v uint64
	for k := sz - 1; k >= 0; k-- {
		v = v<<8 | uint64(b.raw()[i*sz+k])
	}
	return v
}

// set stores v (rounded once, as the CPU backend's storeF64 rounds) at i.
func (b *buf) set(i int, v float64) {
	switch b.dt {
	case backend.Float32:
		b.f32()[i] = float32(v)
	case backend.Float64:
		b.f64()[i] = v
	case backend.Float16:
		b.u16()[i] = uint16(half.Float16FromFloat64(v))
	case backend.BFloat16:
		b.u16()[i] = uint16(half.BFloat16FromFloat64(v))
	case backend.Int32:
		b.i32()[i] = int32(v)
	case backend.Int64:
		b.i64()[i] = int64(v)
	case backend.Bool:
		b.b8()[i] = v != 0
	}
}

func bufOf(dt backend.DType, vals []float64) *buf {
	b := newBuf(dt, len(vals))
	for i, v := range vals {
		b.set(i, v)
	}
	return b
}

// ---- the CPU backend ---------------------------------------------------------------

var cpuB = sync.OnceValue(func() *cpu.Backend {
	b, err := cpu.New(0)
	if err != nil {
		panic(err)
	}
	return b
})

// up copies b into new CPU storage.
func up(b *buf) backend.Storage {
	s, err := cpuB().Alloc(b.dt, max(b.n, 1))
	if err != nil {
		panic(err)
	}
	if b.n > 0 {
		cpuB().Upload(s, 0, b.host())
	}
	return s
}

// down copies CPU storage s into a new buffer of n elements.
func down(s backend.Storage, n int) *buf {
	b := newBuf(s.DType(), n)
	if n > 0 {
		cpuB().Download(b.host(), s, 0)
	}
	cpuB().Free(s)
	return b
}

// ---- comparisons -----------------------------------------------------------------

// sameBits fails unless got and want hold the same bits.
func sameBits(t *testing.T, what string, got, want *buf) {
	t.Helper()
	if got.n != want.n || got.dt != want.dt {
		t.Fatalf("%s: got %d %s, want %d %s", what, got.n, got.dt, want.n, want.dt)
	}
	bad := 0
	for i := 0; i < got.n; i++ {
		if got.bits(i) != want.bits(i) {
			if bad < 5 {
				t.Errorf("%s: element %d is %v (%#x), the CPU backend's %v (%#x)", what, i, got.at(i), got.bits(i), want.at(i), want.bits(i))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements differ", what, bad, got.n)
	}
}

// ulps is the distance between two floats of dt in units in the last place (0 for
// equal bits or two NaNs; MaxInt64 when only one is NaN).
func ulps(dt backend.DType, a, b uint64) int64 {
	nan := func(v uint64) bool {
		switch dt {
		case backend.Float32:
			return math.IsNaN(float64(math.Float32frombits(uint32(v))))
		case backend.Float64:
			return math.IsNaN(math.Float64frombits(v))
		case backend.Float16:
			return half.Float16(v).IsNaN()
		default:
			return half.BFloat16(v).IsNaN()
		}
	}
	if a == b || (nan(a) && nan(b)) {
		return 0
	}
	if nan(a) || nan(b) {
		return math.MaxInt64
	}
	bitsN := uint(dt.Size() * 8)
	ord := func(v uint64) int64 { // sign-magnitude to a monotonic integer
		sign := uint64(1) << (bitsN - 1)
		if v&sign != 0 {
			return -int64(v &^ sign)
		}
		return int64(v)
	}
	d := ord(a) - ord(b)
	if d < 0 {
		d = -d
	}
	return d
}

// closeTo checks got against want within maxULP units in the last place of the stored
// dtype and returns how many elements differ at all.
func closeTo(t *testing.T, what string, got, want *buf, maxULP int64) int {
	t.Helper()
	if got.n != want.n {
		t.Fatalf("%s: got %d elements, want %d", what, got.n, want.n)
	}
	diff, bad := 0, 0
	for i := 0; i < got.n; i++ {
		u := ulps(got.dt, got.bits(i), want.bits(i))
		if u == 0 {
			continue
		}
		diff++
		if u > maxULP && !f64Close(got, want, i, maxULP) {
			if bad < 5 {
				t.Errorf("%s: element %d is %v, the CPU backend's %v (%d ulp)", what, i, got.at(i), want.at(i), u)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements differ by more than %d ulp", what, bad, got.n, maxULP)
	}
	return diff
}

// f64Close accepts float64 results of transcendentals that are close in absolute terms
// (a result that cancels to near zero magnifies the libraries' last-bit differences),
// and Go's math.Exp on amd64 returning ±Inf a little below the true overflow
// threshold (from x ≈ 709.7; glibc and libdevice return the finite value).
func f64Close(got, want *buf, i int, maxULP int64) bool {
	if got.dt != backend.Float64 || maxULP < 1<<10 {
		return false
	}
	g, w := got.at(i), want.at(i)
	if math.IsInf(w, 0) && !math.IsInf(g, 0) && math.Abs(g) > 1e300 && math.Signbit(g) == math.Signbit(w) {
		return true
	}
	return math.Abs(g-w) <= 1e-12*(1+math.Abs(w))
}

// ---- inputs ------------------------------------------------------------------------

// specials are values every floating test covers: signed zeros, infinities, NaN,
// half-precision limits and subnormals, rounding ties.
var specials = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.5, -2.5, 3, 1e-3, 0.1, -0.7,
	65504, 65519.99, 65520, -1e5, 6e-8, 3e-8, 2.9802322387695312e-08, 1e-40, -1e-45, 1e-300,
	3.4e38, 3.5e38, -1e308, 1 + 1.0/2048, 1 + 3.0/2048, 1 + 1.0/256, 1 + 3.0/256,
	math.Inf(1), math.Inf(-1), math.NaN(),
}

// randVals returns n values: the specials, then normal draws scaled by powers of ten.
func randVals(r *rand.Rand, n int, withSpecials bool) []float64 {
	v := make([]float64, 0, n)
	if withSpecials {
		v = append(v, specials...)
	}
	for len(v) < n {
		v = append(v, r.NormFloat64()*math.Pow(10, float64(r.IntN(7)-3)))
	}
	return v[:n]
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

var floatDTypes = []backend.DType{backend.Float32, backend.Float16, backend.BFloat16, backend.Float64}
var allDTypes = []backend.DType{backend.Float32, backend.Float16, backend.BFloat16, backend.Float64,
	backend.Int32, backend.Int64, backend.Bool}

// view is a backend.View on storage s.
func view(s backend.Storage, off int, shape, strides []int) backend.View {
	return backend.View{S: s, Offset: off, Shape: shape, Strides: strides}
}

func layouts(t *testing.T, views ...backend.View) ([]kernels.Layout, int64) {
	t.Helper()
	ls, n, err := kernels.NewLayouts(views...)
	if err != nil {
		t.Fatal(err)
	}
	return ls, n
}
