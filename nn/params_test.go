package nn

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/tensor"
)

func smallModel(seed uint64) *Sequential {
	g := tensor.NewGenerator(seed)
	return NewSequential(NewLinear(4, 6, Init{Gen: g}), NewBatchNorm1d(6), NewReLU(), NewLinear(6, 3, Init{Gen: g}))
}

// step runs one forward and backward pass on a batch of 5 in dt on dev.
func step(t *testing.T, m Module, dt tensor.DType, dev tensor.Device) *tensor.Tensor {
	t.Helper()
	ctx := tensor.NewContext()
	defer ctx.Close()
	x := tensor.FromSlice(wave(20, 2), tensor.Shape{5, 4}, tensor.WithDType(dt), tensor.WithDevice(dev), tensor.WithContext(ctx))
	y := m.Forward(x)
	y.Sum().Backward()
	out := tensor.FromSlice(y.Float32s(), y.Shape())
	return out
}

func TestToMovesEverything(t *testing.T) {
	m := smallModel(1)
	step(t, m, tensor.Float32, tensor.CPU)
	dev := tensor.CPUDevice(1)
	type snap struct {
		vals  []float32
		grad  []float32
		req   bool
		old   *tensor.Tensor
		param *Param
	}
	var before []snap
	for _, p := range append(m.Params(), m.Buffers()...) {
		s := snap{vals: p.T.Float32s(), req: p.T.RequiresGrad(), old: p.T, param: p}
		if p.Grad() != nil {
			s.grad = p.Grad().Float32s()
		}
		before = append(before, s)
	}
	To(m, dev)
	for _, s := range before {
		p := s.param
		assert.Equal(t, dev, p.T.Device(), p.Name)
		assert.True(t, s.old.Released(), "the old tensor of %s is released", p.Name)
		assert.Equal(t, s.vals, p.T.Float32s(), p.Name)
		assert.Equal(t, s.req, p.T.RequiresGrad(), p.Name)
		assert.True(t, p.T.IsLeaf(), p.Name)
		assert.Equal(t, p.Name, p.T.Name())
		if s.grad != nil {
			require.NotNil(t, p.Grad(), p.Name)
			assert.Equal(t, dev, p.Grad().Device(), p.Name)
			assert.Equal(t, s.grad, p.Grad().Float32s(), p.Name)
		}
	}
	// The model trains on the new device, and its gradients accumulate there.
	y := step(t, m, tensor.Float32, dev)
	assert.Equal(t, tensor.Shape{5, 3}, y.Shape())
	for _, p := range m.Params() {
		assert.Equal(t, dev, p.Grad().Device(), p.Name)
	}
	To(m, tensor.CPU)
	for _, p := range append(m.Params(), m.Buffers()...) {
		assert.Equal(t, tensor.CPU, p.T.Device(), p.Name)
	}
}

func TestCastKeepsBatchNormFP32(t *testing.T) {
	for _, tc := range []struct {
		name string
		cast func(Module, tensor.DType)
		all  bool
	}{
		{"Cast (O2)", Cast, false},
		{"CastAll (O3)", CastAll, true},
	} {
		for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
			t.Run(tc.name+" "+dt.String(), func(t *testing.T) {
				m := smallModel(2)
				step(t, m, tensor.Float32, tensor.CPU)
				w0 := m.At(0).(*Linear).Weight
				old := w0.T
				tc.cast(m, dt)
				assert.Same(t, w0, m.At(0).(*Linear).Weight, "the *Param survives a cast")
				assert.True(t, old.Released())
				for _, p := range append(m.Params(), m.Buffers()...) {
					want := dt
					switch {
					case !p.T.DType().IsFloat():
						want = tensor.Int64 // num_batches_tracked stays an integer
					case p.KeepFP32 && !tc.all:
						want = tensor.Float32
					}
					assert.Equal(t, want, p.T.DType(), p.Name)
					if g := p.Grad(); g != nil {
						assert.Equal(t, want, g.DType(), "gradient of %s", p.Name)
					}
					assert.Equal(t, !p.Buffer, p.T.RequiresGrad(), p.Name)
				}
				// The cast model runs on half inputs and produces half outputs.
				ZeroGrad(m)
				y := step(t, m, dt, tensor.CPU)
				assert.True(t, allFinite(y.Float64s()))
				for _, p := range m.Params() {
					require.NotNil(t, p.Grad(), p.Name)
					assert.Equal(t, p.T.DType(), p.Grad().DType(), p.Name)
				}
			})
		}
	}
	assert.Panics(t, func() { Cast(smallModel(1), tensor.Int32) })
}

func TestNumParamsAndSummary(t *testing.T) {
	m := smallModel(3)
	// 4·6+6 + 6+6 + 6·3+3
	assert.Equal(t, 63, NumParams(m))
	Cast(m, tensor.Float16)
	s := Summary(m)
	lines := strings.Split(strings.TrimSpace(s), "\n")
	require.Len(t, lines, 1+len(m.Params())+len(m.Buffers())+1)
	assert.Regexp(t, `^name\s+kind\s+shape\s+dtype\s+device\s+numel$`, lines[0])
	assert.Regexp(t, `^0\.weight\s+param\s+\[6 4\]\s+float16\s+cpu\s+24$`, lines[1])
	assert.Contains(t, s, "1.running_var")
	assert.Regexp(t, `1\.weight\s+param \(fp32\)\s+\[6\]\s+float32`, s)
	assert.Regexp(t, `1\.num_batches_tracked\s+buffer\s+\[\]\s+int64`, s)
	assert.Contains(t, lines[len(lines)-1], "63 trainable parameters, 13 buffer elements")
}

func TestLayerNormInHalfModel(t *testing.T) {
	m := NewSequential(NewLinear(4, 6, Seeded(1)), NewLayerNorm(tensor.Shape{6}), NewGELU())
	Cast(m, tensor.Float16)
	for _, p := range m.Params() {
		assert.Equal(t, tensor.Float16, p.T.DType(), "LayerNorm parameters follow the model's dtype: %s", p.Name)
	}
	y := step(t, m, tensor.Float16, tensor.CPU)
	assert.True(t, allFinite(y.Float64s()))
	for _, p := range m.Params() {
		require.NotNil(t, p.Grad(), p.Name)
		assert.Equal(t, tensor.Float16, p.Grad().DType(), p.Name)
	}
}
