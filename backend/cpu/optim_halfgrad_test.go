package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// TestSGDHalfGradMatchesWidened checks SGDStep with a float16/bfloat16 gradient
// (backend.HalfGradSGD) against SGDStep with that gradient widened to float32 first,
// bit for bit: weights, momentum buffer and the rounded half copy, over sizes around
// the chunk and the pool's grain and every SGD variant.
func TestSGDHalfGradMatchesWidened(t *testing.T) {
	b, _ := New(0)
	if !b.SGDHalfGrads() {
		t.Fatal("SGDHalfGrads is false")
	}
	rng := rand.New(rand.NewPCG(71, 72))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3e38}
	fill := func(x []float32) {
		for i := range x {
			v := float32(rng.NormFloat64())
			if rng.IntN(50) == 0 {
				v = special[rng.IntN(len(special))]
			}
			x[i] = v
		}
	}
	type variant struct {
		mom, damp, wd   float64
		nesterov, max   bool
		first, halfCopy bool
		gdt             backend.DType
	}
	var vs []variant
	for _, gdt := range []backend.DType{backend.BFloat16, backend.Float16} {
		vs = append(vs,
			variant{gdt: gdt},
			variant{mom: 0.9, gdt: gdt},
			variant{mom: 0.9, first: true, gdt: gdt},
			variant{mom: 0.9, wd: 1e-4, gdt: gdt, halfCopy: true},
			variant{mom: 0.9, damp: 0.1, gdt: gdt},
			variant{mom: 0.9, nesterov: true, wd: 0.01, gdt: gdt},
			variant{mom: 0.5, max: true, gdt: gdt},
			variant{wd: 0.01, max: true, gdt: gdt, halfCopy: true},
		)
	}
	for _, n := range []int{0, 1, 17, chunk - 1, chunk, chunk + 1, 3*chunk + 5, grainElems + 3, 5*grainElems + 1000} {
		for _, v := range vs {
			w, g, buf := make([]float32, n), make([]float32, n), make([]float32, n)
			fill(w)
			fill(g)
			fill(buf)
			gl, _ := b.Alloc(v.gdt, n)
			st(gl).storeF32(0, g)
			gbits := append([]uint16(nil), st(gl).u16()...)
			gw := make([]float32, n) // the half gradient widened
			st(gl).loadF32(gw, 0)
			run := func(low bool) (w1, b1 []float32, h1 []uint16) {
				ws, _ := b.Alloc(backend.Float32, n)
				copy(st(ws).f32(), w)
				gs := gl
				if !low {
					gs, _ = b.Alloc(backend.Float32, n)
					copy(st(gs).f32(), gw)
				}
				a := backend.SGDArgs{W: ws, G: gs, N: n, LR: 0.01, Momentum: v.mom, Dampening: v.damp,
					WeightDecay: v.wd, Nesterov: v.nesterov, Maximize: v.max, First: v.first}
				if v.mom != 0 {
					a.Buf, _ = b.Alloc(backend.Float32, n)
					copy(st(a.Buf).f32(), buf)
				}
				if v.halfCopy {
					a.Half, _ = b.Alloc(backend.BFloat16, n)
				}
				b.SGDStep(a)
				w1 = st(ws).f32()
				if a.Buf != nil {
					b1 = st(a.Buf).f32()
				}
				if a.Half != nil {
					h1 = st(a.Half).u16()
				}
				return
			}
			gw1, gb1, gh1 := run(true)
			ww1, wb1, wh1 := run(false)
			for i := range n {
				if !sameBits(gw1[i], ww1[i]) {
					t.Fatalf("n=%d %+v: w[%d] = %v, widened first %v", n, v, i, gw1[i], ww1[i])
				}
				if gb1 != nil && !sameBits(gb1[i], wb1[i]) {
					t.Fatalf("n=%d %+v: buf[%d] = %v, widened first %v", n, v, i, gb1[i], wb1[i])
				}
				if gh1 != nil && gh1[i] != wh1[i] {
					t.Fatalf("n=%d %+v: half[%d] = %#x, widened first %#x", n, v, i, gh1[i], wh1[i])
				}
			}
			for i, u := range st(gl).u16() {
				if u != gbits[i] {
					t.Fatalf("n=%d %+v: the half gradient changed at %d", n, v, i)
				}
			}
		}
	}
}

