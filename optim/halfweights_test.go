package optim

import (
	"errors"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// TestHalfWeightsSmallUpdates trains bfloat16 weights at 1 with updates of 1e-4, far
// below half an ulp (2⁻⁸ ≈ 3.9e-3): without masters round-to-nearest never moves them,
// stochastic rounding moves them by the updates' sum on average, and the 16+16 split
// follows an FP32 master bit for bit.
func TestHalfWeightsSmallUpdates(t *testing.T) {
	const n, steps, lr = 4096, 1000, 1e-4
	run := func(m Masters) (*nn.Param, Optimizer) {
		ones := make([]float32, n)
		for i := range ones {
			ones[i] = 1
		}
		p := &nn.Param{Name: "w", T: tensor.FromSlice(ones, nil, tensor.WithDType(tensor.BFloat16), tensor.WithGrad())}
		opt, err := NewSGD([]*nn.Param{p}, SGDConfig{LR: lr, Masters: m, RoundingSeed: 9})
		require.NoError(t, err)
		for range steps {
			p.T.SetGrad(tensor.Ones(tensor.Shape{n}, tensor.WithDType(tensor.BFloat16)))
			opt.Step()
			opt.ZeroGrad()
		}
		return p, opt
	}
	none, _ := run(NoMasters)
	for _, v := range none.T.Float64s() {
		require.Equal(t, 1.0, v, "round to nearest loses every update")
	}
	sr, _ := run(StochasticRounding)
	mean := 0.0
	for _, v := range sr.T.Float64s() {
		mean += v / n
	}
	require.InDelta(t, 1-steps*lr, mean, 2e-3, "stochastic rounding keeps the updates in expectation")
	split, splitOpt := run(SplitMasters)
	master, masterOpt := run(FP32Masters)
	require.Equal(t, master.T.Float64s(), split.T.Float64s())
	// The pair is the master: its state holds the low halves, and the master's own
	// value sits exactly between what the bfloat16 weight can say.
	require.Equal(t, int64(steps), splitOpt.StepCount())
	m32 := masterOpt.(*SGD).MasterParams()[0].Float32s()
	lo := splitOpt.StateDict().Tensors["state.0.master_low"]
	require.NotNil(t, lo)
	hiBits, loBits := split.T.Uint16s(), lo.Uint16s()
	for i, x := range m32 {
		d := uint32(loBits[i])
		if d > 0x8000 {
			d -= 0x10000
		}
		require.Equal(t, math.Float32bits(x), uint32(hiBits[i])<<16+d, "element %d", i)
	}
}

// TestHalfWeightsSmallUpdatesFloat16 is TestHalfWeightsSmallUpdates on float16 weights
// at 1 (ulp 2⁻¹⁰ ≈ 9.8e-4) with updates of 1e-4: round to nearest never moves them,
// stochastic rounding moves them by the updates' sum on average, and the same seed
// replays the same bits.
func TestHalfWeightsSmallUpdatesFloat16(t *testing.T) {
	const n, steps, lr = 4096, 500, 1e-4
	run := func(m Masters, seed uint64) []float64 {
		p := &nn.Param{Name: "w", T: tensor.Ones(tensor.Shape{n}, tensor.WithDType(tensor.Float16), tensor.WithGrad())}
		opt, err := NewAdam([]*nn.Param{p}, AdamConfig{LR: lr, Masters: m, RoundingSeed: seed})
		require.NoError(t, err)
		for range steps {
			// Adam's steps are ≈ lr whatever the gradient's size.
			p.T.SetGrad(tensor.Ones(tensor.Shape{n}, tensor.WithDType(tensor.Float16)))
			opt.Step()
			opt.ZeroGrad()
		}
		return p.T.Float64s()
	}
	for _, v := range run(NoMasters, 0) {
		require.Equal(t, 1.0, v, "round to nearest loses every update")
	}
	sr := run(StochasticRounding, 9)
	mean := 0.0
	for _, v := range sr {
		mean += v / n
	}
	require.InDelta(t, 1-steps*lr, mean, 2e-3, "stochastic rounding keeps the updates in expectation")
	require.Equal(t, sr, run(StochasticRounding, 9), "the same seed rounds the same way")
	require.NotEqual(t, sr, run(StochasticRounding, 10))
}

func TestHalfWeightsConfigErrors(t *testing.T) {
	f16 := &nn.Param{Name: "h", T: tensor.Zeros(tensor.Shape{3}, tensor.WithDType(tensor.Float16), tensor.WithGrad())}
	_, err := NewAdam([]*nn.Param{f16}, AdamConfig{LR: 1e-3, Masters: SplitMasters})
	require.True(t, errors.Is(err, ErrConfig), "16+16 on float16: %v", err)
	require.ErrorContains(t, err, "bfloat16")
	for _, m := range []Masters{NoMasters, StochasticRounding} {
		_, err = NewSGD([]*nn.Param{f16}, SGDConfig{LR: 1, Masters: m})
		require.NoError(t, err, "%v works on float16", m)
	}
	_, err = NewSGD([]*nn.Param{f16}, SGDConfig{LR: 1, Masters: 9})
	require.True(t, errors.Is(err, ErrConfig))
}

// TestHalfWeightsStateRoundTrip: a state saved from an optimizer without masters loads
// into a fresh one, which then takes the same steps bit for bit (the generator's
// position included); states of another Masters choice are refused, changing nothing.
func TestHalfWeightsStateRoundTrip(t *testing.T) {
	for _, m := range []Masters{StochasticRounding, SplitMasters, NoMasters} {
		build := func() ([]*nn.Param, *Adam) {
			ps := makeParams(tensor.BFloat16)
			opt, err := NewAdamW(ps, AdamConfig{LR: 1e-2, WeightDecay: 0.1, Masters: m, RoundingSeed: 5})
			require.NoError(t, err)
			return ps, opt
		}
		step := func(ps []*nn.Param, opt Optimizer, k int) {
			setGrads(ps, k)
			opt.Step()
			opt.ZeroGrad()
		}
		ps, opt := build()
		for k := 1; k <= 3; k++ {
			step(ps, opt, k)
		}
		saved := opt.StateDict()
		savedW := values(ps)
		for k := 4; k <= 6; k++ {
			step(ps, opt, k)
		}
		ps2, opt2 := build()
		for i, p := range ps2 {
			p.T.CopyFrom(tensor.FromSlice(savedW[i], p.T.Shape(), tensor.WithDType(tensor.BFloat16)))
		}
		require.NoError(t, opt2.LoadStateDict(saved))
		for k := 4; k <= 6; k++ {
			step(ps2, opt2, k)
		}
		require.Equal(t, values(ps), values(ps2), "%v: resumed run", m)

		_, other := func() ([]*nn.Param, *Adam) {
			ps := makeParams(tensor.BFloat16)
			o, err := NewAdamW(ps, AdamConfig{LR: 1e-2, WeightDecay: 0.1})
			require.NoError(t, err)
			return ps, o
		}()
		err := other.LoadStateDict(saved)
		require.True(t, errors.Is(err, ErrStateMismatch), "%v state into an FP32-master optimizer: %v", m, err)
		err = opt2.LoadStateDict(other.StateDict())
		require.True(t, errors.Is(err, ErrStateMismatch), "FP32-master state into %v: %v", m, err)
		saved.Release()
	}
}

func TestParseMasters(t *testing.T) {
	for s, want := range map[string]Masters{"fp32": FP32Masters, "16+16": SplitMasters, "SR": StochasticRounding, "rn": NoMasters, "stochastic-rounding": StochasticRounding, "no-masters": NoMasters} {
		got, err := ParseMasters(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	_, err := ParseMasters("fp8")
	require.ErrorIs(t, err, ErrConfig)
}
