package cpu

import (
	"math"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// attnBenchArgs allocates examples/chargpt's default attention (batch 32 × 4 heads,
// T = 128, D = 32, causal) in dt.
func attnBenchArgs(b *testing.B, dt backend.DType) backend.AttentionArgs {
	be, _ := New(0)
	const bh, t, d = 128, 128, 32
	rng := rand.New(rand.NewPCG(1, 2))
	mk := func(fill bool) backend.Storage {
		s, err := be.Alloc(dt, bh*t*d)
		if err != nil {
			b.Fatal(err)
		}
		if fill {
			v := make([]float32, bh*t*d)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			st(s).storeF32(0, v)
		}
		return s
	}
	lse, _ := be.Alloc(backend.Float32, bh*t)
	return backend.AttentionArgs{Q: mk(true), K: mk(true), V: mk(true), O: mk(false), LSE: lse,
		GO: mk(true), GQ: mk(false), GK: mk(false), GV: mk(false),
		BH: bh, T: t, D: d, Scale: 1 / math.Sqrt(d), Causal: true}
}

// BenchmarkAttention times one forward and one backward pass of chargpt's attention.
func BenchmarkAttention(b *testing.B) {
	be, _ := New(0)
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		b.Run(dt.String(), func(b *testing.B) {
			a := attnBenchArgs(b, dt)
			attnCPUTime(b, func() {
				be.Attention(a)
				be.AttentionBackward(a)
			})
		})
	}
}

// attnBenchPacked is attnBenchArgs's attention on operands laid out as
// tensor.SelfAttention passes them: Q, K and V (and their gradients) in one packed
// [32, 128, 3, 4, 32] storage, O and dO in [32, 128, 4·32].
func attnBenchPacked(b *testing.B, dt backend.DType) backend.AttentionArgs {
	return attnBenchPackedShape(b, dt, 32, 4, 128, 32, true)
}

// attnBenchPackedShape is attnBenchPacked's layout for batch n, heads heads of width d
// and sequence length t.
func attnBenchPackedShape(b *testing.B, dt backend.DType, n, heads, t, d int, causal bool) backend.AttentionArgs {
	be, _ := New(0)
	hd := heads * d
	rng := rand.New(rand.NewPCG(1, 2))
	mk := func(size int, fill bool) backend.Storage {
		s, err := be.Alloc(dt, size)
		if err != nil {
			b.Fatal(err)
		}
		if fill {
			v := make([]float32, size)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			st(s).storeF32(0, v)
		}
		return s
	}
	lse, _ := be.Alloc(backend.Float32, n*heads*t)
	qkv, gx := mk(n*t*3*hd, true), mk(n*t*3*hd, false)
	lay := &backend.AttentionLayout{Heads: heads}
	for p, s := range []*backend.AttentionStride{&lay.Q, &lay.K, &lay.V} {
		*s = backend.AttentionStride{Off: p * hd, Batch: t * 3 * hd, Head: d, Row: 3 * hd}
	}
	lay.GQ, lay.GK, lay.GV = lay.Q, lay.K, lay.V
	lay.O = backend.AttentionStride{Batch: t * hd, Head: d, Row: hd}
	lay.GO = lay.O
	return backend.AttentionArgs{Q: qkv, K: qkv, V: qkv, O: mk(n*t*hd, false), LSE: lse,
		GO: mk(n*t*hd, true), GQ: gx, GK: gx, GV: gx,
		BH: n * heads, T: t, D: d, Scale: 1 / math.Sqrt(float64(d)), Causal: causal, Layout: lay}
}

// BenchmarkAttentionLarge times the forward and the backward pass of ampbench
// transformer-large's attention (16 × 8 heads, T = 128, D = 64, not causal) on the
// packed layout of tensor.SelfAttention.
func BenchmarkAttentionLarge(b *testing.B) {
	be, _ := New(0)
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		a := attnBenchPackedShape(b, dt, 16, 8, 128, 64, false)
		b.Run(dt.String()+"/forward", func(b *testing.B) {
			attnCPUTime(b, func() { be.Attention(a) })
		})
		b.Run(dt.String()+"/backward", func(b *testing.B) {
			be.Attention(a)
			attnCPUTime(b, func() { be.AttentionBackward(a) })
		})
	}
}

// BenchmarkAttentionSmall times the forward and the backward pass of ampbench
// transformer's attention (32 × 4 heads, T = 64, D = 32, not causal) on the packed
// layout of tensor.SelfAttention.
func BenchmarkAttentionSmall(b *testing.B) {
	be, _ := New(0)
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		a := attnBenchPackedShape(b, dt, 32, 4, 64, 32, false)
		b.Run(dt.String()+"/forward", func(b *testing.B) {
			attnCPUTime(b, func() { be.Attention(a) })
		})
		b.Run(dt.String()+"/backward", func(b *testing.B) {
			be.Attention(a)
			attnCPUTime(b, func() { be.AttentionBackward(a) })
		})
	}
}

// BenchmarkAttentionPass times the forward and the backward pass of chargpt's attention
// apart, on dense [BH, T, D] operands and on the packed layout of tensor.SelfAttention.
func BenchmarkAttentionPass(b *testing.B) {
	be, _ := New(0)
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		for _, packed := range []bool{false, true} {
			var a backend.AttentionArgs
			name := "dense"
			if packed {
				name = "packed"
			}
			args := func(b *testing.B) backend.AttentionArgs {
				if a.Q == nil {
					if packed {
						a = attnBenchPacked(b, dt)
					} else {
						a = attnBenchArgs(b, dt)
					}
				}
				return a
			}
			b.Run(dt.String()+"/"+name+"/forward", func(b *testing.B) {
				a := args(b)
				attnCPUTime(b, func() { be.Attention(a) })
			})
			b.Run(dt.String()+"/"+name+"/backward", func(b *testing.B) {
				a := args(b)
				be.Attention(a)
				attnCPUTime(b, func() { be.AttentionBackward(a) })
			})
		}
	}
}

// attnCPUTime runs fn in b's loop and reports, besides the wall time, the process CPU
// time per op (cpu-ns/op), less inflated than the wall time on a shared machine.
func attnCPUTime(b *testing.B, fn func()) {
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	for b.Loop() {
		fn()
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	ns := func(r *syscall.Rusage) float64 { return float64(r.Utime.Nano() + r.Stime.Nano()) }
	b.ReportMetric((ns(&r1)-ns(&r0))/float64(b.N), "cpu-ns/op")
}
