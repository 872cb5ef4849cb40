package cpu_test

import (
	"fmt"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/backend/cpu"
)

// BenchmarkLayerNorm times LayerNorm forward and backward on transformer blocks' shapes
// (2048 tokens of width 128, the ampbench transformer's, 4096, chargpt's, and 2048 of
// width 512, transformer-large's, and 256 of width 512, which stay in L2; affine),
// float32 and bfloat16 activations.
func BenchmarkLayerNorm(b *testing.B) {
	be, err := cpu.New(0)
	if err != nil {
		b.Fatal(err)
	}
	alloc := func(dt backend.DType, n int) backend.Storage {
		s, err := be.Alloc(dt, n)
		if err != nil {
			b.Fatal(err)
		}
		be.RandNormal(s, n, backend.RNG{Seed: 1}, 0, 1)
		return s
	}
	for _, sh := range [][2]int{{2048, 128}, {4096, 128}, {2048, 512}, {256, 512}} {
		rows, cols := sh[0], sh[1]
		w, bias := alloc(backend.Float32, cols), alloc(backend.Float32, cols)
		gw, gb := alloc(backend.Float32, cols), alloc(backend.Float32, cols)
		name := fmt.Sprint(rows)
		if cols != 128 {
			name = fmt.Sprintf("%dx%d", rows, cols)
		}
		b.Run(name, func(b *testing.B) { benchLayerNorm(b, be, alloc, rows, cols, w, bias, gw, gb) })
	}
}

func benchLayerNorm(b *testing.B, be *cpu.Backend, alloc func(backend.DType, int) backend.Storage, rows, cols int, w, bias, gw, gb backend.Storage) {
	mean, inv := alloc(backend.Float32, rows), alloc(backend.Float32, rows)
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		x, y, gy := alloc(dt, rows*cols), alloc(dt, rows*cols), alloc(dt, rows*cols)
		a := backend.NormArgs{X: x, Y: y, Weight: w, Bias: bias, SaveMean: mean, SaveInvStd: inv, N: rows, C: cols, Eps: 1e-5}
		b.Run(dt.String()+"/fwd", func(b *testing.B) {
			for b.Loop() {
				be.LayerNorm(a)
			}
		})
		b.Run(dt.String()+"/bwd", func(b *testing.B) {
			g := backend.NormArgs{X: x, GY: gy, GX: y, Weight: w, SaveMean: mean, SaveInvStd: inv, GWeight: gw, GBias: gb, N: rows, C: cols, Eps: 1e-5}
			for b.Loop() {
				be.LayerNormBackward(g)
			}
		})
	}
	// Float32 X with a bfloat16 Y (forward) or GY (backward): a norm feeding an autocast
	// Linear (backend.LayerNormHalfIO).
	x, gx := alloc(backend.Float32, rows*cols), alloc(backend.Float32, rows*cols)
	y := alloc(backend.BFloat16, rows*cols)
	b.Run("halfio/fwd", func(b *testing.B) {
		a := backend.NormArgs{X: x, Y: y, Weight: w, Bias: bias, SaveMean: mean, SaveInvStd: inv, N: rows, C: cols, Eps: 1e-5}
		for b.Loop() {
			be.LayerNorm(a)
		}
	})
	b.Run("halfio/bwd", func(b *testing.B) {
		g := backend.NormArgs{X: x, GY: y, GX: gx, Weight: w, SaveMean: mean, SaveInvStd: inv, GWeight: gw, GBias: gb, N: rows, C: cols, Eps: 1e-5}
		for b.Loop() {
			be.LayerNormBackward(g)
		}
	})
}
