package optim

import (
	"math"
	"testing"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// mixedParams returns a float16 and a float32 parameter (masters and in-place updates
// both exercised).
func mixedParams() []*nn.Param {
	ps := makeParams(tensor.Float32)
	ps[0].T = tensor.FromSlice(initValues(0, testShapes[0]), testShapes[0], tensor.WithDType(tensor.Float16), tensor.WithGrad())
	return ps
}

// cloneParams returns parameters holding the same values as ps (what restoring the
// model from its own state dict gives).
func cloneParams(ps []*nn.Param) []*nn.Param {
	var out []*nn.Param
	for _, p := range ps {
		t := tensor.Zeros(p.T.Shape(), tensor.WithDType(p.T.DType()), tensor.WithGrad()).CopyFrom(p.T)
		out = append(out, &nn.Param{Name: p.Name, T: t})
	}
	return out
}

var stateBuilders = map[string]func([]*nn.Param) (Optimizer, error){
	"sgd-nesterov": func(ps []*nn.Param) (Optimizer, error) {
		return NewSGD(ps, SGDConfig{LR: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-3})
	},
	"adam-amsgrad": func(ps []*nn.Param) (Optimizer, error) {
		c := DefaultAdam()
		c.AMSGrad = true
		return NewAdam(ps, c)
	},
	"adamw": func(ps []*nn.Param) (Optimizer, error) { return NewAdamW(ps, DefaultAdamW()) },
}

func TestStateDictRoundTripBitIdentical(t *testing.T) {
	for name, build := range stateBuilders {
		t.Run(name, func(t *testing.T) {
			ps := mixedParams()
			a, err := build(ps)
			require.NoError(t, err)
			for k := 1; k <= 3; k++ {
				setGrads(ps, k)
				a.Step()
				a.ZeroGrad()
			}
			a.SetLR(0.0123)
			sa := a.StateDict()
			defer sa.Release()

			ps2 := cloneParams(ps)
			b, err := build(ps2)
			require.NoError(t, err)
			require.NoError(t, b.LoadStateDict(sa))
			sb := b.StateDict()
			defer sb.Release()
			requireStateEqual(t, sa, sb)
			require.Equal(t, a.StepCount(), b.StepCount())
			require.Equal(t, 0.0123, b.LR())

			// Both continue identically.
			for k := 4; k <= 5; k++ {
				setGrads(ps, k)
				setGrads(ps2, k)
				a.Step()
				b.Step()
				for i := range ps {
					require.Equal(t, bits(ps[i].T), bits(ps2[i].T), "step %d param %d", k, i)
				}
			}
			s4a, s4b := a.StateDict(), b.StateDict()
			requireStateEqual(t, s4a, s4b)
			s4a.Release()
			s4b.Release()
		})
	}
}

// TestStateDictIsASnapshot checks that a state taken earlier does not change when the
// optimizer keeps training.
func TestStateDictIsASnapshot(t *testing.T) {
	ps := mixedParams()
	opt, err := NewAdamW(ps, DefaultAdamW())
	require.NoError(t, err)
	setGrads(ps, 1)
	opt.Step()
	s := opt.StateDict()
	before := bits(s.Tensors["state.0.exp_avg"])
	opt.Step()
	require.Equal(t, before, bits(s.Tensors["state.0.exp_avg"]))
	require.Contains(t, s.Tensors, "state.0.master")
	require.NotContains(t, s.Tensors, "state.1.master", "float32 parameters have no master")
}

func TestLoadStateDictMismatch(t *testing.T) {
	trained := func(build func([]*nn.Param) (Optimizer, error)) State {
		ps := mixedParams()
		o, err := build(ps)
		require.NoError(t, err)
		setGrads(ps, 1)
		o.Step()
		return o.StateDict()
	}
	sgdState := trained(stateBuilders["sgd-nesterov"])
	adamState := trained(stateBuilders["adam-amsgrad"])
	adamwState := trained(stateBuilders["adamw"])

	cases := []struct {
		name  string
		build func([]*nn.Param) (Optimizer, error)
		ps    func() []*nn.Param
		state func() State
		want  error
	}{
		{"adam state into sgd", stateBuilders["sgd-nesterov"], mixedParams, func() State { return adamState }, ErrStateMismatch},
		{"sgd state into adam", stateBuilders["adam-amsgrad"], mixedParams, func() State { return sgdState }, ErrStateMismatch},
		{"adam state into adamw", stateBuilders["adamw"], mixedParams, func() State { return adamState }, ErrStateMismatch},
		{"fewer params", stateBuilders["adamw"], func() []*nn.Param { return mixedParams()[:1] }, func() State { return adamwState }, ErrStateMismatch},
		{"other shape", stateBuilders["adamw"], func() []*nn.Param {
			ps := mixedParams()
			ps[1].T = tensor.Zeros(tensor.Shape{5}, tensor.WithGrad())
			return ps
		}, func() State { return adamwState }, ErrStateMismatch},
		{"master for a float32 param", stateBuilders["adamw"], func() []*nn.Param { return makeParams(tensor.Float32) }, func() State { return adamwState }, ErrStateMismatch},
		{"unknown key", stateBuilders["sgd-nesterov"], mixedParams, func() State {
			s := State{Scalars: sgdState.Scalars, Tensors: map[string]*tensor.Tensor{"state.9.momentum_buffer": sgdState.Tensors["state.0.momentum_buffer"]}}
			return s
		}, ErrStateMismatch},
		{"bad hyper-parameter", stateBuilders["sgd-nesterov"], mixedParams, func() State {
			sc := map[string]float64{}
			for k, v := range sgdState.Scalars {
				sc[k] = v
			}
			sc["lr"] = -1
			return State{Scalars: sc, Tensors: sgdState.Tensors}
		}, ErrConfig},
		{"incomplete adam state", stateBuilders["adamw"], mixedParams, func() State {
			ts := map[string]*tensor.Tensor{}
			for k, v := range adamwState.Tensors {
				if k != "state.1.exp_avg_sq" {
					ts[k] = v
				}
			}
			return State{Scalars: adamwState.Scalars, Tensors: ts}
		}, ErrStateMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := c.ps()
			o, err := c.build(ps)
			require.NoError(t, err)
			setGrads(ps, 2)
			o.Step()
			before := o.StateDict()
			defer before.Release()
			err = o.LoadStateDict(c.state())
			require.ErrorIs(t, err, c.want)
			after := o.StateDict()
			defer after.Release()
			requireStateEqual(t, before, after) // nothing changed
		})
	}
}

