package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// The tile loops of the backward pass (attnExpTile, attnDSTile) against their Go twins,
// bit for bit: tiles of every shape up to attnBlock², causal offsets that leave rows
// empty, partly and fully visible, -Inf and NaN log-sum-exps, NaN, subnormal and zero
// operands, with and without the bf16 copies; nothing past a row's cols is written.
func TestAttnTileTwin(t *testing.T) {
	if !attnAsm {
		t.Skip("no AVX-512 (or purego build): the Go loops are the only implementation")
	}
	same := func(a, b float32) bool { return sameBits(a, b) || a != a && b != b }
	sameLo := func(a, b half.BFloat16) bool { return a == b || a.IsNaN() && b.IsNaN() }
	const ld, guard = attnBlock, 7.25
	rng := rand.New(rand.NewPCG(11, 12))
	for _, rows := range []int{1, 2, 5, 16, 17, 33, 64} {
		for _, cols := range []int{1, 3, 15, 16, 17, 31, 32, 48, 63, 64} {
			for _, vis0 := range []int{-40, -3, 0, 1, 5, 17, 33, cols, 200} {
				for _, withLo := range []bool{false, true} {
					name := fmt.Sprintf("rows=%d/cols=%d/vis0=%d/lo=%v", rows, cols, vis0, withLo)
					scale := float32(0.05 + rng.Float64())
					x := make([]float32, ld*ld)
					for i := range x {
						x[i] = guard
					}
					lse := make([]float32, rows)
					for r := range rows {
						lse[r] = float32(rng.NormFloat64() * 3)
						switch rng.IntN(10) {
						case 0:
							lse[r] = float32(math.Inf(-1))
						case 1:
							lse[r] = float32(math.NaN())
						}
						copy(x[r*ld:][:cols], attnExpInputs(rng, cols, scale, lse[r]))
					}
					var la, lg []half.BFloat16
					if withLo {
						la, lg = make([]half.BFloat16, ld*ld), make([]half.BFloat16, ld*ld)
						for i := range la {
							la[i], lg[i] = 0x1234, 0x1234
						}
					}
					a, g := append([]float32(nil), x...), append([]float32(nil), x...)
					sa, sg := make([]float32, rows+1), make([]float32, rows+1)
					sa[rows], sg[rows] = guard, guard
					ma, mg := make([]float32, rows+1), make([]float32, rows+1)
					attnMaxTile(x, ld, rows, cols, vis0, ma)
					attnMaxTileGo(x, ld, rows, cols, vis0, mg)
					for r := range ma {
						if !same(ma[r], mg[r]) {
							t.Fatalf("max %s: row %d: asm %g, Go %g", name, r, ma[r], mg[r])
						}
					}
					sums := [2][]float32{sa, sg}
					if rng.IntN(3) == 0 {
						sums = [2][]float32{nil, nil}
					}
					attnExpTile(a, ld, rows, cols, vis0, lse, scale, la, sums[0])
					attnExpTileGo(g, ld, rows, cols, vis0, lse, scale, lg, sums[1])
					for r := range sa {
						if !same(sa[r], sg[r]) {
							t.Fatalf("exp %s: sum %d: asm %g, Go %g", name, r, sa[r], sg[r])
						}
					}
					for i := range a {
						if !same(a[i], g[i]) {
							t.Fatalf("exp %s: x[%d]: asm %g, Go %g", name, i, a[i], g[i])
						}
						if withLo && !sameLo(la[i], lg[i]) {
							t.Fatalf("exp %s: lo[%d]: asm %#04x, Go %#04x", name, i, la[i], lg[i])
						}
					}
					// dS on the probabilities just computed, with a dP tile of normal,
					// NaN and huge values.
					p := g
					dp := make([]float32, ld*ld)
					for i := range dp {
						dp[i] = float32(rng.NormFloat64())
						switch rng.IntN(12) {
						case 0:
							dp[i] = float32(math.NaN())
						case 1:
							dp[i] = 0x1p100
						case 2:
							p[i] = 0x1p-140
						}
					}
					delta := make([]float32, rows)
					for r := range delta {
						delta[r] = float32(rng.NormFloat64())
					}
					da, dg := append([]float32(nil), dp...), append([]float32(nil), dp...)
					if withLo {
						for i := range la {
							la[i], lg[i] = 0x1234, 0x1234
						}
					}
					attnDSTile(da, p, ld, rows, cols, delta, la)
					attnDSTileGo(dg, p, ld, rows, cols, delta, lg)
					for i := range da {
						if !same(da[i], dg[i]) {
							t.Fatalf("dS %s: [%d]: asm %g, Go %g", name, i, da[i], dg[i])
						}
						if withLo && !sameLo(la[i], lg[i]) {
							t.Fatalf("dS %s: lo[%d]: asm %#04x, Go %#04x", name, i, la[i], lg[i])
						}
					}
				}
			}
		}
	}
}

