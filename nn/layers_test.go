package nn

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/tensor"
)

func TestLinearForward(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in, out int
		batch   []int
		noBias  bool
	}{
		{"2d", 3, 4, []int{2}, false},
		{"3d input", 5, 2, []int{2, 3}, false},
		{"no bias", 3, 4, []int{2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLinear(tc.in, tc.out, Init{Gen: tensor.NewGenerator(1), NoBias: tc.noBias})
			w := wave(tc.out*tc.in, 1)
			set(l.Weight, w)
			b := make([]float64, tc.out)
			if !tc.noBias {
				b = wave(tc.out, 0.5)
				set(l.Bias, b)
			} else {
				require.Nil(t, l.Bias)
				require.Len(t, l.Params(), 1)
			}
			rows := 1
			for _, d := range tc.batch {
				rows *= d
			}
			xv := wave(rows*tc.in, 2)
			ctx := tensor.NewContext()
			defer ctx.Close()
			x := input(ctx, xv, append(append([]int(nil), tc.batch...), tc.in)...)
			y := l.Forward(x)
			require.Equal(t, tensor.Shape(append(append([]int(nil), tc.batch...), tc.out)), y.Shape())
			want := make([]float64, rows*tc.out)
			for r := 0; r < rows; r++ {
				for o := 0; o < tc.out; o++ {
					s := b[o]
					for k := 0; k < tc.in; k++ {
						s += xv[r*tc.in+k] * w[o*tc.in+k]
					}
					want[r*tc.out+o] = s
				}
			}
			requireClose(t, want, y.Float64s(), 1e-5)
		})
	}
}

// refConv is a direct convolution over x [n, c, h, w] with weight [o, c/groups, kh, kw].
func refConv(x []float64, n, c, h, w int, wt []float64, o, kh, kw int, b []float64, s, p, d [2]int, groups int) ([]float64, int, int) {
	oh := (h+2*p[0]-d[0]*(kh-1)-1)/s[0] + 1
	ow := (w+2*p[1]-d[1]*(kw-1)-1)/s[1] + 1
	cpg, opg := c/groups, o/groups
	out := make([]float64, n*o*oh*ow)
	for ni := 0; ni < n; ni++ {
		for oc := 0; oc < o; oc++ {
			g := oc / opg
			for oy := 0; oy < oh; oy++ {
				for ox := 0; ox < ow; ox++ {
					sum := 0.0
					if b != nil {
						sum = b[oc]
					}
					for ic := 0; ic < cpg; ic++ {
						for ky := 0; ky < kh; ky++ {
							for kx := 0; kx < kw; kx++ {
								iy, ix := oy*s[0]-p[0]+ky*d[0], ox*s[1]-p[1]+kx*d[1]
								if iy < 0 || iy >= h || ix < 0 || ix >= w {
									continue
								}
								xv := x[((ni*c+g*cpg+ic)*h+iy)*w+ix]
								wv := wt[((oc*cpg+ic)*kh+ky)*kw+kx]
								sum += xv * wv
							}
						}
					}
					out[((ni*o+oc)*oh+oy)*ow+ox] = sum
				}
			}
		}
	}
	return out, oh, ow
}

func TestConv2dForward(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n, c, h, w int
		o, kh, kw  int
		opt        tensor.ConvOptions
		noBias     bool
	}{
		{"3x3 pad 1", 2, 3, 5, 5, 4, 3, 3, tensor.ConvOptions{Padding: Pair(1)}, false},
		{"stride 2 dilation 2", 1, 2, 7, 6, 3, 3, 2, tensor.ConvOptions{Stride: Pair(2), Dilation: Pair(2), Padding: [2]int{1, 0}}, false},
		{"groups 2", 2, 4, 4, 4, 6, 3, 3, tensor.ConvOptions{Groups: 2, Padding: Pair(1)}, false},
		{"depthwise", 1, 3, 4, 5, 3, 2, 2, tensor.ConvOptions{Groups: 3}, true},
		{"1x1", 2, 3, 3, 3, 2, 1, 1, tensor.ConvOptions{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conv := NewConv2d(tc.c, tc.o, [2]int{tc.kh, tc.kw}, tc.opt, Init{Gen: tensor.NewGenerator(3), NoBias: tc.noBias})
			o := convDefaults(tc.opt)
			require.Equal(t, tensor.Shape{tc.o, tc.c / o.Groups, tc.kh, tc.kw}, conv.Weight.T.Shape())
			wt := wave(conv.Weight.T.Numel(), 0.5)
			set(conv.Weight, wt)
			var b []float64
			if !tc.noBias {
				b = wave(tc.o, 0.3)
				set(conv.Bias, b)
			}
			xv := wave(tc.n*tc.c*tc.h*tc.w, 1.5)
			ctx := tensor.NewContext()
			defer ctx.Close()
			y := conv.Forward(input(ctx, xv, tc.n, tc.c, tc.h, tc.w))
			want, oh, ow := refConv(xv, tc.n, tc.c, tc.h, tc.w, wt, tc.o, tc.kh, tc.kw, b, o.Stride, o.Padding, o.Dilation, o.Groups)
			require.Equal(t, tensor.Shape{tc.n, tc.o, oh, ow}, y.Shape())
			requireClose(t, want, y.Float64s(), 1e-5)
		})
	}
}

