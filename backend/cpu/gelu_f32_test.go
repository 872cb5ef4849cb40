//go:build amd64 && !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// geluCompactCheck runs vecGelu (the compacting loop where it applies), and
// geluCompactAVX512 block by block, on x (and gy), and compares both with
// vecGeluAVX512 on x's multiple-of-16 head and with geluGo, bit for bit.
func geluCompactCheck(t *testing.T, what string, x, gy []float32) {
	t.Helper()
	n := len(x)
	want := make([]float32, n)
	geluGo(want, x, gy)
	got := make([]float32, n)
	vecGelu(got, x, gy)
	in := append([]float32(nil), x...)
	if gy == nil {
		vecGelu(in, in, nil)
	} else {
		in = append([]float32(nil), gy...)
		vecGelu(in, x, in)
	}
	for i := range want {
		if !sameBits(got[i], want[i]) || !sameBits(in[i], want[i]) {
			t.Fatalf("%s n=%d bwd=%v: vecGelu [%d] x=%v (%#08x): %v (in place %v), twin %v",
				what, n, gy != nil, i, x[i], math.Float32bits(x[i]), got[i], in[i], want[i])
		}
	}
	m := n &^ 15
	if m == 0 || !vecAVX512OK() {
		return
	}
	old := make([]float32, m)
	var gp *float32
	if gy != nil {
		gp = &gy[0]
	}
	vecGeluAVX512(&old[0], &x[0], gp, m)
	for i := 0; i < m; i += geluBlock {
		k := min(geluBlock, m-i)
		c := make([]float32, k)
		gp = nil
		if gy != nil {
			gp = &gy[i]
		}
		ok := geluCompactAVX512(&c[0], &x[i], gp, k)
		nan := false
		for _, v := range x[i : i+k] {
			nan = nan || v != v
		}
		if ok == nan {
			t.Fatalf("%s n=%d: geluCompactAVX512 block %d returned %v with NaN %v", what, n, i, ok, nan)
		}
		if !ok {
			continue
		}
		for j := range c {
			o, w := old[i+j], want[i+j]
			if math.Float32bits(c[j]) != math.Float32bits(o) || !sameBits(c[j], w) {
				t.Fatalf("%s n=%d bwd=%v: [%d] x=%v (%#08x): geluCompactAVX512 %v (%#08x), vecGeluAVX512 %v (%#08x), twin %v",
					what, n, gy != nil, i+j, x[i+j], math.Float32bits(x[i+j]), c[j], math.Float32bits(c[j]), o, math.Float32bits(o), w)
			}
		}
	}
}

func geluCompactGy(rng *rand.Rand, n int) []float32 {
	gy := make([]float32, n)
	for i := range gy {
		gy[i] = float32(rng.NormFloat64())
	}
	if n > 3 {
		gy[n/3] = float32(math.NaN())
		gy[n/2] = float32(math.Inf(-1))
	}
	return gy
}

// TestGeluCompactSweep runs every float32 in a band around each piece boundary (in
// a = |x/√2|: 0.84375, 1.25, 1/0.35; and x's exp cut, 13.1), both signs.
func TestGeluCompactSweep(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, b := range []float64{float64(erfA), float64(erfB), float64(erfC)} {
		for _, c := range []float32{float32(b * math.Sqrt2), float32(b), 13.115, 1} {
			for _, sign := range []float32{1, -1} {
				const w = 1 << 15
				x := make([]float32, 0, 2*w)
				base := math.Float32bits(c)
				for d := uint32(0); d < 2*w; d++ {
					x = append(x, sign*math.Float32frombits(base-w+d))
				}
				geluCompactCheck(t, "sweep", x, nil)
				geluCompactCheck(t, "sweep", x, geluCompactGy(rng, len(x)))
			}
		}
	}
}

// TestGeluCompactNormal runs normal activations at several scales, every length to
// 100 and a few large ones, at unaligned offsets.
func TestGeluCompactNormal(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	lens := []int{1023, 1024, 1025, 2048 + 48, 5000, 16384}
	for n := range 101 {
		lens = append(lens, n)
	}
	for _, scale := range []float64{0.1, 1, 3, 30} {
		for _, n := range lens {
			for mis := range 3 {
				x := make([]float32, n+mis)
				for i := range x {
					x[i] = float32(rng.NormFloat64() * scale)
				}
				geluCompactCheck(t, "normal", x[mis:], nil)
				geluCompactCheck(t, "normal", x[mis:], geluCompactGy(rng, n+mis)[mis:])
			}
		}
	}
}

