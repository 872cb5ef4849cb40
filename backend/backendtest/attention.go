package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

func init() {
	register("Attention", testAttention)
}

// attnShapes are the [BH, T, D] geometries checked: T crosses a 64-row block boundary
// in the third, and the last has a single row.
var attnShapes = []struct{ bh, t, d int }{{3, 5, 4}, {2, 17, 8}, {1, 70, 6}, {2, 1, 3}}

// attnRef computes attention in float64 with the full score matrix: the output, the
// log-sum-exp of each row, and, when g is not nil, the gradients of q, k and v.
func attnRef(q, k, v, g []float64, bh, t, d int, scale float64, causal bool) (o, lse, gq, gk, gv []float64) {
	o, lse = make([]float64, bh*t*d), make([]float64, bh*t)
	gq, gk, gv = make([]float64, len(o)), make([]float64, len(o)), make([]float64, len(o))
	p := make([]float64, t)
	for h := range bh {
		at := func(x []float64, i int) []float64 { return x[(h*t+i)*d : (h*t+i+1)*d] }
		for i := range t {
			m := math.Inf(-1)
			for j := range t {
				p[j] = math.Inf(-1)
				if causal && j > i {
					continue
				}
				s := 0.0
				for c := range d {
					s += at(q, i)[c] * at(k, j)[c]
				}
				p[j] = s * scale
				m = math.Max(m, p[j])
			}
			sum := 0.0
			for j := range p {
				p[j] = math.Exp(p[j] - m)
				sum += p[j]
			}
			lse[h*t+i] = m + math.Log(sum)
			for j := range p {
				p[j] /= sum
				for c := range d {
					at(o, i)[c] += p[j] * at(v, j)[c]
				}
			}
			if g == nil {
				continue
			}
			// dP_j = g_i·v_j; dS_j = P_j(dP_j − Σ P·dP)
			dp := make([]float64, t)
			dot := 0.0
			for j := range t {
				for c := range d {
					dp[j] += at(g, i)[c] * at(v, j)[c]
				}
				dot += p[j] * dp[j]
			}
			for j := range t {
				ds := p[j] * (dp[j] - dot) * scale
				for c := range d {
					at(gv, j)[c] += p[j] * at(g, i)[c]
					at(gq, i)[c] += ds * at(k, j)[c]
					at(gk, j)[c] += ds * at(q, i)[c]
				}
			}
		}
	}
	return o, lse, gq, gk, gv
}

// testAttention checks backends with a fused attention kernel (backend.Attention)
// against attnRef: forward (output and log-sum-exp) and backward, causal or not, in
// every floating dtype.
func testAttention(t *testing.T, b backend.Backend) {
	fa, ok := b.(backend.Attention)
	if !ok {
		t.Skipf("%s has no fused attention kernel (backend.Attention)", b.Name())
	}
	for si, sh := range attnShapes {
		for _, causal := range []bool{true, false} {
			for _, dt := range FloatDTypes {
				t.Run(fmt.Sprintf("%dx%dx%d/causal=%v/%s", sh.bh, sh.t, sh.d, causal, dt), func(t *testing.T) {
					n := sh.bh * sh.t * sh.d
					seed := uint64(9000 + 10*si)
					q := Rounded(dt, RandVals(seed, n, -2, 2))
					k := Rounded(dt, RandVals(seed+1, n, -2, 2))
					v := Rounded(dt, RandVals(seed+2, n, -1, 1))
					g := Rounded(dt, RandVals(seed+3, n, -1, 1))
					scale := 1 / math.Sqrt(float64(sh.d))
					o, lse, gq, gk, gv := attnRef(q, k, v, g, sh.bh, sh.t, sh.d, scale, causal)
					lseType := backend.Float32
					if dt == backend.Float64 {
						lseType = backend.Float64
					}
					a := backend.AttentionArgs{
						Q: Upload(t, b, dt, q), K: Upload(t, b, dt, k), V: Upload(t, b, dt, v),
						O: uploadGarbage(t, b, dt, n), LSE: uploadGarbage(t, b, lseType, sh.bh*sh.t),
						BH: sh.bh, T: sh.t, D: sh.d, Scale: scale, Causal: causal,
					}
					defer Free(b, a.Q, a.K, a.V, a.O, a.LSE)
					fa.Attention(a)
					// Half outputs are rounded once; float32 sums a few hundred products.
					tol := math.Max(Tol(dt), 1e-5)
					if dt == backend.Float64 {
						tol = 1e-12
					}
					ExpectClose(t, "O", Download(t, b, a.O), o, tol, 1)
					ExpectClose(t, "LSE", Download(t, b, a.LSE), lse, 1e-5, 1)
					// The backward pass from the kernel's own forward output and LSE.
					a.GO = Upload(t, b, dt, g)
					a.GQ, a.GK, a.GV = uploadGarbage(t, b, dt, n), uploadGarbage(t, b, dt, n), uploadGarbage(t, b, dt, n)
					defer Free(b, a.GO, a.GQ, a.GK, a.GV)
					fa.AttentionBackward(a)
					if dt.IsHalf() {
						// The saved output was rounded to dt, which moves the softmax
						// backward's row term by as much: the gradients are within a few
						// units of dt's precision of the exact ones.
						tol = 4 * Tol(dt)
					}
					ExpectClose(t, "GQ", Download(t, b, a.GQ), gq, tol, 1)
					ExpectClose(t, "GK", Download(t, b, a.GK), gk, tol, 1)
					ExpectClose(t, "GV", Download(t, b, a.GV), gv, tol, 1)
				})
			}
		}
	}
}
