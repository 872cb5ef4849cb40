package cpu

import (
	"fmt"

	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
	"github.com/gamp-ml/gamp/internal/testenv"
)

// geluTableSpecial are gy bit patterns of each half dtype the backward tests pair with
// every x: ±0, 1, -2.5, the largest finite, ±Inf, a quiet NaN with payload, a
// signalling NaN and a negative NaN.
var geluTableSpecial = map[backend.DType][]uint16{
	backend.BFloat16: {0x0000, 0x8000, 0x3f80, 0xc020, 0x7f7f, 0x7f80, 0xff80, 0x7fc1, 0x7f81, 0xffc3},
	backend.Float16:  {0x0000, 0x8000, 0x3c00, 0xc100, 0x7bff, 0x7c00, 0xfc00, 0x7e01, 0x7c01, 0xfe03},
}

// geluTableStorage allocates n elements of dt on b.
func geluTableStorage(t testing.TB, b *Backend, dt backend.DType, n int) *storage {
	s, err := b.Alloc(dt, n)
	if err != nil {
		t.Fatal(err)
	}
	return st(s)
}

// geluTableBits returns element i of s as bits: 16 of a half dtype, 32 of Float32.
func geluTableBits(s *storage, i int) uint32 {
	if s.dt == backend.Float32 {
		return math.Float32bits(s.f32()[i])
	}
	return uint32(s.u16()[i])
}

// geluTableNaN reports whether bits of dt are a NaN.
func geluTableNaN(dt backend.DType, v uint32) bool {
	switch dt {
	case backend.Float32:
		return v&0x7fffffff > 0x7f800000
	case backend.BFloat16:
		return v&0x7fff > 0x7f80
	}
	return v&0x7fff > 0x7c00
}

// geluTableCompare fails unless got equals want bit for bit. Without the vector loops
// (purego, or no AVX2), and for GeluTanh, computed in Go either way, a NaN may differ
// in payload: Go multiplies two NaNs in whatever operand order the compiler picks.
func geluTableCompare(t *testing.T, op backend.UnaryOp, what string, got, want *storage, n int, input func(i int) string) {
	t.Helper()
	bad := 0
	for i := range n {
		g, w := geluTableBits(got, i), geluTableBits(want, i)
		if g == w {
			continue
		}
		if (vec == nil || op == backend.GeluTanh) && geluTableNaN(got.dt, g) && geluTableNaN(want.dt, w) {
			continue
		}
		if bad++; bad <= 10 {
			t.Errorf("%s %s: %s: got %#x, want %#x (old path)", unaryName(op), what, input(i), g, w)
		}
	}
	if bad > 10 {
		t.Errorf("%s %s: %d mismatches in all", unaryName(op), what, bad)
	}
}

// TestGeluTableForward checks the table forward of Gelu and GeluTanh against the float32
// path (unaryKernel) on every bit pattern of both half dtypes, out of place and in
// place.
func TestGeluTableForward(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 16
	for _, op := range []backend.UnaryOp{backend.Gelu, backend.GeluTanh} {
		for _, dt := range []backend.DType{backend.BFloat16, backend.Float16} {
			x, y, want := geluTableStorage(t, b, dt, n), geluTableStorage(t, b, dt, n), geluTableStorage(t, b, dt, n)
			for i := range n {
				x.u16()[i] = uint16(i)
			}
			unaryKernel[float32](op, want, x, n, 0, 0)
			b.Unary(op, y, x, n, 0, 0)
			in := func(i int) string { return fmt.Sprintf("x = %#04x", i) }
			geluTableCompare(t, op, dt.String()+" forward", y, want, n, in)
			b.Unary(op, x, x, n, 0, 0)
			geluTableCompare(t, op, dt.String()+" forward in place", x, want, n, in)
		}
	}
}

