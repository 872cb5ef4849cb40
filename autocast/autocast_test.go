package autocast

import (
	"os"
	"regexp"
	"sort"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// The package doc's table must list exactly the registry, with the same categories.
func TestDocTableMatchesRegistry(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	row := regexp.MustCompile(`(?m)^//\t\| ([a-z0-9_]+) +\| ([a-z_0-9]+) +\|$`)
	doc := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(src), -1) {
		if m[1] != "op" {
			doc[m[1]] = m[2]
		}
	}
	reg := map[string]string{}
	for _, op := range tensor.Ops() {
		reg[op.Name()] = op.Category().String()
	}
	require.Equal(t, reg, doc, "update the table in doc.go")
}

// builders apply each op to inputs of dtype dt bound into ac. Every registered op has
// one, so the test below covers the whole registry.
var builders = map[string]func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor{}

func in(ac *tensor.Context, dt tensor.DType, shape ...int) *tensor.Tensor {
	x := tensor.Rand(tensor.Shape(shape), tensor.WithContext(ac.Root())).Cast(dt)
	return ac.Bind(x)
}

func labels(ac *tensor.Context) *tensor.Tensor {
	return ac.Bind(tensor.FromSlice([]int64{1, 0, 2, 1}, nil, tensor.WithContext(ac.Root())))
}

func mask(ac *tensor.Context) *tensor.Tensor {
	return ac.Bind(tensor.FromSlice([]bool{true, false, true, false}, tensor.Shape{4, 1}, tensor.WithContext(ac.Root())))
}

type b = func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor

