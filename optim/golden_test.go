package optim_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
)

// The golden training runs in ../testdata/golden/mlp_*.json were made by PyTorch
// (testdata/golden/gen.py says how to regenerate them): a 784-64-32-10 ReLU MLP
// trained for 20 steps with cross entropy on one fixed batch of 64, by SGD and by
// AdamW. The batch and the initial weights are not stored but made by mlpUniform24,
// the generator gen.py uses, bit for bit (the files hold their SHA-256 digests); the
// labels, the loss of every step and the final weights are stored.

// Tolerances of the training comparison. The loss of step k passes when
// |got - want| ≤ mlpLossTol·max(|want|, 1) (the losses fall from 2.3 to about 0.01).
// A final weight passes when |got - want| ≤ mlpWeightTol·max(|want|, mlpWeightFloor):
// 1e-4 relative, and 3e-6 absolute below 0.03, the size of a first-layer weight
// (U(±1/√784) = ±0.036 at the start). The floor is not smaller because AdamW
// amplifies rounding where a gradient nearly cancels: in the AdamW run PyTorch's own
// float32 result differs from the same run in float64 by up to 1.8e-6 (weight
// 0.weight[46969], about 0.0167), so gamp and PyTorch cannot agree more closely there.
const (
	mlpLossTol     = 1e-5
	mlpWeightTol   = 1e-4
	mlpWeightFloor = 3e-2
)

type mlpGolden struct {
	Torch       string            `json:"torch"`
	Optimizer   string            `json:"optimizer"`
	Sizes       []int             `json:"sizes"`
	Batch       int               `json:"batch"`
	Steps       int               `json:"steps"`
	SeedX       uint64            `json:"seed_x"`
	SeedParam   uint64            `json:"seed_param"`
	InputSHA256 string            `json:"input_sha256"`
	InitSHA256  map[string]string `json:"init_sha256"`
	Labels      []int64           `json:"labels"`
	Losses      []float64         `json:"losses"`
	Final       map[string]string `json:"final_f32le_base64"`
	FinalShape  map[string][]int  `json:"final_shape"`
	Config      map[string]any    `json:"config"`
}

func loadMLPGolden(t *testing.T, name string) *mlpGolden {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "golden", name))
	require.NoError(t, err, "regenerate with: python3 testdata/golden/gen.py")
	var g mlpGolden
	require.NoError(t, json.Unmarshal(raw, &g))
	require.Equal(t, []int{784, 64, 32, 10}, g.Sizes)
	require.Len(t, g.Labels, g.Batch)
	require.Len(t, g.Losses, g.Steps)
	return &g
}

// mlpUniform24 returns n uniforms in [0, 1) with 24 random bits: value i is the top 24
// bits of splitmix64(seed + (i+1)·0x9E3779B97F4A7C15) over 2^24 (gen.py's uniform24).
func mlpUniform24(seed uint64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		z := seed + uint64(i+1)*0x9E3779B97F4A7C15
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		z ^= z >> 31
		out[i] = float64(z>>40) / (1 << 24)
	}
	return out
}

// mlpInputs is the batch: float32(u_1 + … + u_12 - 6) from 12 consecutive uniforms
// (exact in float64, so identical to numpy's).
func mlpInputs(g *mlpGolden) []float32 {
	n := g.Batch * g.Sizes[0]
	u := mlpUniform24(g.SeedX, 12*n)
	x := make([]float32, n)
	for i := range x {
		s := 0.0
		for _, v := range u[12*i : 12*i+12] {
			s += v
		}
		x[i] = float32(s - 6)
	}
	return x
}

// mlpParamNames lists the parameters in PyTorch's named_parameters order; parameter j
// is drawn from stream SeedParam+j.
var mlpParamNames = []string{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}

// mlpModel builds the MLP with PyTorch's default U(±1/√in) initialisation drawn from
// mlpUniform24 and returns it with its parameters by name.
func mlpModel(t *testing.T, g *mlpGolden) (*nn.Sequential, map[string]*nn.Param) {
	s := g.Sizes
	m := nn.NewSequential(
		nn.NewLinear(s[0], s[1], nn.Seeded(1)), nn.NewReLU(),
		nn.NewLinear(s[1], s[2], nn.Seeded(2)), nn.NewReLU(),
		nn.NewLinear(s[2], s[3], nn.Seeded(3)))
	state := nn.State(m)
	require.Len(t, state, len(mlpParamNames))
	for j, name := range mlpParamNames {
		p := state[name]
		require.NotNil(t, p, name)
		fanIn := s[j/2]
		bound := 1 / math.Sqrt(float64(fanIn))
		u := mlpUniform24(g.SeedParam+uint64(j), p.T.Numel())
		v := make([]float32, len(u))
		for i := range u {
			v[i] = float32((2*u[i] - 1) * bound)
		}
		require.Equal(t, g.InitSHA256[name], mlpSHA256(v), "%s: the generator no longer matches gen.py's", name)
		src := tensor.FromSlice(v, p.T.Shape())
		p.T.CopyFrom(src)
		src.Release()
	}
	return m, state
}

