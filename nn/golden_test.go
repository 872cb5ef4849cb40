package nn_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// The golden cases in ../testdata/golden/layers.json were computed by PyTorch in
// float32 (testdata/golden/gen.py says how to regenerate them). Each case holds the
// inputs, the state dict, the output, the upstream gradient it was back-propagated
// with, the gradients of every input and parameter and the buffers after the forward;
// TestGoldenLayers rebuilds the layer with the same values, runs it in a
// tensor.Context and compares everything PyTorch recorded.
const goldenLayers = "../testdata/golden/layers.json"

// Tolerances of the layer comparison. An element of a quantity (an output, a gradient,
// a buffer) passes when
//
//	|got - want| ≤ goldenRTol · max(|want|, floor),
//	floor = max(goldenFloor · max_j |want_j|, goldenNoise · noise / goldenRTol)
//
// that is, a relative error of 1e-5, except that values near zero are held to 1e-5 of
// the floor. The floor is 1% of the quantity's largest magnitude, or, where that is
// larger, the magnitude at which 1e-5 equals twice PyTorch's own float32 error on the
// quantity: noise, the largest difference between PyTorch's float32 result and the
// same computation in float64, recorded by gen.py. The second term is what "scale by
// the magnitude of the terms" means for values that are sums with cancellation
// (dot products, batch-norm and softmax gradients, a bias gradient that BatchNorm makes
// vanish): float32 resolves them only to about 6e-8 times their terms, and PyTorch's
// own value carries that error, which is measured rather than guessed.
const (
	goldenRTol  = 1e-5
	goldenFloor = 1e-2
	goldenNoise = 2
)

type goldenTensor struct {
	Shape []int     `json:"shape"`
	Data  []float64 `json:"data"`
}

func (g goldenTensor) shape() tensor.Shape { return tensor.Shape(slices.Clone(g.Shape)) }

// float32s returns the values as float64s of the exact float32s PyTorch held (the
// file stores the shortest decimal that rounds to each).
func (g goldenTensor) float32s() []float64 {
	out := make([]float64, len(g.Data))
	for i, v := range g.Data {
		out[i] = float64(float32(v))
	}
	return out
}

type goldenConfig struct {
	In              int     `json:"in"`
	Out             int     `json:"out"`
	Bias            bool    `json:"bias"`
	Kernel          []int   `json:"kernel"`
	Stride          []int   `json:"stride"`
	Padding         []int   `json:"padding"`
	Dilation        []int   `json:"dilation"`
	Groups          int     `json:"groups"`
	Features        int     `json:"features"`
	Momentum        float64 `json:"momentum"`
	Eps             float64 `json:"eps"`
	Shape           []int   `json:"shape"`
	Num             int     `json:"num"`
	Dim             int     `json:"dim"` // Embedding's vector size, or Softmax's dimension
	Approximate     string  `json:"approximate"`
	CountIncludePad bool    `json:"count_include_pad"`
	Smoothing       float64 `json:"smoothing"`
	Reduction       string  `json:"reduction"`
}

type goldenCase struct {
	Name       string                  `json:"name"`
	Kind       string                  `json:"kind"`
	Cfg        goldenConfig            `json:"cfg"`
	Train      bool                    `json:"train"`
	Inputs     map[string]goldenTensor `json:"inputs"`
	IntInputs  map[string]goldenTensor `json:"int_inputs"`
	Params     map[string]goldenTensor `json:"params"` // the state dict before the forward
	Out        goldenTensor            `json:"out"`
	GradOut    goldenTensor            `json:"grad_out"`
	Grads      map[string]goldenTensor `json:"grads"`
	StateAfter map[string]goldenTensor `json:"state_after"`
	// Noise is PyTorch's float32 error on each compared quantity (named as in
	// goldenResult), measured against float64.
	Noise map[string]float64 `json:"noise"`
}

func loadGoldenLayers(t *testing.T) []goldenCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.FromSlash(goldenLayers))
	require.NoError(t, err, "regenerate with: python3 testdata/golden/gen.py")
	var file struct {
		Torch string       `json:"torch"`
		Cases []goldenCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &file))
	require.NotEmpty(t, file.Cases)
	return file.Cases
}

func goldenPair(v []int) [2]int {
	if len(v) == 0 {
		return [2]int{}
	}
	return [2]int{v[0], v[1]}
}