func init() {
	un := func(f func(x *tensor.Tensor) *tensor.Tensor) b {
		return func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor { return f(in(ac, dt, 4, 3).AddScalar(0.5)) }
	}
	bin := func(f func(x, y *tensor.Tensor) *tensor.Tensor) b {
		return func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor { return f(in(ac, dt, 4, 3), in(ac, dt, 4, 3)) }
	}
	m := map[string]b{
		"abs":         un((*tensor.Tensor).Abs),
		"neg":         un((*tensor.Tensor).Neg),
		"exp":         un((*tensor.Tensor).Exp),
		"log":         un((*tensor.Tensor).Log),
		"sqrt":        un((*tensor.Tensor).Sqrt),
		"rsqrt":       un((*tensor.Tensor).Rsqrt),
		"relu":        un((*tensor.Tensor).Relu),
		"gelu":        un((*tensor.Tensor).Gelu),
		"gelu_tanh":   un((*tensor.Tensor).GeluTanh),
		"tanh":        un((*tensor.Tensor).Tanh),
		"sigmoid":     un((*tensor.Tensor).Sigmoid),
		"square":      un((*tensor.Tensor).Square),
		"reciprocal":  un((*tensor.Tensor).Reciprocal),
		"add_scalar":  un(func(x *tensor.Tensor) *tensor.Tensor { return x.AddScalar(1) }),
		"mul_scalar":  un(func(x *tensor.Tensor) *tensor.Tensor { return x.MulScalar(2) }),
		"rsub_scalar": un(func(x *tensor.Tensor) *tensor.Tensor { return x.RSubScalar(2) }),
		"pow_scalar":  un(func(x *tensor.Tensor) *tensor.Tensor { return x.PowScalar(2) }),
		"clamp":       un(func(x *tensor.Tensor) *tensor.Tensor { return x.Clamp(0.6, 0.9) }),
		"sum":         un(func(x *tensor.Tensor) *tensor.Tensor { return x.Sum(1) }),
		"mean":        un(func(x *tensor.Tensor) *tensor.Tensor { return x.Mean() }),
		"softmax":     un(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Softmax(x, 1) }),
		"log_softmax": un(func(x *tensor.Tensor) *tensor.Tensor { return tensor.LogSoftmax(x, 1) }),
		"max":         un(func(x *tensor.Tensor) *tensor.Tensor { return x.Max(1) }),
		"min":         un(func(x *tensor.Tensor) *tensor.Tensor { return x.Min(1) }),
		"argmax":      un(func(x *tensor.Tensor) *tensor.Tensor { return x.ArgMax(1) }),
		"argmin":      un(func(x *tensor.Tensor) *tensor.Tensor { return x.ArgMin(1) }),
		"reshape":     un(func(x *tensor.Tensor) *tensor.Tensor { return x.Reshape(3, 4) }),
		"permute":     un(func(x *tensor.Tensor) *tensor.Tensor { return x.Permute(1, 0) }),
		"expand":      un(func(x *tensor.Tensor) *tensor.Tensor { return x.Unsqueeze(0).Expand(2, 4, 3) }),
		"squeeze":     un(func(x *tensor.Tensor) *tensor.Tensor { return x.Unsqueeze(0).Squeeze(0) }),
		"unsqueeze":   un(func(x *tensor.Tensor) *tensor.Tensor { return x.Unsqueeze(1) }),
		"contiguous":  un(func(x *tensor.Tensor) *tensor.Tensor { return x.T().Contiguous() }),
		"slice":       un(func(x *tensor.Tensor) *tensor.Tensor { return x.Slice(0, 1, 3, 1) }),
		"cast":        un(func(x *tensor.Tensor) *tensor.Tensor { return x.Cast(tensor.Float64).Cast(x.DType()) }),
		"to":          un(func(x *tensor.Tensor) *tensor.Tensor { return x.To(tensor.CPUDevice(1)) }),
		"bind":        un(func(x *tensor.Tensor) *tensor.Tensor { return x.Context().Root().Bind(x) }),
		"dropout":     un(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Dropout(x, 0.5, true) }),
		"index_select": un(func(x *tensor.Tensor) *tensor.Tensor {
			return x.IndexSelect(0, tensor.FromSlice([]int64{2, 0}, nil, tensor.WithContext(x.Context())))
		}),
		"add":                              bin(tensor.Add),
		"sub":                              bin(tensor.Sub),
		"mul":                              bin(tensor.Mul),
		"div":                              bin(tensor.Div),
		"pow":                              bin(tensor.Pow),
		"maximum":                          bin(tensor.Maximum),
		"minimum":                          bin(tensor.Minimum),
		"compare":                          bin(tensor.Lt),
		"mse_loss":                         bin(func(x, y *tensor.Tensor) *tensor.Tensor { return tensor.MSELoss(x, y) }),
		"binary_cross_entropy_with_logits": bin(func(x, y *tensor.Tensor) *tensor.Tensor { return tensor.BCEWithLogits(x, y) }),
		"cat":                              bin(func(x, y *tensor.Tensor) *tensor.Tensor { return tensor.Concat([]*tensor.Tensor{x, y}, 0) }),
		"stack":                            bin(func(x, y *tensor.Tensor) *tensor.Tensor { return tensor.Stack([]*tensor.Tensor{x, y}, 0) }),
		"matmul": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.MatMul(in(ac, dt, 4, 3), in(ac, dt, 3, 5))
		},
		"linear": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.Linear(in(ac, dt, 4, 3), in(ac, dt, 5, 3), in(ac, dt, 5))
		},
		"linear_relu": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.LinearReLU(in(ac, dt, 4, 3), in(ac, dt, 5, 3), in(ac, dt, 5))
		},
		"linear_gelu": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.LinearGELU(in(ac, dt, 4, 3), in(ac, dt, 5, 3), in(ac, dt, 5))
		},
		"conv2d": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.Conv2d(in(ac, dt, 1, 2, 5, 5), in(ac, dt, 3, 2, 3, 3), nil, tensor.ConvOptions{})
		},
		"max_pool2d": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.MaxPool2d(in(ac, dt, 1, 2, 4, 4), [2]int{2, 2}, [2]int{}, [2]int{})
		},
		"avg_pool2d": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.AvgPool2d(in(ac, dt, 1, 2, 4, 4), [2]int{2, 2}, [2]int{}, [2]int{}, true)
		},
		"batch_norm": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.BatchNorm(in(ac, dt, 4, 3), nil, nil, nil, nil, true, 0.1, 1e-5)
		},
		"batch_norm_relu": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.BatchNormReLU(in(ac, dt, 4, 3), nil, nil, nil, nil, true, 0.1, 1e-5)
		},
		"scaled_dot_product_attention": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.ScaledDotProductAttention(in(ac, dt, 1, 2, 4, 3), in(ac, dt, 1, 2, 4, 3), in(ac, dt, 1, 2, 4, 3), tensor.AttentionOptions{Causal: true})
		},
		"self_attention": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.SelfAttention(in(ac, dt, 1, 4, 6), 2, tensor.AttentionOptions{Causal: true})
		},
		"layer_norm": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.LayerNorm(in(ac, dt, 4, 3), tensor.Shape{3}, nil, nil, 1e-5)
		},
		"cross_entropy": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.CrossEntropy(in(ac, dt, 4, 3), labels(ac), 0)
		},
		"embedding": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.Embedding(labels(ac), in(ac, dt, 3, 2))
		},
		"where": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.Where(mask(ac), in(ac, dt, 4, 3), in(ac, dt, 4, 3))
		},
		"masked_fill": func(ac *tensor.Context, dt tensor.DType) *tensor.Tensor {
			return tensor.MaskedFill(in(ac, dt, 4, 3), mask(ac), 0)
		},
	}
	for k, v := range m {
		builders[k] = v
	}
}

