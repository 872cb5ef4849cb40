package optim

import (
	"errors"
	"testing"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

func TestScheduleValues(t *testing.T) {
	cases := []struct {
		name  string
		s     Schedule
		base  float64
		steps []int64
		want  []float64
	}{
		{"StepLR", StepLR{StepSize: 2, Gamma: 0.5}, 1, []int64{0, 1, 2, 3, 4, 7}, []float64{1, 1, 0.5, 0.5, 0.25, 0.125}},
		// EtaMin + (1-EtaMin)(1+cos(π s/4))/2 with EtaMin 0.1: s=1 gives
		// 0.1 + 0.9·(1+√2/2)/2 = 0.868198051533946.
		{"CosineAnnealing", CosineAnnealing{TMax: 4, EtaMin: 0.1}, 1, []int64{0, 1, 2, 3, 4}, []float64{1, 0.868198051533946, 0.55, 0.231801948466054, 0.1}},
		{"LinearWarmup then constant", LinearWarmup{Steps: 4}, 0.8, []int64{0, 1, 2, 3, 4, 100}, []float64{0.2, 0.4, 0.6, 0.8, 0.8, 0.8}},
		{"LinearWarmup then StepLR", LinearWarmup{Steps: 2, Then: StepLR{StepSize: 3, Gamma: 0.1}}, 1, []int64{0, 1, 2, 4, 5, 8}, []float64{0.5, 1, 1, 1, 0.1, 0.01}},
		{"Constant", Constant{}, 0.3, []int64{0, 10}, []float64{0.3, 0.3}},
		{"ScheduleFunc", ScheduleFunc(func(b float64, s int64) float64 { return b / float64(s+1) }), 1, []int64{0, 3}, []float64{1, 0.25}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, c.s.Validate())
			for i, s := range c.steps {
				require.InDelta(t, c.want[i], c.s.LR(c.base, s), 1e-14, "step %d", s)
			}
		})
	}
}

func TestScheduleValidate(t *testing.T) {
	for _, s := range []Schedule{
		StepLR{StepSize: 0, Gamma: 0.1},
		StepLR{StepSize: 1, Gamma: -1},
		CosineAnnealing{TMax: 0},
		CosineAnnealing{TMax: 10, EtaMin: -1},
		LinearWarmup{Steps: -1},
		LinearWarmup{Steps: 5, Then: StepLR{}},
		ScheduleFunc(nil),
	} {
		require.ErrorIs(t, s.Validate(), ErrConfig, "%#v", s)
		p := &nn.Param{Name: "w", T: tensor.FromSlice([]float32{1}, nil, tensor.WithGrad())}
		opt, err := NewSGD([]*nn.Param{p}, SGDConfig{LR: 1})
		require.NoError(t, err)
		_, err = NewScheduler(opt, s)
		require.True(t, errors.Is(err, ErrConfig))
	}
}

func TestSchedulerHoldsOnSkippedSteps(t *testing.T) {
	p := &nn.Param{Name: "w", T: tensor.FromSlice([]float32{1}, nil, tensor.WithGrad())}
	opt, err := NewSGD([]*nn.Param{p}, SGDConfig{LR: 1})
	require.NoError(t, err)
	sc, err := NewScheduler(opt, LinearWarmup{Steps: 4})
	require.NoError(t, err)
	require.Equal(t, 0.25, opt.LR(), "the first update uses the first warmup rate")
	var lrs []float64
	for _, stepped := range []bool{true, false, false, true, true, false, true, true} {
		sc.Step(stepped)
		lrs = append(lrs, opt.LR())
	}
	require.Equal(t, []float64{0.5, 0.5, 0.5, 0.75, 1, 1, 1, 1}, lrs)
	require.Equal(t, int64(5), sc.StepCount())

	// State round trip into a fresh scheduler on another optimizer.
	st := sc.StateDict()
	p2 := &nn.Param{Name: "w", T: tensor.FromSlice([]float32{1}, nil, tensor.WithGrad())}
	opt2, err := NewSGD([]*nn.Param{p2}, SGDConfig{LR: 7})
	require.NoError(t, err)
	sc2, err := NewScheduler(opt2, LinearWarmup{Steps: 4})
	require.NoError(t, err)
	require.NoError(t, sc2.LoadStateDict(st))
	require.Equal(t, st, sc2.StateDict())
	require.Equal(t, 1.0, sc2.BaseLR())
	require.Equal(t, opt.LR(), opt2.LR())
	require.ErrorIs(t, sc2.LoadStateDict(SchedulerState{Step: -1, BaseLR: 1}), ErrStateMismatch)
}