// refPool pools x [n, c, h, w]; avg selects averaging (with includePad) over max.
func refPool(x []float64, n, c, h, w int, k, s, p [2]int, avg, includePad bool) ([]float64, int, int) {
	oh := (h+2*p[0]-k[0])/s[0] + 1
	ow := (w+2*p[1]-k[1])/s[1] + 1
	out := make([]float64, 0, n*c*oh*ow)
	for plane := 0; plane < n*c; plane++ {
		for oy := 0; oy < oh; oy++ {
			for ox := 0; ox < ow; ox++ {
				best, sum, cnt := math.Inf(-1), 0.0, 0
				for ky := 0; ky < k[0]; ky++ {
					for kx := 0; kx < k[1]; kx++ {
						iy, ix := oy*s[0]-p[0]+ky, ox*s[1]-p[1]+kx
						if iy < -p[0] || iy >= h+p[0] || ix < -p[1] || ix >= w+p[1] {
							continue
						}
						if includePad {
							cnt++
						}
						if iy < 0 || iy >= h || ix < 0 || ix >= w {
							continue
						}
						if !includePad {
							cnt++
						}
						v := x[(plane*h+iy)*w+ix]
						best = math.Max(best, v)
						sum += v
					}
				}
				if avg {
					out = append(out, sum/float64(cnt))
				} else {
					out = append(out, best)
				}
			}
		}
	}
	return out, oh, ow
}

func TestPools(t *testing.T) {
	const n, c, h, w = 2, 2, 5, 6
	xv := wave(n*c*h*w, 3)
	for _, tc := range []struct {
		name      string
		m         Module
		k, s, p   [2]int
		avg, incl bool
	}{
		{"max 2x2", NewMaxPool2d(Pair(2), [2]int{}, [2]int{}), Pair(2), Pair(2), Pair(0), false, false},
		{"max 3x3 stride 2 pad 1", NewMaxPool2d(Pair(3), Pair(2), Pair(1)), Pair(3), Pair(2), Pair(1), false, false},
		{"avg 2x3", NewAvgPool2d([2]int{2, 3}, [2]int{}, [2]int{}, true), [2]int{2, 3}, [2]int{2, 3}, Pair(0), true, true},
		{"avg pad count", NewAvgPool2d(Pair(3), Pair(1), Pair(1), true), Pair(3), Pair(1), Pair(1), true, true},
		{"avg pad exclude", NewAvgPool2d(Pair(3), Pair(2), Pair(1), false), Pair(3), Pair(2), Pair(1), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tensor.NewContext()
			defer ctx.Close()
			y := tc.m.Forward(input(ctx, xv, n, c, h, w))
			want, oh, ow := refPool(xv, n, c, h, w, tc.k, tc.s, tc.p, tc.avg, tc.incl)
			require.Equal(t, tensor.Shape{n, c, oh, ow}, y.Shape())
			requireClose(t, want, y.Float64s(), 1e-6)
		})
	}
}

// refBatchNorm normalises x [n, c, s] per channel and returns the output and the
// batch mean and biased variance.
func refBatchNorm(x []float64, n, c, s int, mean, variance, w, b []float64, eps float64) []float64 {
	out := make([]float64, len(x))
	for i := 0; i < n; i++ {
		for ch := 0; ch < c; ch++ {
			for k := 0; k < s; k++ {
				idx := (i*c+ch)*s + k
				out[idx] = (x[idx]-mean[ch])/math.Sqrt(variance[ch]+eps)*w[ch] + b[ch]
			}
		}
	}
	return out
}