// expected is the dtype op runs in (its output dtype) for inputs of dtype dt.
func expected(op *tensor.Op, p Policy, dt tensor.DType) tensor.DType {
	switch op.Name() {
	case "argmax", "argmin":
		return tensor.Int64
	case "compare":
		return tensor.Bool
	}
	if !p.Enabled {
		return dt
	}
	if c, ok := p.Overrides[op.Name()]; ok {
		return expectedCat(c, p, dt)
	}
	return expectedCat(op.Category(), p, dt)
}

func expectedCat(c tensor.CastCategory, p Policy, dt tensor.DType) tensor.DType {
	switch c {
	case tensor.LowerPrecision:
		return p.Low
	case tensor.FP32:
		return tensor.Float32
	}
	return dt
}

// The dtype every op runs in, under every policy, for float32 and half inputs.
func TestDTypeEveryOpRunsIn(t *testing.T) {
	policies := map[string]Policy{
		"fp16":     Half(tensor.Float16),
		"bf16":     Half(tensor.BFloat16),
		"disabled": Disabled(),
		"override": Half(tensor.Float16).Override("matmul", tensor.FP32).Override("softmax", tensor.LowerPrecision),
	}
	var names []string
	for _, op := range tensor.Ops() {
		names = append(names, op.Name())
	}
	sort.Strings(names)
	for pname, p := range policies {
		for _, name := range names {
			op, _ := tensor.LookupOp(name)
			build, ok := builders[name]
			require.True(t, ok, "op %q has no builder in this test: add one", name)
			for _, dt := range []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16} {
				if p.Enabled && dt.IsHalf() && dt != p.Low {
					continue
				}
				ctx := tensor.NewContext(tensor.UseGenerator(tensor.NewGenerator(1)))
				ac := Enter(ctx, p)
				out := build(ac, dt)
				require.Equal(t, expected(op, p, dt), out.DType(), "%s: op %s with %s inputs", pname, name, dt)
				ac.Close()
				ctx.Close()
			}
		}
	}
}

// Float64 is never cast, and integer tensors are never cast.
func TestFloat64AndIntegersNeverCast(t *testing.T) {
	ctx := tensor.NewContext()
	defer ctx.Close()
	ac := Enter(ctx, Half(tensor.Float16))
	x := ac.Bind(tensor.Randn(tensor.Shape{3, 3}, tensor.WithDType(tensor.Float64), tensor.WithContext(ctx)))
	require.Equal(t, tensor.Float64, tensor.MatMul(x, x).DType())
	require.Equal(t, tensor.Float64, tensor.Softmax(x, 1).DType())
	idx := ac.Bind(tensor.FromSlice([]int64{0, 2}, nil, tensor.WithContext(ctx)))
	require.Equal(t, tensor.Int64, idx.Reshape(2, 1).DType())
}

// Nesting: a disabled inner region runs in the input dtypes; Run binds the result back
// so the outer policy applies again afterwards.
func TestNestingRestoresOuterState(t *testing.T) {
	ctx := tensor.NewContext()
	defer ctx.Close()
	w := tensor.Randn(tensor.Shape{4, 4}).SetRequiresGrad(true)
	defer w.Release()
	outer := Enter(ctx, Half(tensor.BFloat16))
	defer outer.Close()
	x := outer.Bind(tensor.Randn(tensor.Shape{2, 4}, tensor.WithContext(ctx)))
	require.Equal(t, tensor.BFloat16, tensor.Linear(x, w, nil).DType())
	inner := Run(outer, Disabled(), func(ac *tensor.Context) *tensor.Tensor {
		y := tensor.Linear(ac.Bind(x), w, nil)
		require.Equal(t, tensor.Float32, y.DType(), "autocast disabled inside")
		return y
	})
	require.Same(t, outer, inner.Context(), "the result is back in the outer region")
	require.Equal(t, tensor.BFloat16, tensor.Linear(inner, w, nil).DType(), "the outer policy applies again")
}

