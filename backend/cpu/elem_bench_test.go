package cpu_test

import (
	"fmt"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/backend/cpu"
)

// BenchmarkElem times the elementwise, cast and reduction kernels of an MLP step on
// its shapes: activations [256, 1024] and a 1024×1024 weight. It reports GB/s of the
// bytes each kernel must read and write.
func BenchmarkElem(b *testing.B) {
	be, err := cpu.New(0)
	if err != nil {
		b.Fatal(err)
	}
	const rows, cols = 256, 1024
	const act, weight = rows * cols, 1024 * 1024
	alloc := func(dt backend.DType, n int) backend.Storage {
		s, err := be.Alloc(dt, n)
		if err != nil {
			b.Fatal(err)
		}
		be.RandNormal(s, n, backend.RNG{Seed: 1}, 0, 1)
		return s
	}
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		sz := int64(dt.Size())
		x, y, g := alloc(dt, act), alloc(dt, act), alloc(dt, act)
		w, v := alloc(dt, weight), alloc(dt, weight)
		bias := alloc(dt, cols)
		col := alloc(dt, cols)
		// x as [16, 16, 32, 32] (a conv layer's output), 2×2 max pooling; batch norm
		// over its 16 channels.
		pool := backend.PoolArgs{Kind: backend.MaxPool, N: 16, C: 16, H: 32, W: 32, KH: 2, KW: 2,
			StrideH: 2, StrideW: 2, OH: 16, OW: 16}
		col4, idx := alloc(dt, act/4), alloc(backend.Int64, act/4)
		mean, invstd := alloc(backend.Float32, 16), alloc(backend.Float32, 16)
		bn := func(x, y, g backend.Storage) backend.NormArgs {
			a := backend.NormArgs{X: x, Y: y, N: 16, C: 16, S: 1024, Training: true, Eps: 1e-5,
				SaveMean: mean, SaveInvStd: invstd}
			if g != nil {
				a.Y, a.GY, a.GX = nil, g, y
			}
			return a
		}
		dense := func(s backend.Storage, shape ...int) backend.View { return backend.Dense(s, 0, shape...) }
		cases := []struct {
			name  string
			bytes int64
			run   func()
		}{
			{"relu", 2 * act * sz, func() { be.Unary(backend.Relu, y, x, act, 0, 0) }},
			{"relu-backward", 3 * act * sz, func() { be.UnaryBackward(backend.Relu, y, g, x, nil, act, 0, 0) }},
			{"gelu", 2 * act * sz, func() { be.Unary(backend.Gelu, y, x, act, 0, 0) }},
			{"gelu-backward", 3 * act * sz, func() { be.UnaryBackward(backend.Gelu, y, g, x, nil, act, 0, 0) }},
			{"mul-scalar", 2 * weight * sz, func() { be.Unary(backend.MulScalar, w, w, weight, 0.9, 0) }},
			{"add", 3 * weight * sz, func() { be.Binary(backend.Add, dense(w, weight), dense(w, weight), dense(v, weight)) }},
			{"bias-add", (2*act + cols) * sz, func() {
				be.Binary(backend.Add, dense(y, rows, cols), dense(x, rows, cols),
					backend.View{S: bias, Shape: []int{rows, cols}, Strides: []int{0, 1}})
			}},
			{"sum-rows", (act + cols) * sz, func() { be.Reduce(backend.Sum, col, g, 1, rows, cols) }},
			{"sum-last", (act + rows) * sz, func() { be.Reduce(backend.Sum, col, g, rows, cols, 1) }},
			{"softmax", 2 * act * sz, func() { be.Softmax(y, x, rows, cols, false) }},
			{"log-softmax-backward", 3 * act * sz, func() { be.SoftmaxBackward(y, g, x, rows, cols, true) }},
			{"unscale", 2 * weight * sz, func() { be.UnscaleCheck(v, weight, 1) }},
			{"max-pool", act*sz + act/4*(sz+8), func() { be.Pool(col4, idx, x, pool) }},
			{"batch-norm", 2 * act * sz, func() { be.BatchNorm(bn(x, y, nil)) }},
			{"batch-norm-backward", 3 * act * sz, func() { be.BatchNormBackward(bn(x, y, g)) }},
		}
		if dt == backend.Float32 {
			w16 := alloc(backend.BFloat16, weight)
			cases = append(cases,
				struct {
					name  string
					bytes int64
					run   func()
				}{"cast-to-bf16", 6 * weight, func() { be.Copy(dense(w16, weight), dense(w, weight)) }},
				struct {
					name  string
					bytes int64
					run   func()
				}{"cast-from-bf16", 6 * weight, func() { be.Copy(dense(w, weight), dense(w16, weight)) }},
			)
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("%s/%s", c.name, dt), func(b *testing.B) {
				b.SetBytes(c.bytes)
				for range b.N {
					c.run()
				}
			})
		}
	}
}
