package profiler_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/profiler"
	"github.com/gamp-ml/gamp/tensor"
)

// Grouped by shape, each linear layer of the MLP gets its own forward and backward row,
// the backward keyed by its forward's input shapes, so a layer's two passes line up.
func TestRowsByShape(t *testing.T) {
	p := profiledStep(t)
	recs := p.Records()

	first := []tensor.Shape{{8, 16}, {32, 16}, {32}}
	second := []tensor.Shape{{8, 32}, {10, 32}, {10}}
	got := map[string]profiler.Row{}
	calls := 0
	for _, r := range p.RowsGrouped(profiler.Grouping{Shapes: true}) {
		calls += r.Calls
		require.NotNil(t, r.Shapes, "%s %s", r.Op, r.Pass)
		if r.Op == "linear" {
			got[r.Pass.String()+" "+r.ShapesString()] = r
		}
	}
	require.Equal(t, len(recs), calls, "every record in one row")
	require.Len(t, got, 4, "two layers, two passes: %v", got)
	for _, pass := range []string{"forward", "backward"} {
		for _, sh := range []string{"[[8, 16], [32, 16], [32]]", "[[8, 32], [10, 32], [10]]"} {
			r, ok := got[pass+" "+sh]
			require.True(t, ok, "row %s %s", pass, sh)
			require.Equal(t, 1, r.Calls)
		}
	}
	require.Equal(t, first, got["backward [[8, 16], [32, 16], [32]]"].Shapes)
	require.Equal(t, second, got["forward [[8, 32], [10, 32], [10]]"].Shapes)

	// Without the grouping rows carry no shapes, and the layers share a row.
	for _, r := range p.Rows(false) {
		require.Nil(t, r.Shapes)
		require.Empty(t, r.ShapesString())
		if r.Op == "linear" {
			require.Equal(t, 2, r.Calls)
		}
	}

	var tbl bytes.Buffer
	require.NoError(t, p.Table(&tbl, profiler.ByShape(), profiler.ByDType()))
	out := tbl.String()
	require.Contains(t, out, "Input Shapes")
	require.Contains(t, out, "[[8, 16], [32, 16], [32]]")
	for _, line := range strings.Split(out, "\n") {
		require.Equal(t, strings.TrimRight(line, " "), line, "no trailing blanks")
	}
	var plain bytes.Buffer
	require.NoError(t, p.Table(&plain))
	require.NotContains(t, plain.String(), "Input Shapes")
}

// A backward whose forward was not recorded (the profiler was reset in between) goes
// by its incoming gradient's shape.
func TestRowsByShapeWithoutForward(t *testing.T) {
	m := newMLP(t)
	p := profiler.New()
	ctx := p.Context()
	x := tensor.Randn(tensor.Shape{8, 16}, tensor.WithContext(ctx))
	out := tensor.Linear(x, m.w1, m.b1).Sum()
	p.Reset()
	out.Backward()
	ctx.Close()
	var lin []profiler.Row
	for _, r := range p.RowsGrouped(profiler.Grouping{Shapes: true}) {
		if r.Op == "linear" {
			lin = append(lin, r)
		}
	}
	require.Len(t, lin, 1)
	require.Equal(t, profiler.Backward, lin[0].Pass)
	require.Equal(t, []tensor.Shape{{8, 32}}, lin[0].Shapes, "the incoming gradient's shape")
}