// TestSGDHalfGradRejects checks that a half gradient needs float32 weights.
func TestSGDHalfGradRejects(t *testing.T) {
	b, _ := New(0)
	w, _ := b.Alloc(backend.Float64, 8)
	g, _ := b.Alloc(backend.BFloat16, 8)
	defer func() {
		if recover() == nil {
			t.Fatal("SGDStep took a bfloat16 gradient for float64 weights")
		}
	}()
	b.SGDStep(backend.SGDArgs{W: w, G: g, N: 8, LR: 0.1})
}

// BenchmarkSGDHalfGrad times an SGD step with momentum over the MLP's 1.86 M
// parameters from a bfloat16 gradient: "widen+step" widens it into a float32 gradient
// first (the pass deferral saves), "halfgrad" hands SGDStep the bfloat16 gradient, and
// "f32grad" runs SGDStep on a float32 gradient already there (the update alone).
func BenchmarkSGDHalfGrad(b *testing.B) {
	const n = 1860000
	be, _ := New(0)
	rng := rand.New(rand.NewPCG(3, 4))
	w, _ := be.Alloc(backend.Float32, n)
	buf, _ := be.Alloc(backend.Float32, n)
	g32, _ := be.Alloc(backend.Float32, n)
	g16, _ := be.Alloc(backend.BFloat16, n)
	tmp := make([]float32, n)
	for i := range tmp {
		tmp[i] = float32(rng.NormFloat64() * 1e-3)
		st(w).f32()[i] = float32(rng.NormFloat64() * 0.05)
		st(buf).f32()[i] = float32(rng.NormFloat64() * 1e-2)
	}
	st(g16).storeF32(0, tmp)
	be.Copy(backend.Dense(g32, 0, n), backend.Dense(g16, 0, n))
	for _, path := range []string{"widen+step", "halfgrad", "f32grad"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				a := backend.SGDArgs{W: w, G: g16, Buf: buf, N: n, LR: 0.01, Momentum: 0.9}
				switch path {
				case "widen+step":
					be.Copy(backend.Dense(g32, 0, n), backend.Dense(g16, 0, n))
					a.G = g32
				case "f32grad":
					a.G = g32
				}
				be.SGDStep(a)
			}
		})
	}
}

// BenchmarkAdamHalfGrad is BenchmarkSGDHalfGrad for an AdamW step over the MLP's
// 1.86 M parameters that also rounds the masters into a bfloat16 copy (O2's update):
// "widen+step" widens the bfloat16 gradient into a float32 one first (the master
// gradient O2 made before AdamStep read half gradients), "halfgrad" hands AdamStep the
// bfloat16 gradient, and "f32grad" runs AdamStep on a float32 gradient already there.
func BenchmarkAdamHalfGrad(b *testing.B) {
	const n = 1860000
	be, _ := New(0)
	rng := rand.New(rand.NewPCG(5, 6))
	var w, m, v, g32 backend.Storage
	for _, s := range []*backend.Storage{&w, &m, &v, &g32} {
		*s, _ = be.Alloc(backend.Float32, n)
	}
	g16, _ := be.Alloc(backend.BFloat16, n)
	half, _ := be.Alloc(backend.BFloat16, n)
	tmp := make([]float32, n)
	for i := range tmp {
		tmp[i] = float32(rng.NormFloat64() * 1e-3)
		st(w).f32()[i] = float32(rng.NormFloat64() * 0.05)
		st(m).f32()[i] = float32(rng.NormFloat64() * 1e-3)
		st(v).f32()[i] = float32(rng.Float64() * 1e-6)
	}
	st(g16).storeF32(0, tmp)
	be.Copy(backend.Dense(g32, 0, n), backend.Dense(g16, 0, n))
	for _, path := range []string{"widen+step", "halfgrad", "f32grad"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				a := backend.AdamArgs{W: w, G: g16, M: m, V: v, Half: half, N: n, LR: 1e-3,
					Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 3, Decoupled: true}
				switch path {
				case "widen+step":
					be.Copy(backend.Dense(g32, 0, n), backend.Dense(g16, 0, n))
					a.G = g32
				case "f32grad":
					a.G = g32
				}
				be.AdamStep(a)
			}
		})
	}
}

