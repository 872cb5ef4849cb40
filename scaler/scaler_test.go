package scaler

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// model is a tiny model built directly from tensors: loss = Σ w·x + Σ b² (+ Σ h² with
// an optional float16 parameter h, cast to float32 first — as autocast does for
// reductions — so the scaled gradient reaching h is 2h·scale, not the scale itself,
// which would overflow float16 at 2^16).
type model struct {
	w, b, h *nn.Param
}

func newModel(withHalf bool) *model {
	m := &model{
		w: &nn.Param{Name: "w", T: tensor.FromSlice([]float32{0.5, -1, 2, 0.25}, tensor.Shape{2, 2}, tensor.WithGrad())},
		b: &nn.Param{Name: "b", T: tensor.FromSlice([]float32{0.1, -0.3}, nil, tensor.WithGrad())},
	}
	if withHalf {
		m.h = &nn.Param{Name: "h", T: tensor.FromSlice([]float32{0.01, -0.02, 0.03}, nil, tensor.WithDType(tensor.Float16), tensor.WithGrad())}
	}
	return m
}

func (m *model) params() []*nn.Param {
	ps := []*nn.Param{m.w, m.b}
	if m.h != nil {
		ps = append(ps, m.h)
	}
	return ps
}

// loss builds the loss inside ctx, times k.
func (m *model) loss(ctx *tensor.Context, k float64) *tensor.Tensor {
	x := tensor.FromSlice([]float32{1, 2, 3, 4}, tensor.Shape{2, 2}, tensor.WithContext(ctx))
	b := ctx.Bind(m.b.T)
	l := ctx.Bind(m.w.T).Mul(x).Sum().Add(b.Mul(b).Sum())
	if m.h != nil {
		h := ctx.Bind(m.h.T).Cast(tensor.Float32)
		l = l.Add(h.Mul(h).Sum())
	}
	return l.MulScalar(k)
}

// backward runs one scaled forward/backward.
func (m *model) backward(sc *GradScaler) {
	ctx := tensor.NewContext()
	defer ctx.Close()
	sc.Scale(m.loss(ctx, 1)).Backward()
}

func sgd(t *testing.T, ps []*nn.Param) *optim.SGD {
	o, err := optim.NewSGD(ps, optim.SGDConfig{LR: 0.01, Momentum: 0.9})
	require.NoError(t, err)
	return o
}

// runScript runs one iteration per entry of script, injecting Inf (odd iterations) or
// NaN (even ones) into b's gradient where the entry is true, and returns the scale
// after each Update.
func runScript(t *testing.T, sc *GradScaler, m *model, opt optim.Optimizer, script []bool) []float64 {
	t.Helper()
	var scales []float64
	for i, bad := range script {
		m.backward(sc)
		if bad {
			v := math.Inf(1)
			if i%2 == 0 {
				v = math.NaN()
			}
			m.b.T.Grad().FillInPlace(v)
		}
		require.Equal(t, !bad, sc.Step(opt), "iteration %d", i+1)
		require.NoError(t, sc.Update())
		scales = append(scales, sc.ScaleValue())
		opt.ZeroGrad()
	}
	return scales
}

const T, F = true, false

func TestTrajectoryPyTorchRule(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GrowthInterval = 3
	sc, err := New(cfg)
	require.NoError(t, err)
	m := newModel(false)
	opt := sgd(t, m.params())
	script := []bool{F, F, F, T, F, F, T, T, F, F, F, F, F, F}
	// PyTorch: growth ×2 after 3 clean steps in a row, backoff ×0.5 at each overflow,
	// the tracker restarting at both.
	want := []float64{65536, 65536, 131072, 65536, 65536, 65536, 32768, 16384, 16384, 16384, 32768, 32768, 32768, 65536}
	require.Equal(t, want, runScript(t, sc, m, opt, script))
	require.Equal(t, want, sc.History())
	require.Equal(t, int64(3), sc.SkippedSteps())
	require.Equal(t, int64(11), opt.StepCount(), "skipped steps do not count")
}

