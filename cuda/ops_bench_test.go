package cuda

import (
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/internal/testenv"
)

// BenchmarkBERTBaseOps times the backend ops of one transformer-base layer (ampbench's
// BERT-base-sized encoder: 16 × 512 tokens, width 768, 12 heads, MLP 3072) one by one
// on the GPU, so that a step's time can be split by kernel without a profiler: run
// `cuda.test -test.run '^$' -test.bench BERTBaseOps` on a GPU machine. Each op runs b.N
// times, then the device is synchronised; the GB/s figure counts the bytes the op must
// read and write once.
func BenchmarkBERTBaseOps(b *testing.B) {
	g, err := Open(0)
	if err != nil {
		testenv.Skip(b, testenv.GPU, "no CUDA device: %v", err)
	}
	const rows, width, ff, scoreRows, t = 16 * 512, 768, 3072, 16 * 12 * 512, 512
	alloc := func(dt backend.DType, n int) backend.Storage {
		s, err := g.Alloc(dt, n)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	run := func(name string, bytes int64, f func()) {
		b.Run(name, func(b *testing.B) {
			f()
			if err := g.Synchronize(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(bytes)
			b.ResetTimer()
			for range b.N {
				f()
			}
			if err := g.Synchronize(); err != nil {
				b.Fatal(err)
			}
		})
	}
	for _, dt := range []backend.DType{backend.Float32, backend.Float16} {
		sz := int64(dt.Size())
		s, y, gy, gx := alloc(dt, scoreRows*t), alloc(dt, scoreRows*t), alloc(dt, scoreRows*t), alloc(dt, scoreRows*t)
		run("softmax/"+dt.String(), 2*sz*scoreRows*t, func() { g.Softmax(y, s, scoreRows, t, false) })
		run("softmax_backward/"+dt.String(), 3*sz*scoreRows*t, func() { g.SoftmaxBackward(gx, gy, y, scoreRows, t, false) })
		g.Free(s)
		g.Free(y)
		g.Free(gy)
		g.Free(gx)

		x, ln, gln, gxl := alloc(dt, rows*width), alloc(dt, rows*width), alloc(dt, rows*width), alloc(dt, rows*width)
		w, bias, gw, gb := alloc(backend.Float32, width), alloc(backend.Float32, width), alloc(backend.Float32, width), alloc(backend.Float32, width)
		mean, inv := alloc(backend.Float32, rows), alloc(backend.Float32, rows)
		norm := backend.NormArgs{X: x, Y: ln, Weight: w, Bias: bias, SaveMean: mean, SaveInvStd: inv, N: rows, C: width, Eps: 1e-5,
			GY: gln, GX: gxl, GWeight: gw, GBias: gb}
		if dt == backend.Float32 {
			run("layer_norm/"+dt.String(), 2*sz*rows*width, func() { g.LayerNorm(norm) })
			run("layer_norm_backward/"+dt.String(), 3*sz*rows*width, func() { g.LayerNormBackward(norm) })
		}
		view := func(s backend.Storage) backend.View {
			return backend.View{S: s, Shape: []int{rows * width}, Strides: []int{1}}
		}
		run("add/"+dt.String(), 3*sz*rows*width, func() { g.Binary(backend.Add, view(ln), view(x), view(gln)) })
		for _, st := range []backend.Storage{x, ln, gln, gxl, w, bias, gw, gb, mean, inv} {
			g.Free(st)
		}

		h, hy, hg := alloc(dt, rows*ff), alloc(dt, rows*ff), alloc(dt, rows*ff)
		col := alloc(dt, ff)
		run("gelu/"+dt.String(), 2*sz*rows*ff, func() { g.Unary(backend.Gelu, hy, h, rows*ff, 0, 0) })
		run("gelu_backward/"+dt.String(), 3*sz*rows*ff, func() { g.UnaryBackward(backend.Gelu, hg, hy, h, nil, rows*ff, 0, 0) })
		run("bias_grad_sum/"+dt.String(), sz*rows*ff, func() { g.Reduce(backend.Sum, col, hy, 1, rows, ff) })
		a, wt := alloc(dt, rows*width), alloc(dt, ff*width)
		mm := backend.MatMulArgs{A: a, B: wt, C: h, Batch: 1, M: rows, N: ff, K: width, TransB: true, Alpha: 1}
		run("linear_768x3072/"+dt.String(), sz*(rows*width+ff*width+rows*ff), func() { g.MatMul(mm) })
		for _, st := range []backend.Storage{h, hy, hg, col, a, wt} {
			g.Free(st)
		}
	}
}