// TestVecSGDBF16 pits sgdFusedBF16 (vecSGDBF16AVX512 where the CPU has AVX-512) against
// its twin sgdGoBF16 and against sgdFused on the gradient widened first, bit for bit
// (any two NaNs equal), in every mode, with special values among the inputs.
func TestVecSGDBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(77, 78))
	for _, n := range []int{0, 1, 15, 16, 17, 63, 64, 65, 100, 1000, 4099} {
		for _, wd := range []float64{0, 0.01} {
			for _, mom := range []float64{0, 0.9} {
				for _, first := range []bool{false, true} {
					for _, damp := range []float64{0, 0.25} {
						for _, nest := range []bool{false, true} {
							if mom == 0 && (first || damp != 0 || nest) {
								continue
							}
							a := backend.SGDArgs{LR: 0.01, Momentum: mom, Dampening: damp, WeightDecay: wd,
								Nesterov: nest, First: first, N: n}
							w0, b0 := vecInputs(rng, n), vecInputs(rng, n)
							gh := make([]uint16, n)
							gw := make([]float32, n)
							for i, v := range vecInputs(rng, n) {
								gh[i] = uint16(math.Float32bits(v) >> 16)
								if rng.IntN(64) == 0 {
									gh[i] = uint16(rng.Uint32()) // any bits: NaNs, infinities, subnormals
								}
								gw[i] = math.Float32frombits(uint32(gh[i]) << 16)
							}
							type res struct{ w, buf []float32 }
							run := func(f func(w, buf []float32)) res {
								w, buf := slices.Clone(w0), slices.Clone(b0)
								if mom == 0 {
									buf = nil
								}
								f(w, buf)
								return res{w, buf}
							}
							got := run(func(w, buf []float32) { sgdFusedBF16(a, w, slices.Clone(gh), buf) })
							others := map[string]res{
								"twin": run(func(w, buf []float32) {
									sgdGoBF16(sgdModeOf(a), w, slices.Clone(gh), buf, float32(wd), float32(mom), float32(1-damp), float32(a.LR))
								}),
								"widened": run(func(w, buf []float32) { sgdFused(a, w, slices.Clone(gw), buf) }),
							}
							for name, want := range others {
								for i := range got.w {
									if !sameBits(got.w[i], want.w[i]) {
										t.Fatalf("n=%d %+v: w[%d] = %v, %s %v", n, a, i, got.w[i], name, want.w[i])
									}
									if got.buf != nil && !sameBits(got.buf[i], want.buf[i]) {
										t.Fatalf("n=%d %+v: buf[%d] = %v, %s %v", n, a, i, got.buf[i], name, want.buf[i])
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestAdamHalfGradMatchesWidened checks AdamStep with a float16/bfloat16 gradient
// (backend.HalfGradAdam) against AdamStep with that gradient widened to float32 first,
// bit for bit: weights, both moments, AMSGrad's maximum and the rounded half copy, for
// Adam and AdamW with and without weight decay, AMSGrad and Maximize, over sizes around
// the vector loop's width, the widening block and the pool's grain.
func TestAdamHalfGradMatchesWidened(t *testing.T) {
	b, _ := New(0)
	if !b.AdamHalfGrads() {
		t.Fatal("AdamHalfGrads is false")
	}
	rng := rand.New(rand.NewPCG(81, 82))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3e38}
	fill := func(x []float32, positive bool) {
		for i := range x {
			v := float32(rng.NormFloat64())
			if rng.IntN(50) == 0 {
				v = special[rng.IntN(len(special))]
			}
			if positive {
				v = float32(math.Abs(float64(v)))
			}
			x[i] = v
		}
	}
	type variant struct {
		beta1, wd           float64
		decoupled, ams, max bool
		step                int64
		gdt, hdt            backend.DType // hdt: the half copy's dtype, Float32 for none
	}
	var vs []variant
	for _, gdt := range []backend.DType{backend.BFloat16, backend.Float16} {
		vs = append(vs,
			variant{beta1: 0.9, step: 1, gdt: gdt, hdt: backend.Float32},
			variant{beta1: 0.9, step: 5, gdt: gdt, hdt: gdt},
			variant{beta1: 0.9, wd: 0.01, step: 3, gdt: gdt, hdt: gdt},                              // Adam: coupled decay
			variant{beta1: 0.9, wd: 0.1, decoupled: true, step: 3, gdt: gdt, hdt: backend.Float32},  // AdamW
			variant{beta1: 0.3, wd: 0.1, decoupled: true, step: 2, gdt: gdt, hdt: backend.BFloat16}, // lerp's other form
			variant{beta1: 0.9, ams: true, step: 4, gdt: gdt, hdt: gdt},                             // AMSGrad
			variant{beta1: 0.9, max: true, wd: 0.01, step: 2, gdt: gdt, hdt: backend.Float32},       // Maximize
			variant{beta1: 0.9, ams: true, max: true, wd: 0.05, decoupled: true, step: 6, gdt: gdt, hdt: backend.Float16},
		)
	}
	ns := []int{0, 1, 15, 16, 17, 100, adamLowBlock - 1, adamLowBlock, adamLowBlock + 1, 3*adamLowBlock + 5,
		grainElems - 1, grainElems + 3, 2*grainElems + 1001}
	for _, n := range ns {
		for _, v := range vs {
			w, g, m, sq, mx := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
			fill(w, false)
			fill(g, false)
			fill(m, false)
			fill(sq, true)
			fill(mx, true)
			gl, _ := b.Alloc(v.gdt, n)
			st(gl).storeF32(0, g)
			gbits := append([]uint16(nil), st(gl).u16()...)
			gw := make([]float32, n) // the half gradient widened
			st(gl).loadF32(gw, 0)
			type res struct {
				f [4][]float32 // w, m, v, vmax
				h []uint16
			}
			run := func(low bool) res {
				var ss [4]backend.Storage
				for k, x := range [][]float32{w, m, sq, mx} {
					ss[k], _ = b.Alloc(backend.Float32, n)
					copy(st(ss[k]).f32(), x)
				}
				gs := gl
				if !low {
					gs, _ = b.Alloc(backend.Float32, n)
					copy(st(gs).f32(), gw)
				}
				a := backend.AdamArgs{W: ss[0], G: gs, M: ss[1], V: ss[2], N: n, LR: 1e-2,
					Beta1: v.beta1, Beta2: 0.999, Eps: 1e-8, WeightDecay: v.wd, Step: v.step,
					Decoupled: v.decoupled, AMSGrad: v.ams, Maximize: v.max}
				if v.ams {
					a.VMax = ss[3]
				}
				if v.hdt != backend.Float32 {
					a.Half, _ = b.Alloc(v.hdt, n)
				}
				b.AdamStep(a)
				var r res
				for k := range ss {
					r.f[k] = st(ss[k]).f32()
				}
				if a.Half != nil {
					r.h = st(a.Half).u16()
				}
				return r
			}
			got, want := run(true), run(false)
			for k, name := range []string{"w", "m", "v", "vmax"} {
				for i := range n {
					if !sameBits(got.f[k][i], want.f[k][i]) {
						t.Fatalf("n=%d %+v: %s[%d] = %v, widened first %v", n, v, name, i, got.f[k][i], want.f[k][i])
					}
				}
			}
			for i := range got.h {
				if got.h[i] != want.h[i] {
					t.Fatalf("n=%d %+v: half[%d] = %#x, widened first %#x", n, v, i, got.h[i], want.h[i])
				}
			}
			for i, u := range st(gl).u16() {
				if u != gbits[i] {
					t.Fatalf("n=%d %+v: the half gradient changed at %d", n, v, i)
				}
			}
		}
	}
}

// TestAdamHalfGradRejects checks that a half gradient needs float32 weights and enough
// elements.
func TestAdamHalfGradRejects(t *testing.T) {
	b, _ := New(0)
	for _, c := range []struct {
		name      string
		wdt       backend.DType
		wn, gn, n int
	}{
		{"float64 weights", backend.Float64, 8, 8, 8},
		{"short gradient", backend.Float32, 8, 7, 8},
		{"short weights", backend.Float32, 7, 8, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, _ := b.Alloc(c.wdt, c.wn)
			g, _ := b.Alloc(backend.BFloat16, c.gn)
			m, _ := b.Alloc(c.wdt, c.wn)
			v, _ := b.Alloc(c.wdt, c.wn)
			defer func() {
				if msg, _ := recover().(string); !strings.Contains(msg, "AdamStep: a bfloat16") {
					t.Fatalf("AdamStep on a bfloat16[%d] gradient for %s[%d] weights, N %d: panic %q, want the half gradient's", c.gn, c.wdt, c.wn, c.n, msg)
				}
			}()
			b.AdamStep(backend.AdamArgs{W: w, G: g, M: m, V: v, N: c.n, LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1})
		})
	}
}