// TestGeluTableBackward checks the table backward of Gelu and GeluTanh against the
// float32 path (unaryBackwardKernel): every x of each half dtype with each gy of
// geluTableSpecial and with random gy of every pattern, gy and gx of x's dtype; then gx
// or gy Float32; out of place, into x and into gy.
func TestGeluTableBackward(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	const m = 1 << 16
	for _, op := range []backend.UnaryOp{backend.Gelu, backend.GeluTanh} {
		for _, dt := range []backend.DType{backend.BFloat16, backend.Float16} {
			sp := geluTableSpecial[dt]
			reps := len(sp) + 3
			n := m*reps + 7 // a ragged tail too
			x, gy := geluTableStorage(t, b, dt, n), geluTableStorage(t, b, dt, n)
			for i := range n {
				x.u16()[i] = uint16(i)
				r := i / m
				switch {
				case r < len(sp):
					gy.u16()[i] = sp[r]
				case r == len(sp):
					// gy near 1 in size: products that round, rarely overflow.
					gy.u16()[i] = uint16(rng.IntN(0x800)) + map[bool]uint16{true: 0x3b00, false: 0x3700}[dt == backend.BFloat16]
					gy.u16()[i] |= uint16(rng.IntN(2)) << 15
				default:
					gy.u16()[i] = uint16(rng.Uint32())
				}
			}
			in := func(i int) string {
				return fmt.Sprintf("x = %#04x, gy = %#04x", x.u16()[i], gy.u16()[i])
			}
			for _, gdt := range []backend.DType{dt, backend.Float32} {
				for _, gxdt := range []backend.DType{dt, backend.Float32} {
					g := gy
					if gdt == backend.Float32 {
						g = geluTableStorage(t, b, gdt, n)
						gy.loadF32(g.f32(), 0)
					}
					gx, want := geluTableStorage(t, b, gxdt, n), geluTableStorage(t, b, gxdt, n)
					unaryBackwardKernel[float32](op, want, g, x, false, n, 0, 0)
					b.UnaryBackward(op, gx, g, x, nil, n, 0, 0)
					geluTableCompare(t, op, fmt.Sprintf("%s backward, gy %s, gx %s", dt, gdt, gxdt), gx, want, n, in)
					if gxdt == dt {
						// In place: gx is x.
						c := geluTableStorage(t, b, dt, n)
						copy(c.words, x.words)
						b.UnaryBackward(op, c, g, c, nil, n, 0, 0)
						geluTableCompare(t, op, fmt.Sprintf("%s backward into x, gy %s", dt, gdt), c, want, n, in)
					}
					if gxdt == gdt {
						// In place: gx is gy.
						c := geluTableStorage(t, b, gdt, n)
						copy(c.words, g.words)
						b.UnaryBackward(op, c, c, x, nil, n, 0, 0)
						geluTableCompare(t, op, fmt.Sprintf("%s backward in place, gy %s", dt, gdt), c, want, n, in)
					}
				}
			}
		}
	}
}

// TestGeluTableTwins pits the lookup loops against their pure-Go twins on every
// length up to 100 and at every offset of a vector: the tables of both dtypes, random
// patterns, random gy with NaNs and Infs among them (float32 gy, and half gy of every
// pattern).
func TestGeluTableTwins(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dt := range []backend.DType{backend.BFloat16, backend.Float16} {
		tab := geluTableOf(backend.Gelu, dt)
		const size = 200
		x := make([]uint16, size)
		g := make([]float32, size)
		gy := make([]uint16, size) // random patterns: some NaN, some Inf
		for i := range x {
			gy[i] = uint16(rng.Uint32())
			x[i] = uint16(rng.Uint32())
			g[i] = float32(rng.NormFloat64())
			switch rng.IntN(16) {
			case 0:
				g[i] = float32(math.NaN())
			case 1:
				g[i] = float32(math.Inf(1 - 2*rng.IntN(2)))
			case 2:
				x[i] = 0x7f80 | uint16(rng.IntN(2))<<15 // ±Inf of bf16, a NaN of f16
			case 3:
				x[i] = 0x7c00 | uint16(rng.IntN(2))<<15 // ±Inf of f16, 1.x·2^121 of bf16
			}
		}
		for off := range 16 {
			for n := range 100 {
				y1, y2 := make([]uint16, n), make([]uint16, n)
				geluTabFwd(y1, x[off:off+n], tab.fwd)
				geluTabFwdGo(y2, x[off:off+n], tab.fwd)
				for i := range n {
					if y1[i] != y2[i] {
						t.Fatalf("%s forward, off %d n %d: [%d] x = %#04x: %#04x, twin %#04x", dt, off, n, i, x[off+i], y1[i], y2[i])
					}
				}
				h1, h2 := make([]uint16, n), make([]uint16, n)
				geluTabBwdHalf(h1, gy[off:off+n], x[off:off+n], tab.bwd, dt == backend.BFloat16)
				geluTabBwdHalfGo(h2, gy[off:off+n], x[off:off+n], tab.bwd, dt == backend.BFloat16)
				for i := range n {
					if h1[i] != h2[i] {
						t.Fatalf("%s half backward, off %d n %d: [%d] x = %#04x gy = %#04x: %#04x, twin %#04x", dt, off, n, i, x[off+i], gy[off+i], h1[i], h2[i])
					}
				}
				d1, d2 := make([]float32, n), make([]float32, n)
				geluTabMul(d1, g[off:off+n], x[off:off+n], tab.bwd)
				geluTabMulGo(d2, g[off:off+n], x[off:off+n], tab.bwd)
				for i := range n {
					b1, b2 := math.Float32bits(d1[i]), math.Float32bits(d2[i])
					if b1 != b2 {
						t.Fatalf("%s backward, off %d n %d: [%d] x = %#04x gy = %v: %#x, twin %#x", dt, off, n, i, x[off+i], g[off+i], b1, b2)
					}
				}
			}
		}
	}
}

