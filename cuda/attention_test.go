package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/backend/backendtest"
	"github.com/gamp-ml/gamp/backend/cpu"
)

// TestEmulatedAttentionMatchesCPU runs the fused attention forward and backward on the
// emulated device and on the CPU backend from the same inputs and compares them within
// rounding (the kernels sum in another order than the CPU's blocked kernel), in every
// float dtype, causal or not.
func TestEmulatedAttentionMatchesCPU(t *testing.T) {
	g := needEmulated(t)
	c, err := cpu.New(0)
	if err != nil {
		t.Fatal(err)
	}
	p := pair{g: g, c: c}
	before := g.MemoryStats().Allocated
	for _, sh := range []struct{ bh, t, d int }{{2, 7, 4}, {1, 70, 33}} {
		for _, causal := range []bool{true, false} {
			for _, dt := range backendtest.FloatDTypes {
				t.Run(fmt.Sprintf("%dx%dx%d/causal=%v/%s", sh.bh, sh.t, sh.d, causal, dt), func(t *testing.T) {
					n := sh.bh * sh.t * sh.d
					lt := backend.Float32
					if dt == backend.Float64 {
						lt = backend.Float64
					}
					q, k, v, gy := p.up(t, dt, backendtest.RandVals(1, n, -2, 2)), p.up(t, dt, backendtest.RandVals(2, n, -2, 2)),
						p.up(t, dt, backendtest.RandVals(3, n, -1, 1)), p.up(t, dt, backendtest.RandVals(4, n, -1, 1))
					o, lse := p.garbage(t, dt, n), p.garbage(t, lt, sh.bh*sh.t)
					gq, gk, gv := p.garbage(t, dt, n), p.garbage(t, dt, n), p.garbage(t, dt, n)
					defer p.free(q, k, v, gy, o, lse, gq, gk, gv)
					var res [2][5][]float64
					for i, b := range []backend.Backend{p.g, p.c} {
						a := backend.AttentionArgs{Q: q[i], K: k[i], V: v[i], O: o[i], LSE: lse[i], GO: gy[i], GQ: gq[i], GK: gk[i], GV: gv[i],
							BH: sh.bh, T: sh.t, D: sh.d, Scale: 1 / math.Sqrt(float64(sh.d)), Causal: causal}
						f := b.(backend.Attention)
						f.Attention(a)
						f.AttentionBackward(a)
						for j, s := range []backend.Storage{o[i], lse[i], gq[i], gk[i], gv[i]} {
							res[i][j] = backendtest.Download(t, b, s)
						}
					}
					tol := math.Max(4*backendtest.Tol(dt), 1e-5)
					if dt == backend.Float64 {
						tol = 1e-12
					}
					for j, what := range []string{"O", "LSE", "GQ", "GK", "GV"} {
						backendtest.ExpectClose(t, what, res[0][j], res[1][j], tol, 1)
					}
				})
			}
		}
	}
	if a := g.MemoryStats().Allocated; a != before {
		t.Errorf("%d bytes allocated after freeing everything, %d before (the backward's scratch leaked)", a, before)
	}
}

// The fused kernels take attention only where the composed path's scores would fill a
// GiB or more: not the transformers ampbench trains.
func TestFusedAttentionChoice(t *testing.T) {
	var b *Backend // the choice reads no device state
	for _, c := range []struct {
		bh, t, d int
		fused    bool
	}{
		{128, 64, 32, false},  // ampbench's transformer, batch 32
		{1, 1, 1, false},      // tiny
		{128, 128, 64, false}, // transformer-large, batch 16
		{192, 512, 64, false}, // transformer-base (BERT-base), batch 16
		{64, 2048, 64, true},  // 2^28 scores: 1 GiB in float32
		{1, 1 << 16, 1 << 10, true},
	} {
		if got := b.FusedAttention(backend.Float16, c.bh, c.t, c.d); got != c.fused {
			t.Errorf("FusedAttention(%d heads, T %d, D %d) = %v, want %v", c.bh, c.t, c.d, got, c.fused)
		}
	}
}
