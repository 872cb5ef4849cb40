package amp

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// halfTrainer is newTrainer with bfloat16 weights kept as masters says, for SGD with
// momentum or AdamW.
func halfTrainer(t testing.TB, level OptLevel, masters optim.Masters, sgd bool, dev tensor.Device) *Trainer {
	m := newMLP(7)
	nn.To(m, dev)
	Prepare(m, level, tensor.BFloat16)
	var opt optim.Optimizer
	var err error
	if sgd {
		opt, err = optim.NewSGD(m.Params(), optim.SGDConfig{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-3, Masters: masters, RoundingSeed: 1})
	} else {
		opt, err = optim.NewAdamW(m.Params(), optim.AdamWConfig{LR: 0.01, WeightDecay: 0.01, Masters: masters, RoundingSeed: 1})
	}
	require.NoError(t, err)
	tr, err := NewTrainer(m, opt, ce, dev, Config{Level: level, Low: tensor.BFloat16})
	require.NoError(t, err)
	tr.Gen.Seed(3)
	return tr
}

func trainOn(t testing.TB, tr *Trainer, dev tensor.Device, from, to int) {
	for s := from; s < to; s++ {
		x, y := batch(s, 16)
		xd, yd := x.To(dev), y.To(dev)
		_, err := tr.Step([]*tensor.Tensor{xd}, []*tensor.Tensor{yd})
		require.NoError(t, err)
		for _, v := range []*tensor.Tensor{x, y, xd, yd} {
			v.Release()
		}
	}
}

// tieWriteBack is O2's optimizer (FP32 masters) with the write-back of the 16+16 split:
// the nearest bfloat16, and at an exact tie the neighbour below in magnitude (the one
// the pair can hold; 32 bits cannot hold a float32 and its round-to-nearest-even
// bfloat16 at every tie). Written here in plain Go from the masters, it is the
// reference the split must equal bit for bit.
type tieWriteBack struct{ optim.Optimizer }

func (o tieWriteBack) Step() {
	o.Optimizer.Step()
	masters := o.Optimizer.(interface{ MasterParams() []*tensor.Tensor }).MasterParams()
	for i, p := range o.Params() {
		if p.T.DType() != tensor.BFloat16 {
			continue
		}
		w := masters[i].Float32s()
		for j, x := range w {
			w[j] = math.Float32frombits((math.Float32bits(x) + 0x7fff) >> 16 << 16)
		}
		p.T.CopyFrom(tensor.FromSlice(w, p.T.Shape()))
	}
}

// TestSplitMastersBitIdenticalToO2 trains the same model 200 steps in bfloat16 with
// FP32 masters and with 16+16 split masters, for AdamW and for SGD with momentum, at O2
// and O3: parameters and buffers end bit-identical to the FP32 masters written back
// with the split's tie rule. Against O2's round-to-nearest-even write-back the runs part
// at the first exact tie that rounds the other way; the test logs how many weights
// differ after 200 steps.
func TestSplitMastersBitIdenticalToO2(t *testing.T) {
	for _, level := range []OptLevel{O2, O3} {
		for _, sgd := range []bool{false, true} {
			ref := halfTrainer(t, level, optim.FP32Masters, sgd, tensor.CPU)
			ref.Opt = tieWriteBack{ref.Opt}
			split := halfTrainer(t, level, optim.SplitMasters, sgd, tensor.CPU)
			o2 := halfTrainer(t, level, optim.FP32Masters, sgd, tensor.CPU)
			trainOn(t, ref, tensor.CPU, 0, 200)
			trainOn(t, split, tensor.CPU, 0, 200)
			trainOn(t, o2, tensor.CPU, 0, 200)
			require.Equal(t, paramBits(ref.Model), paramBits(split.Model), "%v sgd=%v: 200 steps", level, sgd)
			differ, total := 0, 0
			a, b := paramBits(o2.Model), paramBits(split.Model)
			for k := range a {
				for i := range a[k] {
					total++
					if a[k][i] != b[k][i] {
						differ++
					}
				}
			}
			t.Logf("%v sgd=%v: after 200 steps %d of %d values differ from O2's round-to-nearest-even write-back", level, sgd, differ, total)
		}
	}
}