func TestTrajectoryDefaults(t *testing.T) {
	sc, err := New(DefaultConfig())
	require.NoError(t, err)
	require.Equal(t, 65536.0, sc.ScaleValue())
	m := newModel(false)
	opt := sgd(t, m.params())
	require.Equal(t, []float64{65536, 32768, 32768, 32768, 16384}, runScript(t, sc, m, opt, []bool{F, T, F, F, T}))

	// 2000 clean steps in a row double the scale, not 1999.
	clean := make([]bool, 2000)
	scales := runScript(t, sc, m, opt, clean)
	require.Equal(t, 16384.0, scales[1998])
	require.Equal(t, 32768.0, scales[1999])
}

func TestZeroConfigFieldsTakeDefaults(t *testing.T) {
	sc, err := New(Config{})
	require.NoError(t, err)
	require.Equal(t, DefaultConfig(), sc.Config())
}

func TestHysteresis(t *testing.T) {
	t.Run("deepspeed", func(t *testing.T) {
		sc, err := New(Config{GrowthInterval: 3, Hysteresis: 2})
		require.NoError(t, err)
		m := newModel(false)
		opt := sgd(t, m.params())
		script := []bool{T, F, T, T, F, F, F, T, T}
		// The first overflow is tolerated (step skipped, scale kept); the counter is
		// not refilled by clean steps, only by growth, so the next overflows back off.
		want := []float64{65536, 65536, 32768, 16384, 16384, 16384, 32768, 32768, 16384}
		var hyst []int
		for i, bad := range script {
			got := runScript(t, sc, m, opt, []bool{bad})
			require.Equal(t, want[i], got[0], "iteration %d", i+1)
			hyst = append(hyst, sc.StateDict().HysteresisTracker)
		}
		require.Equal(t, []int{1, 1, 0, 0, 0, 0, 2, 1, 0}, hyst)
		require.Equal(t, int64(5), sc.SkippedSteps(), "every overflow skips its step")
	})
	t.Run("consecutive", func(t *testing.T) {
		sc, err := New(Config{GrowthInterval: 3, Hysteresis: 2, ConsecutiveHysteresis: true})
		require.NoError(t, err)
		m := newModel(false)
		opt := sgd(t, m.params())
		// Each clean step refills the counter: only two overflows in a row back off.
		want := []float64{65536, 65536, 65536, 32768, 32768, 32768}
		require.Equal(t, want, runScript(t, sc, m, opt, []bool{T, F, T, T, F, T}))
	})
}

func TestMinMaxScale(t *testing.T) {
	t.Run("min", func(t *testing.T) {
		sc, err := New(Config{GrowthInterval: 3, MinScale: 16384})
		require.NoError(t, err)
		m := newModel(false)
		opt := sgd(t, m.params())
		want := []float64{32768, 16384, 16384, 16384, 16384, 16384, 32768}
		require.Equal(t, want, runScript(t, sc, m, opt, []bool{T, T, T, T, F, F, F}))
		require.Equal(t, int64(2), sc.MinScaleOverflows(), "overflows at the minimum are counted")
		require.Equal(t, int64(4), sc.SkippedSteps(), "and still skipped")
	})
	t.Run("max", func(t *testing.T) {
		sc, err := New(Config{GrowthInterval: 1, MaxScale: 131072})
		require.NoError(t, err)
		m := newModel(false)
		opt := sgd(t, m.params())
		require.Equal(t, []float64{131072, 131072, 131072}, runScript(t, sc, m, opt, []bool{F, F, F}))
	})
	t.Run("never collapses to zero", func(t *testing.T) {
		sc, err := New(Config{InitScale: 0x1p-125})
		require.NoError(t, err)
		m := newModel(false)
		opt := sgd(t, m.params())
		require.Equal(t, []float64{0x1p-126, 0x1p-126, 0x1p-126}, runScript(t, sc, m, opt, []bool{T, T, T}))
		require.Equal(t, int64(2), sc.MinScaleOverflows())
	})
	t.Run("growth past float32 is not kept", func(t *testing.T) {
		sc, err := New(Config{InitScale: 0x1p127, GrowthInterval: 1})
		require.NoError(t, err)
		sc.adapt(false) // any real gradient overflows at this scale: drive the rule directly
		require.Equal(t, 0x1p127, sc.ScaleValue())
		require.Equal(t, 0, sc.StateDict().GrowthTracker)
	})
	t.Run("static", func(t *testing.T) {
		sc, err := New(Config{Static: true, InitScale: 1024, GrowthInterval: 1})
		require.NoError(t, err)
		m := newModel(false)
		opt := sgd(t, m.params())
		require.Equal(t, []float64{1024, 1024, 1024}, runScript(t, sc, m, opt, []bool{F, T, F}))
		require.Equal(t, int64(1), sc.SkippedSteps(), "a static scale still skips non-finite steps")
	})
}

