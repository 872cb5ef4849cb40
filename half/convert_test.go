package half

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/x448/float16"
	"golang.org/x/sys/cpu"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// convert runs k over the longest prefix of src it can take and the pure-Go
// twin over the rest, as the exported functions do with the kernel in use.
// len(dst) >= len(src).
func convert[D, S any](k kernel[D, S], dst []D, src []S, twin func([]D, []S)) {
	n := bulkLen(k, len(src))
	if n > 0 {
		k.fn(&dst[0], &src[0], n)
	}
	twin(dst[n:len(src)], src[n:])
}

// usable returns the kernels this CPU can run.
func usable[D, S any](ks []kernel[D, S]) []kernel[D, S] {
	var out []kernel[D, S]
	for _, k := range ks {
		if k.ok {
			out = append(out, k)
		}
	}
	return out
}

// TestKernelsSelected guards against a feature check that silently leaves
// an AVX-512 machine (the development machine kind) on a slower path.
func TestKernelsSelected(t *testing.T) {
	got := []string{f32ToF16.name, f16ToF32.name, f32ToBF16.name, bf16ToF32.name}
	t.Logf("kernels in use (f32→f16, f16→f32, f32→bf16, bf16→f32): %q", got)
	if len(f32ToF16Kernels) == 0 {
		t.Skip("no assembly in this build")
	}
	if cpu.X86.HasAVX512F {
		want := []string{"avx512", "avx512", "avx512", "avx512"}
		if cpu.X86.HasAVX512BF16 && cpu.X86.HasAVX512DQ {
			want[2] = "avx512bf16"
		}
		if !slices.Equal(got, want) {
			t.Errorf("AVX-512 CPU but kernels %q, want %q", got, want)
		}
	}
}

// Inputs mixing random bits with the values where conversions go wrong.
func float32Inputs(n int, seed uint64) []float32 {
	specials := []uint32{
		0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff80ffff,
		0x7fffffff, 0x7f7fffff, 0x7f7f8000, 0x477fe000, 0x477ff000, 0x477fefff, 0x47800000,
		0x33800000, 0x33000000, 0x33000001, 0x38800000, 0x387fffff, 0x00000001, 0x00008000,
		0x00018000, 0x3f808000, 0x3f818000, 0x3f801000, 0x3f803000, 0x7fa00000,
	}
	r := newRand(seed)
	x := make([]float32, n)
	for i := range x {
		switch r.IntN(4) {
		case 0:
			x[i] = f32(specials[r.IntN(len(specials))] ^ uint32(r.IntN(2))<<31)
		case 1: // near the fp16 range, where the rounding happens
			x[i] = float32(math.Ldexp(r.Float64()+0.5, r.IntN(50)-34))
		default:
			x[i] = f32(r.Uint32())
		}
	}
	return x
}

func uint16Inputs[T ~uint16](n int, seed uint64) []T {
	r := newRand(seed)
	x := make([]T, n)
	for i := range x {
		x[i] = T(r.Uint32())
	}
	return x
}

func bitsOf[T any](v T) uint64 {
	switch v := any(v).(type) {
	case float64:
		return math.Float64bits(v)
	case float32:
		return uint64(math.Float32bits(v))
	case Float16:
		return uint64(v)
	case BFloat16:
		return uint64(v)
	}
	panic("bitsOf")
}

// checkKernels runs every usable kernel, through convert, against the
// pure-Go twin over lengths 0..140 plus a few long ones, at unaligned
// source and destination offsets, and checks that nothing past len(src)
// is written.
func checkKernels[D, S any](t *testing.T, ks []kernel[D, S], twin func([]D, []S), in []S, fill D) {
	lengths := []int{1000, 4099}
	for n := range 141 {
		lengths = append(lengths, n)
	}
	for _, k := range usable(ks) {
		for _, n := range lengths {
			for off := range 4 {
				src := in[off : off+n]
				want := make([]D, n)
				twin(want, src)
				buf := make([]D, n+off+8)
				for i := range buf {
					buf[i] = fill
				}
				dst := buf[off : off+n+8]
				convert(k, dst, src, twin)
				for i := range dst {
					w := fill
					if i < n {
						w = want[i]
					}
					if bitsOf(dst[i]) != bitsOf(w) {
						t.Fatalf("kernel %s, n=%d, offset %d: dst[%d] = %#x, want %#x", k.name, n, off, i, bitsOf(dst[i]), bitsOf(w))
					}
				}
				for i := range off {
					if bitsOf(buf[i]) != bitsOf(fill) {
						t.Fatalf("kernel %s wrote before dst", k.name)
					}
				}
			}
		}
	}
}