func goldenReduction(t *testing.T, s string) tensor.Reduction {
	switch s {
	case "mean":
		return tensor.ReductionMean
	case "sum":
		return tensor.ReductionSum
	case "none":
		return tensor.ReductionNone
	}
	t.Fatalf("unknown reduction %q", s)
	return 0
}

// goldenModule builds the gamp layer of a module case (its parameters are overwritten
// from the case afterwards), or returns nil for the functional kinds.
func goldenModule(t *testing.T, c goldenCase) nn.Module {
	cfg := c.Cfg
	init := nn.Seeded(1)
	switch c.Kind {
	case "linear":
		init.NoBias = !cfg.Bias
		return nn.NewLinear(cfg.In, cfg.Out, init)
	case "conv2d":
		init.NoBias = !cfg.Bias
		o := tensor.ConvOptions{Stride: goldenPair(cfg.Stride), Padding: goldenPair(cfg.Padding), Dilation: goldenPair(cfg.Dilation), Groups: cfg.Groups}
		return nn.NewConv2d(cfg.In, cfg.Out, goldenPair(cfg.Kernel), o, init)
	case "batchnorm1d":
		return nn.NewBatchNorm1d(cfg.Features, nn.NormOptions{Momentum: cfg.Momentum, Eps: cfg.Eps})
	case "batchnorm2d":
		return nn.NewBatchNorm2d(cfg.Features, nn.NormOptions{Momentum: cfg.Momentum, Eps: cfg.Eps})
	case "layernorm":
		return nn.NewLayerNorm(tensor.Shape(cfg.Shape))
	case "embedding":
		return nn.NewEmbedding(cfg.Num, cfg.Dim, init)
	case "maxpool2d":
		return nn.NewMaxPool2d(goldenPair(cfg.Kernel), goldenPair(cfg.Stride), goldenPair(cfg.Padding))
	case "avgpool2d":
		return nn.NewAvgPool2d(goldenPair(cfg.Kernel), goldenPair(cfg.Stride), goldenPair(cfg.Padding), cfg.CountIncludePad)
	case "relu":
		return nn.NewReLU()
	case "gelu":
		g := nn.NewGELU()
		g.Approximate = cfg.Approximate == "tanh"
		return g
	case "tanh":
		return nn.NewTanh()
	case "sigmoid":
		return nn.NewSigmoid()
	case "flatten":
		return nn.NewFlatten()
	case "sequential":
		// gen.py's nn.Sequential(Conv2d(3, 4, 3, padding=1), BatchNorm2d(4), ReLU(),
		// MaxPool2d(2), Flatten(), Linear(36, 5), GELU()).
		return nn.NewSequential(
			nn.NewConv2d(3, 4, nn.Pair(3), tensor.ConvOptions{Padding: nn.Pair(1)}, init),
			nn.NewBatchNorm2d(4), nn.NewReLU(), nn.NewMaxPool2d(nn.Pair(2), [2]int{}, [2]int{}),
			nn.NewFlatten(), nn.NewLinear(36, 5, init), nn.NewGELU())
	}
	return nil
}

// goldenFunc computes a functional case (softmax, losses) from its named inputs.
func goldenFunc(t *testing.T, c goldenCase, in map[string]*tensor.Tensor) *tensor.Tensor {
	cfg := c.Cfg
	switch c.Kind {
	case "softmax":
		return in["x"].Softmax(cfg.Dim)
	case "log_softmax":
		return in["x"].LogSoftmax(cfg.Dim)
	case "cross_entropy":
		return tensor.CrossEntropyWith(in["x"], in["labels"], tensor.CrossEntropyOptions{Smoothing: cfg.Smoothing, Reduction: goldenReduction(t, cfg.Reduction)})
	case "mse":
		return tensor.MSELossWith(in["x"], in["y"], tensor.LossOptions{Reduction: goldenReduction(t, cfg.Reduction)})
	case "bce_with_logits":
		return tensor.BCEWithLogitsWith(in["x"], in["y"], tensor.LossOptions{Reduction: goldenReduction(t, cfg.Reduction)})
	}
	t.Fatalf("%s: unknown kind %q", c.Name, c.Kind)
	return nil
}