func TestSkipAlarmNamesTheParameter(t *testing.T) {
	sc, err := New(Config{SkipAlarm: 3})
	require.NoError(t, err)
	m := newModel(false)
	opt := sgd(t, m.params())
	iter := func(bad bool) error {
		m.backward(sc)
		if bad {
			m.b.T.Grad().FillInPlace(math.NaN())
		}
		sc.Step(opt)
		defer opt.ZeroGrad()
		return sc.Update()
	}
	require.NoError(t, iter(true))
	require.NoError(t, iter(true))
	err = iter(true)
	require.ErrorIs(t, err, ErrSkipAlarm)
	var alarm *SkipAlarmError
	require.True(t, errors.As(err, &alarm))
	require.Equal(t, []string{"b"}, alarm.Params)
	require.Equal(t, int64(3), alarm.Consecutive)
	require.Equal(t, 8192.0, alarm.Scale)
	require.Contains(t, err.Error(), "non-finite gradients in the last step: b.")
	require.NotContains(t, err.Error(), "w,")
	require.Equal(t, []string{"b"}, sc.NonFiniteParams(opt))

	require.ErrorIs(t, iter(true), ErrSkipAlarm, "it keeps firing while steps keep being skipped")
	require.NoError(t, iter(false))
	require.Equal(t, int64(0), sc.ConsecutiveSkips())
	require.Equal(t, int64(4), sc.SkippedSteps())
}

// rawState captures the bits of the parameters and of the optimizer's state.
func rawState(t *testing.T, ps []*nn.Param, opt optim.Optimizer) (params [][]uint64, state map[string][]uint64, scalars map[string]float64) {
	t.Helper()
	for _, p := range ps {
		params = append(params, bits(p.T))
	}
	s := opt.StateDict()
	defer s.Release()
	state = map[string][]uint64{}
	for k, v := range s.Tensors {
		state[k] = bits(v)
	}
	return params, state, s.Scalars
}

func bits(t *tensor.Tensor) []uint64 {
	var out []uint64
	if t.DType().IsHalf() {
		for _, b := range t.Uint16s() {
			out = append(out, uint64(b))
		}
		return out
	}
	for _, v := range t.Float32s() {
		out = append(out, uint64(math.Float32bits(v)))
	}
	return out
}

func TestSkippedStepLeavesEverythingBitIdentical(t *testing.T) {
	builders := map[string]func([]*nn.Param) (optim.Optimizer, error){
		"sgd-momentum": func(ps []*nn.Param) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.01, Momentum: 0.9, WeightDecay: 1e-4})
		},
		"adamw": func(ps []*nn.Param) (optim.Optimizer, error) { return optim.NewAdamW(ps, optim.DefaultAdamW()) },
	}
	for name, build := range builders {
		for _, inject := range []float64{math.Inf(1), math.Inf(-1), math.NaN()} {
			t.Run(fmt.Sprintf("%s/%g", name, inject), func(t *testing.T) {
				m := newModel(true)
				opt, err := build(m.params())
				require.NoError(t, err)
				sc, err := New(DefaultConfig())
				require.NoError(t, err)
				runScript(t, sc, m, opt, []bool{F, F}) // state exists now
				p0, s0, sc0 := rawState(t, m.params(), opt)
				require.Contains(t, s0, "state.2.master")

				m.backward(sc)
				// One element of the float16 parameter's gradient overflows.
				m.h.T.Grad().CopyFrom(tensor.FromSlice([]float64{1, inject, 1}, nil))
				require.False(t, sc.Step(opt))
				require.True(t, sc.FoundInf(opt))
				require.Equal(t, []string{"h"}, sc.NonFiniteParams(opt))
				require.NoError(t, sc.Update())
				opt.ZeroGrad()

				p1, s1, sc1 := rawState(t, m.params(), opt)
				require.Equal(t, p0, p1, "parameters")
				require.Equal(t, s0, s1, "moments and masters")
				require.Equal(t, sc0, sc1, "step counters and hyper-parameters")
				require.Equal(t, int64(2), opt.StepCount())
				require.Equal(t, 32768.0, sc.ScaleValue())
			})
		}
	}
}

