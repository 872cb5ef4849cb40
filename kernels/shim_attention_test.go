package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/kernels"
)

// attnBound checks got against want within atol + rtol·|want|: the kernels sum and
// exponentiate in another order than the CPU backend's blocked kernel, so they agree to
// rounding, not bit for bit.
func attnBound(t *testing.T, what string, got, want *buf, rtol, atol float64) {
	t.Helper()
	for i := 0; i < want.n; i++ {
		g, w := got.at(i), want.at(i)
		if math.IsNaN(g) || math.Abs(g-w) > atol+rtol*math.Abs(w) {
			t.Fatalf("%s: element %d is %v, the CPU backend's %v", what, i, g, w)
		}
	}
}

// The attention kernels under the g++ shim against the CPU backend's fused attention:
// output, log-sum-exp and the three gradients, causal or not, in every float dtype,
// with a head dimension past one ATTN_CHUNK of columns.
func TestShimAttention(t *testing.T) {
	s := loadShim(t)
	for _, sh := range []struct{ bh, t, d int }{{2, 5, 3}, {3, 19, 8}, {1, 9, 40}} {
		for _, causal := range []bool{true, false} {
			for _, dt := range floatDTypes {
				n := sh.bh * sh.t * sh.d
				r := newRand(uint64(n))
				q, k, v, g := bufOf(dt, randVals(r, n, false)), bufOf(dt, randVals(r, n, false)),
					bufOf(dt, randVals(r, n, false)), bufOf(dt, randVals(r, n, false))
				for _, b := range []*buf{q, k, v, g} {
					for i := 0; i < n; i++ {
						b.set(i, math.Max(-3, math.Min(3, b.at(i)))) // scores of a trained model's size
					}
				}
				lt := backend.Float32
				if dt == backend.Float64 {
					lt = backend.Float64
				}
				a := backend.AttentionArgs{Q: up(q), K: up(k), V: up(v), BH: sh.bh, T: sh.t, D: sh.d,
					Scale: 1 / math.Sqrt(float64(sh.d)), Causal: causal}
				a.O, _ = cpuB().Alloc(dt, n)
				a.LSE, _ = cpuB().Alloc(lt, sh.bh*sh.t)
				var cpu backend.Attention = cpuB()
				cpu.Attention(a)
				a.GO = up(g)
				a.GQ, _ = cpuB().Alloc(dt, n)
				a.GK, _ = cpuB().Alloc(dt, n)
				a.GV, _ = cpuB().Alloc(dt, n)
				cpu.AttentionBackward(a)
				wantO, wantL := down(a.O, n), down(a.LSE, sh.bh*sh.t)
				wantQ, wantK, wantV := down(a.GQ, n), down(a.GK, n), down(a.GV, n)
				for _, st := range []backend.Storage{a.Q, a.K, a.V, a.GO} {
					cpuB().Free(st)
				}
				rtol, atol := 1e-5, 1e-5
				switch dt {
				case backend.Float64:
					rtol, atol = 1e-12, 1e-12
				case backend.Float16:
					rtol, atol = 4e-3, 4e-3 // a few units of the stored output's precision
				case backend.BFloat16:
					rtol, atol = 3e-2, 3e-2
				}
				causalFlag := int32(0)
				if causal {
					causalFlag = 1
				}
				geom := []any{int64(sh.bh), int64(sh.t), int64(sh.d), a.Scale, causalFlag}
				what := fmt.Sprintf("%v/causal=%v/%s", sh, causal, dt)

				o, lse := newBuf(dt, n), newBuf(lt, sh.bh*sh.t)
				s.run(t, kernels.Name("attention_forward", dt), append([]any{o.ptr(), lse.ptr(), q.ptr(), k.ptr(), v.ptr()}, geom...)...)
				attnBound(t, what+" o", o, wantO, rtol, atol)
				attnBound(t, what+" lse", lse, wantL, 1e-5, 1e-5)

				// The backward kernels from the CPU's forward output and log-sum-exp.
				gq, delta := newBuf(dt, n), newBuf(lt, sh.bh*sh.t)
				s.run(t, kernels.Name("attention_backward_dq", dt), append([]any{gq.ptr(), delta.ptr(), g.ptr(), q.ptr(), k.ptr(), v.ptr(), wantO.ptr(), wantL.ptr()}, geom...)...)
				gk, gv := newBuf(dt, n), newBuf(dt, n)
				s.run(t, kernels.Name("attention_backward_dkv", dt), append([]any{gk.ptr(), gv.ptr(), g.ptr(), q.ptr(), k.ptr(), v.ptr(), wantL.ptr(), delta.ptr()}, geom...)...)
				attnBound(t, what+" gq", gq, wantQ, rtol, atol)
				attnBound(t, what+" gk", gk, wantK, rtol, atol)
				attnBound(t, what+" gv", gv, wantV, rtol, atol)
			}
		}
	}
}
