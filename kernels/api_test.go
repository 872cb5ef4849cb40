package kernels_test

import (
	"math"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/internal/testenv"
	"github.com/gamp-ml/gamp/kernels"
)

func TestTableConsistent(t *testing.T) {
	src := kernels.Sources()
	ks := kernels.Kernels()
	if len(ks) == 0 {
		t.Fatal("empty table")
	}
	for i, k := range ks {
		if i > 0 && ks[i-1].Name >= k.Name {
			t.Errorf("table not sorted or duplicate at %s", k.Name)
		}
		if got := kernels.Name(k.Family, k.DTypes...); got != k.Name {
			t.Errorf("%s: Name(%q, %v) = %q", k.Name, k.Family, k.DTypes, got)
		}
		if _, ok := src[k.File]; !ok {
			t.Errorf("%s: source %q is not embedded", k.Name, k.File)
		}
		if k.Launch != kernels.GridStride && k.Launch != kernels.PerRow {
			t.Errorf("%s: bad launch %v", k.Name, k.Launch)
		}
		if got, ok := kernels.Lookup(k.Name); !ok || got.Name != k.Name {
			t.Errorf("Lookup(%q) failed", k.Name)
		}
		seen := map[string]bool{}
		for _, p := range k.Params {
			if seen[p.Name] {
				t.Errorf("%s: parameter %s twice", k.Name, p.Name)
			}
			seen[p.Name] = true
			if p.Size <= 0 || p.Align <= 0 || p.Size%p.Align != 0 {
				t.Errorf("%s: parameter %s has size %d align %d", k.Name, p.Name, p.Size, p.Align)
			}
			if (p.Kind == kernels.Ptr) != strings.HasSuffix(p.CType, "*") {
				t.Errorf("%s: parameter %s is %v but declared %q", k.Name, p.Name, p.Kind, p.CType)
			}
		}
	}
	if _, ok := kernels.Lookup("no_such_kernel"); ok {
		t.Error("Lookup found a kernel that does not exist")
	}
	t.Logf("%d kernels in %d sources", len(ks), len(src))
}

func TestNames(t *testing.T) {
	cases := map[string]string{
		kernels.Name("unary", backend.Float16):                     "unary_f16",
		kernels.Name("copy", backend.BFloat16, backend.Float64):    "copy_bf16_f64",
		kernels.Name("one_hot", backend.Bool, backend.Int64):       "one_hot_b8_i64",
		kernels.Name("index_select", backend.Int32, backend.Int32): "index_select_i32_i32",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		if _, ok := kernels.Lookup(got); !ok {
			t.Errorf("%s is not in the table", got)
		}
	}
}

// TestOpCodes checks that the enums of common.cuh equal the backend's op codes.
func TestOpCodes(t *testing.T) {
	vals := map[string]int{}
	re := regexp.MustCompile(`\b([A-Z][A-Z0-9_]*)\s*=\s*(\d+)`)
	for _, m := range re.FindAllStringSubmatch(kernels.Header(), -1) {
		v, _ := strconv.Atoi(m[2])
		vals[m[1]] = v
	}
	want := map[string]int{
		"UOP_NEG": int(backend.Neg), "UOP_EXP": int(backend.Exp), "UOP_LOG": int(backend.Log),
		"UOP_SQRT": int(backend.Sqrt), "UOP_RSQRT": int(backend.Rsqrt), "UOP_ABS": int(backend.Abs),
		"UOP_SIGN": int(backend.Sign), "UOP_RELU": int(backend.Relu), "UOP_GELU": int(backend.Gelu),
		"UOP_GELU_TANH": int(backend.GeluTanh), "UOP_TANH": int(backend.Tanh),
		"UOP_SIGMOID": int(backend.Sigmoid), "UOP_SQUARE": int(backend.Square),
		"UOP_RECIP": int(backend.Recip), "UOP_ADD_SCALAR": int(backend.AddScalar),
		"UOP_MUL_SCALAR": int(backend.MulScalar), "UOP_POW_SCALAR": int(backend.PowScalar),
		"UOP_CLAMP": int(backend.Clamp), "UOP_RSUB_SCALAR": int(backend.RSubScalar),
		"BOP_ADD": int(backend.Add), "BOP_SUB": int(backend.Sub), "BOP_MUL": int(backend.Mul),
		"BOP_DIV": int(backend.Div), "BOP_POW": int(backend.Pow), "BOP_MAXIMUM": int(backend.Maximum),
		"BOP_MINIMUM": int(backend.Minimum), "BOP_EQ": int(backend.Eq), "BOP_NE": int(backend.Ne),
		"BOP_LT": int(backend.Lt), "BOP_LE": int(backend.Le), "BOP_GT": int(backend.Gt), "BOP_GE": int(backend.Ge),
		"ROP_SUM": int(backend.Sum), "ROP_MEAN": int(backend.Mean), "ROP_MAX": int(backend.Max),
		"ROP_MIN": int(backend.Min), "ROP_ARGMAX": int(backend.ArgMax), "ROP_ARGMIN": int(backend.ArgMin),
		"POOL_MAX": int(backend.MaxPool), "POOL_AVG": int(backend.AvgPool),
		"OPT_DECOUPLED": int(kernels.FlagDecoupled), "OPT_AMSGRAD": int(kernels.FlagAMSGrad),
		"OPT_MAXIMIZE": int(kernels.FlagMaximize), "OPT_NESTEROV": int(kernels.FlagNesterov),
		"OPT_FIRST": int(kernels.FlagFirst),
	}
	for name, w := range want {
		if got, ok := vals[name]; !ok || got != w {
			t.Errorf("%s = %d in common.cuh (present %v), want %d", name, got, ok, w)
		}
	}
	for prefix, n := range map[string]int{"UOP_": backend.NumUnaryOps, "BOP_": backend.NumBinaryOps} {
		c := 0
		for name := range vals {
			if strings.HasPrefix(name, prefix) {
				c++
			}
		}
		if c != n {
			t.Errorf("common.cuh has %d %s codes, backend %d", c, prefix, n)
		}
	}
}

