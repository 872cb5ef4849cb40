package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// attnCase is one attention geometry.
type attnCase struct {
	bh, t, d int
	causal   bool
}

func (c attnCase) String() string {
	return fmt.Sprintf("BH=%d/T=%d/D=%d/causal=%v", c.bh, c.t, c.d, c.causal)
}

var attnCases = []attnCase{
	{3, 7, 5, true}, {3, 7, 5, false}, {2, 64, 16, true}, {1, 70, 33, true},
	{2, 130, 32, true}, {2, 130, 32, false}, {1, 200, 64, true}, {1, 100, 128, false},
}

// attnData is the inputs of one case: Q, K, V and the incoming gradient dO.
type attnData struct{ q, k, v, g []float32 }

func newAttnData(c attnCase, seed uint64) attnData {
	rng := rand.New(rand.NewPCG(seed, uint64(c.t)))
	n := c.bh * c.t * c.d
	f := func(s float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * s)
		}
		return x
	}
	return attnData{q: f(1.5), k: f(1.5), v: f(1), g: f(1)}
}

// attnResult is what one forward and backward pass gives, widened to float64.
type attnResult struct{ o, lse, gq, gk, gv []float64 }

// runAttn runs Backend.Attention and AttentionBackward with dt storage (the inputs
// rounded to dt) and the 1/√D scale.
func runAttn(t *testing.T, c attnCase, in attnData, dt backend.DType) attnResult {
	t.Helper()
	b, _ := New(0)
	n := c.bh * c.t * c.d
	mk := func(v []float32) backend.Storage {
		s, err := b.Alloc(dt, n)
		if err != nil {
			t.Fatal(err)
		}
		if v != nil {
			st(s).storeF32(0, v)
		}
		return s
	}
	lseDT := backend.Float32
	if dt == backend.Float64 {
		lseDT = backend.Float64
	}
	lse, _ := b.Alloc(lseDT, c.bh*c.t)
	a := backend.AttentionArgs{Q: mk(in.q), K: mk(in.k), V: mk(in.v), O: mk(nil), LSE: lse,
		BH: c.bh, T: c.t, D: c.d, Scale: 1 / math.Sqrt(float64(c.d)), Causal: c.causal}
	b.Attention(a)
	a.GO, a.GQ, a.GK, a.GV = mk(in.g), mk(nil), mk(nil), mk(nil)
	b.AttentionBackward(a)
	get := func(s backend.Storage, n int) []float64 {
		x := make([]float64, n)
		st(s).loadF64(x, 0)
		return x
	}
	return attnResult{o: get(a.O, n), lse: get(lse, c.bh*c.t), gq: get(a.GQ, n), gk: get(a.GK, n), gv: get(a.GV, n)}
}

// rounded returns the inputs rounded to dt, as float32.
func (in attnData) rounded(t *testing.T, dt backend.DType) attnData {
	b, _ := New(0)
	r := func(v []float32) []float32 {
		s, _ := b.Alloc(dt, len(v))
		st(s).storeF32(0, v)
		out := make([]float32, len(v))
		st(s).loadF32(out, 0)
		return out
	}
	return attnData{q: r(in.q), k: r(in.k), v: r(in.v), g: r(in.g)}
}

// attnMaxErr returns max |got - want| / max |want|.
func attnMaxErr(got, want []float64) float64 {
	var e, m float64
	for i := range want {
		e = max(e, math.Abs(got[i]-want[i]))
		m = max(m, math.Abs(want[i]))
		if math.IsNaN(got[i]) {
			return math.Inf(1)
		}
	}
	return e / max(m, 1e-30)
}

func (r attnResult) parts() [][]float64 { return [][]float64{r.o, r.lse, r.gq, r.gk, r.gv} }

var attnPartNames = []string{"O", "LSE", "dQ", "dK", "dV"}

// The float32 kernel against the float64 one (the exact reference) on the same inputs:
// every element within 1e-5 relative + 1e-5 absolute, as the tensor tests demand
// against the composed ops.
func TestAttentionF32MatchesF64(t *testing.T) {
	for _, c := range attnCases {
		t.Run(c.String(), func(t *testing.T) {
			in := newAttnData(c, 1)
			want := runAttn(t, c, in, backend.Float64)
			got := runAttn(t, c, in, backend.Float32)
			for p, w := range want.parts() {
				g := got.parts()[p]
				for i := range w {
					if d := math.Abs(g[i] - w[i]); !(d <= 1e-5+1e-5*math.Abs(w[i])) {
						t.Fatalf("%s[%d]: float32 %.8g, float64 %.8g", attnPartNames[p], i, g[i], w[i])
					}
				}
			}
		})
	}
}

// The bf16 kernel with each native bf16 micro-kernel this CPU has against the same
// kernel with its pure-Go twin: equal bit for bit.
func TestAttentionBF16Twin(t *testing.T) {
	defer func(k *gemmBF16Kernel) { attnBF16Kernel = k }(attnBF16Kernel)
	for _, kern := range gemmBF16Kernels() {
		twin := kern.goTwin()
		if twin == kern {
			continue
		}
		for _, c := range attnCases {
			t.Run(kern.name+"/"+c.String(), func(t *testing.T) {
				in := newAttnData(c, 2)
				attnBF16Kernel = kern
				got := runAttn(t, c, in, backend.BFloat16)
				attnBF16Kernel = twin
				want := runAttn(t, c, in, backend.BFloat16)
				for p, w := range want.parts() {
					g := got.parts()[p]
					for i := range w {
						if math.Float64bits(g[i]) != math.Float64bits(w[i]) {
							t.Fatalf("%s[%d]: %s %.8g, %s %.8g", attnPartNames[p], i, kern.name, g[i], twin.name, w[i])
						}
					}
				}
			})
		}
	}
}

// The bf16 numerics (bf16 products, P and dS rounded to bf16, float32 accumulation and
// statistics, outputs rounded to bf16) against the float64 kernel on the same
// bf16-rounded inputs: the largest error of each result, relative to the result's
// largest magnitude, within attnBF16Tol, while the float32 kernel on those inputs is
// within 1e-5: the bound measures the bf16 arithmetic. The worst seen was 1.5e-2, dQ
// at T = 7 unmasked, where the rows of dS = P∘(dP - δ) cancel (they sum to zero) and
// their bf16 rounding shows; O stays within 3e-3 (one bf16 rounding is 2^-9 ≈ 2e-3).
const attnBF16Tol = 3e-2

func TestAttentionBF16Numerics(t *testing.T) {
	for _, c := range attnCases {
		t.Run(c.String(), func(t *testing.T) {
			in := newAttnData(c, 3).rounded(t, backend.BFloat16)
			want := runAttn(t, c, in, backend.Float64)
			got := runAttn(t, c, in, backend.BFloat16)
			f32 := runAttn(t, c, in, backend.Float32)
			for p, w := range want.parts() {
				e := attnMaxErr(got.parts()[p], w)
				e32 := attnMaxErr(f32.parts()[p], w)
				t.Logf("%s: bf16 %.2e, float32 %.2e", attnPartNames[p], e, e32)
				if !(e <= attnBF16Tol) || !(e32 <= 1e-5) {
					t.Errorf("%s: bf16 error %.3g (bound %g), float32 error %.3g", attnPartNames[p], e, attnBF16Tol, e32)
				}
			}
		})
	}
}
