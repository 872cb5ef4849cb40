package memory_test

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/memory"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// here returns the caller's "file:line", the form Origin and LiveTensors use.
func here() string {
	_, file, line, _ := runtime.Caller(1)
	return fmt.Sprintf("%s:%d", file, line)
}

func tracking(t *testing.T) {
	tensor.SetDebugTracking(true)
	t.Cleanup(func() { tensor.SetDebugTracking(false) })
}

func groupAt(origin string) (tensor.LiveGroup, bool) {
	for _, g := range tensor.LiveTensors() {
		if g.Origin == origin {
			return g, true
		}
	}
	return tensor.LiveGroup{}, false
}

// The creating line is the user's, even when the tensor is made deep inside nn and
// tensor; closing the step's Context makes its tensors disappear from the report.
func TestLiveTensorsNameTheUsersLine(t *testing.T) {
	tracking(t)
	model, atModel := nn.NewLinear(8, 4, nn.Seeded(1)), here()
	defer func() {
		for _, p := range model.Params() {
			p.T.Release()
		}
	}()
	ctx := tensor.NewContext()
	x := tensor.Randn(tensor.Shape{2, 8}, tensor.WithContext(ctx))
	y, atForward := model.Forward(x), here()
	require.Equal(t, atForward, y.Origin())
	leak, atLeak := tensor.Zeros(tensor.Shape{1000}), here()

	g, ok := groupAt(atModel)
	require.True(t, ok, "parameters made inside nn.NewLinear are attributed to the caller")
	require.Equal(t, 2, g.Count, "weight and bias")
	g, ok = groupAt(atForward)
	require.True(t, ok)
	require.GreaterOrEqual(t, g.Count, 2, "the output and what the graph saved (a view of the weight)")
	g, ok = groupAt(atLeak)
	require.True(t, ok)
	require.Equal(t, int64(4000), g.Bytes)

	var buf bytes.Buffer
	require.NoError(t, memory.WriteLiveTensors(&buf))
	require.Contains(t, buf.String(), "3.91 KiB |     1 | [1000] float32 cpu")
	require.Contains(t, buf.String(), atLeak)

	ctx.Close()
	_, ok = groupAt(atForward)
	require.False(t, ok, "closing the Context released the step's tensors")
	leak.Release()
	_, ok = groupAt(atLeak)
	require.False(t, ok)
}

func TestWriteLiveTensorsSaysHowToTurnTrackingOn(t *testing.T) {
	tensor.SetDebugTracking(false)
	var buf bytes.Buffer
	require.NoError(t, memory.WriteLiveTensors(&buf))
	if len(tensor.LiveTensors()) == 0 {
		require.Contains(t, buf.String(), "tensor.SetDebugTracking(true)")
	}
}

// The classic bug: a running total built from loss tensors keeps every step's graph.
func TestHistoryDetectorCatchesAccumulatedLoss(t *testing.T) {
	tracking(t)
	w := tensor.Randn(tensor.Shape{3, 4}, tensor.WithGrad())
	defer w.Release()
	defer w.ZeroGrad()
	ctx := tensor.NewContext() // one scope for the whole loop, where the bug bites
	defer ctx.Close()

	det := memory.NewHistoryDetector(memory.HistoryOptions{})
	total := tensor.Scalar(0, tensor.WithContext(ctx))
	var warn *memory.Warning
	var at string
	step := 0
	for ; step < 10 && warn == nil; step++ {
		x := tensor.Randn(tensor.Shape{2, 4}, tensor.WithContext(ctx))
		loss := tensor.Linear(x, w, nil).Relu().Sum()
		loss.Backward()
		total, at = tensor.Add(total, loss), here() // wrong: should be a float64 += loss.Item()
		warn = det.Observe(step, total)
	}
	require.NotNil(t, warn)
	require.Equal(t, 2, warn.Step, "three strictly growing observations by default")
	require.Equal(t, 0, warn.Index)
	require.Equal(t, []int{4, 8, 12}, warn.Sizes)
	require.Equal(t, at, warn.Origin, "the warning names the test's line")
	require.Contains(t, warn.String(), at)
	require.Contains(t, warn.String(), "loss.Item()")

	// It does not repeat while the same growth goes on.
	x := tensor.Randn(tensor.Shape{2, 4}, tensor.WithContext(ctx))
	total = tensor.Add(total, tensor.Linear(x, w, nil).Sum())
	require.Nil(t, det.Observe(step, total))
}

func TestHistoryDetectorQuietOnACorrectLoop(t *testing.T) {
	w := tensor.Randn(tensor.Shape{3, 4}, tensor.WithGrad())
	defer w.Release()
	defer w.ZeroGrad()
	det := memory.NewHistoryDetector(memory.HistoryOptions{Steps: 2})
	outer := tensor.NewContext()
	defer outer.Close()
	detached := tensor.Scalar(0, tensor.WithContext(outer))
	total := 0.0
	for step := range 6 {
		x := tensor.Randn(tensor.Shape{2, 4}, tensor.WithContext(outer))
		loss := tensor.Linear(x, w, nil).Relu().Sum()
		loss.Backward()
		total += loss.Item()
		detached = tensor.Add(detached, loss.Detach())
		require.Nil(t, det.Observe(step, loss, detached), "step %d", step)
	}
	require.InDelta(t, total, detached.Item(), 1e-4)
}

func TestHistoryWarningWithoutTracking(t *testing.T) {
	tensor.SetDebugTracking(false)
	ctx := tensor.NewContext()
	defer ctx.Close()
	det := memory.NewHistoryDetector(memory.HistoryOptions{Steps: 2})
	w := tensor.Randn(tensor.Shape{2}, tensor.WithGrad())
	defer w.Release()
	acc := ctx.Bind(w)
	require.Nil(t, det.Observe(0, acc))
	acc = acc.MulScalar(2)
	warn := det.Observe(1, acc)
	require.NotNil(t, warn)
	require.Equal(t, "", warn.Origin)
	require.Contains(t, warn.String(), "tensor.SetDebugTracking(true)")
}