// goldenResult is what a case computed, by compared quantity: "out", "grad.<name>"
// for the gradient of an input or parameter, "state.<name>" for a buffer after the
// forward.
type goldenResult map[string][]float64

// runGoldenCase runs case c in gamp and returns every quantity PyTorch recorded.
func runGoldenCase(t *testing.T, c goldenCase) goldenResult {
	t.Helper()
	ctx := tensor.NewContext()
	defer ctx.Close()
	res := goldenResult{}

	in := map[string]*tensor.Tensor{}
	for name, g := range c.Inputs {
		in[name] = tensor.FromSlice(g.Data, g.shape(), tensor.WithDType(tensor.Float32), tensor.WithContext(ctx), tensor.WithGrad())
	}
	for name, g := range c.IntInputs {
		idx := make([]int64, len(g.Data))
		for i, v := range g.Data {
			idx[i] = int64(v)
		}
		in[name] = tensor.FromSlice(idx, g.shape(), tensor.WithContext(ctx))
	}

	var y *tensor.Tensor
	var params []*nn.Param
	var buffers []*nn.Param
	if m := goldenModule(t, c); m != nil {
		state := nn.State(m)
		require.Equal(t, goldenKeys(c.Params), goldenKeys(state), "%s: gamp's state dict names differ from PyTorch's", c.Name)
		for name, g := range c.Params {
			p := state[name]
			require.True(t, g.shape().Equal(p.T.Shape()), "%s: %s is %v in gamp, %v in PyTorch", c.Name, name, p.T.Shape(), g.shape())
			src := tensor.FromSlice(g.Data, g.shape())
			p.T.CopyFrom(src)
			src.Release()
		}
		m.SetTraining(c.Train)
		params, buffers = m.Params(), m.Buffers()
		y = m.Forward(in["x"])
	} else {
		y = goldenFunc(t, c, in)
	}
	require.True(t, c.Out.shape().Equal(y.Shape()), "%s: output %v, PyTorch's %v", c.Name, y.Shape(), c.Out.shape())
	res["out"] = y.Float64s()

	gy := tensor.FromSlice(c.GradOut.Data, c.GradOut.shape(), tensor.WithDType(tensor.Float32), tensor.WithContext(ctx))
	y.Backward(tensor.GradOutput(gy))
	for name, x := range in {
		if x.RequiresGrad() {
			require.NotNil(t, x.Grad(), "%s: no gradient for input %s", c.Name, name)
			res["grad."+name] = x.Grad().Float64s()
		}
	}
	for _, p := range params {
		require.NotNil(t, p.Grad(), "%s: no gradient for %s", c.Name, p.Name)
		res["grad."+p.Name] = p.Grad().Float64s()
	}
	for _, p := range buffers {
		res["state."+p.Name] = p.T.Float64s()
	}
	// Parameters outlive the Context; release their gradients with it.
	for _, p := range params {
		p.T.ZeroGrad()
	}
	return res
}

func goldenKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// goldenWant lists what case c compares, by the names runGoldenCase uses.
func goldenWant(c goldenCase) map[string]goldenTensor {
	want := map[string]goldenTensor{"out": c.Out}
	for name, g := range c.Grads {
		want["grad."+name] = g
	}
	for name, g := range c.StateAfter {
		want["state."+name] = g
	}
	return want
}

// goldenErr is the comparison of one quantity: the largest error as a fraction of its
// tolerance (≤ 1 passes), the largest plain relative error |got-want|/|want| among
// the elements above the floor, and the first failing element, if any.
type goldenErr struct {
	ratio, rel float64
	bad        int // -1: none
	got, want  float64
}

// compareGolden compares got with want element by element: |got-want| must not exceed
// rtol·max(|want|, floor).
func compareGolden(want, got []float64, rtol, floor float64) goldenErr {
	e := goldenErr{bad: -1}
	for i, w := range want {
		d := math.Abs(got[i] - w)
		tol := rtol * math.Max(math.Abs(w), floor)
		r := d / tol
		if tol == 0 {
			r = 0
			if d != 0 {
				r = math.Inf(1)
			}
		}
		if math.IsNaN(got[i]) {
			r = math.Inf(1)
		}
		if math.Abs(w) >= floor && w != 0 {
			e.rel = math.Max(e.rel, d/math.Abs(w))
		}
		if r > e.ratio {
			e.ratio = r
		}
		if r > 1 && e.bad < 0 {
			e.bad, e.got, e.want = i, got[i], w
		}
	}
	return e
}

