package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/kernels"
)

func convOut(in, k, stride, pad, dil int) int {
	span := in + 2*pad - dil*(k-1) - 1
	if span < 0 {
		return 0
	}
	return span/stride + 1
}

func TestShimIm2Col(t *testing.T) {
	s := loadShim(t)
	geoms := []backend.ConvArgs{
		{N: 1, C: 1, H: 5, W: 5, KH: 3, KW: 3, StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1},
		{N: 2, C: 3, H: 7, W: 6, KH: 3, KW: 2, StrideH: 2, StrideW: 1, PadH: 1, PadW: 1, DilationH: 1, DilationW: 2},
		{N: 1, C: 2, H: 9, W: 8, KH: 2, KW: 3, StrideH: 3, StrideW: 2, PadH: 2, PadW: 0, DilationH: 2, DilationW: 1},
	}
	for gi, a := range geoms {
		a.OH = convOut(a.H, a.KH, a.StrideH, a.PadH, a.DilationH)
		a.OW = convOut(a.W, a.KW, a.StrideW, a.PadW, a.DilationW)
		nImg, nCol := a.N*a.C*a.H*a.W, a.N*a.C*a.KH*a.KW*a.OH*a.OW
		g := kernels.NewConv2d(a)
		for _, dt := range floatDTypes {
			r := newRand(uint64(gi))
			img, col := bufOf(dt, randVals(r, nImg, true)), bufOf(dt, randVals(r, nCol, false))
			is, cs := up(img), up(col)
			ds, _ := cpuB().Alloc(dt, nCol)
			cpuB().Im2Col(ds, is, a)
			want := down(ds, nCol)
			got := newBuf(dt, nCol)
			name := kernels.Name("im2col", dt)
			s.run(t, name, got.ptr(), img.ptr(), g)
			sameBits(t, fmt.Sprintf("%s geometry %d", name, gi), got, want)

			ds, _ = cpuB().Alloc(dt, nImg)
			cpuB().Col2Im(ds, cs, a)
			want = down(ds, nImg)
			got = newBuf(dt, nImg)
			name = kernels.Name("col2im", dt)
			s.run(t, name, got.ptr(), col.ptr(), g)
			sameBits(t, fmt.Sprintf("%s geometry %d", name, gi), got, want)
			cpuB().Free(is)
			cpuB().Free(cs)
		}
	}
}

// poolOut returns the floor and ceil_mode output lengths, as PyTorch computes them.
func poolOut(in, k, stride, pad int) (floor, ceil int) {
	span := in + 2*pad - k
	floor = span/stride + 1
	ceil = (span+stride-1)/stride + 1
	if (ceil-1)*stride >= in+pad {
		ceil--
	}
	return floor, ceil
}

func TestShimPool(t *testing.T) {
	s := loadShim(t)
	type geom struct{ h, w, kh, kw, sh, sw, ph, pw int }
	geoms := []geom{{6, 6, 2, 2, 2, 2, 0, 0}, {7, 8, 3, 2, 2, 2, 1, 1}, {5, 7, 3, 3, 1, 2, 1, 0}, {8, 5, 4, 2, 3, 1, 2, 1}}
	for gi, gm := range geoms {
		for _, ceil := range []bool{false, true} {
			for _, kind := range []backend.PoolKind{backend.MaxPool, backend.AvgPool} {
				for _, cip := range []bool{false, true} {
					if kind == backend.MaxPool && cip {
						continue
					}
					a := backend.PoolArgs{Kind: kind, N: 2, C: 3, H: gm.h, W: gm.w, KH: gm.kh, KW: gm.kw,
						StrideH: gm.sh, StrideW: gm.sw, PadH: gm.ph, PadW: gm.pw, CountIncludePad: cip}
					fh, ch := poolOut(gm.h, gm.kh, gm.sh, gm.ph)
					fw, cw := poolOut(gm.w, gm.kw, gm.sw, gm.pw)
					a.OH, a.OW = fh, fw
					if ceil {
						a.OH, a.OW = ch, cw
					}
					nIn, nOut := a.N*a.C*a.H*a.W, a.N*a.C*a.OH*a.OW
					g := kernels.NewPool2d(a)
					for _, dt := range floatDTypes {
						r := newRand(uint64(gi))
						v := randVals(r, nIn, false)
						for i := range v {
							v[i] = math.Round(v[i]) // ties for the first-maximum rule
						}
						v[5], v[17], v[18] = math.NaN(), math.Inf(1), math.NaN()
						x, gy := bufOf(dt, v), bufOf(dt, randVals(r, nOut, false))
						xs, gs := up(x), up(gy)
						ys, _ := cpuB().Alloc(dt, nOut)
						ixs, _ := cpuB().Alloc(backend.Int64, nOut)
						cpuB().Pool(ys, ixs, xs, a)
						wantY, wantI := down(ys, nOut), down(ixs, nOut)
						gotY, gotI := newBuf(dt, nOut), newBuf(backend.Int64, nOut)
						what := fmt.Sprintf("geometry %d ceil %v kind %d count_include_pad %v", gi, ceil, kind, cip)
						var ip uint64
						if kind == backend.MaxPool {
							ip = gotI.ptr()
						}
						name := kernels.Name("pool_forward", dt)
						s.run(t, name, gotY.ptr(), ip, x.ptr(), g)
						sameBits(t, name+" "+what, gotY, wantY)
						if kind == backend.MaxPool {
							sameBits(t, name+" index "+what, gotI, wantI)
						}
						idxc := up(wantI)
						gxs, _ := cpuB().Alloc(dt, nIn)
						cpuB().PoolBackward(gxs, gs, idxc, a)
						want := down(gxs, nIn)
						got := newBuf(dt, nIn)
						name = kernels.Name("pool_backward", dt)
						s.run(t, name, got.ptr(), gy.ptr(), wantI.ptr(), g)
						sameBits(t, name+" "+what, got, want)
						for _, st := range []backend.Storage{xs, gs, idxc} {
							cpuB().Free(st)
						}
					}
				}
			}
		}
	}
}