func TestKernelsFloat32ToFloat16(t *testing.T) {
	checkKernels(t, f32ToF16Kernels, float32ToFloat16Go, float32Inputs(5000, 3), Float16(0xdead))
}

func TestKernelsFloat16ToFloat32(t *testing.T) {
	checkKernels(t, f16ToF32Kernels, float16ToFloat32Go, uint16Inputs[Float16](5000, 4), f32(0xdeadbeef))
}

func TestKernelsFloat32ToBFloat16(t *testing.T) {
	checkKernels(t, f32ToBF16Kernels, float32ToBFloat16Go, float32Inputs(5000, 5), BFloat16(0xdead))
}

func TestKernelsBFloat16ToFloat32(t *testing.T) {
	checkKernels(t, bf16ToF32Kernels, bfloat16ToFloat32Go, uint16Inputs[BFloat16](5000, 6), f32(0xdeadbeef))
}

// TestKernelsAllHalfPatterns widens all 65536 patterns with every kernel.
func TestKernelsAllHalfPatterns(t *testing.T) {
	h := make([]Float16, 1<<16)
	b := make([]BFloat16, 1<<16)
	for i := range h {
		h[i], b[i] = Float16(i), BFloat16(i)
	}
	want := make([]float32, len(h))
	got := make([]float32, len(h))
	back := make([]Float16, len(h))
	float16ToFloat32Go(want, h)
	for _, k := range usable(f16ToF32Kernels) {
		k.fn(&got[0], &h[0], len(h))
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("kernel %s: Float16 %#04x widened to %#08x, want %#08x", k.name, uint16(i), math.Float32bits(got[i]), math.Float32bits(want[i]))
			}
		}
	}
	for _, k := range usable(f32ToF16Kernels) {
		k.fn(&back[0], &want[0], len(want))
		for i := range back {
			if w := Float16FromFloat32(want[i]); back[i] != w {
				t.Fatalf("kernel %s: Float16 %#04x round trip gave %#04x, want %#04x", k.name, uint16(i), uint16(back[i]), uint16(w))
			}
		}
	}
	bfloat16ToFloat32Go(want, b)
	for _, k := range usable(bf16ToF32Kernels) {
		k.fn(&got[0], &b[0], len(b))
		for i := range got {
			if math.Float32bits(got[i]) != uint32(i)<<16 {
				t.Fatalf("kernel %s: BFloat16 %#04x widened to %#08x", k.name, uint16(i), math.Float32bits(got[i]))
			}
		}
	}
}

