package profiler

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/tensor"
)

// Every op reports Begin and Forward (ArgMax and comparisons included), and per-Context
// state stays bounded when every step has a Context of its own.
func TestEveryOpRecordedAndStateBounded(t *testing.T) {
	p := New()
	for range 200 {
		ctx := p.Context()
		x := tensor.Randn(tensor.Shape{4, 3}, tensor.WithContext(ctx))
		x.Relu().ArgMax(1)
		tensor.Eq(x, x)
		ctx.Close()
	}
	p.mu.Lock()
	states := len(p.states)
	p.mu.Unlock()
	require.LessOrEqual(t, states, maxStates)
	recs := p.Records()
	count := map[string]int{}
	for _, r := range recs {
		count[r.Op]++
		require.Equal(t, 0, r.Lane)
	}
	require.Equal(t, map[string]int{"relu": 200, "argmax": 200, "compare": 200}, count)
}