// TestGeluTableBuild reports what building one dtype's tables costs (it runs once per
// process); the figure is logged, not asserted.
func TestGeluTableBuild(t *testing.T) {
	for _, op := range []backend.UnaryOp{backend.Gelu, backend.GeluTanh} {
		var tb geluTable
		start := time.Now()
		const reps = 5
		for range reps {
			tb.build(op, backend.BFloat16)
		}
		t.Logf("building %s's tables of one dtype: %v", unaryName(op), time.Since(start)/reps)
	}
}

// BenchmarkGeluBF16 times the GELU (and GeluTanh) of a million BFloat16 and Float16
// elements through the backend, forward and backward (gy and gx of x's dtype), by table
// and by the float32 path it replaces, in ns per element (GAMP_CPU_THREADS=1 -cpu 1: one thread, the steadiest
// figure on a shared machine).
func BenchmarkGeluBF16(b *testing.B) {
	be, err := New(0)
	if err != nil {
		b.Fatal(err)
	}
	const n = 1 << 20
	for _, dt := range []backend.DType{backend.BFloat16, backend.Float16} {
		x, y, gy, gx := geluTableStorage(b, be, dt, n), geluTableStorage(b, be, dt, n), geluTableStorage(b, be, dt, n), geluTableStorage(b, be, dt, n)
		be.RandNormal(x, n, backend.RNG{Seed: 1}, 0, 1.5)
		be.RandNormal(gy, n, backend.RNG{Seed: 2}, 0, 1)
		geluTableOf(backend.Gelu, dt)
		geluTableOf(backend.GeluTanh, dt)
		cases := []struct {
			name string
			run  func()
		}{
			{"fwd-table", func() { be.Unary(backend.Gelu, y, x, n, 0, 0) }},
			{"fwd-old", func() { unaryKernel[float32](backend.Gelu, y, x, n, 0, 0) }},
			{"bwd-table", func() { be.UnaryBackward(backend.Gelu, gx, gy, x, nil, n, 0, 0) }},
			{"bwd-old", func() { unaryBackwardKernel[float32](backend.Gelu, gx, gy, x, false, n, 0, 0) }},
			{"tanh-fwd-table", func() { be.Unary(backend.GeluTanh, y, x, n, 0, 0) }},
			{"tanh-fwd-old", func() { unaryKernel[float32](backend.GeluTanh, y, x, n, 0, 0) }},
			{"tanh-bwd-table", func() { be.UnaryBackward(backend.GeluTanh, gx, gy, x, nil, n, 0, 0) }},
			{"tanh-bwd-old", func() { unaryBackwardKernel[float32](backend.GeluTanh, gx, gy, x, false, n, 0, 0) }},
		}
		for _, c := range cases {
			b.Run(dt.String()+"/"+c.name, func(b *testing.B) {
				for b.Loop() {
					c.run()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/elem")
			})
		}
	}
}

// BenchmarkGeluTableLoops times the lookup loops and their pure-Go twins on one chunk
// of BFloat16 activations from N(0, 1.5²), in ns per element; and the bfloat16
// backward in one pass against converting gy and gx around geluTabMul.
func BenchmarkGeluTableLoops(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	tab := geluTableOf(backend.Gelu, backend.BFloat16)
	x, y := make([]uint16, chunk), make([]uint16, chunk)
	g, d := make([]float32, chunk), make([]float32, chunk)
	gy := make([]uint16, chunk)
	for i := range x {
		x[i] = uint16(math.Float32bits(float32(rng.NormFloat64()*1.5)) >> 16)
		g[i] = float32(rng.NormFloat64())
		gy[i] = uint16(math.Float32bits(g[i]) >> 16)
	}
	cases := []struct {
		name string
		run  func()
	}{
		{"fwd", func() { geluTabFwd(y, x, tab.fwd) }},
		{"fwd-twin", func() { geluTabFwdGo(y, x, tab.fwd) }},
		{"mul", func() { geluTabMul(d, g, x, tab.bwd) }},
		{"bwd-bf16", func() { geluTabBwdHalf(y, gy, x, tab.bwd, true) }},
		{"bwd-bf16-converting", func() {
			half.BFloat16ToFloat32(g, u16As[half.BFloat16](gy))
			geluTabMul(d, g, x, tab.bwd)
			half.Float32ToBFloat16(u16As[half.BFloat16](y), d)
		}},
		{"mul-twin", func() { geluTabMulGo(d, g, x, tab.bwd) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.run()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/chunk, "ns/elem")
		})
	}
}

// TestGeluTableAsmGenerated checks that gelu_table_amd64.s is what internal/gelutabgen
// writes.
func TestGeluTableAsmGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go run")
	}
	gotool := testenv.Programs(t, testenv.GoTool, "go")[0]
	out := t.TempDir() + "/gelu_table_amd64.s"
	if b, err := exec.Command(gotool, "run", "./internal/gelutabgen", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("gelutabgen: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("gelu_table_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatal("gelu_table_amd64.s is not what gelutabgen writes: run go generate ./backend/cpu/")
	}
}
