package parallel_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/memory"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// Logical CPU devices used by this package's tests. Each test that checks memory
// statistics keeps to devices no other test touches, so nothing another test left to
// the GC disturbs them:
//
//	20–21 Transformer under DataParallel    22–23 Example
//	30–35 DataParallel vs one device        36–38 memory baseline
//	39–40 autocast in replicas              41–46 two concurrent DataParallels
//	47–48 device misuse                     49–51 Pipeline vs one device
//	52–53 BatchNorm statistics              55, 62–63 Pipeline input gradient, memory
//	56–58 input gradient                    59–61 Pipeline under amp
func cpu(i int) tensor.Device { return tensor.CPUDevice(i) }

func cpus(is ...int) []tensor.Device {
	ds := make([]tensor.Device, len(is))
	for k, i := range is {
		ds[k] = cpu(i)
	}
	return ds
}

const (
	inDim, hidden, classes = 8, 16, 4
	batch                  = 11 // uneven over 2 and 3 devices and over 4 micro-batches
)

// mlp returns the test network (Flatten, Linear, ReLU, Linear) with weights drawn
// from seed, on dev.
func mlp(seed uint64, dev tensor.Device) *nn.Sequential {
	m := models.MLP(inDim, []int{hidden}, classes, nn.Seeded(seed))
	nn.To(m, dev)
	return m
}

// wave returns n deterministic values in [-scale, scale].
func wave(n int, scale, phase float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * math.Sin(0.7*float64(i)+phase) * math.Cos(0.13*float64(i)))
	}
	return v
}

// batchOn returns the test batch — inputs [batch, inDim] and class labels — on dev,
// outside any Context (the caller releases them).
func batchOn(dev tensor.Device, step int) (x, y *tensor.Tensor) {
	return inputOn(dev, step), targetsOn(dev, step)
}

// inputOn returns the inputs of the test batch of step on dev.
func inputOn(dev tensor.Device, step int) *tensor.Tensor {
	return tensor.FromSlice(wave(batch*inDim, 2, float64(step)), tensor.Shape{batch, inDim}, tensor.WithDevice(dev))
}

// targetsOn returns the class labels of the test batch of step on dev.
func targetsOn(dev tensor.Device, step int) *tensor.Tensor {
	labels := make([]int64, batch)
	for i := range labels {
		labels[i] = int64((i*7 + step) % classes)
	}
	return tensor.FromSlice(labels, tensor.Shape{batch}, tensor.WithDevice(dev))
}

func crossEntropy(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }

// weights returns every parameter's values, in order.
func weights(m nn.Module) [][]float64 {
	var ws [][]float64
	for _, p := range m.Params() {
		ws = append(ws, p.T.Float64s())
	}
	return ws
}

// requireClose checks got against want with a tolerance relative to the size of
// each weight tensor (max |want|), so that near-zero entries do not dominate.
func requireClose(t *testing.T, want, got [][]float64, tol float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for k := range want {
		require.Len(t, got[k], len(want[k]), msg)
		scale := 0.0
		for _, v := range want[k] {
			scale = max(scale, math.Abs(v))
		}
		for i := range want[k] {
			if d := math.Abs(want[k][i] - got[k][i]); d > tol*scale {
				require.Failf(t, "weights differ", "%s: parameter %d element %d: want %g, got %g (|diff| %g > %g·%g)", msg, k, i, want[k][i], got[k][i], d, tol, scale)
			}
		}
	}
}

// maxRelDiff is the largest |want-got| / max|want| over the parameters.
func maxRelDiff(want, got [][]float64) float64 {
	worst := 0.0
	for k := range want {
		scale := 0.0
		for _, v := range want[k] {
			scale = max(scale, math.Abs(v))
		}
		for i := range want[k] {
			worst = max(worst, math.Abs(want[k][i]-got[k][i])/scale)
		}
	}
	return worst
}

func allocated(t *testing.T, dev tensor.Device) int64 {
	t.Helper()
	n, err := memory.Allocated(dev)
	require.NoError(t, err)
	return n
}
