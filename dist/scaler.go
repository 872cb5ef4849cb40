package dist

import (
	"fmt"

	"github.com/gamp-ml/gamp/scaler"
	"github.com/gamp-ml/gamp/tensor"
)

// SyncScaler makes s combine its found-inf decisions over pg: after each Unscale the
// flag is all-reduced with Max, so when any process found an Inf or NaN gradient every
// process skips the step and backs its scale off alike — the replicas stay identical.
// (DDP's averaging already spreads a non-finite gradient to every process; the flag
// covers gradients DDP does not reduce and faults after the all-reduce.) Every process
// must call Unscale, or Step, for the same optimizers in the same order. A failed
// all-reduce panics: the processes can no longer agree.
func SyncScaler(s *scaler.GradScaler, pg ProcessGroup) {
	if pg.Size() == 1 {
		s.SetFoundInfReducer(nil)
		return
	}
	s.SetFoundInfReducer(func(found bool) bool { return anyRank(pg, found, "the scaler's found-inf flag") })
}

// anyRank all-reduces flag with Max: whether it is set on any process. A failed
// all-reduce panics, naming what, since the processes can no longer agree.
func anyRank(pg ProcessGroup, flag bool, what string) bool {
	v := 0.0
	if flag {
		v = 1
	}
	t := tensor.Scalar(v, tensor.WithDType(tensor.Float32))
	defer t.Release()
	if err := pg.AllReduce(t, Max); err != nil {
		panic(fmt.Errorf("dist: all-reducing %s: %w", what, err))
	}
	return t.Item() > 0
}