// TestGeluCompactSpecial runs ±0, ±Inf, NaN (in some blocks only: the others keep
// the compacting loop), subnormals, huge values and the pieces' bounds, mixed in
// normal activations.
func TestGeluCompactSpecial(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	nan := math.Float32frombits(0x7fc01234)
	sp := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(1), -math.Float32frombits(1), math.Float32frombits(0x7fffff), 1e-38, -1e-30,
		math.MaxFloat32, -math.MaxFloat32, 1e20, -1e20, 13.1, -13.1, 13.2, -13.2, 86, -86, 4e9}
	for _, b := range []float64{float64(erfA), float64(erfB), float64(erfC)} {
		for _, s := range []float64{1, math.Sqrt2} {
			v := float32(b * s)
			sp = append(sp, v, -v, math.Nextafter32(v, 0), -math.Nextafter32(v, 0), math.Nextafter32(v, 100), -math.Nextafter32(v, 100))
		}
	}
	for _, withNaN := range []bool{false, true} {
		for _, n := range []int{64, 100, 1024, 3000} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
				if rng.IntN(3) == 0 {
					x[i] = sp[rng.IntN(len(sp))]
				}
			}
			if withNaN {
				x[n/2] = nan
				x[n-1] = -nan
			}
			geluCompactCheck(t, "special", x, nil)
			geluCompactCheck(t, "special", x, geluCompactGy(rng, n))
		}
	}
}

// TestGeluCompactGenerated checks that gelu_f32_amd64.s is internal/gelugen's output.
func TestGeluCompactGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator")
	}
	out := filepath.Join(t.TempDir(), "gelu_f32_amd64.s")
	cmd := exec.Command("go", "run", "./internal/gelugen", "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gelugen: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("gelu_f32_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatal("gelu_f32_amd64.s is stale: go generate ./backend/cpu/")
	}
}

// BenchmarkGeluCompact times the old loop (vecGeluAVX512) and the compacting one
// (vecGelu) on N(0, σ²) activations, in ns per element.
func BenchmarkGeluCompact(b *testing.B) {
	if !vecAVX512OK() {
		b.Skip("no AVX-512")
	}
	const n = 1 << 14
	for _, sigma := range []float64{1, 3} {
		rng := rand.New(rand.NewPCG(1, 2))
		x, gy, y := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], gy[i] = float32(rng.NormFloat64()*sigma), float32(rng.NormFloat64())
		}
		for _, dir := range []string{"fwd", "bwd"} {
			var g []float32
			if dir == "bwd" {
				g = gy
			}
			for _, impl := range []string{"old", "new"} {
				b.Run("s"+[]string{"", "1", "", "3"}[int(sigma)]+"/"+dir+"/"+impl, func(b *testing.B) {
					var gp *float32
					if g != nil {
						gp = &g[0]
					}
					for b.Loop() {
						if impl == "old" {
							vecGeluAVX512(&y[0], &x[0], gp, n)
						} else {
							vecGelu(y, x, g)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/elem")
				})
			}
		}
	}
}

// BenchmarkGeluCompactPair times the old loop and vecGelu alternately, 16K elements
// per timing, and reports the minimum and median ns per element of each: less
// sensitive to a loaded machine than separate runs.
func BenchmarkGeluCompactPair(b *testing.B) {
	if !vecAVX512OK() {
		b.Skip("no AVX-512")
	}
	const n = 1 << 14
	// σ = 0.58 is about the transformer's (cmd/ampbench) GELU inputs.
	for _, sigma := range []float64{0.58, 1} {
		rng := rand.New(rand.NewPCG(1, 2))
		x, gy, y := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], gy[i] = float32(rng.NormFloat64()*sigma), float32(rng.NormFloat64())
		}
		for _, dir := range []string{"fwd", "bwd"} {
			b.Run(fmt.Sprintf("s%v/%s", sigma, dir), func(b *testing.B) {
				var g []float32
				var gp *float32
				if dir == "bwd" {
					g, gp = gy, &gy[0]
				}
				var old, nw []float64
				for b.Loop() {
					t0 := time.Now()
					vecGeluAVX512(&y[0], &x[0], gp, n)
					t1 := time.Now()
					vecGelu(y, x, g)
					t2 := time.Now()
					old = append(old, float64(t1.Sub(t0).Nanoseconds())/n)
					nw = append(nw, float64(t2.Sub(t1).Nanoseconds())/n)
				}
				slices.Sort(old)
				slices.Sort(nw)
				b.ReportMetric(old[0], "old-min")
				b.ReportMetric(old[len(old)/2], "old-med")
				b.ReportMetric(nw[0], "new-min")
				b.ReportMetric(nw[len(nw)/2], "new-med")
			})
		}
	}
}
