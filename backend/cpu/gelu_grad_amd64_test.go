//go:build amd64 && !purego

package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"unsafe"

	"github.com/gamp-ml/gamp/backend"
)

// TestGeluCompactGrad runs geluCompactGradAVX512 block by block against
// vecGeluAVX512's forward (y) and its backward on a gy of ones (T), bit for bit, and
// checks that it refuses exactly the blocks with a NaN, leaving y and t alone.
func TestGeluCompactGrad(t *testing.T) {
	if !vecAVX512OK() {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(17, 18))
	for _, sigma := range []float64{0.58, 1, 3, 30} {
		for _, special := range []bool{false, true} {
			for k := 16; k <= geluBlock; k += 16 {
				x := geluGradMix(rng, k+1, sigma, special)[1:] // unaligned
				y, tt := make([]float32, k), make([]float32, k)
				for i := range y {
					y[i], tt[i] = -7, -7
				}
				ok := geluCompactGradAVX512(&y[0], &tt[0], &x[0], k)
				nan := slices.ContainsFunc(x, func(v float32) bool { return v != v })
				if ok == nan {
					t.Fatalf("σ=%v k=%d: returned %v with NaN %v", sigma, k, ok, nan)
				}
				wy, wt := make([]float32, k), make([]float32, k)
				if !ok {
					for i := range wy {
						wy[i], wt[i] = -7, -7
					}
				} else {
					vecGeluAVX512(&wy[0], &x[0], nil, k)
					vecGeluAVX512(&wt[0], &x[0], &geluOnes[0], k)
				}
				for i := range y {
					if math.Float32bits(y[i]) != math.Float32bits(wy[i]) || math.Float32bits(tt[i]) != math.Float32bits(wt[i]) {
						t.Fatalf("σ=%v k=%d [%d] x=%v (%#08x): y %#08x t %#08x, want %#08x %#08x",
							sigma, k, i, x[i], math.Float32bits(x[i]), math.Float32bits(y[i]), math.Float32bits(tt[i]),
							math.Float32bits(wy[i]), math.Float32bits(wt[i]))
					}
				}
			}
		}
	}
}

// processCPU returns the process's CPU time (CLOCK_PROCESS_CPUTIME_ID), in ns.
func processCPU() int64 {
	var ts syscall.Timespec
	const clockProcessCPU = 2
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockProcessCPU, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic(e)
	}
	return ts.Nano()
}

// BenchmarkGeluGradPair times the transformer-large GELU ([2048, 2048] float32,
// N(0, 0.58²) inputs) through the backend, forward and backward, the old way (Unary,
// UnaryBackward from x) and the new (GeluForwardGrad, GeluBackwardGrad from T),
// alternately, and reports the median process CPU time of each in ms (every worker's
// time counted, so other processes on the machine inflate it little).
func BenchmarkGeluGradPair(b *testing.B) {
	be, err := New(0)
	if err != nil {
		b.Fatal(err)
	}
	const n = 2048 * 2048
	rng := rand.New(rand.NewPCG(1, 2))
	x, gy := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], gy[i] = float32(rng.NormFloat64()*0.58), float32(rng.NormFloat64())
	}
	s := func(v []float32) backend.Storage {
		st, err := be.Alloc(backend.Float32, n)
		if err != nil {
			b.Fatal(err)
		}
		if v != nil {
			be.Upload(st, 0, v)
		}
		return st
	}
	xs, gys, y, ts, gx := s(x), s(gy), s(nil), s(nil), s(nil)
	var of, ob, nf, nb []float64
	timed := func(acc *[]float64, fn func()) {
		t0 := processCPU()
		fn()
		*acc = append(*acc, float64(processCPU()-t0)/1e6)
	}
	for b.Loop() {
		timed(&of, func() { be.Unary(backend.Gelu, y, xs, n, 0, 0) })
		timed(&ob, func() { be.UnaryBackward(backend.Gelu, gx, gys, xs, nil, n, 0, 0) })
		timed(&nf, func() { be.GeluForwardGrad(y, ts, xs, n) })
		timed(&nb, func() { be.GeluBackwardGrad(gx, gys, ts, n) })
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(med(of), "old-fwd-cpu-ms")
	b.ReportMetric(med(ob), "old-bwd-cpu-ms")
	b.ReportMetric(med(nf), "new-fwd-cpu-ms")
	b.ReportMetric(med(nb), "new-bwd-cpu-ms")
}
