package optim

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// refSGD is torch.optim.SGD's single-tensor algorithm written out in float64.
type refSGD struct {
	cfg SGDConfig
	buf [][]float64
}

func (r *refSGD) step(w, g [][]float64) {
	c := r.cfg
	if r.buf == nil {
		r.buf = make([][]float64, len(w))
	}
	for i := range w {
		if g[i] == nil {
			continue // no gradient: PyTorch skips the parameter
		}
		first := r.buf[i] == nil
		if c.Momentum != 0 && first {
			r.buf[i] = make([]float64, len(w[i]))
		}
		for j := range w[i] {
			d := g[i][j]
			if c.Maximize {
				d = -d
			}
			if c.WeightDecay != 0 {
				d += c.WeightDecay * w[i][j]
			}
			if c.Momentum != 0 {
				b := &r.buf[i][j]
				if first {
					*b = d // the first step's buffer is a clone of d
				} else {
					*b = c.Momentum**b + (1-c.Dampening)*d
				}
				if c.Nesterov {
					d += c.Momentum * *b
				} else {
					d = *b
				}
			}
			w[i][j] -= c.LR * d
		}
	}
}

// refAdam is torch.optim.Adam/AdamW's single-tensor algorithm written out in float64.
type refAdam struct {
	cfg         AdamConfig
	decoupled   bool
	step        []int
	m, v, vmax  [][]float64
	initialised bool
}

func (r *refAdam) update(w, g [][]float64) {
	c := r.cfg
	if !r.initialised {
		n := len(w)
		r.step = make([]int, n)
		r.m, r.v, r.vmax = make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for i := range w {
			r.m[i], r.v[i], r.vmax[i] = make([]float64, len(w[i])), make([]float64, len(w[i])), make([]float64, len(w[i]))
		}
		r.initialised = true
	}
	for i := range w {
		if g[i] == nil {
			continue
		}
		r.step[i]++
		t := float64(r.step[i])
		bc1 := 1 - math.Pow(c.Beta1, t)
		bc2 := 1 - math.Pow(c.Beta2, t)
		for j := range w[i] {
			gj := g[i][j]
			if c.Maximize {
				gj = -gj
			}
			if c.WeightDecay != 0 {
				if r.decoupled {
					w[i][j] *= 1 - c.LR*c.WeightDecay
				} else {
					gj += c.WeightDecay * w[i][j]
				}
			}
			r.m[i][j] += (1 - c.Beta1) * (gj - r.m[i][j])
			r.v[i][j] = c.Beta2*r.v[i][j] + (1-c.Beta2)*gj*gj
			v := r.v[i][j]
			if c.AMSGrad {
				r.vmax[i][j] = math.Max(r.vmax[i][j], v)
				v = r.vmax[i][j]
			}
			denom := math.Sqrt(v)/math.Sqrt(bc2) + c.Eps
			w[i][j] -= c.LR / bc1 * r.m[i][j] / denom
		}
	}
}

var refDTypes = []tensor.DType{tensor.Float64, tensor.Float32, tensor.Float16, tensor.BFloat16}

// runAgainstReference trains the test parameters for 3 steps with opt and with the
// reference step function, and compares after every step. For half parameters it
// compares the FP32 masters, and checks that each parameter is its master rounded.
func runAgainstReference(t *testing.T, dt tensor.DType, build func([]*nn.Param) (Optimizer, error), ref func(w, g [][]float64)) {
	ps := makeParams(dt)
	opt, err := build(ps)
	require.NoError(t, err)
	w := values(ps) // the reference starts from the values the parameters hold
	for k := 1; k <= 3; k++ {
		g := setGrads(ps, k)
		opt.Step()
		ref(w, g)
		var got [][]float64
		if dt.IsHalf() {
			masters := opt.(interface{ MasterParams() []*tensor.Tensor }).MasterParams()
			for i, m := range masters {
				require.Equal(t, tensor.Float32, m.DType())
				got = append(got, m.Float64s())
				rounded := tensor.FromSlice(m.Float32s(), m.Shape(), tensor.WithDType(dt))
				require.Equal(t, rounded.Uint16s(), ps[i].T.Uint16s(), "parameter %d is its master rounded", i)
			}
		} else {
			got = values(ps)
		}
		requireClose(t, w, got, dtypeTol(dt), fmt.Sprintf("step %d", k))
		require.Equal(t, int64(k), opt.StepCount())
		opt.ZeroGrad()
	}
}

func TestSGDMatchesPyTorchAlgorithm(t *testing.T) {
	cases := []struct {
		name string
		cfg  SGDConfig
	}{
		{"plain", SGDConfig{LR: 0.1}},
		{"momentum", SGDConfig{LR: 0.1, Momentum: 0.9}},
		{"dampening", SGDConfig{LR: 0.1, Momentum: 0.9, Dampening: 0.3}},
		{"nesterov", SGDConfig{LR: 0.1, Momentum: 0.9, Nesterov: true}},
		{"weight decay", SGDConfig{LR: 0.1, WeightDecay: 0.05}},
		{"momentum+wd", SGDConfig{LR: 0.05, Momentum: 0.8, WeightDecay: 0.1}},
		{"nesterov+wd", SGDConfig{LR: 0.05, Momentum: 0.8, WeightDecay: 0.1, Nesterov: true}},
		{"maximize", SGDConfig{LR: 0.05, Momentum: 0.5, WeightDecay: 0.1, Maximize: true}},
	}
	for _, dt := range refDTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				r := &refSGD{cfg: c.cfg}
				runAgainstReference(t, dt, func(ps []*nn.Param) (Optimizer, error) { return NewSGD(ps, c.cfg) }, r.step)
			})
		}
	}
}

