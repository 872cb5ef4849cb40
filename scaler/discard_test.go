package scaler

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// DiscardIteration undoes Unscale and Step's bookkeeping and nothing else: the
// optimizer can be unscaled again, Update has nothing to adapt, and the scale and
// counters are those before the discarded iteration.
func TestDiscardIterationStartsAFreshIteration(t *testing.T) {
	sc, err := New(DefaultConfig())
	require.NoError(t, err)
	m := newModel(true)
	opt := sgd(t, m.params())
	before := sc.StateDict()

	m.backward(sc)
	sc.Unscale(opt)
	sc.DiscardIteration()
	require.Equal(t, before, sc.StateDict())
	require.Panics(t, func() { _ = sc.Update() }, "nothing recorded after a discard")
	opt.ZeroGrad()

	m.backward(sc)
	require.NotPanics(t, func() { sc.Unscale(opt) }, "a discarded Unscale does not count")
	require.True(t, sc.Step(opt))
	require.NoError(t, sc.Update())
	require.Equal(t, before.Updates+1, sc.StateDict().Updates)
}
