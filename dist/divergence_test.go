package dist

import (
	"errors"
	"sync"
	"testing"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// Two ranks whose local losses differ: from step 3 on, rank 1's targets are 1e8 times
// larger, so only its loss explodes. With SyncDivergence both ranks stop at the same
// step; without it rank 0 trains on while rank 1 stops (in a real job rank 0 would then
// wait for rank 1 in the next collective).
func TestSyncDivergenceStopsEveryRankTogether(t *testing.T) {
	for _, synced := range []bool{true, false} {
		groups := inprocGroups(2)
		stopped := make([]int, 2) // the step each rank's Step returned ErrDiverged (0: never)
		var wg sync.WaitGroup
		for r, pg := range groups {
			wg.Go(func() {
				m := nn.NewSequential(nn.NewLinear(4, 1, nn.Seeded(1)))
				opt, err := optim.NewSGD(m.Params(), optim.SGDConfig{LR: 1e-3})
				require.NoError(t, err)
				mse := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.MSELoss(out, y) }
				tr, err := amp.NewTrainer(m, opt, mse, tensor.CPU, amp.Config{Divergence: amp.DivergenceConfig{Patience: 2}})
				require.NoError(t, err)
				if synced {
					SyncDivergence(tr, pg)
				}
				for step := 1; step <= 8; step++ {
					scale := float32(1)
					if r == 1 && step >= 3 {
						scale = 1e8
					}
					x := tensor.FromSlice([]float32{1, 2, 3, 4, 4, 3, 2, 1}, tensor.Shape{2, 4})
					y := tensor.FromSlice([]float32{scale, -scale}, tensor.Shape{2, 1})
					_, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
					x.Release()
					y.Release()
					if errors.Is(err, amp.ErrDiverged) {
						if stopped[r] == 0 {
							stopped[r] = step
						}
						if synced {
							return // every rank stops here, so no collective is left waiting
						}
					} else {
						require.NoError(t, err)
					}
				}
			})
		}
		wg.Wait()
		if synced {
			require.Equal(t, []int{4, 4}, stopped, "both ranks stop at the second bad step")
		} else {
			require.Equal(t, 0, stopped[0], "unsynced, rank 0 never sees rank 1's loss")
			require.Equal(t, 4, stopped[1])
		}
	}
}

func TestSyncDivergenceWorldOfOne(t *testing.T) {
	m := nn.NewSequential(nn.NewLinear(2, 1, nn.Seeded(1)))
	opt, err := optim.NewSGD(m.Params(), optim.SGDConfig{LR: 0.1})
	require.NoError(t, err)
	tr, err := amp.NewTrainer(m, opt, func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.MSELoss(out, y) }, tensor.CPU, amp.Config{})
	require.NoError(t, err)
	SyncDivergence(tr, NewLocal()) // no reducer: nothing to agree on
	x := tensor.FromSlice([]float32{1, 2}, tensor.Shape{1, 2})
	y := tensor.FromSlice([]float32{1}, tensor.Shape{1, 1})
	_, err = tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
	require.NoError(t, err)
}