// sweep calls check on chunks of float32s whose bits are offset + i*41 for
// i < count (mod 2^32): 41 is odd, so the points are distinct and spread
// evenly over the whole space. Two goroutines share the work.
func sweep(t *testing.T, count int64, check func(src []float32) string) {
	const chunk = 1 << 16
	var (
		mu      sync.Mutex
		failed  []string
		wg      sync.WaitGroup
		checked atomic.Int64
	)
	const workers = 2
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := make([]float32, chunk)
			for start := int64(w) * chunk; start < count; start += workers * chunk {
				n := int(min(chunk, count-start))
				for i := range n {
					src[i] = f32(0x12345677 + uint32(start+int64(i))*41)
				}
				checked.Add(int64(n))
				if msg := check(src[:n]); msg != "" {
					mu.Lock()
					failed = append(failed, msg)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, msg := range failed {
		t.Error(msg)
	}
	if len(failed) == 0 && checked.Load() != count {
		t.Errorf("sweep checked %d inputs, want %d", checked.Load(), count)
	}
}

var exhaustive = flag.Bool("exhaustive", false, "sweep all 2^32 float32 inputs (about a minute on 2 cores)")

// sweepCount is the number of float32 inputs the sweeps check: 104 M in a
// normal run (41*104M is just under 2^32, so the sweep crosses every
// exponent); 2 M under -short, for quick runs with -race.
func sweepCount() int64 {
	if *exhaustive {
		return 1 << 32
	}
	if testing.Short() {
		return 1 << 21
	}
	return 104_000_000
}

// TestFloat32ToFloat16Sweep checks the bulk path (every kernel) and the
// scalar path against x448/float16 on 104 M float32 bit patterns.
func TestFloat32ToFloat16Sweep(t *testing.T) {
	kernels := usable(f32ToF16Kernels)
	sweep(t, sweepCount(), func(src []float32) string {
		bulk := make([]Float16, len(src))
		Float32ToFloat16(bulk, src)
		outs := make([][]Float16, len(kernels))
		for j, k := range kernels {
			outs[j] = make([]Float16, len(src))
			convert(k, outs[j], src, float32ToFloat16Go)
		}
		for i, x := range src {
			want := Float16(float16.Fromfloat32(x))
			if got := Float16FromFloat32(x); got != want {
				return fmt.Sprintf("Float16FromFloat32(%#08x) = %#04x, x448 %#04x", math.Float32bits(x), uint16(got), uint16(want))
			}
			if bulk[i] != want {
				return fmt.Sprintf("Float32ToFloat16 of %#08x = %#04x, x448 %#04x", math.Float32bits(x), uint16(bulk[i]), uint16(want))
			}
			for j, k := range kernels {
				if outs[j][i] != want {
					return fmt.Sprintf("kernel %s of %#08x = %#04x, x448 %#04x", k.name, math.Float32bits(x), uint16(outs[j][i]), uint16(want))
				}
			}
		}
		return ""
	})
}

// TestFloat32ToBFloat16Sweep checks the bulk and scalar BF16 paths against
// the float64 reference on 104 M float32 bit patterns.
func TestFloat32ToBFloat16Sweep(t *testing.T) {
	kernels := usable(f32ToBF16Kernels)
	sweep(t, sweepCount(), func(src []float32) string {
		bulk := make([]BFloat16, len(src))
		Float32ToBFloat16(bulk, src)
		outs := make([][]BFloat16, len(kernels))
		for j, k := range kernels {
			outs[j] = make([]BFloat16, len(src))
			convert(k, outs[j], src, float32ToBFloat16Go)
		}
		for i, x := range src {
			var want BFloat16
			if u := math.Float32bits(x); x != x {
				want = BFloat16(u>>16 | 0x40)
			} else {
				want = refBFloat16Fast(x)
			}
			if got := BFloat16FromFloat32(x); got != want {
				return fmt.Sprintf("BFloat16FromFloat32(%#08x) = %#04x, reference %#04x", math.Float32bits(x), uint16(got), uint16(want))
			}
			if bulk[i] != want {
				return fmt.Sprintf("Float32ToBFloat16 of %#08x = %#04x, reference %#04x", math.Float32bits(x), uint16(bulk[i]), uint16(want))
			}
			for j, k := range kernels {
				if outs[j][i] != want {
					return fmt.Sprintf("kernel %s of %#08x = %#04x, reference %#04x", k.name, math.Float32bits(x), uint16(outs[j][i]), uint16(want))
				}
			}
		}
		return ""
	})
}

// refBFloat16Fast is refBFloat16 for a non-NaN float32, whose neighbours are
// found by truncation rather than search: a float64 comparison with the
// exact midpoint decides.
func refBFloat16Fast(x float32) BFloat16 {
	u := math.Float32bits(x)
	sign, lo := uint16(u>>16)&0x8000, uint16(u>>16)&0x7fff
	if lo == 0x7f80 {
		return BFloat16(sign | lo)
	}
	mid := (bf16Value(lo) + bf16Value(lo+1)) / 2
	a := math.Abs(float64(x))
	if a > mid || a == mid && lo&1 == 1 {
		lo++
	}
	return BFloat16(sign | lo)
}

func TestLengthPanics(t *testing.T) {
	tests := []struct {
		op string
		f  func()
	}{
		{"Float32ToFloat16", func() { Float32ToFloat16(make([]Float16, 2), make([]float32, 3)) }},
		{"Float16ToFloat32", func() { Float16ToFloat32(make([]float32, 2), make([]Float16, 3)) }},
		{"Float32ToBFloat16", func() { Float32ToBFloat16(make([]BFloat16, 2), make([]float32, 3)) }},
		{"BFloat16ToFloat32", func() { BFloat16ToFloat32(make([]float32, 2), make([]BFloat16, 3)) }},
		{"Float64ToFloat16", func() { Float64ToFloat16(make([]Float16, 2), make([]float64, 3)) }},
		{"Float16ToFloat64", func() { Float16ToFloat64(make([]float64, 2), make([]Float16, 3)) }},
		{"Float64ToBFloat16", func() { Float64ToBFloat16(make([]BFloat16, 2), make([]float64, 3)) }},
		{"BFloat16ToFloat64", func() { BFloat16ToFloat64(make([]float64, 2), make([]BFloat16, 3)) }},
	}
	for _, tc := range tests {
		func() {
			defer func() {
				var le LengthError
				err, _ := recover().(error)
				if !errors.As(err, &le) || le != (LengthError{tc.op, 2, 3}) || !strings.Contains(err.Error(), tc.op) {
					t.Errorf("%s: panic %v, want LengthError{%s, 2, 3}", tc.op, err, tc.op)
				}
			}()
			tc.f()
		}()
	}
	// A longer dst is fine and keeps its tail.
	dst := []Float16{1, 2, 3, 4}
	Float32ToFloat16(dst, []float32{0, 0})
	if dst[2] != 3 || dst[3] != 4 || dst[0] != 0 {
		t.Errorf("Float32ToFloat16 with long dst: %v", dst)
	}
	Float32ToFloat16(nil, nil)
}

func TestFloat64Bulk(t *testing.T) {
	r := newRand(7)
	src := make([]float64, 1000)
	for i := range src {
		src[i] = math.Ldexp(r.NormFloat64(), r.IntN(300)-150)
	}
	src[0], src[1], src[2] = math.NaN(), math.Inf(-1), 65520
	h := make([]Float16, len(src))
	b := make([]BFloat16, len(src))
	Float64ToFloat16(h, src)
	Float64ToBFloat16(b, src)
	hw := make([]float64, len(src))
	bw := make([]float64, len(src))
	Float16ToFloat64(hw, h)
	BFloat16ToFloat64(bw, b)
	for i, x := range src {
		if h[i] != Float16FromFloat64(x) || b[i] != BFloat16FromFloat64(x) {
			t.Fatalf("src[%d] = %v: bulk %#04x %#04x, scalar %#04x %#04x", i, x, uint16(h[i]), uint16(b[i]), uint16(Float16FromFloat64(x)), uint16(BFloat16FromFloat64(x)))
		}
		if math.Float64bits(hw[i]) != math.Float64bits(h[i].Float64()) || math.Float64bits(bw[i]) != math.Float64bits(b[i].Float64()) {
			t.Fatalf("widening %#04x %#04x: %v %v", uint16(h[i]), uint16(b[i]), hw[i], bw[i])
		}
	}
}

// TestBulkMatchesScalar checks the four exported SIMD conversions against
// the scalar functions on random inputs of awkward lengths.
func TestBulkMatchesScalar(t *testing.T) {
	for _, n := range []int{0, 1, 15, 16, 17, 63, 64, 65, 1023} {
		x := float32Inputs(n, uint64(n))
		h := make([]Float16, n)
		b := make([]BFloat16, n)
		Float32ToFloat16(h, x)
		Float32ToBFloat16(b, x)
		hw := make([]float32, n)
		bw := make([]float32, n)
		Float16ToFloat32(hw, h)
		BFloat16ToFloat32(bw, b)
		for i := range x {
			if h[i] != Float16FromFloat32(x[i]) || b[i] != BFloat16FromFloat32(x[i]) ||
				math.Float32bits(hw[i]) != math.Float32bits(h[i].Float32()) ||
				math.Float32bits(bw[i]) != math.Float32bits(b[i].Float32()) {
				t.Fatalf("n=%d, x[%d] = %#08x: bulk and scalar differ", n, i, math.Float32bits(x[i]))
			}
		}
	}
}

// float64Inputs mixes random bits and the float64 values where narrowing to a
// half format in two roundings goes wrong: exact midpoints between neighbouring
// Float16 or BFloat16 values (normal and subnormal, and at the top of their
// ranges) and values just off them by less than a float32 ulp, which float32
// would round onto the midpoint; plus NaNs, infinities, zeros and the float32
// overflow and underflow edges.
func float64Inputs(n int, seed uint64) []float64 {
	specials := []uint64{
		0, 1, 0x7ff0000000000000, 0x7ff8000000000000, 0x7ff0000000000001, 0x7ff4000000000000,
		0x7fefffffffffffff, 0x47efffffe0000000, 0x47effffff0000000, 0x47f0000000000000,
		0x36a0000000000000, 0x3690000000000000, 0x3690000000000001, 0x380fffffffffffff,
		0x3810000000000000, 0x40effe0000000000, 0x40efff0000000000, 0x40f0000000000000,
	}
	r := newRand(seed)
	x := make([]float64, n)
	for i := range x {
		var v float64
		switch r.IntN(6) {
		case 0:
			v = math.Float64frombits(specials[r.IntN(len(specials))])
		case 1, 2: // a midpoint between two BFloat16 (1) or Float16 (2) neighbours
			var lo, hi float64
			if r.IntN(2) == 0 {
				b := BFloat16(r.IntN(0x7f80))
				lo, hi = b.Float64(), (b + 1).Float64()
			} else {
				h := Float16(r.IntN(0x7c00))
				lo, hi = h.Float64(), (h + 1).Float64()
			}
			v = lo + (hi-lo)/2 // exact
			switch r.IntN(3) {
			case 0:
				v = math.Nextafter(v, math.Inf(1))
			case 1:
				v = math.Nextafter(v, 0)
			}
		case 3:
			v = math.Ldexp(r.Float64()+0.5, r.IntN(320)-170)
		default:
			v = math.Float64frombits(r.Uint64())
		}
		if r.IntN(2) == 0 {
			v = -v
		}
		x[i] = v
	}
	return x
}

func TestKernelsFloat64ToFloat32Odd(t *testing.T) {
	in := float64Inputs(5000, 8)
	checkKernels(t, f64ToF32OddKernels, float64ToFloat32OddGo, in, f32(0xdeadbeef))
}

// TestFloat32OddRoundsOnce checks the claim Float64ToFloat16 and Float64ToBFloat16
// rest on: float64 rounded to odd in float32, then to nearest even in the half
// format, is the half format's single rounding of the float64.
func TestFloat32OddRoundsOnce(t *testing.T) {
	for _, x := range float64Inputs(200000, 9) {
		o := OddFloat32(x)
		if got, want := BFloat16FromFloat32(o), BFloat16FromFloat64(x); got != want {
			t.Fatalf("%v (%#016x): via float32 odd %#04x, direct %#04x", x, math.Float64bits(x), uint16(got), uint16(want))
		}
		if got, want := Float16FromFloat32(o), Float16FromFloat64(x); got != want {
			t.Fatalf("%v (%#016x): via float32 odd %#04x, direct %#04x", x, math.Float64bits(x), uint16(got), uint16(want))
		}
	}
}

// TestFloat64BulkRoundsOnce runs the exported float64 narrowings, at lengths on
// both sides of their block and lane sizes, on inputs that two roundings get
// wrong, against the scalar conversions.
func TestFloat64BulkRoundsOnce(t *testing.T) {
	in := float64Inputs(2000, 10)
	for _, n := range []int{0, 1, 15, 16, 31, 32, 33, 128, 255, 256, 257, 300, 511, 512, 1000, 2000} {
		src := in[len(in)-n:]
		h := make([]Float16, n+1)
		b := make([]BFloat16, n+1)
		h[n], b[n] = 0xdead, 0xdead
		Float64ToFloat16(h, src)
		Float64ToBFloat16(b, src)
		for i, x := range src {
			if h[i] != Float16FromFloat64(x) || b[i] != BFloat16FromFloat64(x) {
				t.Fatalf("n=%d, src[%d] = %v (%#016x): bulk %#04x %#04x, scalar %#04x %#04x", n, i, x, math.Float64bits(x),
					uint16(h[i]), uint16(b[i]), uint16(Float16FromFloat64(x)), uint16(BFloat16FromFloat64(x)))
			}
		}
		if h[n] != 0xdead || b[n] != 0xdead {
			t.Fatalf("n=%d: wrote past len(src)", n)
		}
	}
}