func TestStructSizes(t *testing.T) {
	for _, c := range []struct {
		name        string
		size, align uintptr
		want        int
	}{
		{"Layout", unsafe.Sizeof(kernels.Layout{}), unsafe.Alignof(kernels.Layout{}), 144},
		{"Conv2d", unsafe.Sizeof(kernels.Conv2d{}), unsafe.Alignof(kernels.Conv2d{}), 112},
		{"Pool2d", unsafe.Sizeof(kernels.Pool2d{}), unsafe.Alignof(kernels.Pool2d{}), 104},
	} {
		if int(c.size) != c.want || c.align != 8 {
			t.Errorf("%s: size %d align %d, want %d and 8", c.name, c.size, c.align, c.want)
		}
	}
	if off := unsafe.Offsetof(kernels.Layout{}.Shape); off != 16 {
		t.Errorf("Layout.Shape at %d, want 16", off)
	}
}

func TestPack(t *testing.T) {
	k, _ := kernels.Lookup("binary_f32")
	l := kernels.Contiguous(0, 10)
	a, err := k.Pack(uint64(0x1000), uint64(0x2000), uintptr(0x3000), int64(10), l, l, l, int32(backend.Mul))
	if err != nil {
		t.Fatal(err)
	}
	offs, size := k.ArgOffsets()
	if size != 4*8+3*144+4 || len(a.Bytes()) != size || len(a.Pointers()) != len(k.Params) {
		t.Fatalf("size %d, bytes %d, pointers %d", size, len(a.Bytes()), len(a.Pointers()))
	}
	if got := *(*int64)(a.Pointers()[3]); got != 10 {
		t.Errorf("n = %d", got)
	}
	if got := *(*int32)(a.Pointers()[7]); got != int32(backend.Mul) {
		t.Errorf("op = %d", got)
	}
	if got := *(*kernels.Layout)(a.Pointers()[4]); got != l {
		t.Errorf("layout = %+v", got)
	}
	if uintptr(a.Pointers()[4])-uintptr(unsafe.Pointer(&a.Bytes()[0])) != uintptr(offs[4]) {
		t.Error("pointer 4 is not at its offset")
	}
	var p runtime.Pinner
	a.Pin(&p)
	p.Unpin()

	bad := [][]any{
		{uint64(1), uint64(2), uint64(3), int32(10), l, l, l, int32(0)},  // int32 for long long
		{uint64(1), uint64(2), uint64(3), 10, l, l, l, int32(0)},         // int for long long
		{uint64(1), uint64(2), uint64(3), int64(10), l, l, l, int64(0)},  // int64 for int
		{uint64(1), uint64(2), uint64(3), int64(10), l, l, l},            // too few
		{int64(1), uint64(2), uint64(3), int64(10), l, l, l, int32(0)},   // int64 for a pointer
		{uint64(1), uint64(2), uint64(3), int64(10), &l, l, l, int32(0)}, // pointer to a struct
		{uint64(1), uint64(2), uint64(3), int64(10), kernels.Conv2d{}, l, l, int32(0)},
	}
	for i, args := range bad {
		if _, err := k.Pack(args...); err == nil {
			t.Errorf("case %d: Pack accepted %v", i, args)
		} else if i == 0 {
			t.Logf("error: %v", err)
		}
	}
	k, _ = kernels.Lookup("unscale_check_f16")
	if _, err := k.Pack(uint64(1), uint64(2), int32(3), 0.5, uint64(4)); err == nil {
		t.Error("Pack accepted float64 for float")
	}
	if _, err := k.Pack(uint64(1), uint64(2), int32(3), float32(0.5), uint64(4)); err != nil {
		t.Error(err)
	}
	// PackInto reuses memory.
	var args kernels.Args
	if err := k.PackInto(&args, uint64(1), uint64(2), int32(3), float32(0.5), uint64(4)); err != nil {
		t.Fatal(err)
	}
	p0 := &args.Bytes()[0]
	if err := k.PackInto(&args, uint64(5), uint64(6), int32(7), float32(0.25), uint64(8)); err != nil {
		t.Fatal(err)
	}
	if &args.Bytes()[0] != p0 || *(*float32)(args.Pointers()[3]) != 0.25 {
		t.Error("PackInto did not reuse or update the buffer")
	}
}