func batchStats(x []float64, n, c, s int) (mean, biased, unbiased []float64) {
	mean, biased, unbiased = make([]float64, c), make([]float64, c), make([]float64, c)
	m := float64(n * s)
	for ch := 0; ch < c; ch++ {
		for i := 0; i < n; i++ {
			for k := 0; k < s; k++ {
				mean[ch] += x[(i*c+ch)*s+k]
			}
		}
		mean[ch] /= m
		for i := 0; i < n; i++ {
			for k := 0; k < s; k++ {
				d := x[(i*c+ch)*s+k] - mean[ch]
				biased[ch] += d * d
			}
		}
		unbiased[ch] = biased[ch] / (m - 1)
		biased[ch] /= m
	}
	return mean, biased, unbiased
}

func TestBatchNormTrainEval(t *testing.T) {
	for _, tc := range []struct {
		name  string
		m     func() (Module, *BatchNorm)
		shape []int
	}{
		{"1d [N,C]", func() (Module, *BatchNorm) { b := NewBatchNorm1d(3); return b, &b.BatchNorm }, []int{4, 3}},
		{"1d [N,C,L]", func() (Module, *BatchNorm) { b := NewBatchNorm1d(2); return b, &b.BatchNorm }, []int{3, 2, 5}},
		{"2d", func() (Module, *BatchNorm) { b := NewBatchNorm2d(3); return b, &b.BatchNorm }, []int{2, 3, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, bn := tc.m()
			n, c := tc.shape[0], tc.shape[1]
			s := tensor.Shape(tc.shape[2:]).Numel()
			w, b := wave(c, 1), wave(c+1, 0.5)[1:]
			for i := range w {
				w[i] += 1.5
			}
			set(bn.Weight, w)
			set(bn.Bias, b)
			rm, rv := make([]float64, c), make([]float64, c)
			for i := range rv {
				rv[i] = 1
			}
			// Two training steps with different batches: outputs use batch statistics,
			// running statistics follow momentum 0.1 with the unbiased variance.
			for step := 0; step < 2; step++ {
				xv := wave(n*c*s+step*7, 2+float64(step))[step*7:]
				for i := range xv {
					xv[i] += float64(step) + 0.5*float64((i/s)%c)
				}
				ctx := tensor.NewContext()
				y := m.Forward(input(ctx, xv, tc.shape...))
				mean, biased, unbiased := batchStats(xv, n, c, s)
				requireClose(t, refBatchNorm(xv, n, c, s, mean, biased, w, b, 1e-5), y.Float64s(), 1e-5, "step %d output", step)
				ctx.Close()
				for ch := 0; ch < c; ch++ {
					rm[ch] = 0.9*rm[ch] + 0.1*mean[ch]
					rv[ch] = 0.9*rv[ch] + 0.1*unbiased[ch]
				}
				requireClose(t, rm, bn.RunningMean.T.Float64s(), 1e-5, "running mean after step %d", step+1)
				requireClose(t, rv, bn.RunningVar.T.Float64s(), 1e-5, "running var after step %d", step+1)
			}
			assert.Equal(t, []int64{2}, bn.NumBatchesTracked.T.Int64s())

			// Eval normalises with the running statistics and leaves them alone.
			Eval(m)
			xv := wave(n*c*s, 1)
			ctx := tensor.NewContext()
			defer ctx.Close()
			y := m.Forward(input(ctx, xv, tc.shape...))
			requireClose(t, refBatchNorm(xv, n, c, s, rm, rv, w, b, 1e-5), y.Float64s(), 1e-5)
			requireClose(t, rm, bn.RunningMean.T.Float64s(), 1e-6)
			assert.Equal(t, []int64{2}, bn.NumBatchesTracked.T.Int64s())
		})
	}
}