func mlpSHA256(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func mlpDecodeF32(t *testing.T, s string) []float64 {
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	require.Zero(t, len(b)%4)
	out := make([]float64, len(b)/4)
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return out
}

// mlpTrain runs the golden training and returns the loss of every step (before its
// update).
func mlpTrain(t *testing.T, g *mlpGolden, newOpt func([]*nn.Param) (optim.Optimizer, error)) ([]float64, map[string]*nn.Param) {
	xs := mlpInputs(g)
	require.Equal(t, g.InputSHA256, mlpSHA256(xs), "the input generator no longer matches gen.py's")
	x := tensor.FromSlice(xs, tensor.Shape{g.Batch, g.Sizes[0]})
	defer x.Release()
	labels := tensor.FromSlice(g.Labels, nil)
	defer labels.Release()

	m, state := mlpModel(t, g)
	opt, err := newOpt(m.Params())
	require.NoError(t, err)
	losses := make([]float64, g.Steps)
	for k := range losses {
		opt.ZeroGrad()
		ctx := tensor.NewContext()
		loss := tensor.CrossEntropy(m.Forward(ctx.Bind(x)), ctx.Bind(labels), 0)
		losses[k] = loss.Item()
		loss.Backward()
		opt.Step()
		ctx.Close()
	}
	opt.ZeroGrad()
	return losses, state
}

// mlpCheck compares a run with the golden file and returns one line per mismatch,
// with the largest errors seen (relative to each tolerance's scale).
func mlpCheck(t *testing.T, g *mlpGolden, losses []float64, state map[string]*nn.Param) (bad []string, lossErr, weightErr float64) {
	for k, want := range g.Losses {
		want = float64(float32(want))
		d := math.Abs(losses[k] - want)
		scale := math.Max(math.Abs(want), 1)
		lossErr = math.Max(lossErr, d/scale)
		if d > mlpLossTol*scale || math.IsNaN(losses[k]) {
			bad = append(bad, fmt.Sprintf("%s: loss of step %d = %.8g, PyTorch %.8g", g.Optimizer, k+1, losses[k], want))
		}
	}
	require.Len(t, g.Final, len(mlpParamNames))
	for _, name := range mlpParamNames {
		want := mlpDecodeF32(t, g.Final[name])
		p := state[name]
		require.True(t, tensor.Shape(g.FinalShape[name]).Equal(p.T.Shape()), name)
		got := p.T.Float64s()
		require.Len(t, got, len(want), name)
		worst := -1
		for i, w := range want {
			d := math.Abs(got[i] - w)
			scale := math.Max(math.Abs(w), mlpWeightFloor)
			weightErr = math.Max(weightErr, d/scale)
			if (d > mlpWeightTol*scale || math.IsNaN(got[i])) && worst < 0 {
				worst = i
			}
		}
		if worst >= 0 {
			bad = append(bad, fmt.Sprintf("%s: final %s[%d] = %.8g, PyTorch %.8g", g.Optimizer, name, worst, got[worst], want[worst]))
		}
	}
	return bad, lossErr, weightErr
}

func TestGoldenMLPTraining(t *testing.T) {
	for _, tc := range []struct {
		file   string
		cfg    map[string]any // the PyTorch arguments, as gen.py recorded them
		newOpt func([]*nn.Param) (optim.Optimizer, error)
	}{
		{"mlp_sgd.json", map[string]any{"lr": 0.1, "momentum": 0.9, "nesterov": false, "weight_decay": 1e-4},
			func(ps []*nn.Param) (optim.Optimizer, error) {
				return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4})
			}},
		{"mlp_adamw.json", map[string]any{"lr": 1e-3, "betas": []any{0.9, 0.999}, "eps": 1e-8, "weight_decay": 0.01},
			func(ps []*nn.Param) (optim.Optimizer, error) {
				return optim.NewAdamW(ps, optim.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
			}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			g := loadMLPGolden(t, tc.file)
			require.Equal(t, tc.cfg, g.Config)
			losses, state := mlpTrain(t, g, tc.newOpt)
			bad, lossErr, weightErr := mlpCheck(t, g, losses, state)
			require.Empty(t, bad)
			t.Logf("%s: largest loss error %.2g (of max(|loss|, 1)), largest weight error %.2g (of max(|w|, %g))",
				g.Optimizer, lossErr, weightErr, mlpWeightFloor)

			// Every comparison can fail: a loss or a weight moved by 10 tolerances is
			// reported.
			saved := g.Losses[g.Steps-1]
			g.Losses[g.Steps-1] += 10 * mlpLossTol * math.Max(math.Abs(saved), 1)
			bad, _, _ = mlpCheck(t, g, losses, state)
			g.Losses[g.Steps-1] = saved
			require.Len(t, bad, 1, "a perturbed loss went unnoticed")
			for _, name := range mlpParamNames {
				p := state[name]
				v := p.T.Float64s()
				i := len(v) / 2
				v[i] += 10 * mlpWeightTol * math.Max(math.Abs(v[i]), mlpWeightFloor)
				src := tensor.FromSlice(v, p.T.Shape(), tensor.WithDType(tensor.Float32))
				orig := p.T.Float64s()
				p.T.CopyFrom(src)
				src.Release()
				bad, _, _ = mlpCheck(t, g, losses, state)
				src = tensor.FromSlice(orig, p.T.Shape(), tensor.WithDType(tensor.Float32))
				p.T.CopyFrom(src)
				src.Release()
				require.Len(t, bad, 1, "a perturbed %s went unnoticed", name)
			}
		})
	}
}