func TestParsePolicies(t *testing.T) {
	cases := []struct {
		in      string
		enabled bool
		low     tensor.DType
		param   tensor.DType
		output  tensor.DType
	}{
		{"params=float32,compute=float16,output=float32", true, tensor.Float16, tensor.Float32, tensor.Float32},
		{"params=float32,compute=bfloat16,output=bfloat16", true, tensor.BFloat16, tensor.Float32, tensor.BFloat16},
		{"p=f32,c=f16,o=f32", true, tensor.Float16, tensor.Float32, tensor.Float32},
		{"half", true, tensor.Float16, tensor.Float16, tensor.Float16},
		{"float32", false, 0, tensor.Float32, tensor.Float32},
		{"compute=float32", false, 0, tensor.Float32, tensor.Float32},
		{"mixed_bfloat16", true, tensor.BFloat16, tensor.Float32, tensor.Float32},
	}
	for _, c := range cases {
		p, err := Parse(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, c.enabled, p.Enabled, c.in)
		if c.enabled {
			require.Equal(t, c.low, p.Low, c.in)
		}
		require.Equal(t, c.param, p.Param, c.in)
		require.Equal(t, c.output, p.Output, c.in)
		back, err := Parse(p.String())
		require.NoError(t, err)
		require.Equal(t, p.Enabled, back.Enabled)
	}
	for _, bad := range []string{"compute=int32", "params=float32,compute", "speed=fast", "compute=float64", "compute=float16,compute=bfloat16", "params=bogus"} {
		_, err := Parse(bad)
		require.Error(t, err, bad)
	}
	require.Error(t, Half(tensor.Float32).Validate())
	require.Error(t, Half(tensor.Float16).Override("no_such_op", tensor.FP32).Validate())
	require.NoError(t, Default(tensor.CUDA(0)).Validate())
	require.Equal(t, tensor.Float16, Default(tensor.CUDA(0)).Low)
	require.Equal(t, tensor.BFloat16, Default(tensor.CPU).Low)
}

// A policy limited to CUDA leaves CPU tensors alone.
func TestKindsLimitThePolicy(t *testing.T) {
	ctx := tensor.NewContext()
	defer ctx.Close()
	q := Policy{Enabled: true, Low: tensor.Float16, Kinds: []backend.Kind{backend.KindCUDA}}
	ac := Enter(ctx, q)
	x := ac.Bind(tensor.Randn(tensor.Shape{2, 2}, tensor.WithContext(ctx)))
	require.Equal(t, tensor.Float32, tensor.MatMul(x, x).DType())
}

// Two goroutines train two models at once, one under FP16 autocast and one in FP32:
// neither sees the other's state (PyTorch's thread-local autocast broke DataParallel,
// pytorch#50170). Each records the dtype its linear layers produced at every step.
func TestTwoGoroutinesTwoPolicies(t *testing.T) {
	type result struct {
		dtypes map[tensor.DType]int
		grads  tensor.DType
	}
	train := func(p *Policy, seed uint64, out *result) {
		m := nn.NewSequential(nn.NewLinear(8, 16, nn.Seeded(seed)), nn.NewReLU(), nn.NewLinear(16, 4, nn.Seeded(seed+1)))
		out.dtypes = map[tensor.DType]int{}
		g := tensor.NewGenerator(seed)
		for step := 0; step < 100; step++ {
			ctx := tensor.NewContext(tensor.UseGenerator(g))
			region := ctx
			if p != nil {
				region = Enter(ctx, *p)
			}
			x := region.Bind(tensor.Randn(tensor.Shape{8, 8}, tensor.WithContext(ctx)))
			y := m.Forward(x)
			out.dtypes[y.DType()]++
			tensor.MSELoss(y, tensor.ZerosLike(y)).Backward()
			region.Close()
			ctx.Close()
		}
		out.grads = m.Params()[0].Grad().DType()
	}
	var a, b result
	fp16 := Half(tensor.Float16)
	done := make(chan bool)
	go func() { train(&fp16, 1, &a); done <- true }()
	go func() { train(nil, 2, &b); done <- true }()
	<-done
	<-done
	require.Equal(t, map[tensor.DType]int{tensor.Float16: 100}, a.dtypes)
	require.Equal(t, map[tensor.DType]int{tensor.Float32: 100}, b.dtypes)
	require.Equal(t, tensor.Float32, a.grads, "gradients of FP32 parameters land in FP32")
	require.Equal(t, tensor.Float32, b.grads)
}