func TestStageMachine(t *testing.T) {
	setup := func() (*GradScaler, *model, *optim.SGD) {
		sc, err := New(DefaultConfig())
		require.NoError(t, err)
		m := newModel(false)
		opt := sgd(t, m.params())
		m.backward(sc)
		return sc, m, opt
	}
	t.Run("unscale twice", func(t *testing.T) {
		sc, _, opt := setup()
		sc.Unscale(opt)
		require.PanicsWithError(t, "scaler: Unscale already called on this optimizer since the last Update: call it once, after backward and before clipping", func() { sc.Unscale(opt) })
	})
	t.Run("unscale after step", func(t *testing.T) {
		sc, _, opt := setup()
		sc.Step(opt)
		require.PanicsWithError(t, "scaler: Unscale called after Step on this optimizer: Step unscales by itself; call Unscale (if at all) before Step, once per Update", func() { sc.Unscale(opt) })
	})
	t.Run("step twice", func(t *testing.T) {
		sc, _, opt := setup()
		sc.Unscale(opt)
		sc.Step(opt)
		require.PanicsWithError(t, "scaler: Step already called on this optimizer since the last Update: step each optimizer once, then call Update", func() { sc.Step(opt) })
	})
	t.Run("update with nothing recorded", func(t *testing.T) {
		sc, _, _ := setup()
		require.PanicsWithError(t, "scaler: Update called but no optimizer was unscaled or stepped since the last Update: call Step for each optimizer first (with gradient accumulation, only at the end of the window)", func() { _ = sc.Update() })
	})
	t.Run("update resets", func(t *testing.T) {
		sc, m, opt := setup()
		sc.Unscale(opt)
		require.True(t, sc.Step(opt))
		require.NoError(t, sc.Update())
		opt.ZeroGrad()
		m.backward(sc)
		sc.Unscale(opt)
		require.True(t, sc.Step(opt))
		require.NoError(t, sc.Update())
	})
	t.Run("half master gradients are refused", func(t *testing.T) {
		sc, err := New(DefaultConfig())
		require.NoError(t, err)
		p := &nn.Param{Name: "h", T: tensor.FromSlice([]float32{1}, nil, tensor.WithDType(tensor.Float16), tensor.WithGrad())}
		p.T.SetGrad(tensor.FromSlice([]float32{1}, nil, tensor.WithDType(tensor.Float16)))
		var me *MisuseError
		func() {
			defer func() { me, _ = recover().(*MisuseError) }()
			sc.Unscale(halfGradOptimizer{p})
		}()
		require.NotNil(t, me)
		require.Contains(t, me.Error(), "attempting to unscale float16 gradients (h)")
	})
}

// halfGradOptimizer is a broken optimizer that hands out half gradients.
type halfGradOptimizer struct{ p *nn.Param }

func (o halfGradOptimizer) Params() []*nn.Param               { return []*nn.Param{o.p} }
func (o halfGradOptimizer) MasterGrads() []*tensor.Tensor     { return []*tensor.Tensor{o.p.T.Grad()} }
func (o halfGradOptimizer) Step()                             {}
func (o halfGradOptimizer) ZeroGrad()                         {}
func (o halfGradOptimizer) LR() float64                       { return 0 }
func (o halfGradOptimizer) SetLR(float64)                     {}
func (o halfGradOptimizer) StepCount() int64                  { return 0 }
func (o halfGradOptimizer) StateDict() optim.State            { return optim.State{} }
func (o halfGradOptimizer) LoadStateDict(s optim.State) error { return nil }