func TestBatchNormOptions(t *testing.T) {
	b := NewBatchNorm1d(2, NormOptions{NoAffine: true, NoRunningStats: true, Momentum: 0.5, Eps: 1e-3})
	assert.Empty(t, b.Params())
	assert.Empty(t, b.Buffers())
	assert.Equal(t, 0.5, b.Momentum)
	assert.Equal(t, 1e-3, b.Eps)
	// Without running statistics eval still uses batch statistics.
	Eval(b)
	xv := []float64{1, 2, 3, 6, 5, 10}
	ctx := tensor.NewContext()
	defer ctx.Close()
	y := b.Forward(input(ctx, xv, 3, 2))
	mean, biased, _ := batchStats(xv, 3, 2, 1)
	requireClose(t, refBatchNorm(xv, 3, 2, 1, mean, biased, []float64{1, 1}, []float64{0, 0}, 1e-3), y.Float64s(), 1e-5)

	d := NewBatchNorm2d(4)
	assert.Equal(t, 0.1, d.Momentum)
	assert.Equal(t, 1e-5, d.Eps)
	for _, p := range append(d.Params(), d.Buffers()...) {
		if p.T.DType().IsFloat() {
			assert.True(t, p.KeepFP32, p.Name)
			assert.Equal(t, tensor.Float32, p.T.DType(), p.Name)
		}
	}
	assert.Panics(t, func() { d.Forward(input(ctx, wave(12, 1), 3, 4)) }, "2-d input to BatchNorm2d")
	assert.Panics(t, func() { d.Forward(input(ctx, wave(24, 1), 1, 3, 2, 4)) }, "wrong channel count")
}

func TestLayerNormForward(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape []int
		norm  tensor.Shape
	}{
		{"last dim", []int{3, 4}, tensor.Shape{4}},
		{"last two dims", []int{2, 3, 4}, tensor.Shape{3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLayerNorm(tc.norm)
			k := tc.norm.Numel()
			w, b := wave(k, 1), wave(k, 0.2)
			set(l.Weight, w)
			set(l.Bias, b)
			total := tensor.Shape(tc.shape).Numel()
			xv := wave(total, 3)
			ctx := tensor.NewContext()
			defer ctx.Close()
			y := l.Forward(input(ctx, xv, tc.shape...))
			require.Equal(t, tensor.Shape(tc.shape), y.Shape())
			want := make([]float64, total)
			for r := 0; r < total/k; r++ {
				row := xv[r*k : (r+1)*k]
				mean, v := 0.0, 0.0
				for _, x := range row {
					mean += x
				}
				mean /= float64(k)
				for _, x := range row {
					v += (x - mean) * (x - mean)
				}
				v /= float64(k)
				for j, x := range row {
					want[r*k+j] = (x-mean)/math.Sqrt(v+1e-5)*w[j] + b[j]
				}
			}
			requireClose(t, want, y.Float64s(), 1e-5)
		})
	}
}

func TestEmbeddingForward(t *testing.T) {
	e := NewEmbedding(5, 3, Seeded(4))
	w := wave(15, 1)
	set(e.Weight, w)
	ctx := tensor.NewContext()
	defer ctx.Close()
	for _, dt := range []tensor.DType{tensor.Int64, tensor.Int32} {
		idx := tensor.FromSlice([]int64{4, 0, 2, 2, 1, 3}, tensor.Shape{2, 3}, tensor.WithDType(dt), tensor.WithContext(ctx))
		y := e.Forward(idx)
		require.Equal(t, tensor.Shape{2, 3, 3}, y.Shape())
		var want []float64
		for _, i := range []int{4, 0, 2, 2, 1, 3} {
			want = append(want, w[3*i:3*i+3]...)
		}
		requireClose(t, want, y.Float64s(), 0)
	}
	assert.Panics(t, func() { e.Forward(input(ctx, []float64{1}, 1)) }, "float indices")
}

func TestDropout(t *testing.T) {
	const n, p = 4000, 0.25
	d := NewDropout(p)
	xv := make([]float64, n)
	for i := range xv {
		xv[i] = 1 + float64(i%7)
	}
	g := tensor.NewGenerator(99)
	run := func() []float64 {
		root := tensor.NewContext()
		defer root.Close()
		c := root.WithGenerator(g)
		return d.Forward(input(c, xv, n)).Float64s()
	}
	state := g.State()
	y1 := run()
	zeros := 0
	for i, v := range y1 {
		if v == 0 {
			zeros++
			continue
		}
		require.InDelta(t, xv[i]/(1-p), v, 1e-5, "kept elements are scaled by 1/(1-p)")
	}
	assert.InDelta(t, p, float64(zeros)/n, 0.04, "fraction dropped")
	assert.NotEqual(t, y1, run(), "the generator advances between steps")
	g.SetState(state)
	assert.Equal(t, y1, run(), "restoring the generator replays the mask")

	Eval(d)
	requireClose(t, xv, run(), 0, "eval is the identity")
	assert.Panics(t, func() { NewDropout(1.5) })
}

