package cpu_test

import (
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/backend/cpu"
)

// BenchmarkCopyHeads times the strided copies around multi-head attention on the
// transformer's shapes (N 32, T 64, 4 heads of 32): the split of a packed [N, T, 3·D]
// projection into [N, H, T, Dh] and the merge back, in float32 and bfloat16, and a
// bias broadcast into [N·T, 4·D].
func BenchmarkCopyHeads(b *testing.B) {
	be, err := cpu.New(0)
	if err != nil {
		b.Fatal(err)
	}
	const n, t, h, dh = 32, 64, 4, 32
	const d = h * dh
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		packed, _ := be.Alloc(dt, n*t*3*d)
		heads, _ := be.Alloc(dt, n*t*d)
		bias, _ := be.Alloc(dt, 4*d)
		out, _ := be.Alloc(dt, n*t*4*d)
		hs := []int{n, h, t, dh}
		split := backend.View{S: packed, Offset: d, Shape: hs, Strides: []int{t * 3 * d, dh, 3 * d, 1}}
		merged := backend.View{S: heads, Shape: hs, Strides: []int{t * d, dh, d, 1}}
		dense := backend.Dense(heads, 0, hs...)
		b.Run(dt.String()+"/split", func(b *testing.B) {
			b.SetBytes(int64(2 * n * t * d * dt.Size()))
			for b.Loop() {
				be.Copy(dense, split)
			}
		})
		b.Run(dt.String()+"/merge", func(b *testing.B) {
			b.SetBytes(int64(2 * n * t * d * dt.Size()))
			for b.Loop() {
				be.Copy(merged, dense)
			}
		})
		b.Run(dt.String()+"/bias", func(b *testing.B) {
			b.SetBytes(int64(n * t * 4 * d * dt.Size()))
			dst := backend.Dense(out, 0, n*t, 4*d)
			src := backend.View{S: bias, Shape: []int{n * t, 4 * d}, Strides: []int{0, 1}}
			for b.Loop() {
				be.Copy(dst, src)
			}
		})
	}
}
