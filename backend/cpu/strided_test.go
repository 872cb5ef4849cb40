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

// TestCopyRowsSame checks the row copy of equal dtypes against an element loop over
// the views' indices: permutations of a 4-D tensor whose last dimension stays last (the
// attention head split and merge), with offsets, a broadcast row, and row counts that
// split across workers, for every element size.
func TestCopyRowsSame(t *testing.T) {
	b, _ := New(0)
	perms := [][]int{{0, 2, 1, 3}, {1, 0, 2, 3}, {2, 1, 0, 3}, {0, 1, 2, 3}}
	for _, dt := range []backend.DType{backend.Bool, backend.BFloat16, backend.Float32, backend.Int64} {
		for _, shape := range [][]int{{3, 5, 7, 4}, {64, 3, 40, 32}, {1, 2, 1, 3}} {
			for _, perm := range perms {
				n := 1
				for _, v := range shape {
					n *= v
				}
				ss, _ := b.Alloc(dt, n+5)
				raw := st(ss).rawBytes()
				for i := range raw {
					raw[i] = byte(i*7 + i>>8)
				}
				if dt == backend.Bool {
					for i := range raw {
						raw[i] &= 1
					}
				}
				// Source: shape permuted by perm, read through the inverse strides.
				sst := []int{shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1}
				vshape := make([]int, 4)
				vst := make([]int, 4)
				for i, p := range perm {
					vshape[i], vst[i] = shape[p], sst[p]
				}
				src := backend.View{S: ss, Offset: 5, Shape: vshape, Strides: vst}
				ds, _ := b.Alloc(dt, n+3)
				dst := backend.Dense(ds, 3, vshape...)
				// A permutation that collapses to one row is Copy's to copy whole.
				if !copyRowsSame(dst, src, st(ds), st(ss)) {
					if perm[1] != 1 && shape[0] > 1 {
						t.Fatalf("%s %v %v: not copied", dt, shape, perm)
					}
					b.Copy(dst, src)
				}
				sz := dt.Size()
				g, s := st(ds).rawBytes(), st(ss).rawBytes()
				k := 0
				for i0 := range vshape[0] {
					for i1 := range vshape[1] {
						for i2 := range vshape[2] {
							for i3 := range vshape[3] {
								o := 5 + i0*vst[0] + i1*vst[1] + i2*vst[2] + i3*vst[3]
								for c := range sz {
									if g[(3+k)*sz+c] != s[o*sz+c] {
										t.Fatalf("%s %v %v: element %d differs", dt, shape, perm, k)
									}
								}
								k++
							}
						}
					}
				}
			}
		}
		// A broadcast row (source stride 0 over rows), as a bias.
		ss, _ := b.Alloc(dt, 8)
		ds, _ := b.Alloc(dt, 100*8)
		copyRowsSame(backend.Dense(ds, 0, 100, 8), backend.View{S: ss, Shape: []int{100, 8}, Strides: []int{0, 1}}, st(ds), st(ss))
		g, s := st(ds).rawBytes(), st(ss).rawBytes()
		for i := range g {
			if g[i] != s[i%len(s)] {
				t.Fatalf("%s broadcast: byte %d differs", dt, i)
			}
		}
	}
}