func TestActivationsAndFlatten(t *testing.T) {
	xv := wave(24, 3)
	ctx := tensor.NewContext()
	defer ctx.Close()
	x := input(ctx, xv, 2, 3, 4)
	for _, tc := range []struct {
		name string
		m    Module
		f    func(float64) float64
	}{
		{"relu", NewReLU(), func(v float64) float64 { return math.Max(v, 0) }},
		{"gelu", NewGELU(), func(v float64) float64 { return 0.5 * v * (1 + math.Erf(v/math.Sqrt2)) }},
		{"gelu tanh", &GELU{Approximate: true}, func(v float64) float64 {
			return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
		}},
		{"tanh", NewTanh(), math.Tanh},
		{"sigmoid", NewSigmoid(), func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := tc.m.Forward(x)
			require.Equal(t, x.Shape(), y.Shape())
			want := make([]float64, len(xv))
			for i, v := range xv {
				want[i] = tc.f(v)
			}
			requireClose(t, want, y.Float64s(), 1e-5)
		})
	}
	y := NewFlatten().Forward(x)
	assert.Equal(t, tensor.Shape{2, 12}, y.Shape())
	requireClose(t, xv, y.Float64s(), 0)
	assert.Equal(t, tensor.Shape{6, 4}, (&Flatten{Start: 0, End: 1}).Forward(x).Shape())
}

func TestLosses(t *testing.T) {
	ctx := tensor.NewContext()
	defer ctx.Close()
	logits := input(ctx, []float64{1, 2, 0.5, -1, 0, 3}, 2, 3)
	labels := tensor.FromSlice([]int64{1, 2}, nil, tensor.WithContext(ctx))
	ce := func(row []float64, label int, eps float64) float64 {
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, v)
		}
		s := 0.0
		for _, v := range row {
			s += math.Exp(v - m)
		}
		loss := 0.0
		for j, v := range row {
			q := eps / float64(len(row))
			if j == label {
				q += 1 - eps
			}
			loss -= q * (v - m - math.Log(s))
		}
		return loss
	}
	for _, eps := range []float64{0, 0.1} {
		got := CrossEntropyLoss{Smoothing: eps}.Loss(logits, labels).Item()
		want := (ce([]float64{1, 2, 0.5}, 1, eps) + ce([]float64{-1, 0, 3}, 2, eps)) / 2
		assert.InDelta(t, want, got, 1e-6, "smoothing %g", eps)
	}
	pred := input(ctx, []float64{1, 2, 3, 4}, 4)
	target := input(ctx, []float64{0, 2, 5, 3}, 4)
	assert.InDelta(t, (1+0+4+1)/4.0, MSELoss{}.Loss(pred, target).Item(), 1e-6)
	assert.InDelta(t, 6.0, MSELoss{Reduction: tensor.ReductionSum}.Loss(pred, target).Item(), 1e-6)
	y := input(ctx, []float64{0, 1, 1, 0}, 4)
	bce := 0.0
	for i, x := range []float64{1, 2, 3, 4} {
		p := 1 / (1 + math.Exp(-x))
		yy := []float64{0, 1, 1, 0}[i]
		bce -= yy*math.Log(p) + (1-yy)*math.Log(1-p)
	}
	assert.InDelta(t, bce/4, BCEWithLogitsLoss{}.Loss(pred, y).Item(), 1e-6)
	var l Loss = LossFunc(func(p, t *tensor.Tensor) *tensor.Tensor { return tensor.MSELoss(p, t) })
	assert.InDelta(t, 1.5, l.Loss(pred, target).Item(), 1e-6)
}

