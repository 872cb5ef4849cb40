package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// TestBatchNormGroupsMatchReference runs the group-wise batch-norm kernels (forward
// with and without ReLU, backward with and without the ReLU mask) against the
// reference kernels they replaced (bn_ref_test.go), outputs, statistics, running
// statistics and gradients bit for bit, in every floating dtype, in training and eval,
// with and without affine parameters, on geometries whose groups are several channels,
// one channel, one channel of several tiles, with a short last group, and cached or
// not (bnCacheElems).
func TestBatchNormGroupsMatchReference(t *testing.T) {
	b, _ := New(0)
	rng := rand.New(rand.NewPCG(51, 52))
	geoms := [][3]int{{4, 3, 1}, {2, 5, 7}, {3, 2, 1024}, {2, 2, 2500}, {5, 40, 30}, {9, 3, 200}, {200, 2, 700}, {1, 3, 5}, {64, 16, 196}}
	for _, dt := range []backend.DType{backend.BFloat16, backend.Float16, backend.Float32, backend.Float64} {
		for _, gm := range geoms {
			n, c, s := gm[0], gm[1], gm[2]
			for _, training := range []bool{true, false} {
				for _, affine := range []bool{true, false} {
					for _, relu := range []bool{false, true} {
						what := fmt.Sprintf("%s N=%d C=%d S=%d training=%v affine=%v relu=%v", dt, n, c, s, training, affine, relu)
						checkBNAgainstRef(t, b, rng, dt, n, c, s, training, affine, relu, what)
					}
				}
			}
		}
	}
}

func checkBNAgainstRef(t *testing.T, b *Backend, rng *rand.Rand, dt backend.DType, n, c, s int, training, affine, relu bool, what string) {
	t.Helper()
	total := n * c * s
	alloc := func(dt backend.DType, vals []float32) *storage {
		st0, err := b.Alloc(dt, len(vals))
		if err != nil {
			t.Fatal(err)
		}
		st(st0).storeF32(0, vals)
		return st(st0)
	}
	xv, gv := make([]float32, total), make([]float32, total)
	for i := range xv {
		ch := (i / s) % c
		xv[i] = float32(rng.NormFloat64()*float64(1+ch) + float64(3*ch))
		gv[i] = float32(rng.NormFloat64())
	}
	pv := func(base float32) []float32 {
		v := make([]float32, c)
		for i := range v {
			v[i] = base + float32(rng.NormFloat64())*0.5
		}
		return v
	}
	wv, bv, rmv, rvv := pv(1), pv(0), pv(0.5), pv(2)
	for i := range rvv {
		rvv[i] = float32(math.Abs(float64(rvv[i]))) + 0.1
	}
	type outs struct{ y, gx, sm, si, rm, rv, gw, gb []float64 }
	run := func(ref bool) outs {
		x, gy := alloc(dt, xv), alloc(dt, gv)
		y, gx := alloc(dt, make([]float32, total)), alloc(dt, make([]float32, total))
		f32 := func(v []float32) []float32 { return alloc(backend.Float32, v).f32() }
		p := bnParams{rm: f32(rvvCopy(rmv)), rv: f32(rvvCopy(rvv)), sm: f32(make([]float32, c)), si: f32(make([]float32, c))}
		if affine {
			p.w, p.bias = f32(wv), f32(bv)
		}
		a := backend.NormArgs{N: n, C: c, S: s, Training: training, Momentum: 0.1, Eps: 1e-5}
		f64 := computeF64(dt)
		switch {
		case ref && f64:
			batchNormRef[float64](&a, x, y, &p, relu)
		case ref:
			batchNormRef[float32](&a, x, y, &p, relu)
		case f64:
			batchNorm[float64](&a, x, y, &p, relu)
		default:
			batchNorm[float32](&a, x, y, &p, relu)
		}
		bp := bnParams{w: p.w, gw: f32(make([]float32, c)), gb: f32(make([]float32, c))}
		if training {
			bp.sm, bp.si = p.sm, p.si
		} else {
			bp.rm, bp.rv = p.rm, p.rv
		}
		var ys *storage
		if relu {
			ys = y
		}
		switch {
		case ref && f64:
			batchNormBackwardRef[float64](&a, x, gy, gx, ys, &bp)
		case ref:
			batchNormBackwardRef[float32](&a, x, gy, gx, ys, &bp)
		case f64:
			batchNormBackward[float64](&a, x, gy, gx, ys, &bp)
		default:
			batchNormBackward[float32](&a, x, gy, gx, ys, &bp)
		}
		load := func(s *storage) []float64 {
			v := make([]float64, s.n)
			s.loadF64(v, 0)
			return v
		}
		w64 := func(v []float32) []float64 {
			o := make([]float64, len(v))
			for i, x := range v {
				o[i] = float64(x)
			}
			return o
		}
		return outs{load(y), load(gx), w64(p.sm), w64(p.si), w64(p.rm), w64(p.rv), w64(bp.gw), w64(bp.gb)}
	}
	want, got := run(true), run(false)
	for _, c := range []struct {
		name string
		w, g []float64
	}{{"y", want.y, got.y}, {"gx", want.gx, got.gx}, {"save_mean", want.sm, got.sm}, {"save_invstd", want.si, got.si},
		{"running_mean", want.rm, got.rm}, {"running_var", want.rv, got.rv}, {"gweight", want.gw, got.gw}, {"gbias", want.gb, got.gb}} {
		for i := range c.w {
			if math.Float64bits(c.w[i]) != math.Float64bits(c.g[i]) {
				t.Fatalf("%s: %s[%d]: reference %v, group-wise %v", what, c.name, i, c.w[i], c.g[i])
			}
		}
	}
}

func rvvCopy(v []float32) []float32 { return append([]float32(nil), v...) }