func TestShimIndex(t *testing.T) {
	s := loadShim(t)
	const outer, n, inner = 2, 5, 3
	idxVals := []float64{3, 0, 3, 4, 1, 3, 0}
	m := len(idxVals)
	for _, ix := range []backend.DType{backend.Int32, backend.Int64} {
		idx := bufOf(ix, idxVals)
		ids := up(idx)
		for _, dt := range allDTypes {
			r := newRand(uint64(dt))
			var sv []float64
			if dt.IsFloat() {
				sv = randVals(r, outer*n*inner, true)
			} else {
				sv = intVals(r, outer*n*inner)
			}
			src := bufOf(dt, sv)
			ss := up(src)
			ds, _ := cpuB().Alloc(dt, outer*m*inner)
			cpuB().IndexSelect(ds, ss, ids, outer, n, inner, m)
			want := down(ds, outer*m*inner)
			got, bad := newBuf(dt, outer*m*inner), newBuf(backend.Int32, 1)
			name := kernels.Name("index_select", dt, ix)
			s.run(t, name, got.ptr(), src.ptr(), idx.ptr(), int64(outer), int64(n), int64(inner), int64(m), bad.ptr())
			sameBits(t, name, got, want)
			if bad.i32()[0] != 0 {
				t.Errorf("%s: bad flag set", name)
			}
			cpuB().Free(ss)
			if !dt.IsFloat() {
				continue
			}

			// index_add: the sorted kernel bit for bit, the atomic one within rounding.
			base := bufOf(dt, randVals(r, outer*n*inner, false))
			add := bufOf(dt, randVals(r, outer*m*inner, false))
			bs, as := up(base), up(add)
			cpuB().IndexAdd(bs, as, ids, outer, n, inner, m)
			want = down(bs, outer*n*inner)
			cpuB().Free(as)
			var order, starts []int64
			var err error
			if ix == backend.Int32 {
				order, starts, err = kernels.GroupIndex(idx.i32(), n)
			} else {
				order, starts, err = kernels.GroupIndex(idx.i64(), n)
			}
			if err != nil {
				t.Fatal(err)
			}
			ob, sb := newBuf(backend.Int64, len(order)), newBuf(backend.Int64, len(starts))
			copy(ob.i64(), order)
			copy(sb.i64(), starts)
			got = base.clone()
			name = kernels.Name("index_add_sorted", dt, ix)
			s.run(t, name, got.ptr(), add.ptr(), idx.ptr(), ob.ptr(), sb.ptr(), int64(len(starts)-1),
				int64(outer), int64(n), int64(inner), int64(m))
			sameBits(t, name, got, want)

			got = base.clone()
			name = kernels.Name("index_add", dt, ix)
			s.run(t, name, got.ptr(), add.ptr(), idx.ptr(), int64(outer), int64(n), int64(inner), int64(m), bad.ptr())
			rel := map[backend.DType]float64{backend.Float32: 1e-6, backend.Float64: 1e-14,
				backend.Float16: 4e-3, backend.BFloat16: 3e-2}[dt]
			for i := 0; i < got.n; i++ {
				g, w := got.at(i), want.at(i)
				if math.Abs(g-w) > rel*(math.Abs(w)+1) {
					t.Errorf("%s: element %d is %v, the CPU backend's %v", name, i, g, w)
				}
			}
		}
		// Out-of-range indices raise the flag.
		idx.set(2, n)
		src, got, bad := newBuf(backend.Float32, outer*n*inner), newBuf(backend.Float32, outer*m*inner), newBuf(backend.Int32, 1)
		s.run(t, kernels.Name("index_select", backend.Float32, ix), got.ptr(), src.ptr(), idx.ptr(),
			int64(outer), int64(n), int64(inner), int64(m), bad.ptr())
		if bad.i32()[0] != 1 {
			t.Error("index_select: an out-of-range index did not set the bad flag")
		}
		cpuB().Free(ids)
	}
}
