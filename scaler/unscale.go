package scaler

import (
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/internal/tensorx"
	"github.com/gamp-ml/gamp/tensor"
)

// unscaleCheckAll multiplies every tensor of ts in place by inv and reports, in
// found[i], whether tensor i held an Inf or NaN (tensor.UnscaleCheckInPlace over several
// tensors). Backends with a multi-tensor kernel (backend.MultiUnscaler: CUDA) unscale
// every tensor of a device with no wait between them and read the flags back once,
// instead of once per tensor. nil entries are skipped (found false).
func unscaleCheckAll(ts []*tensor.Tensor, inv float32) (found []bool) {
	found = make([]bool, len(ts))
	type group struct {
		m   backend.MultiUnscaler
		idx []int
		ss  []backend.Storage
		ns  []int
	}
	groups := map[tensor.Device]*group{}
	for i, t := range ts {
		if t == nil {
			continue
		}
		b, s := tensorx.MustDense(t, "unscale_")
		m, ok := b.(backend.MultiUnscaler)
		if !ok {
			found[i] = b.UnscaleCheck(s, t.Numel(), inv)
			continue
		}
		g := groups[t.Device()]
		if g == nil {
			g = &group{m: m}
			groups[t.Device()] = g
		}
		g.idx = append(g.idx, i)
		g.ss = append(g.ss, s)
		g.ns = append(g.ns, t.Numel())
	}
	for _, g := range groups {
		for k, f := range g.m.UnscaleCheckMulti(g.ss, g.ns, inv) {
			found[g.idx[k]] = f
		}
	}
	return found
}