func TestGrid(t *testing.T) {
	k, _ := kernels.Lookup("unary_f32")
	for _, c := range []struct {
		work int64
		grid uint32
	}{{0, 1}, {1, 1}, {256, 1}, {257, 2}, {1 << 40, kernels.MaxGrid}} {
		g, b := k.Grid(c.work)
		if g != c.grid || b != kernels.BlockSize {
			t.Errorf("Grid(%d) = %d, %d", c.work, g, b)
		}
	}
	k, _ = kernels.Lookup("softmax_f16")
	if g, b := k.Grid(1000); g != 1000 || b != kernels.RowBlock {
		t.Errorf("per-row Grid(1000) = %d, %d", g, b)
	}
}

func TestNewLayouts(t *testing.T) {
	// A dense [2,3,4] view and a broadcast [1,3,1] one.
	d := backend.View{Offset: 5, Shape: []int{2, 3, 4}, Strides: []int{12, 4, 1}}
	b := backend.View{Offset: 1, Shape: []int{2, 3, 4}, Strides: []int{0, 1, 0}}
	ls, n, err := kernels.NewLayouts(d, d)
	if err != nil || n != 24 || ls[0].NDim != 1 || ls[0].Shape[0] != 24 || ls[0].Stride[0] != 1 || ls[0].Offset != 5 {
		t.Errorf("dense: %+v %d %v", ls, n, err)
	}
	ls, _, err = kernels.NewLayouts(d, b)
	if err != nil || ls[0].NDim != 3 || ls[1].Stride != [kernels.MaxDims]int64{0, 1, 0} || ls[1].Offset != 1 {
		t.Errorf("broadcast: %+v %v", ls, err)
	}
	if _, _, err := kernels.NewLayouts(d, backend.View{Shape: []int{2, 3}, Strides: []int{3, 1}}); err == nil {
		t.Error("shape mismatch accepted")
	}
	shape, strides := make([]int, 9), make([]int, 9)
	for i := range shape {
		shape[i], strides[i] = 2, 1<<(2*(8-i)) // never contiguous
	}
	if _, _, err := kernels.NewLayouts(backend.View{Shape: shape, Strides: strides}); err == nil {
		t.Error("9 dimensions accepted")
	}
	ls, n, err = kernels.NewLayouts(backend.View{Shape: []int{1, 1}, Strides: []int{7, 7}, Offset: 3})
	if err != nil || n != 1 || ls[0].NDim != 1 || ls[0].Shape[0] != 1 || ls[0].Offset != 3 {
		t.Errorf("single element: %+v %d %v", ls, n, err)
	}
	ls, n, err = kernels.NewLayouts(backend.View{Shape: []int{3, 0}, Strides: []int{0, 1}})
	if err != nil || n != 0 || ls[0].NDim != 1 {
		t.Errorf("empty: %+v %d %v", ls, n, err)
	}
}

func TestGroupIndex(t *testing.T) {
	order, starts, err := kernels.GroupIndex([]int64{3, 1, 3, 0, 1}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !equalI64(order, []int64{3, 1, 4, 0, 2}) || !equalI64(starts, []int64{0, 1, 3, 5}) {
		t.Errorf("order %v starts %v", order, starts)
	}
	if _, _, err := kernels.GroupIndex([]int32{0, 4}, 4); err == nil {
		t.Error("out-of-range index accepted")
	}
	order, starts, err = kernels.GroupIndex([]int32{}, 4)
	if err != nil || len(order) != 0 || len(starts) != 1 {
		t.Errorf("empty: %v %v %v", order, starts, err)
	}
}

func TestAdamScalars(t *testing.T) {
	s, b := kernels.AdamScalars(1e-3, 0.9, 0.999, 1)
	if math.Abs(s-1e-2) > 1e-15 || math.Abs(b-math.Sqrt(0.001)) > 1e-15 {
		t.Errorf("AdamScalars = %v, %v", s, b)
	}
}

func TestCompileOptions(t *testing.T) {
	opts := strings.Join(kernels.CompileOptions(), " ")
	if !strings.Contains(opts, "--fmad=false") {
		t.Errorf("CompileOptions %q lacks --fmad=false", opts)
	}
	if kernels.Header() == "" || !strings.Contains(kernels.Sources()["unary.cu"], `#include "`+kernels.HeaderName+`"`) {
		t.Error("sources do not include the header by HeaderName")
	}
}

func equalI64(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// needTool returns the path of a compiler the tests need, or skips (fails when
// GAMP_REQUIRE_KERNEL_TOOLS=1, as CI sets it, or when the tools are installed).
func needTool(t testing.TB, name string) string {
	t.Helper()
	p, err := lookTool(name)
	if err != nil {
		testenv.Skip(t, testenv.KernelTools, "%s not found: %v", name, err)
	}
	return p
}