func TestAdamMatchesPyTorchAlgorithm(t *testing.T) {
	adam := func(f func(*AdamConfig)) AdamConfig {
		c := DefaultAdam()
		c.LR = 0.01
		f(&c)
		return c
	}
	cases := []struct {
		name      string
		decoupled bool
		cfg       AdamConfig
	}{
		{"adam", false, adam(func(c *AdamConfig) {})},
		{"adam wd", false, adam(func(c *AdamConfig) { c.WeightDecay = 0.1 })},
		{"adam amsgrad", false, adam(func(c *AdamConfig) { c.AMSGrad = true; c.Beta2 = 0.9 })},
		{"adam beta1 0.3 (lerp's second form)", false, adam(func(c *AdamConfig) { c.Beta1 = 0.3 })},
		{"adam large eps", false, adam(func(c *AdamConfig) { c.Eps = 0.1 })},
		{"adam beta1 0 (GAN style)", false, adam(func(c *AdamConfig) { c.Beta1 = ZeroBeta; c.Beta2 = 0.99 })},
		{"adam both betas 0", false, adam(func(c *AdamConfig) { c.Beta1 = ZeroBeta; c.Beta2 = ZeroBeta })},
		{"adamw", true, adam(func(c *AdamConfig) { c.WeightDecay = 0.1 })},
		{"adamw amsgrad maximize", true, adam(func(c *AdamConfig) { c.WeightDecay = 0.1; c.AMSGrad = true; c.Maximize = true; c.Beta2 = 0.5 })},
	}
	for _, dt := range refDTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", dt, c.name), func(t *testing.T) {
				rc := c.cfg
				for _, b := range []*float64{&rc.Beta1, &rc.Beta2} {
					if *b == ZeroBeta {
						*b = 0 // the reference takes β = 0 literally
					}
				}
				r := &refAdam{cfg: rc, decoupled: c.decoupled}
				build := func(ps []*nn.Param) (Optimizer, error) {
					if c.decoupled {
						return NewAdamW(ps, c.cfg)
					}
					return NewAdam(ps, c.cfg)
				}
				runAgainstReference(t, dt, build, r.update)
			})
		}
	}
}

// TestAdamPerParameterStep checks that a parameter without a gradient does not advance
// its own step count (its bias correction), as in PyTorch.
func TestAdamPerParameterStep(t *testing.T) {
	ps := makeParams(tensor.Float32)
	opt, err := NewAdam(ps, DefaultAdam())
	require.NoError(t, err)
	for k := 1; k <= 3; k++ {
		setGrads(ps, k)
		opt.Step()
	}
	s := opt.StateDict()
	defer s.Release()
	require.Equal(t, 3.0, s.Scalars["state.0.step"])
	require.Equal(t, 2.0, s.Scalars["state.1.step"], "parameter 1 had no gradient at step 2")
	require.Equal(t, 3.0, s.Scalars["step"])
}

// TestSGDHandComputed pins one update to numbers worked out by hand, independent of the
// reference implementation above.
func TestSGDHandComputed(t *testing.T) {
	p := &nn.Param{Name: "w", T: tensor.FromSlice([]float64{1, -2}, nil, tensor.WithGrad())}
	opt, err := NewSGD([]*nn.Param{p}, SGDConfig{LR: 0.5, Momentum: 0.5, WeightDecay: 0.25, Nesterov: true})
	require.NoError(t, err)
	// Step 1: d = g + 0.25·w = [2+0.25, 4-0.5] = [2.25, 3.5]; b = d;
	// Nesterov d = d + 0.5·b = [3.375, 5.25]; w = w - 0.5·d = [-0.6875, -4.625].
	p.T.SetGrad(tensor.FromSlice([]float64{2, 4}, nil))
	opt.Step()
	require.Equal(t, []float64{-0.6875, -4.625}, p.T.Float64s())
	// Step 2 with g = [1, 1]: d = [1-0.171875, 1-1.15625] = [0.828125, -0.15625];
	// b = 0.5·[2.25, 3.5] + d = [1.953125, 1.59375]; d = d + 0.5·b = [1.8046875, 0.640625];
	// w = [-0.6875-0.90234375, -4.625-0.3203125] = [-1.58984375, -4.9453125].
	p.T.SetGrad(tensor.FromSlice([]float64{1, 1}, nil))
	opt.Step()
	require.Equal(t, []float64{-1.58984375, -4.9453125}, p.T.Float64s())
}

// TestAdamZeroFieldsTakeDefaults checks the zero-value convention: zero betas and eps
// are PyTorch's defaults, ZeroBeta is an exact 0, LR and WeightDecay are literal.
func TestAdamZeroFieldsTakeDefaults(t *testing.T) {
	o, err := NewAdamW(makeParams(tensor.Float32), AdamWConfig{LR: 3e-4, WeightDecay: 0.1})
	require.NoError(t, err)
	require.Equal(t, AdamConfig{LR: 3e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1}, o.Config())
	o, err = NewAdam(makeParams(tensor.Float32), AdamConfig{LR: 1, Beta1: ZeroBeta, Beta2: 0.5})
	require.NoError(t, err)
	require.Equal(t, AdamConfig{LR: 1, Beta1: 0, Beta2: 0.5, Eps: 1e-8}, o.Config())
	s := o.StateDict()
	require.Equal(t, 0.0, s.Scalars["beta1"])
	o2, err := NewAdam(makeParams(tensor.Float32), DefaultAdam())
	require.NoError(t, err)
	require.NoError(t, o2.LoadStateDict(s), "a literal 0 in a state is a true 0")
	require.Equal(t, o.Config(), o2.Config())
}
