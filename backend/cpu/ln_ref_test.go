package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// The layer-norm kernels as they were before they read float32 rows in place and
// converted half rows a chunk at a time (every row loaded into a buffer and stored
// back): the reference the kernels must equal bit for bit.

// rowStatsRef is rowStats as it was, before lnStats.
func rowStatsRef[C numeric](row []C, eps float64) (mean, invstd float64) {
	if len(row) == 0 {
		return 0, 1 / math.Sqrt(eps)
	}
	if rf, ok := any(row).([]float32); ok {
		mean = vecSumF64(rf) / float64(len(rf))
		return mean, 1 / math.Sqrt(vecDevSqF64(rf, mean)/float64(len(rf))+eps)
	}
	s := 0.0
	for _, v := range row {
		s += float64(v)
	}
	mean = s / float64(len(row))
	sq := 0.0
	for _, v := range row {
		d := float64(v) - mean
		sq += d * d
	}
	return mean, 1 / math.Sqrt(sq/float64(len(row))+eps)
}

func layerNormRef[C numeric](a *backend.NormArgs, x, y *storage, p *bnParams) {
	rows, cols := a.N, a.C
	w, bias := toCompute[C](p.w), toCompute[C](p.bias)
	ParallelFor(rows, max(1, grainElems/max(cols, 1)), func(lo, hi int) {
		row := make([]C, cols)
		for r := lo; r < hi; r++ {
			load(row, x, r*cols, 1)
			mean, invstd := rowStatsRef(row, a.Eps)
			if p.sm != nil {
				p.sm[r] = float32(mean)
			}
			if p.si != nil {
				p.si[r] = float32(invstd)
			}
			m, is := C(mean), C(invstd)
			if rf, ok := any(row).([]float32); ok {
				// The loops below on the vector layer, each step rounded as there.
				if w != nil && bias != nil {
					vecLnFwd(rf, rf, any(w).([]float32), any(bias).([]float32), float32(m), float32(is))
					store(y, r*cols, 1, row)
					continue
				}
				vecScalar(vecSubS, rf, rf, float32(m))
				vecScalar(vecMulS, rf, rf, float32(is))
				if w != nil {
					vecBinary(vecMul, rf, rf, any(w).([]float32))
				}
				if bias != nil {
					vecBinary(vecAdd, rf, rf, any(bias).([]float32))
				}
				store(y, r*cols, 1, row)
				continue
			}
			for j, v := range row {
				row[j] = (v - m) * is
			}
			if w != nil {
				for j := range row {
					row[j] *= w[j]
				}
			}
			if bias != nil {
				for j := range row {
					row[j] += bias[j]
				}
			}
			store(y, r*cols, 1, row)
		}
	})
}

func layerNormBackwardRef[C numeric](a *backend.NormArgs, x, gyS, gxS *storage, p *bnParams) {
	rows, cols := a.N, a.C
	if rows == 0 {
		clear(p.gw)
		clear(p.gb)
		return
	}
	w := toCompute[C](p.w)
	// Blocks of whole rows, sized from the shape alone.
	nb := max(1, min(lnMaxBlocks, rows, (rows*cols+grainElems-1)/grainElems))
	per := (rows + nb - 1) / nb
	nb = (rows + per - 1) / per
	var pgw, pgb []float64
	if p.gw != nil {
		pgw = make([]float64, nb*cols)
	}
	if p.gb != nil {
		pgb = make([]float64, nb*cols)
	}
	ParallelFor(nb, 1, func(blo, bhi int) {
		xr, gy, g := make([]C, cols), make([]C, cols), make([]C, cols)
		var scratch []float64 // stands in for a nil bgw or bgb in the float32 row pass
		if pgw == nil || pgb == nil {
			scratch = make([]float64, cols)
		}
		for blk := blo; blk < bhi; blk++ {
			var bgw, bgb []float64
			if pgw != nil {
				bgw = pgw[blk*cols : (blk+1)*cols]
			}
			if pgb != nil {
				bgb = pgb[blk*cols : (blk+1)*cols]
			}
			for r := blk * per; r < min(rows, (blk+1)*per); r++ {
				load(xr, x, r*cols, 1)
				load(gy, gyS, r*cols, 1)
				mean, invstd := float64(p.sm[r]), float64(p.si[r])
				if gf, ok := any(g).([]float32); ok {
					layerNormBackwardRowF32(gf, any(gy).([]float32), any(xr).([]float32), any(w).([]float32), bgw, bgb, scratch, mean, invstd)
					store(gxS, r*cols, 1, g)
					continue
				}
				copy(g, gy)
				if w != nil {
					for j := range g {
						g[j] *= w[j]
					}
				}
				// s1 = Σ g, s2 = Σ g·x̂.
				s1, s2 := 0.0, 0.0
				for j, v := range g {
					xh := (float64(xr[j]) - mean) * invstd
					s1 += float64(v)
					s2 += float64(v) * xh
					if bgw != nil {
						bgw[j] += float64(gy[j]) * xh
					}
					if bgb != nil {
						bgb[j] += float64(gy[j])
					}
				}
				n := float64(cols)
				ca, cm := C(invstd), C(mean)
				cb := C(-invstd * invstd * s2 / n)
				cc := C(-invstd * s1 / n)
				for j := range g {
					g[j] = ca*g[j] + cb*(xr[j]-cm) + cc
				}
				store(gxS, r*cols, 1, g)
			}
		}
	})
	if pgw == nil && pgb == nil {
		return
	}
	ParallelFor(cols, grainElems/max(nb, 1), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			sw, sb := 0.0, 0.0
			for blk := range nb {
				if pgw != nil {
					sw += pgw[blk*cols+j]
				}
				if pgb != nil {
					sb += pgb[blk*cols+j]
				}
			}
			if p.gw != nil {
				p.gw[j] = float32(sw)
			}
			if p.gb != nil {
				p.gb[j] = float32(sb)
			}
		}
	})
}

