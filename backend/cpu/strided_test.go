package cpu

import (
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// TestCopyStridedRawMatchesRoundTrip checks the raw strided copy of the half types
// against the float32 round trip it replaces, on every bit pattern (a stride of 2 on
// the source, 3 on the destination).
func TestCopyStridedRawMatchesRoundTrip(t *testing.T) {
	b, _ := New(0)
	const n = 1 << 16
	for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
		ss, _ := b.Alloc(dt, 2*n)
		src := st(ss).u16()
		for i := range n {
			src[2*i] = uint16(i)
		}
		ds, _ := b.Alloc(dt, 3*n)
		if !copyStridedRaw(st(ds), 0, 3, st(ss), 0, 2, n) {
			t.Fatalf("%s: not copied", dt)
		}
		buf := make([]float32, n)
		loadStridedF32(buf, st(ss), 0, 2)
		ws, _ := b.Alloc(dt, n)
		st(ws).storeF32(0, buf)
		got, want := st(ds).u16(), st(ws).u16()
		for i := range n {
			if got[3*i] != want[i] {
				t.Fatalf("%s %#04x: copied %#04x, round trip %#04x", dt, i, got[3*i], want[i])
			}
		}
	}
}

// TestCopyBroadcast checks the fill path of the raw strided copy (source stride 0)
// against the element loop, contiguous and strided, for a float32 and a half NaN.
func TestCopyBroadcast(t *testing.T) {
	b, _ := New(0)
	for _, n := range []int{0, 1, 2, 3, 7, 64, 100} {
		for _, ds := range []int{1, 3} {
			for _, dt := range []backend.DType{backend.Float32, backend.BFloat16, backend.Float16} {
				ss, _ := b.Alloc(dt, 2)
				raw := st(ss).rawBytes()
				for i := range raw {
					raw[i] = 0x7f // a signalling NaN in the half types, a number in float32
				}
				d1, _ := b.Alloc(dt, ds*n+1)
				d2, _ := b.Alloc(dt, ds*n+1)
				copyStridedRaw(st(d1), 1, ds, st(ss), 1, 0, n)
				buf := make([]float32, n)
				loadStridedF32(buf, st(ss), 1, 0)
				storeStridedF32(st(d2), 1, ds, buf)
				g, w := st(d1).rawBytes(), st(d2).rawBytes()
				for i := range g {
					if g[i] != w[i] {
						t.Fatalf("%s n=%d ds=%d: byte %d = %#x, want %#x", dt, n, ds, i, g[i], w[i])
					}
				}
			}
		}
	}
}