// unscaledGrads runs an unscaled backward of loss×k on a copy of m's parameters and
// returns the gradients, as the reference for what Unscale must produce.
func unscaledGrads(t *testing.T, m *model, ks ...float64) [][]float64 {
	ref := &model{
		w: &nn.Param{Name: "w", T: tensor.Zeros(m.w.T.Shape(), tensor.WithGrad()).CopyFrom(m.w.T)},
		b: &nn.Param{Name: "b", T: tensor.Zeros(m.b.T.Shape(), tensor.WithGrad()).CopyFrom(m.b.T)},
	}
	for _, k := range ks {
		ctx := tensor.NewContext()
		ref.loss(ctx, k).Backward()
		ctx.Close()
	}
	return [][]float64{ref.w.T.Grad().Float64s(), ref.b.T.Grad().Float64s()}
}

func grads(opt optim.Optimizer) [][]float64 {
	var out [][]float64
	for _, g := range opt.MasterGrads() {
		out = append(out, g.Float64s())
	}
	return out
}

func TestRecipes(t *testing.T) {
	t.Run("unscale then clip", func(t *testing.T) {
		sc, err := New(DefaultConfig())
		require.NoError(t, err)
		m := newModel(false)
		opt := sgd(t, m.params())
		want := unscaledGrads(t, m, 1)
		m.backward(sc)
		require.Equal(t, 65536.0, m.b.T.Grad().Float64s()[0]/want[1][0], "gradients are scaled after backward")
		sc.Unscale(opt)
		require.Equal(t, want, grads(opt), "unscaled exactly (the scale is a power of two)")
		var sq float64
		for _, g := range want {
			for _, v := range g {
				sq += v * v
			}
		}
		require.InDelta(t, math.Sqrt(sq), optim.ClipGradNorm(opt.MasterGrads(), 1, 2), 1e-6)
		require.True(t, sc.Step(opt))
		require.NoError(t, sc.Update())
	})
	t.Run("several optimizers", func(t *testing.T) {
		sc, err := New(Config{GrowthInterval: 2})
		require.NoError(t, err)
		m := newModel(false)
		optW := sgd(t, []*nn.Param{m.w})
		optB := sgd(t, []*nn.Param{m.b})
		m.backward(sc)
		m.b.T.Grad().FillInPlace(math.Inf(1))
		require.True(t, sc.Step(optW), "w's gradients are finite: its optimizer steps, as in PyTorch")
		require.False(t, sc.Step(optB))
		require.NoError(t, sc.Update())
		require.Equal(t, 32768.0, sc.ScaleValue(), "one Update backs off once")
		require.Equal(t, int64(1), sc.SkippedSteps())
		require.False(t, sc.FoundInf(optW))
		require.True(t, sc.FoundInf(optB))
		require.Equal(t, []string{"b"}, sc.NonFiniteParams(optB))
		require.Equal(t, int64(1), optW.StepCount())
		require.Equal(t, int64(0), optB.StepCount())
		optW.ZeroGrad()
		optB.ZeroGrad()

		m.backward(sc)
		require.True(t, sc.Step(optW))
		require.True(t, sc.Step(optB))
		require.NoError(t, sc.Update())
		require.Equal(t, 32768.0, sc.ScaleValue())
	})
	t.Run("accumulation", func(t *testing.T) {
		sc, err := New(Config{GrowthInterval: 1})
		require.NoError(t, err)
		m := newModel(false)
		opt := sgd(t, m.params())
		const micro = 4
		want := unscaledGrads(t, m, 0.25, 0.25, 0.25, 0.25)
		for range micro {
			require.Equal(t, 65536.0, sc.ScaleValue(), "the scale is constant through the window")
			ctx := tensor.NewContext()
			sc.Scale(m.loss(ctx, 1.0/micro)).Backward()
			ctx.Close()
		}
		sc.Unscale(opt)
		require.Equal(t, want, grads(opt))
		require.True(t, sc.Step(opt))
		require.NoError(t, sc.Update())
		require.Equal(t, 131072.0, sc.ScaleValue(), "one Update per window")
	})
	t.Run("half loss is scaled in float32", func(t *testing.T) {
		sc, err := New(DefaultConfig())
		require.NoError(t, err)
		l := tensor.FromSlice([]float32{2}, nil, tensor.WithDType(tensor.Float16))
		s := sc.Scale(l)
		require.Equal(t, tensor.Float32, s.DType())
		require.Equal(t, 131072.0, s.Item(), "would overflow float16")
	})
}