// TestLayerNormMatchesReference runs LayerNorm and LayerNormBackward against the
// reference kernels, outputs, statistics and gradients bit for bit, in every floating
// dtype, with and without weight and bias (and GWeight/GBias), with Y = X and GX = GY
// or GX = X, on widths that are and are not multiples of 16 (odd ones, 1, wider than a
// conversion chunk), row counts that leave short chunks and blocks, and rows holding
// NaN, ±Inf and constant values.
func TestLayerNormMatchesReference(t *testing.T) {
	b, _ := New(0)
	rng := rand.New(rand.NewPCG(61, 62))
	geoms := [][2]int{{1, 1}, {3, 7}, {5, 16}, {17, 33}, {64, 128}, {300, 128}, {41, 100}, {7, 3000}, {2048, 128}, {1000, 1}, {0, 8}, {4, 0}, {131, 512}, {200, 160}, {67, 48}, {300, 1000}}
	for _, dt := range []backend.DType{backend.BFloat16, backend.Float16, backend.Float32, backend.Float64} {
		for _, gm := range geoms {
			for _, affine := range []int{0, 1, 2, 3} {
				for _, alias := range []int{0, 1, 2} {
					what := fmt.Sprintf("%s N=%d C=%d affine=%d alias=%d", dt, gm[0], gm[1], affine, alias)
					checkLNAgainstRef(t, b, rng, dt, gm[0], gm[1], affine, alias, what)
				}
			}
		}
	}
}

