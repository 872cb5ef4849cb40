package dist

import "github.com/gamp-ml/gamp/amp"

// SyncDivergence makes tr's divergence check decide over pg: each step's verdict is
// all-reduced with Max, so when any process's step was bad (its local loss NaN or
// exploding) every process counts it, and all of them return the *amp.DivergenceError
// at the same step instead of one stopping while the others wait for it in the next
// collective. It costs one one-element all-reduce per step. Every process must call
// Step alike; a failed all-reduce panics.
func SyncDivergence(tr *amp.Trainer, pg ProcessGroup) {
	if pg.Size() == 1 {
		tr.SetDivergenceReducer(nil)
		return
	}
	tr.SetDivergenceReducer(func(bad bool) bool { return anyRank(pg, bad, "the divergence check's verdict") })
}