func TestSeveralLossesGradients(t *testing.T) {
	sc, err := New(DefaultConfig())
	require.NoError(t, err)
	m := newModel(false)
	opt := sgd(t, m.params())
	want := unscaledGrads(t, m, 1, 3)
	for _, k := range []float64{1, 3} {
		ctx := tensor.NewContext()
		sc.Scale(m.loss(ctx, k)).Backward()
		ctx.Close()
	}
	sc.Unscale(opt)
	require.Equal(t, want, grads(opt))
}

func TestBFloat16DisablesTheScaler(t *testing.T) {
	for _, low := range []tensor.DType{tensor.BFloat16, tensor.Float32} {
		sc, err := NewFor(low, DefaultConfig())
		require.NoError(t, err)
		require.False(t, sc.Enabled())
		require.Equal(t, 1.0, sc.ScaleValue())
		m := newModel(false)
		opt := sgd(t, m.params())
		ctx := tensor.NewContext()
		l := m.loss(ctx, 1)
		require.Same(t, l, sc.Scale(l), "Scale returns the loss itself")
		l.Backward()
		ctx.Close()
		before := [][]uint64{bits(m.w.T.Grad()), bits(m.b.T.Grad())}
		sc.Unscale(opt)
		sc.Unscale(opt) // no stage machine either: nothing to misuse
		require.Equal(t, before, [][]uint64{bits(m.w.T.Grad()), bits(m.b.T.Grad())}, "Unscale does nothing")
		require.True(t, sc.Step(opt))
		require.NoError(t, sc.Update())
		require.Equal(t, int64(1), opt.StepCount())
		require.Empty(t, sc.History())
		require.Equal(t, int64(0), sc.SkippedSteps())
	}
	require.True(t, Needed(tensor.Float16))
	require.False(t, Needed(tensor.BFloat16))
	require.False(t, Needed(tensor.Float32))
	sc, err := New(Config{}) // New scales bfloat16 training anyway
	require.NoError(t, err)
	require.True(t, sc.Enabled())
	sc, err = NewFor(tensor.Float16, DefaultConfig())
	require.NoError(t, err)
	require.True(t, sc.Enabled())
	_, err = NewFor(tensor.Int32, DefaultConfig())
	require.ErrorIs(t, err, ErrConfig)
}

func TestBadConfigs(t *testing.T) {
	with := func(f func(*Config)) Config {
		c := DefaultConfig()
		f(&c)
		return c
	}
	for _, c := range []Config{
		with(func(c *Config) { c.GrowthFactor = 1 }),
		with(func(c *Config) { c.GrowthFactor = 0.5 }),
		with(func(c *Config) { c.GrowthFactor = math.Inf(1) }),
		with(func(c *Config) { c.BackoffFactor = 1 }),
		with(func(c *Config) { c.BackoffFactor = -0.5 }),
		with(func(c *Config) { c.BackoffFactor = 1.5 }),
		with(func(c *Config) { c.GrowthInterval = -1 }),
		with(func(c *Config) { c.InitScale = -1 }),
		with(func(c *Config) { c.InitScale = math.NaN() }),
		with(func(c *Config) { c.InitScale = 1e39 }),
		with(func(c *Config) { c.MinScale = -1 }),
		with(func(c *Config) { c.MinScale = 4; c.MaxScale = 2 }),
		with(func(c *Config) { c.MaxScale = 1024 }), // below InitScale
		with(func(c *Config) { c.MinScale = 1e6 }),  // above InitScale
		with(func(c *Config) { c.Hysteresis = -2 }),
		with(func(c *Config) { c.SkipAlarm = -1 }),
	} {
		_, err := New(c)
		require.ErrorIs(t, err, ErrConfig, "%+v", c)
	}
	sc, err := New(Config{Disabled: true, GrowthFactor: 0.5})
	require.NoError(t, err, "a disabled scaler ignores the rest of its Config")
	require.False(t, sc.Enabled())
}