// attnExpTileGo is the backward pass's former row loop: attnExpRowGo on each row's
// visible scores and clears, checked element by element against a direct evaluation.
func TestAttnExpTileGo(t *testing.T) {
	const ld, rows, cols = attnBlock, 9, 20
	rng := rand.New(rand.NewPCG(13, 14))
	x := make([]float32, ld*rows)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	lse := []float32{0.5, float32(math.Inf(-1)), 1, 2, -1, 0, 3, 0.25, 1.5}
	lo := make([]half.BFloat16, ld*rows)
	got := append([]float32(nil), x...)
	sums := make([]float32, rows)
	attnExpTileGo(got, ld, rows, cols, -2, lse, 0.3, lo, sums)
	for r := range rows {
		vis := min(max(r-2, 0), cols)
		var sum [16]float32
		for c := range ld {
			i := r*ld + c
			want := x[i]
			switch {
			case c >= cols:
			case c >= vis || math.IsInf(float64(lse[r]), -1):
				want = 0
			default:
				want = attnExp32(fma32(x[i], 0.3, -lse[r]))
				sum[c%16] += want
			}
			if !sameBits(got[i], want) {
				t.Fatalf("[%d][%d]: %g, want %g", r, c, got[i], want)
			}
			if c < cols && lo[i] != half.BFloat16FromFloat32(want) {
				t.Fatalf("lo[%d][%d]: %#04x, want %#04x", r, c, lo[i], half.BFloat16FromFloat32(want))
			}
		}
		if want := attnLaneSum(&sum); !sameBits(sums[r], want) {
			t.Fatalf("sum %d: %g, want %g", r, sums[r], want)
		}
	}
}

// The forward pass's whole-tile softmax (attnMaxTile, attnExpTile) against the row by
// row loop it replaced (softmaxRows), bit for bit, on every geometry of attnCases and
// every storage type, also with infinite and NaN inputs that make rows of scores -Inf
// or NaN (the rows softmaxTile leaves to softmaxRows).
func TestAttentionTileSoftmaxMatchesRows(t *testing.T) {
	defer func() { attnTileSoftmax = true }()
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16, backend.Float16} {
		for ci, c := range attnCases {
			for _, special := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/special=%v", dt, c, special), func(t *testing.T) {
					in := newAttnData(c, uint64(40+ci))
					if special {
						rng := rand.New(rand.NewPCG(uint64(ci), 77))
						for range 3 {
							in.q[rng.IntN(len(in.q))] = float32(math.Inf(1))
							in.k[rng.IntN(len(in.k))] = float32(math.Inf(-1))
						}
						in.k[rng.IntN(len(in.k))] = float32(math.NaN())
					}
					attnTileSoftmax = true
					got := runAttn(t, c, in, dt)
					attnTileSoftmax = false
					want := runAttn(t, c, in, dt)
					for p, w := range want.parts() {
						g := got.parts()[p]
						for i := range w {
							if math.Float64bits(g[i]) != math.Float64bits(w[i]) && !(g[i] != g[i] && w[i] != w[i]) {
								t.Fatalf("%s[%d]: tile %.8g, rows %.8g", attnPartNames[p], i, g[i], w[i])
							}
						}
					}
				})
			}
		}
	}
}

