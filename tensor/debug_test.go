package tensor

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

func here() string {
	_, file, line, _ := runtime.Caller(1)
	return fmt.Sprintf("%s:%d", file, line)
}

func liveAt(origin string) int {
	n := 0
	for _, g := range LiveTensors() {
		if g.Origin == origin {
			n += g.Count
		}
	}
	return n
}

// The creating line is the caller's, however deep inside the package the tensor is
// allocated (an op, a view, FromSlice's move under a Context).
func TestOriginIsTheCallersLine(t *testing.T) {
	SetDebugTracking(true)
	defer SetDebugTracking(false)
	require.True(t, DebugTracking())
	ctx := NewContext()
	x, atX := FromSlice([]float32{1, -2, 3}, nil, WithContext(ctx)), here()
	y, atY := x.Relu().Reshape(3, 1), here()
	require.Equal(t, atX, x.Origin())
	require.Equal(t, atY, y.Origin())
	require.Equal(t, 1, liveAt(atX))
	require.Equal(t, 2, liveAt(atY), "relu's output and the reshaped view")
	ctx.Close()
	require.Zero(t, liveAt(atX))
	require.Zero(t, liveAt(atY))

	SetDebugTracking(false)
	z := Zeros(Shape{2})
	defer z.Release()
	require.Empty(t, z.Origin())
}

// Tracking does not keep an untracked tensor alive: once the GC collects it, it is no
// longer reported.
func TestLiveTensorsForgetCollectedTensors(t *testing.T) {
	SetDebugTracking(true)
	defer SetDebugTracking(false)
	var at string
	func() {
		_, at = Zeros(Shape{16}), here()
	}()
	runtime.GC()
	runtime.GC()
	require.Zero(t, liveAt(at))
}

func TestInternalFrame(t *testing.T) {
	for _, c := range []struct {
		fn, file string
		internal bool
	}{
		{gampPrefix + "tensor.allocTensor", "/src/gamp/tensor/tensor.go", true},
		{gampPrefix + "nn.(*Linear).Forward", "/src/gamp/nn/linear.go", true},
		{gampPrefix + "amp.(*Trainer).Step", "/src/gamp/amp/trainer.go", true},
		{gampPrefix + "memory.FindExecutableBatchSize", "/src/gamp/memory/batch.go", true},
		{"runtime.goexit", "/usr/local/go/src/runtime/asm_amd64.s", true},
		{gampPrefix + "nn.TestLinear", "/src/gamp/nn/linear_test.go", false},
		{gampPrefix + "tensor_test.Example", "/src/gamp/tensor/example_test.go", false},
		{"main.main", "/src/gamp/examples/fashion/main.go", false},
		{"example.com/user/train.Step", "/home/u/train/step.go", false},
	} {
		require.Equal(t, c.internal, internalFrame(runtime.Frame{Function: c.fn, File: c.file}), c.fn)
	}
	require.Equal(t, "github.com/gamp-ml/gamp/", gampPrefix)
}
