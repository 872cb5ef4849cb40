package optim

import (
	"errors"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// oomParams returns a small and a large parameter on dev with gradients, so a memory
// cap can admit the small one's new state and refuse the large one's.
func oomParams(dev tensor.Device) []*nn.Param {
	var ps []*nn.Param
	for i, s := range []tensor.Shape{{8, 8}, {256, 256}} {
		v := initValues(i, s)
		p := &nn.Param{Name: []string{"small", "large"}[i], T: tensor.FromSlice(v, s, tensor.WithDevice(dev), tensor.WithGrad())}
		p.T.SetGrad(tensor.FromSlice(gradValues(1, i, s), s, tensor.WithDevice(dev)))
		ps = append(ps, p)
	}
	return ps
}

// An optimizer step that runs out of memory while creating its state (the first Adam
// step, the first SGD-with-momentum step) changes nothing — no parameter, no state, no
// step count — and the retry equals a step on an optimizer that never failed.
func TestStepOutOfMemoryWhileAllocatingStateChangesNothing(t *testing.T) {
	dev := tensor.CPUDevice(41)
	b := backend.MustGet(dev)
	mk := map[string]func([]*nn.Param) (Optimizer, error){
		"Adam": func(ps []*nn.Param) (Optimizer, error) {
			return NewAdam(ps, AdamConfig{LR: 0.01, AMSGrad: true})
		},
		"SGD": func(ps []*nn.Param) (Optimizer, error) {
			return NewSGD(ps, SGDConfig{LR: 0.1, Momentum: 0.9})
		},
	}
	for name, newOpt := range mk {
		t.Run(name, func(t *testing.T) {
			ps := oomParams(dev)
			opt, err := newOpt(ps)
			require.NoError(t, err)
			before := opt.StateDict()
			defer before.Release()
			w0 := values(ps)

			b.EmptyCache() // the cap counts reserved bytes: no cached block may serve the state
			st := b.MemoryStats()
			oomsBefore := st.NumOOMs
			// Room for the small parameter's state, not for the large one's.
			b.SetMemoryLimit(st.Reserved + 16<<10)
			err = tensor.CatchOOM(opt.Step)
			b.SetMemoryLimit(0)
			require.Error(t, err)
			require.True(t, errors.Is(err, tensor.ErrOutOfMemory))
			require.Greater(t, b.MemoryStats().NumOOMs, oomsBefore)

			after := opt.StateDict()
			defer after.Release()
			requireStateEqual(t, before, after)
			require.Equal(t, w0, values(ps), "no parameter changed")
			require.Equal(t, int64(0), opt.StepCount())

			opt.Step()
			clean := oomParams(dev)
			ref, err := newOpt(clean)
			require.NoError(t, err)
			ref.Step()
			require.Equal(t, values(clean), values(ps), "the retry equals a clean step")
			sa, sb := opt.StateDict(), ref.StateDict()
			defer sa.Release()
			defer sb.Release()
			requireStateEqual(t, sb, sa)
		})
	}
}

// Loading a state into an optimizer that has none yet makes its buffers first: when
// they do not fit, the load fails with an out-of-memory error and changes nothing.
func TestLoadStateOutOfMemoryChangesNothing(t *testing.T) {
	dev := tensor.CPUDevice(41)
	b := backend.MustGet(dev)
	src, err := NewAdam(oomParams(dev), AdamConfig{LR: 0.01})
	require.NoError(t, err)
	src.Step()
	saved := src.StateDict()
	defer saved.Release()

	ps := oomParams(dev)
	opt, err := NewAdam(ps, AdamConfig{LR: 0.5})
	require.NoError(t, err)
	before := opt.StateDict()
	defer before.Release()
	b.EmptyCache()
	b.SetMemoryLimit(b.MemoryStats().Reserved + 16<<10)
	err = opt.LoadStateDict(saved)
	b.SetMemoryLimit(0)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	after := opt.StateDict()
	defer after.Release()
	requireStateEqual(t, before, after)

	require.NoError(t, opt.LoadStateDict(saved))
	again := opt.StateDict()
	defer again.Release()
	requireStateEqual(t, saved, again)
}