// TestGradientsReachEveryParameter runs a backward through each layer and checks that
// every parameter (and the input) gets a gradient of its own shape and dtype.
func TestGradientsReachEveryParameter(t *testing.T) {
	g := tensor.NewGenerator(5)
	for _, tc := range []struct {
		name  string
		m     Module
		shape []int
		index bool
	}{
		{"linear", NewLinear(4, 3, Init{Gen: g}), []int{2, 4}, false},
		{"conv", NewConv2d(4, 6, Pair(3), tensor.ConvOptions{Padding: Pair(1), Groups: 2}, Init{Gen: g}), []int{2, 4, 5, 5}, false},
		{"batchnorm1d", NewBatchNorm1d(3), []int{4, 3}, false},
		{"batchnorm2d", NewBatchNorm2d(3), []int{2, 3, 2, 2}, false},
		{"layernorm", NewLayerNorm(tensor.Shape{4}), []int{3, 4}, false},
		{"embedding", NewEmbedding(6, 4, Init{Gen: g}), []int{2, 3}, true},
		{"relu", NewReLU(), []int{2, 3}, false},
		{"gelu", NewGELU(), []int{2, 3}, false},
		{"tanh", NewTanh(), []int{2, 3}, false},
		{"sigmoid", NewSigmoid(), []int{2, 3}, false},
		{"dropout", NewDropout(0.5), []int{2, 8}, false},
		{"maxpool", NewMaxPool2d(Pair(2), [2]int{}, [2]int{}), []int{1, 2, 4, 4}, false},
		{"avgpool", NewAvgPool2d(Pair(2), [2]int{}, [2]int{}, true), []int{1, 2, 4, 4}, false},
		{"flatten", NewFlatten(), []int{2, 3, 2}, false},
		{"sequential", NewSequential(
			NewConv2d(2, 4, Pair(3), tensor.ConvOptions{Padding: Pair(1)}, Init{Gen: g}),
			NewBatchNorm2d(4), NewReLU(), NewMaxPool2d(Pair(2), [2]int{}, [2]int{}), NewFlatten(),
			NewLinear(16, 5, Init{Gen: g}), NewLayerNorm(tensor.Shape{5}), NewGELU()), []int{3, 2, 4, 4}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tensor.NewContext()
			defer ctx.Close()
			var x *tensor.Tensor
			n := tensor.Shape(tc.shape).Numel()
			if tc.index {
				idx := make([]int64, n)
				for i := range idx {
					idx[i] = int64(i % 6)
				}
				x = tensor.FromSlice(idx, tensor.Shape(tc.shape), tensor.WithContext(ctx))
			} else {
				x = tensor.FromSlice(wave(n, 2), tensor.Shape(tc.shape), tensor.WithDType(tensor.Float32), tensor.WithContext(ctx), tensor.WithGrad())
			}
			y := tc.m.Forward(x)
			// A weighted sum, so that normalised outputs do not have a zero gradient.
			wts := tensor.FromSlice(wave(y.Numel(), 1), y.Shape(), tensor.WithDType(y.DType()), tensor.WithContext(ctx))
			y.Mul(wts).Sum().Backward()
			if !tc.index {
				require.NotNil(t, x.Grad(), "input gradient")
				assert.Equal(t, x.Shape(), x.Grad().Shape())
			}
			for _, p := range tc.m.Params() {
				gr := p.Grad()
				require.NotNil(t, gr, "gradient of %s", p.Name)
				assert.Equal(t, p.T.Shape(), gr.Shape(), p.Name)
				assert.Equal(t, p.T.DType(), gr.DType(), p.Name)
				assert.True(t, allFinite(gr.Float64s()), p.Name)
			}
			for _, p := range tc.m.Buffers() {
				assert.Nil(t, p.Grad(), "buffer %s gets no gradient", p.Name)
			}
			ZeroGrad(tc.m)
			for _, p := range tc.m.Params() {
				assert.Nil(t, p.Grad(), p.Name)
			}
		})
	}
}

func TestLayerMisuse(t *testing.T) {
	ctx := tensor.NewContext()
	defer ctx.Close()
	x := input(ctx, wave(6, 1), 2, 3)
	var opErr *tensor.OpError
	func() {
		defer func() { opErr, _ = recover().(*tensor.OpError) }()
		NewLinear(4, 2).Forward(x)
	}()
	require.NotNil(t, opErr, "a wrong input size panics with *tensor.OpError")
	assert.Contains(t, opErr.Error(), "nn.Linear")
	assert.Contains(t, opErr.Error(), "[2 3]")
	assert.Panics(t, func() { NewConv2d(3, 4, Pair(3), tensor.ConvOptions{Groups: 2}) }, "groups must divide channels")
	assert.Panics(t, func() { NewLinear(0, 2) })
	assert.Panics(t, func() { NewLinear(2, 2, Init{}, Init{}) })
	assert.Panics(t, func() { NewConv2d(2, 2, Pair(3), tensor.ConvOptions{}).Forward(x) })
}