func TestStateRoundTrip(t *testing.T) {
	cfg := Config{GrowthInterval: 3, Hysteresis: 2, MinScale: 1, MaxScale: 1 << 24, SkipAlarm: 100}
	a, err := New(cfg)
	require.NoError(t, err)
	m := newModel(false)
	opt := sgd(t, m.params())
	runScript(t, a, m, opt, []bool{F, T, F, T, T, F, F})

	raw, err := json.Marshal(a.StateDict())
	require.NoError(t, err)
	var st State
	require.NoError(t, json.Unmarshal(raw, &st))
	require.Equal(t, a.StateDict(), st)

	b, err := New(DefaultConfig())
	require.NoError(t, err)
	require.NoError(t, b.LoadStateDict(st))
	require.Equal(t, a.StateDict(), b.StateDict())
	require.Equal(t, a.Config(), b.Config())

	// Both continue along the same trajectory.
	m2 := newModel(false)
	opt2 := sgd(t, m2.params())
	script := []bool{F, F, T, F, F, F, T, T, T}
	require.Equal(t, runScript(t, a, m, opt, script), runScript(t, b, m2, opt2, script))
	require.Equal(t, a.StateDict(), b.StateDict())

	// Bad states are refused and change nothing.
	good := b.StateDict()
	for _, bad := range []func(*State){
		func(s *State) { s.Scale = math.NaN() },
		func(s *State) { s.Scale = 0 },
		func(s *State) { s.Scale = 1 << 25 }, // above MaxScale
		func(s *State) { s.GrowthTracker = 3 },
		func(s *State) { s.HysteresisTracker = 3 },
		func(s *State) { s.ConsecutiveSkips = s.SkippedSteps + 1 },
		func(s *State) { s.Config.Disabled = true },
		func(s *State) { s.Config.BackoffFactor = 2 },
	} {
		s := good
		bad(&s)
		require.ErrorIs(t, b.LoadStateDict(s), ErrConfig)
		require.Equal(t, good, b.StateDict())
	}

	// A disabled scaler ignores a state.
	d, err := New(Config{Disabled: true})
	require.NoError(t, err)
	require.NoError(t, d.LoadStateDict(good))
	require.Equal(t, 1.0, d.ScaleValue())
}

func TestHistoryIsBounded(t *testing.T) {
	sc, err := New(Config{GrowthInterval: 1 << 30})
	require.NoError(t, err)
	for i := range HistoryLen + 5 {
		sc.record(float64(i))
	}
	h := sc.History()
	require.Len(t, h, HistoryLen)
	require.Equal(t, 5.0, h[0])
	require.Equal(t, float64(HistoryLen+4), h[len(h)-1])
}

// A state saved before Disabled replaced Enabled ("enabled", "force_enabled") still
// loads, and is written back in the new form.
func TestLoadOldFormatState(t *testing.T) {
	old := `{"scale":32768,"growth_tracker":1,"hysteresis_tracker":2,"consecutive_skips":0,"skipped_steps":1,"min_scale_overflows":0,"updates":4,` +
		`"config":{"init_scale":65536,"growth_factor":2,"backoff_factor":0.5,"growth_interval":3,"min_scale":0,"max_scale":0,"hysteresis":2,` +
		`"consecutive_hysteresis":false,"skip_alarm":0,"enabled":true,"static":false,"force_enabled":false}}`
	var st State
	require.NoError(t, json.Unmarshal([]byte(old), &st))
	require.False(t, st.Config.Disabled)
	sc, err := New(Config{})
	require.NoError(t, err)
	require.NoError(t, sc.LoadStateDict(st))
	require.Equal(t, 32768.0, sc.ScaleValue())
	require.Equal(t, 3, sc.Config().GrowthInterval)
	raw, err := json.Marshal(sc.StateDict())
	require.NoError(t, err)
	require.Contains(t, string(raw), `"disabled":false`)
	require.NotContains(t, string(raw), `"enabled"`)

	var off State
	require.NoError(t, json.Unmarshal([]byte(`{"scale":1,"config":{"enabled":false,"force_enabled":false}}`), &off))
	require.True(t, off.Config.Disabled)
	require.ErrorIs(t, sc.LoadStateDict(off), ErrConfig, "saved from a disabled scaler")

	// The new field wins over the old one; neither means enabled (the zero Config).
	var c Config
	require.NoError(t, json.Unmarshal([]byte(`{"enabled":true,"disabled":true}`), &c))
	require.True(t, c.Disabled)
	c = Config{}
	require.NoError(t, json.Unmarshal([]byte(`{"growth_interval":7}`), &c))
	require.Equal(t, Config{GrowthInterval: 7}, c)
}