// checkLNAgainstRef compares one geometry: affine bit 0 gives a weight, bit 1 a bias
// (and GBias); alias 1 runs with Y = X and GX = GY, alias 2 with GX = X.
func checkLNAgainstRef(t *testing.T, b *Backend, rng *rand.Rand, dt backend.DType, n, c, affine, alias int, what string) {
	t.Helper()
	total := n * c
	alloc := func(dt backend.DType, vals []float32) *storage { return storageWith(t, b, dt, vals) }
	xv, gv := make([]float32, total), make([]float32, total)
	for i := range xv {
		r := i / c
		xv[i] = float32(rng.NormFloat64()*float64(1+r%5) + float64(r%7))
		gv[i] = float32(rng.NormFloat64())
		lnSpecial(xv, gv, i, c)
	}
	pv := func(base float32) []float32 {
		v := make([]float32, c)
		for i := range v {
			v[i] = base + float32(rng.NormFloat64())*0.5
		}
		return v
	}
	wv, bv := pv(1), pv(0)
	type outs struct{ y, gx, sm, si, gw, gb []float64 }
	read := func(s *storage, k int) []float64 {
		v := make([]float64, k)
		loadStridedF64(v, s, 0, 1)
		return v
	}
	run := func(ref bool) outs {
		x, gy := alloc(dt, xv), alloc(dt, gv)
		y, gx := alloc(dt, make([]float32, total)), alloc(dt, make([]float32, total))
		f32 := func(v []float32) []float32 { return alloc(backend.Float32, v).f32()[:len(v)] }
		p := bnParams{sm: f32(make([]float32, n)), si: f32(make([]float32, n))}
		if affine&1 != 0 {
			p.w, p.gw = f32(wv), f32(make([]float32, c))
		}
		if affine&2 != 0 {
			p.bias, p.gb = f32(bv), f32(make([]float32, c))
		}
		a := backend.NormArgs{N: n, C: c, Eps: 1e-5}
		if alias == 1 {
			y = x
		}
		f64 := computeF64(dt)
		switch {
		case ref && f64:
			layerNormRef[float64](&a, x, y, &p)
		case ref:
			layerNormRef[float32](&a, x, y, &p)
		case f64:
			layerNorm[float64](&a, x, y, &p)
		default:
			layerNorm[float32](&a, x, y, &p)
		}
		o := outs{y: read(y, total), sm: f64s(p.sm), si: f64s(p.si)}
		// The backward pass from the forward's x (restored when Y = X) and statistics.
		x = alloc(dt, xv)
		switch alias {
		case 1:
			gx = gy
		case 2:
			gx = x
		}
		switch {
		case ref && f64:
			layerNormBackwardRef[float64](&a, x, gy, gx, &p)
		case ref:
			layerNormBackwardRef[float32](&a, x, gy, gx, &p)
		case f64:
			layerNormBackward[float64](&a, x, gy, gx, &p)
		default:
			layerNormBackward[float32](&a, x, gy, gx, &p)
		}
		o.gx, o.gw, o.gb = read(gx, total), f64s(p.gw), f64s(p.gb)
		return o
	}
	want, got := run(true), run(false)
	requireSameBits(t, what+": Y", "reference", got.y, want.y, true)
	requireNormGrads(t, what, "reference", [5][]float64{got.sm, got.si, got.gx, got.gw, got.gb}, [5][]float64{want.sm, want.si, want.gx, want.gw, want.gb}, true)
}

// lnSpecial gives element i of x or of gy (rows of c) the special value its row
// holds, if any: a NaN, ±Inf, a constant row (zero variance), an infinite gradient.
func lnSpecial(xv, gv []float32, i, c int) {
	r := i / c
	switch {
	case r%11 == 3 && i%c == c/2:
		xv[i] = float32(math.NaN())
	case r%11 == 5 && i%c == 0:
		xv[i] = float32(math.Inf(1 - 2*(r%2)))
	case r%11 == 7:
		xv[i] = 2.5
	case r%13 == 4 && i%c == c-1:
		gv[i] = float32(math.Inf(1))
	}
}

// storageWith returns a storage of dt (at least one element) holding vals.
func storageWith(t *testing.T, b *Backend, dt backend.DType, vals []float32) *storage {
	t.Helper()
	s, err := b.Alloc(dt, max(len(vals), 1))
	if err != nil {
		t.Fatal(err)
	}
	st(s).storeF32(0, vals)
	return st(s)
}

// requireNormGrads compares a norm's saved statistics and gradients (SaveMean,
// SaveInvStd, GX, GWeight, GBias) by requireSameBits.
func requireNormGrads[F float32 | float64](t *testing.T, what, against string, got, want [5][]F, nanEq bool) {
	t.Helper()
	for i, name := range []string{"SaveMean", "SaveInvStd", "GX", "GWeight", "GBias"} {
		requireSameBits(t, what+": "+name, against, got[i], want[i], nanEq)
	}
}

// requireSameBits fails t at the first element of got whose bits differ from want's
// (with nanEq, any two NaNs match), saying what it was compared against.
func requireSameBits[F float32 | float64](t *testing.T, what, against string, got, want []F, nanEq bool) {
	t.Helper()
	bits := func(v F) uint64 {
		if f, ok := any(v).(float32); ok {
			return uint64(math.Float32bits(f))
		}
		return math.Float64bits(float64(v))
	}
	for i := range want {
		g, w := got[i], want[i]
		if bits(g) != bits(w) && !(nanEq && g != g && w != w) {
			t.Fatalf("%s[%d] = %v, %s %v", what, i, g, against, w)
		}
	}
}

func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