func TestBadConfigs(t *testing.T) {
	ps := func() []*nn.Param { return makeParams(tensor.Float32) }
	nan := math.NaN()
	sgd := []SGDConfig{
		{LR: -0.1},
		{LR: nan},
		{LR: math.Inf(1)},
		{LR: 0.1, Momentum: -0.9},
		{LR: 0.1, WeightDecay: -1},
		{LR: 0.1, Nesterov: true},
		{LR: 0.1, Nesterov: true, Momentum: 0.9, Dampening: 0.1},
		{LR: 0.1, Momentum: 0.9, Dampening: nan},
	}
	for _, c := range sgd {
		_, err := NewSGD(ps(), c)
		require.ErrorIs(t, err, ErrConfig, "%+v", c)
	}
	adam := func(f func(*AdamConfig)) AdamConfig {
		c := DefaultAdam()
		f(&c)
		return c
	}
	for _, c := range []AdamConfig{
		adam(func(c *AdamConfig) { c.LR = -1 }),
		adam(func(c *AdamConfig) { c.Beta1 = 1 }),
		adam(func(c *AdamConfig) { c.Beta1 = -0.1 }),
		adam(func(c *AdamConfig) { c.Beta2 = 1 }),
		adam(func(c *AdamConfig) { c.Beta2 = nan }),
		adam(func(c *AdamConfig) { c.Eps = -1e-8 }),
		adam(func(c *AdamConfig) { c.Eps = math.Inf(1) }),
		adam(func(c *AdamConfig) { c.WeightDecay = -0.01 }),
	} {
		_, err := NewAdam(ps(), c)
		require.ErrorIs(t, err, ErrConfig, "%+v", c)
		_, err = NewAdamW(ps(), c)
		require.ErrorIs(t, err, ErrConfig, "%+v", c)
	}
	// Bad parameter lists.
	p := ps()
	for _, list := range [][]*nn.Param{
		nil,
		{p[0], p[0]},
		{{Name: "nil"}},
		{{Name: "buf", T: tensor.Zeros(tensor.Shape{1}), Buffer: true}},
		{{Name: "int", T: tensor.Zeros(tensor.Shape{1}, tensor.WithDType(tensor.Int64))}},
	} {
		_, err := NewSGD(list, SGDConfig{LR: 0.1})
		require.ErrorIs(t, err, ErrConfig)
	}
	// SetLR misuse panics.
	o, err := NewSGD(ps(), SGDConfig{LR: 0.1})
	require.NoError(t, err)
	require.Panics(t, func() { o.SetLR(-1) })
}
