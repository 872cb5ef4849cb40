package cpu_test

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/backend/cpu"
)

// BenchmarkCNNNorm times the Fashion CNN's fused batch-norm + ReLU and its 2×2 max-pool,
// forward and backward, on its two layers' shapes ([128, 16, 28, 28] and [128, 32, 14,
// 14]), reporting GB/s of the bytes each kernel must read and write and the process
// CPU time per op (cpu-ns/op), which other processes on a shared machine inflate less
// than the wall time.
func BenchmarkCNNNorm(b *testing.B) {
	be, err := cpu.New(0)
	if err != nil {
		b.Fatal(err)
	}
	alloc := func(dt backend.DType, n int) backend.Storage {
		s, err := be.Alloc(dt, n)
		if err != nil {
			b.Fatal(err)
		}
		be.RandNormal(s, n, backend.RNG{Seed: uint64(n)}, 0, 1)
		return s
	}
	for _, layer := range []struct{ c, hw int }{{16, 28}, {32, 14}} {
		for _, dt := range []backend.DType{backend.Float32, backend.BFloat16, backend.Float16} {
			const n = 128
			s := layer.hw * layer.hw
			act := n * layer.c * s
			sz := int64(dt.Size())
			x, y, gy, gx := alloc(dt, act), alloc(dt, act), alloc(dt, act), alloc(dt, act)
			w, bias := alloc(backend.Float32, layer.c), alloc(backend.Float32, layer.c)
			gw, gb := alloc(backend.Float32, layer.c), alloc(backend.Float32, layer.c)
			rm, rv := alloc(backend.Float32, layer.c), alloc(backend.Float32, layer.c)
			mean, invstd := alloc(backend.Float32, layer.c), alloc(backend.Float32, layer.c)
			fwd := backend.NormArgs{X: x, Y: y, Weight: w, Bias: bias, RunningMean: rm, RunningVar: rv,
				SaveMean: mean, SaveInvStd: invstd, N: n, C: layer.c, S: s, Training: true, Momentum: 0.1, Eps: 1e-5}
			bwd := backend.NormArgs{X: x, Y: y, GY: gy, GX: gx, Weight: w, GWeight: gw, GBias: gb,
				SaveMean: mean, SaveInvStd: invstd, N: n, C: layer.c, S: s, Training: true, Eps: 1e-5}
			be.BatchNormReLU(fwd)
			oh := layer.hw / 2
			pool := backend.PoolArgs{Kind: backend.MaxPool, N: n, C: layer.c, H: layer.hw, W: layer.hw, KH: 2, KW: 2,
				StrideH: 2, StrideW: 2, OH: oh, OW: oh}
			po, pg, idx := alloc(dt, act/4), alloc(dt, act/4), alloc(backend.Int64, act/4)
			cases := []struct {
				name  string
				bytes int64
				run   func()
			}{
				{"bn-relu", 2 * int64(act) * sz, func() { be.BatchNormReLU(fwd) }},
				{"bn-relu-backward", 4 * int64(act) * sz, func() { be.BatchNormReLUBackward(bwd) }},
				{"max-pool-index", int64(act)*sz + int64(act/4)*(sz+8), func() { be.Pool(po, idx, y, pool) }},
				{"max-pool-index-backward", int64(act)*sz + int64(act/4)*(sz+8), func() { be.PoolBackward(gx, pg, idx, pool) }},
				{"max-pool", int64(act)*sz + int64(act/4)*sz, func() { be.MaxPool(po, y, pool) }},
				{"max-pool-backward", 2*int64(act)*sz + int64(act/4)*sz, func() { be.MaxPoolBackward(gx, pg, y, pool) }},
			}
			for _, c := range cases {
				b.Run(fmt.Sprintf("%s/c%d/%s", c.name, layer.c, dt), func(b *testing.B) {
					b.SetBytes(c.bytes)
					var r0, r1 syscall.Rusage
					_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
					for range b.N {
						c.run()
					}
					_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
					ns := func(r *syscall.Rusage) float64 { return float64(r.Utime.Nano() + r.Stime.Nano()) }
					b.ReportMetric((ns(&r1)-ns(&r0))/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}
