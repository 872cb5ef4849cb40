package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// TestLayerNormHalfIO checks backend.LayerNormHalfIO: LayerNorm with Float32 X and a
// half Y equals a Float32 Y then Copy to the half dtype, and LayerNormBackward with a
// half GY (Float32 X and GX) equals Copying GY to Float32 first — outputs, statistics
// and gradients bit for bit (raw bits, NaN payloads included), with and without
// weight and bias, with GX = X, on widths the fused row kernels take and ones they do
// not, row counts that leave short chunks and blocks, and rows holding NaN, ±Inf, a
// constant and values that round to half subnormals or overflow float16.
func TestLayerNormHalfIO(t *testing.T) {
	b, _ := New(0)
	rng := rand.New(rand.NewPCG(71, 72))
	for _, dt := range []backend.DType{backend.BFloat16, backend.Float16} {
		if !b.LayerNormHalfIO(dt) {
			t.Fatalf("LayerNormHalfIO(%s) = false", dt)
		}
		for _, gm := range [][2]int{{1, 1}, {3, 7}, {17, 33}, {64, 128}, {300, 128}, {41, 100}, {7, 3000}, {2048, 128}, {131, 512}, {0, 8}} {
			for affine := range 4 {
				for _, aliasX := range []bool{false, true} {
					checkLNHalfIO(t, b, rng, dt, gm[0], gm[1], affine, aliasX)
				}
			}
		}
	}
	if b.LayerNormHalfIO(backend.Float32) || b.LayerNormHalfIO(backend.Float64) {
		t.Fatal("LayerNormHalfIO says yes to a dtype that is not half")
	}
}

func checkLNHalfIO(t *testing.T, b *Backend, rng *rand.Rand, dt backend.DType, n, c, affine int, aliasX bool) {
	t.Helper()
	what := fmt.Sprintf("%s N=%d C=%d affine=%d gx=x %v", dt, n, c, affine, aliasX)
	total := n * c
	alloc := func(dt backend.DType, vals []float32) *storage { return storageWith(t, b, dt, vals) }
	view := func(s *storage) backend.View {
		return backend.View{S: s, Shape: []int{max(total, 1)}, Strides: []int{1}}
	}
	xv, gv := make([]float32, total), make([]float32, total)
	for i := range xv {
		r := i / c
		xv[i] = float32(rng.NormFloat64()*float64(1+r%5)*math.Pow(10, float64(r%9-4)) + float64(r%7))
		gv[i] = float32(rng.NormFloat64() * math.Pow(10, float64(r%5-2)))
		lnSpecial(xv, gv, i, c)
	}
	pv := func(base, scale float32) []float32 {
		v := make([]float32, c)
		for i := range v {
			v[i] = base + float32(rng.NormFloat64())*scale
		}
		return v
	}
	// Weights up to ~1e5 send some outputs past float16's range and small ones into
	// the half subnormals.
	wv, bv := pv(1, 3e4), pv(0, 1e-6)
	type outs struct {
		y          []uint16
		sm, si     []float32
		gx, gw, gb []float32
	}
	run := func(fused bool) outs {
		f32 := func(v []float32) *storage { return alloc(backend.Float32, v) }
		x := f32(xv)
		sm, si := f32(make([]float32, n)), f32(make([]float32, n))
		a := backend.NormArgs{X: x, SaveMean: sm, SaveInvStd: si, N: n, C: c, Eps: 1e-5}
		var gw, gb *storage
		if affine&1 != 0 {
			a.Weight, gw = f32(wv), f32(make([]float32, c))
			a.GWeight = gw
		}
		if affine&2 != 0 {
			a.Bias, gb = f32(bv), f32(make([]float32, c))
			a.GBias = gb
		}
		y := alloc(dt, make([]float32, total))
		if fused {
			a.Y = y
			b.LayerNorm(a)
		} else {
			y32 := f32(make([]float32, total))
			a.Y = y32
			b.LayerNorm(a)
			b.Copy(view(y), view(y32))
		}
		o := outs{y: append([]uint16(nil), y.u16()[:total]...), sm: append([]float32(nil), sm.f32()[:n]...), si: append([]float32(nil), si.f32()[:n]...)}
		gy := alloc(dt, gv)
		gx := f32(make([]float32, total))
		if aliasX {
			gx = x
		}
		a.GX = gx
		if fused {
			a.GY = gy
		} else {
			gy32 := f32(make([]float32, total))
			b.Copy(view(gy32), view(gy))
			a.GY = gy32
		}
		b.LayerNormBackward(a)
		o.gx = append([]float32(nil), gx.f32()[:total]...)
		if gw != nil {
			o.gw = append([]float32(nil), gw.f32()[:c]...)
		}
		if gb != nil {
			o.gb = append([]float32(nil), gb.f32()[:c]...)
		}
		return o
	}
	want, got := run(false), run(true)
	for i := range want.y {
		if got.y[i] != want.y[i] {
			t.Fatalf("%s: Y[%d] = %#04x, float32 Y then Copy %#04x", what, i, got.y[i], want.y[i])
		}
	}
	requireNormGrads(t, what, "with a float32 GY", [5][]float32{got.sm, got.si, got.gx, got.gw, got.gb}, [5][]float32{want.sm, want.si, want.gx, want.gw, want.gb}, false)
}

// TestLayerNormHalfIORefused checks that only Y and GY may be half, and only beside
// Float32 X (and GX): every other mix panics, naming the operands.
func TestLayerNormHalfIORefused(t *testing.T) {
	b, _ := New(0)
	mk := func(dt backend.DType) backend.Storage {
		s, err := b.Alloc(dt, 8)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	f32, bf, f16, f64 := backend.Float32, backend.BFloat16, backend.Float16, backend.Float64
	stats := func() (backend.Storage, backend.Storage) { return mk(f32), mk(f32) }
	for _, c := range []struct {
		fwd       bool
		x, y, gx  backend.DType
		wantInMsg string
	}{
		{true, bf, f32, 0, "Y is float32 but X is bfloat16"},
		{true, f64, bf, 0, "Y is bfloat16 but X is float64"},
		{true, f16, bf, 0, "Y is bfloat16 but X is float16"},
		{false, f32, bf, bf, "GX is bfloat16 but X is float32"},
		{false, bf, f32, bf, "GY is float32 but X is bfloat16"},
		{false, f64, f16, f64, "GY is float16 but X is float64"},
	} {
		sm, si := stats()
		a := backend.NormArgs{X: mk(c.x), SaveMean: sm, SaveInvStd: si, N: 2, C: 4, Eps: 1e-5}
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), c.wantInMsg) {
					t.Errorf("%+v: panic %v, want one saying %q", c, r, c.wantInMsg)
				}
			}()
			if c.fwd {
				a.Y = mk(c.y)
				b.LayerNorm(a)
				return
			}
			a.GY, a.GX = mk(c.y), mk(c.gx)
			b.LayerNormBackward(a)
		}()
	}
}