// goldenFloorOf returns the floor of quantity name of case c (see goldenRTol).
func goldenFloorOf(c goldenCase, name string) (float64, error) {
	scale := 0.0
	for _, v := range goldenWant(c)[name].float32s() {
		scale = math.Max(scale, math.Abs(v))
	}
	noise, ok := c.Noise[name]
	if !ok {
		return 0, fmt.Errorf("%s: the golden file has no noise for %s; regenerate it", c.Name, name)
	}
	return math.Max(goldenFloor*scale, goldenNoise*noise/goldenRTol), nil
}

// checkGolden compares every quantity of case c and returns one line per mismatch.
func checkGolden(c goldenCase, res goldenResult) (mismatches []string, worst map[string]goldenErr) {
	worst = map[string]goldenErr{}
	want := goldenWant(c)
	for _, name := range goldenKeys(want) {
		w := want[name].float32s()
		got, ok := res[name]
		if !ok {
			mismatches = append(mismatches, fmt.Sprintf("%s: gamp computed no %s", c.Name, name))
			continue
		}
		if len(got) != len(w) || len(w) == 0 {
			mismatches = append(mismatches, fmt.Sprintf("%s: %s has %d values, PyTorch %d", c.Name, name, len(got), len(w)))
			continue
		}
		floor, err := goldenFloorOf(c, name)
		if err != nil {
			mismatches = append(mismatches, err.Error())
			continue
		}
		e := compareGolden(w, got, goldenRTol, floor)
		worst[name] = e
		if e.bad >= 0 {
			mismatches = append(mismatches, fmt.Sprintf("%s: %s[%d] = %.9g, PyTorch %.9g (error %.3g× the tolerance)", c.Name, name, e.bad, e.got, e.want, e.ratio))
		}
	}
	for name := range res {
		if _, ok := want[name]; !ok {
			mismatches = append(mismatches, fmt.Sprintf("%s: PyTorch recorded no %s", c.Name, name))
		}
	}
	return mismatches, worst
}

// group is the part of a case name before the slash ("conv", "batchnorm2d", …).
func goldenGroup(name string) string {
	g, _, _ := strings.Cut(name, "/")
	return g
}

func TestGoldenLayers(t *testing.T) {
	cases := loadGoldenLayers(t)
	worstRel := map[string]float64{}
	worstRatio := map[string]float64{}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			res := runGoldenCase(t, c)
			bad, worst := checkGolden(c, res)
			require.Empty(t, bad)
			for _, e := range worst {
				g := goldenGroup(c.Name)
				worstRel[g] = math.Max(worstRel[g], e.rel)
				worstRatio[g] = math.Max(worstRatio[g], e.ratio)
			}
		})
	}
	for _, g := range goldenKeys(worstRel) {
		t.Logf("%-16s largest relative error %.2g, largest error/tolerance %.2g", g, worstRel[g], worstRatio[g])
	}
}

// TestGoldenLayersDetectPerturbation makes sure every comparison TestGoldenLayers does
// can fail: moving the largest value of each recorded quantity by 10 times its
// tolerance must be reported as a mismatch of that quantity, and of nothing else.
func TestGoldenLayersDetectPerturbation(t *testing.T) {
	for _, c := range loadGoldenLayers(t) {
		res := runGoldenCase(t, c)
		for name, g := range goldenWant(c) {
			i, scale := 0, 0.0
			for j, v := range g.Data {
				if math.Abs(v) > scale {
					i, scale = j, math.Abs(v)
				}
			}
			floor, err := goldenFloorOf(c, name)
			require.NoError(t, err)
			delta := 10 * goldenRTol * math.Max(scale, floor)
			if delta == 0 {
				delta = 1 // an exactly zero quantity, such as a counter in evaluation
			}
			saved := slices.Clone(g.Data)
			g.Data[i] += delta
			bad, _ := checkGolden(c, res)
			copy(g.Data, saved)
			require.Len(t, bad, 1, "%s: perturbing %s[%d] went unnoticed", c.Name, name, i)
			require.Contains(t, bad[0], ": "+name+"[")
		}
	}
}