// Leaving the causally masked micro-kernel tiles of Q·Kᵀ out (attnSkipMasked) changes no
// bit: the tiles are never read. The pooled scratch is first filled with NaN by a pass
// on NaN inputs, so a stale tile that was read would show.
func TestAttentionSkipMaskedTiles(t *testing.T) {
	defer func() { attnSkipMasked = true }()
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		for ci, c := range attnCases {
			if !c.causal {
				continue
			}
			t.Run(fmt.Sprintf("%s/%s", dt, c), func(t *testing.T) {
				in := newAttnData(c, uint64(60+ci))
				nan := attnData{q: make([]float32, len(in.q)), k: make([]float32, len(in.k)), v: make([]float32, len(in.v)), g: make([]float32, len(in.g))}
				for _, x := range [][]float32{nan.q, nan.k, nan.v, nan.g} {
					for i := range x {
						x[i] = float32(math.NaN())
					}
				}
				attnSkipMasked = false
				want := runAttn(t, c, in, dt)
				attnSkipMasked = true
				runAttn(t, c, nan, dt)
				got := runAttn(t, c, in, dt)
				for p, w := range want.parts() {
					g := got.parts()[p]
					for i := range w {
						if math.Float64bits(g[i]) != math.Float64bits(w[i]) {
							t.Fatalf("%s[%d]: skipping %.8g, not %.8g", attnPartNames[p], i, g[i], w[i])
						}
					}
				}
			})
		}
	}
}

// Storing each output block's first product (attnStoreFirst) instead of clearing it and
// adding changes no bit, with outputs and pooled scratch holding NaN before the passes
// (so an element left unwritten would show), on every geometry of attnCases and of
// attnLayoutCases' sizes.
func TestAttentionStoreFirst(t *testing.T) {
	defer func() { attnStoreFirst = true }()
	cases := append([]attnCase{{1, 1, 1, false}, {2, 128, 64, false}, {1, 65, 12, true}}, attnCases...)
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16, backend.Float16} {
		for ci, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", dt, c), func(t *testing.T) {
				in := newAttnData(c, uint64(80+ci))
				attnStoreFirst = false
				want := runAttn(t, c, in, dt)
				attnStoreFirst = true
				nan := float32(math.NaN())
				runAttnFilled(t, c, newAttnDataFilled(c, nan), dt, nan)
				got := runAttnFilled(t, c, in, dt, nan)
				for p, w := range want.parts() {
					g := got.parts()[p]
					for i := range w {
						if math.Float64bits(g[i]) != math.Float64bits(w[i]) {
							t.Fatalf("%s[%d]: storing first %.8g, clearing %.8g", attnPartNames[p], i, g[i], w[i])
						}
					}
				}
			})
		}
	}
}

// newAttnDataFilled returns inputs of c holding v everywhere.
func newAttnDataFilled(c attnCase, v float32) attnData {
	n := c.bh * c.t * c.d
	f := func() []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = v
		}
		return x
	}
	return attnData{q: f(), k: f(), v: f(), g: f()}
}

// runAttnFilled is runAttn with the outputs (O, LSE, dQ, dK, dV) holding fill before
// the passes.
func runAttnFilled(t *testing.T, c attnCase, in attnData, dt backend.DType, fill float32) attnResult {
	t.Helper()
	b, _ := New(0)
	n := c.bh * c.t * c.d
	filled := make([]float32, n)
	for i := range filled {
		filled[i] = fill
	}
	mk := func(v []float32) backend.Storage {
		s, err := b.Alloc(dt, n)
		if err != nil {
			t.Fatal(err)
		}
		st(s).storeF32(0, v)
		return s
	}
	lse, _ := b.Alloc(backend.Float32, c.bh*c.t)
	st(lse).storeF32(0, filled[:c.bh*c.t])
	a := backend.AttentionArgs{Q: mk(in.q), K: mk(in.k), V: mk(in.v), O: mk(filled), LSE: lse,
		BH: c.bh, T: c.t, D: c.d, Scale: 1 / math.Sqrt(float64(c.d)), Causal: c.causal}
	b.Attention(a)
	a.GO, a.GQ, a.GK, a.GV = mk(in.g), mk(filled), mk(filled), mk(filled)
	b.AttentionBackward(a)
	get := func(s backend.Storage, n int) []float64 {
		x := make([]float64, n)
		st(s).loadF64(x, 0)
		return x
	}
	return attnResult{o: get(a.O, n), lse: get(lse, c.bh*c.t), gq: get(a.GQ, n), gk: get(a.GK, n), gv: get(a.GV, n)}
}