// TestHalfWeightsMemory measures, with the allocator's statistics on a device of its
// own, what parameters, buffers and optimizer state hold after a step (gradients
// released): the 16+16 split at O3 against O2's FP32 masters. Without masters the
// half parameters cost 4 bytes (split) or 2 (stochastic rounding) instead of 6; Adam's
// two FP32 moments (8 bytes) are the same in every case.
func TestHalfWeightsMemory(t *testing.T) {
	dev := tensor.CPUDevice(44)
	held := func(level OptLevel, masters optim.Masters, sgd bool) int64 {
		b := backend.MustGet(dev)
		before := b.MemoryStats().Allocated
		tr := halfTrainer(t, level, masters, sgd, dev)
		trainOn(t, tr, dev, 0, 1)
		got := b.MemoryStats().Allocated - before
		for _, p := range nn.State(tr.Model) {
			p.T.Release()
		}
		tr.Opt.(interface{ Release() }).Release()
		return got
	}
	// Plain SGD keeps no state: 2 bytes (split: 2+2) against 2+4 — the 16+16 split's
	// 4 bytes instead of 6 per parameter, ≤ 0.7× of FP32 masters.
	plain := func(masters optim.Masters) int64 {
		b := backend.MustGet(dev)
		before := b.MemoryStats().Allocated
		m := newMLP(7)
		nn.To(m, dev)
		Prepare(m, O3, tensor.BFloat16)
		opt, err := optim.NewSGD(m.Params(), optim.SGDConfig{LR: 0.01, Masters: masters})
		require.NoError(t, err)
		got := b.MemoryStats().Allocated - before
		opt.Release()
		for _, p := range nn.State(m) {
			p.T.Release()
		}
		return got
	}
	o2, split := plain(optim.FP32Masters), plain(optim.SplitMasters)
	t.Logf("plain SGD: params+optimizer bytes: FP32 masters %d, 16+16 %.3f×", o2, float64(split)/float64(o2))
	require.LessOrEqual(t, float64(split)/float64(o2), 0.7)
	for _, sgd := range []bool{false, true} {
		o2 := held(O3, optim.FP32Masters, sgd)
		split := held(O3, optim.SplitMasters, sgd)
		sr := held(O3, optim.StochasticRounding, sgd)
		t.Logf("sgd=%v: params+optimizer bytes: FP32 masters %d, 16+16 %.3f×, stochastic rounding %.3f×", sgd, o2, float64(split)/float64(o2), float64(sr)/float64(o2))
		require.Less(t, split, o2)
		require.Less(t, sr, split)
		if sgd {
			// 2+4+4 bytes (weight, master, momentum) against 2+2+4 and 2+4.
			require.InDelta(t, 0.8, float64(split)/float64(o2), 0.02)
			require.InDelta(t, 0.6, float64(sr)/float64(o2), 0.02)
		} else {
			// 2+4+8 against 2+2+8 and 2+8.
			require.InDelta(t, 12.0/14, float64(split)/float64(o2), 0.02)
			require.InDelta(t, 10.0/14, float64(sr)/float64(o2), 0.02)
		}
	}
}

// TestHalfWeightsSaveLoadResume: a run with stochastic rounding or 16+16 masters saved
// to a file at step 10 and loaded into a fresh trainer takes steps 10–20 exactly as the
// uninterrupted run (the low halves and the rounding generator are in the file).
func TestHalfWeightsSaveLoadResume(t *testing.T) {
	for _, masters := range []optim.Masters{optim.StochasticRounding, optim.SplitMasters} {
		path := filepath.Join(t.TempDir(), "state.safetensors")
		full := halfTrainer(t, O3, masters, false, tensor.CPU)
		trainOn(t, full, tensor.CPU, 0, 20)
		half := halfTrainer(t, O3, masters, false, tensor.CPU)
		trainOn(t, half, tensor.CPU, 0, 10)
		require.NoError(t, Save(path, half, SaveInfo{Epoch: 1}))
		resumed := halfTrainer(t, O3, masters, false, tensor.CPU)
		_, err := Load(path, resumed)
		require.NoError(t, err)
		trainOn(t, resumed, tensor.CPU, 10, 20)
		require.Equal(t, paramBits(full.Model), paramBits(resumed.Model), "%v", masters)
		// A file of another choice is refused.
		other := halfTrainer(t, O3, optim.FP32Masters, false, tensor.CPU)
		_, err = Load(path, other)
		require.ErrorIs(t, err, optim.ErrStateMismatch)
	}
}
