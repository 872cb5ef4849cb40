package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// gDistinct is a float64 leaf requiring grad whose elements are a shuffle of
// 0.1·(0, 1, …, n−1) − n/20: no two tie, and each gap is far wider than a
// finite-difference step (max pooling).
func gDistinct(shape ...int) gradInput {
	return func(r *rand.Rand) *Tensor {
		s := Shape(shape)
		n := s.Numel()
		v := make([]float64, n)
		for i, p := range r.Perm(n) {
			v[i] = 0.1*float64(p) - float64(n)/20
		}
		return FromSlice(v, s, WithGrad())
	}
}

// convCase is one Conv2d geometry shared by the gradcheck rows and the forward tests.
type convCase struct {
	name   string
	x, w   Shape
	bias   bool
	opts   ConvOptions
	permIn bool // feed x as a non-contiguous (permuted) view
}

var convCases = []convCase{
	{name: "plain", x: Shape{2, 3, 5, 6}, w: Shape{4, 3, 3, 2}, bias: true},
	{name: "stride 2 padding 1", x: Shape{2, 3, 7, 6}, w: Shape{4, 3, 3, 3}, bias: true, opts: ConvOptions{Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}},
	{name: "dilation 2", x: Shape{2, 2, 7, 7}, w: Shape{3, 2, 2, 3}, bias: true, opts: ConvOptions{Dilation: [2]int{2, 2}, Padding: [2]int{1, 2}}},
	{name: "groups 2 no bias", x: Shape{2, 4, 5, 5}, w: Shape{6, 2, 3, 3}, opts: ConvOptions{Groups: 2, Padding: [2]int{1, 1}}},
	{name: "all options non-square", x: Shape{2, 4, 7, 8}, w: Shape{6, 2, 3, 2}, bias: true,
		opts: ConvOptions{Stride: [2]int{2, 1}, Padding: [2]int{1, 0}, Dilation: [2]int{2, 1}, Groups: 2}},
	{name: "depthwise stride 2", x: Shape{2, 3, 6, 5}, w: Shape{3, 1, 3, 3}, bias: true, opts: ConvOptions{Groups: 3, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}},
	{name: "pointwise", x: Shape{2, 3, 4, 5}, w: Shape{5, 3, 1, 1}, bias: true},
	{name: "pointwise groups 3", x: Shape{2, 6, 3, 3}, w: Shape{3, 2, 1, 1}, opts: ConvOptions{Groups: 3}},
	{name: "single image", x: Shape{1, 2, 4, 4}, w: Shape{2, 2, 3, 3}, bias: true, opts: ConvOptions{Padding: [2]int{1, 1}}},
	{name: "permuted input", x: Shape{2, 3, 4, 5}, w: Shape{2, 3, 2, 2}, bias: true, permIn: true},
}

// input builds x for the case from a [N, C, H, W] buffer laid out as the case wants.
func (cc convCase) input(x *Tensor) *Tensor {
	if cc.permIn {
		// x was made as [N, W, H, C]; the view is [N, C, H, W].
		return x.Permute(0, 3, 2, 1)
	}
	return x
}

// storedShape is the shape x is created with (permuted for permIn).
func (cc convCase) storedShape() Shape {
	if cc.permIn {
		return Shape{cc.x[0], cc.x[3], cc.x[2], cc.x[1]}
	}
	return cc.x
}

func convGradCases() []gradCase {
	var cases []gradCase
	for _, cc := range convCases {
		in := []gradInput{gN(cc.storedShape()...), gN(cc.w...)}
		if cc.bias {
			in = append(in, gN(cc.w[0]))
		}
		cases = append(cases, gradCase{op: "conv2d", name: cc.name, in: in, f: func(xs []*Tensor) *Tensor {
			var b *Tensor
			if cc.bias {
				b = xs[2]
			}
			return Conv2d(cc.input(xs[0]), xs[1], b, cc.opts)
		}})
	}
	mp := func(k, s, p [2]int) func(xs []*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return MaxPool2d(xs[0], k, s, p) }
	}
	ap := func(k, s, p [2]int, inc bool) func(xs []*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return AvgPool2d(xs[0], k, s, p, inc) }
	}
	return append(cases,
		gradCase{op: "max_pool2d", name: "2x2 default stride", in: []gradInput{gDistinct(2, 3, 4, 6)}, f: mp([2]int{2, 2}, [2]int{}, [2]int{})},
		gradCase{op: "max_pool2d", name: "3x3 stride 2 pad 1 overlapping", in: []gradInput{gDistinct(2, 2, 7, 5)}, f: mp([2]int{3, 3}, [2]int{2, 2}, [2]int{1, 1})},
		gradCase{op: "max_pool2d", name: "non-square", in: []gradInput{gDistinct(1, 2, 5, 6)}, f: mp([2]int{3, 2}, [2]int{1, 2}, [2]int{1, 1})},
		gradCase{op: "max_pool2d", name: "permuted input", in: []gradInput{gDistinct(2, 4, 4, 3)}, f: func(xs []*Tensor) *Tensor {
			return MaxPool2d(xs[0].Permute(0, 3, 2, 1), [2]int{2, 2}, [2]int{1, 1}, [2]int{})
		}},
		gradCase{op: "avg_pool2d", name: "include pad", in: []gradInput{gN(2, 2, 7, 6)}, f: ap([2]int{3, 3}, [2]int{2, 2}, [2]int{1, 1}, true)},
		gradCase{op: "avg_pool2d", name: "exclude pad", in: []gradInput{gN(2, 2, 7, 6)}, f: ap([2]int{3, 3}, [2]int{2, 2}, [2]int{1, 1}, false)},
		gradCase{op: "avg_pool2d", name: "non-square exclude pad", in: []gradInput{gN(1, 3, 5, 7)}, f: ap([2]int{2, 3}, [2]int{1, 2}, [2]int{1, 1}, false)},
		gradCase{op: "avg_pool2d", name: "2x2 default stride", in: []gradInput{gN(2, 2, 4, 4)}, f: ap([2]int{2, 2}, [2]int{}, [2]int{}, true)},
	)
}

func TestGradCheckConvPoolOps(t *testing.T) { runGradCases(t, convGradCases()) }

// --- float64 references

// refConv2d is direct convolution (cross-correlation) in float64.
func refConv2d(x, w, b []float64, xs, ws Shape, o ConvOptions) ([]float64, Shape) {
	def := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	sh, sw := def(o.Stride[0], 1), def(o.Stride[1], 1)
	dh, dw := def(o.Dilation[0], 1), def(o.Dilation[1], 1)
	ph, pw := o.Padding[0], o.Padding[1]
	g := def(o.Groups, 1)
	n, c, h, wd := xs[0], xs[1], xs[2], xs[3]
	oc, cg, kh, kw := ws[0], ws[1], ws[2], ws[3]
	oh := (h+2*ph-dh*(kh-1)-1)/sh + 1
	ow := (wd+2*pw-dw*(kw-1)-1)/sw + 1
	og := oc / g
	out := make([]float64, n*oc*oh*ow)
	for in := 0; in < n; in++ {
		for o := 0; o < oc; o++ {
			grp := o / og
			for y := 0; y < oh; y++ {
				for z := 0; z < ow; z++ {
					s := 0.0
					if b != nil {
						s = b[o]
					}
					for ci := 0; ci < cg; ci++ {
						ch := grp*cg + ci
						for i := 0; i < kh; i++ {
							for j := 0; j < kw; j++ {
								hy, wz := y*sh-ph+i*dh, z*sw-pw+j*dw
								if hy < 0 || hy >= h || wz < 0 || wz >= wd {
									continue
								}
								s += x[((in*c+ch)*h+hy)*wd+wz] * w[((o*cg+ci)*kh+i)*kw+j]
							}
						}
					}
					out[((in*oc+o)*oh+y)*ow+z] = s
				}
			}
		}
	}
	return out, Shape{n, oc, oh, ow}
}

// refPool2d is naive max or average pooling in float64 (floor mode).
func refPool2d(x []float64, xs Shape, k, s, p [2]int, isMax, includePad bool) ([]float64, Shape) {
	for i := range s {
		if s[i] == 0 {
			s[i] = k[i]
		}
	}
	n, c, h, w := xs[0], xs[1], xs[2], xs[3]
	oh := (h+2*p[0]-k[0])/s[0] + 1
	ow := (w+2*p[1]-k[1])/s[1] + 1
	out := make([]float64, n*c*oh*ow)
	for pl := 0; pl < n*c; pl++ {
		for y := 0; y < oh; y++ {
			for z := 0; z < ow; z++ {
				best, sum, cnt, padded := math.Inf(-1), 0.0, 0, 0
				for i := 0; i < k[0]; i++ {
					for j := 0; j < k[1]; j++ {
						hy, wz := y*s[0]-p[0]+i, z*s[1]-p[1]+j
						if hy < h+p[0] && wz < w+p[1] {
							padded++
						}
						if hy < 0 || hy >= h || wz < 0 || wz >= w {
							continue
						}
						v := x[(pl*h+hy)*w+wz]
						best = math.Max(best, v)
						sum += v
						cnt++
					}
				}
				r := best
				if !isMax {
					if includePad {
						cnt = padded
					}
					r = sum / float64(cnt)
				}
				out[(pl*oh+y)*ow+z] = r
			}
		}
	}
	return out, Shape{n, c, oh, ow}
}

// permuteNWHC lays a [N, C, H, W] buffer out as [N, W, H, C] (convCase.permIn).
func permuteNWHC(v []float64, s Shape) []float64 {
	out := make([]float64, len(v))
	n, c, h, w := s[0], s[1], s[2], s[3]
	for a := 0; a < n; a++ {
		for b := 0; b < c; b++ {
			for y := 0; y < h; y++ {
				for z := 0; z < w; z++ {
					out[((a*w+z)*h+y)*c+b] = v[((a*c+b)*h+y)*w+z]
				}
			}
		}
	}
	return out
}

func TestConv2dForward(t *testing.T) {
	for i, cc := range convCases {
		t.Run(cc.name, func(t *testing.T) {
			c := NewContext()
			defer c.Close()
			xv := randVals(uint64(100+i), cc.x.Numel(), 1)
			wv := randVals(uint64(200+i), cc.w.Numel(), 1)
			var bv []float64
			if cc.bias {
				bv = randVals(uint64(300+i), cc.w[0], 1)
			}
			want, ws := refConv2d(xv, wv, bv, cc.x, cc.w, cc.opts)
			stored := xv
			if cc.permIn {
				stored = permuteNWHC(xv, cc.x)
			}
			for _, dt := range []DType{Float64, Float32} {
				x := cc.input(FromSlice(stored, cc.storedShape(), WithDType(dt), WithContext(c)))
				w := FromSlice(wv, cc.w, WithDType(dt), WithContext(c))
				var b *Tensor
				if cc.bias {
					b = FromSlice(bv, nil, WithDType(dt), WithContext(c))
				}
				y := Conv2d(x, w, b, cc.opts)
				require.Equal(t, ws, y.Shape())
				require.Equal(t, dt, y.DType())
				tol := 1e-12
				if dt == Float32 {
					tol = 1e-5
				}
				requireClose(t, want, y.Float64s(), tol, dt.String())
			}
		})
	}
}

// TestConv2dHalf runs conv2d in float16 and bfloat16 against the float64 reference
// on the same (rounded) inputs: accumulation is float32, so only the final rounding
// and the float32 sums separate them.
func TestConv2dHalf(t *testing.T) {
	cc := convCases[4] // every option at once
	for _, dt := range []DType{Float16, BFloat16} {
		t.Run(dt.String(), func(t *testing.T) {
			c := NewContext()
			defer c.Close()
			xv := roundTo(randVals(1, cc.x.Numel(), 1), dt)
			wv := roundTo(randVals(2, cc.w.Numel(), 0.5), dt)
			bv := roundTo(randVals(3, cc.w[0], 1), dt)
			want, _ := refConv2d(xv, wv, bv, cc.x, cc.w, cc.opts)
			x := FromSlice(xv, cc.x, WithDType(dt), WithContext(c)).SetRequiresGrad(true)
			w := FromSlice(wv, cc.w, WithDType(dt), WithContext(c)).SetRequiresGrad(true)
			b := FromSlice(bv, nil, WithDType(dt), WithContext(c)).SetRequiresGrad(true)
			y := Conv2d(x, w, b, cc.opts)
			require.Equal(t, dt, y.DType())
			requireClose(t, want, y.Float64s(), halfTol(dt), "forward")

			// The half backward agrees with the float64 one.
			gv := roundTo(randVals(4, y.Numel(), 1), dt)
			y.Backward(GradOutput(FromSlice(gv, y.Shape(), WithDType(dt), WithContext(c))))
			x64 := FromSlice(xv, cc.x, WithContext(c), WithGrad())
			w64 := FromSlice(wv, cc.w, WithContext(c), WithGrad())
			b64 := FromSlice(bv, nil, WithContext(c), WithGrad())
			Conv2d(x64, w64, b64, cc.opts).Backward(GradOutput(FromSlice(gv, y.Shape(), WithContext(c))))
			for _, p := range [][2]*Tensor{{x, x64}, {w, w64}, {b, b64}} {
				require.Equal(t, dt, p[0].Grad().DType())
				// Gradients sum over many terms: compare relative to their scale.
				requireClose(t, p[1].Grad().Float64s(), p[0].Grad().Float64s(), 4*halfTol(dt), "gradient")
			}
		})
	}
}

func TestConv2dAutocast(t *testing.T) {
	c := NewContext()
	defer c.Close()
	cc := convCases[1]
	xv, wv, bv := randVals(5, cc.x.Numel(), 1), randVals(6, cc.w.Numel(), 1), randVals(7, cc.w[0], 1)
	ac := c.WithAutocast(castAllPolicy{low: BFloat16})
	x := FromSlice(xv, cc.x, WithDType(Float32), WithContext(ac))
	w := FromSlice(wv, cc.w, WithDType(Float32), WithContext(ac), WithGrad())
	b := FromSlice(bv, nil, WithDType(Float32), WithContext(ac), WithGrad())
	y := Conv2d(x, w, b, cc.opts)
	require.Equal(t, BFloat16, y.DType(), "conv2d is LowerPrecision")
	want, _ := refConv2d(roundTo(xv, BFloat16), roundTo(wv, BFloat16), roundTo(bv, BFloat16), cc.x, cc.w, cc.opts)
	requireClose(t, want, y.Float64s(), halfTol(BFloat16), "autocast forward")
	y.Cast(Float32).Sum().Backward()
	require.Equal(t, Float32, w.Grad().DType(), "the gradient of an FP32 leaf is FP32")
	require.Equal(t, cc.w, w.Grad().Shape())
}

func TestPoolForward(t *testing.T) {
	xs := Shape{2, 3, 7, 6}
	xv := randVals(21, xs.Numel(), 1)
	for _, tc := range []struct {
		k, s, p [2]int
	}{
		{[2]int{2, 2}, [2]int{}, [2]int{}},
		{[2]int{3, 3}, [2]int{2, 2}, [2]int{1, 1}},
		{[2]int{3, 2}, [2]int{1, 2}, [2]int{1, 1}},
		{[2]int{7, 6}, [2]int{1, 1}, [2]int{}},
	} {
		c := NewContext()
		for _, dt := range []DType{Float64, Float32} {
			x := FromSlice(xv, xs, WithDType(dt), WithContext(c))
			want, ws := refPool2d(xv, xs, tc.k, tc.s, tc.p, true, false)
			y := MaxPool2d(x, tc.k, tc.s, tc.p)
			require.Equal(t, ws, y.Shape())
			requireClose(t, want, y.Float64s(), 1e-6, "max_pool2d")
			for _, inc := range []bool{true, false} {
				want, _ := refPool2d(xv, xs, tc.k, tc.s, tc.p, false, inc)
				requireClose(t, want, AvgPool2d(x, tc.k, tc.s, tc.p, inc).Float64s(), 1e-6, "avg_pool2d")
			}
		}
		c.Close()
	}
}

func TestPoolHalf(t *testing.T) {
	xs := Shape{1, 2, 5, 5}
	for _, dt := range []DType{Float16, BFloat16} {
		c := NewContext()
		xv := roundTo(randVals(22, xs.Numel(), 2), dt)
		x := FromSlice(xv, xs, WithDType(dt), WithContext(c))
		k, s, p := [2]int{3, 3}, [2]int{2, 2}, [2]int{1, 1}
		want, _ := refPool2d(xv, xs, k, s, p, true, false)
		y := MaxPool2d(x, k, s, p)
		require.Equal(t, dt, y.DType())
		require.Equal(t, want, y.Float64s(), "max pooling picks an element: exact")
		want, _ = refPool2d(xv, xs, k, s, p, false, true)
		requireClose(t, want, AvgPool2d(x, k, s, p, true).Float64s(), halfTol(dt), "avg_pool2d")
		c.Close()
	}
}

func TestConvPoolMisuse(t *testing.T) {
	c := NewContext()
	defer c.Close()
	x := Zeros(Shape{2, 3, 5, 5}, WithContext(c))
	for _, tc := range []struct {
		name, want string
		f          func()
	}{
		{"wrong channel count", "weight expects 4 input channels", func() { Conv2d(x, Zeros(Shape{2, 4, 3, 3}, WithContext(c)), nil, ConvOptions{}) }},
		{"groups do not divide channels", "not divisible by groups 2", func() {
			Conv2d(x, Zeros(Shape{2, 1, 3, 3}, WithContext(c)), nil, ConvOptions{Groups: 2})
		}},
		{"groups do not divide outputs", "output channels 4", func() {
			Conv2d(Zeros(Shape{1, 6, 5, 5}, WithContext(c)), Zeros(Shape{4, 2, 3, 3}, WithContext(c)), nil, ConvOptions{Groups: 3})
		}},
		{"3-d input", "input must be 4-d", func() {
			Conv2d(Zeros(Shape{3, 5, 5}, WithContext(c)), Zeros(Shape{2, 3, 3, 3}, WithContext(c)), nil, ConvOptions{})
		}},
		{"kernel larger than input", "larger than the padded input", func() {
			Conv2d(x, Zeros(Shape{2, 3, 7, 3}, WithContext(c)), nil, ConvOptions{Padding: [2]int{0, 1}})
		}},
		{"bad bias", "bias must be [2]", func() {
			Conv2d(x, Zeros(Shape{2, 3, 3, 3}, WithContext(c)), Zeros(Shape{3}, WithContext(c)), ConvOptions{})
		}},
		{"mixed dtypes", "share one floating dtype", func() {
			Conv2d(x, Zeros(Shape{2, 3, 3, 3}, WithDType(Float16), WithContext(c)), nil, ConvOptions{})
		}},
		{"negative stride", "stride", func() { Conv2d(x, Zeros(Shape{2, 3, 3, 3}, WithContext(c)), nil, ConvOptions{Stride: [2]int{-1, 1}}) }},
		{"pool 3-d input", "input must be 4-d", func() { MaxPool2d(Zeros(Shape{3, 5, 5}, WithContext(c)), [2]int{2, 2}, [2]int{}, [2]int{}) }},
		{"pool padding over half the kernel", "half the kernel", func() { AvgPool2d(x, [2]int{2, 2}, [2]int{}, [2]int{2, 0}, true) }},
		{"pool kernel larger than input", "larger than the padded input", func() { MaxPool2d(x, [2]int{6, 2}, [2]int{}, [2]int{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := requireOpError(t, tc.f)
			require.Contains(t, e.Error(), tc.want)
			require.True(t, strings.HasPrefix(e.Error(), "tensor: "+e.Op+": "), e.Error())
		})
	}
}

// TestConvPoolReleaseMemory checks that a forward and backward inside a Context leave
// nothing allocated once the Context closes, and that no-grad pooling keeps no index.
func TestConvPoolReleaseMemory(t *testing.T) {
	dev := CPUDevice(7)
	before := cpuAllocated(t, dev)
	c := NewContext()
	x := Randn(Shape{2, 4, 6, 6}, WithDevice(dev), WithContext(c), WithGrad())
	w := Randn(Shape{4, 2, 3, 3}, WithDevice(dev), WithContext(c), WithGrad())
	b := Randn(Shape{4}, WithDevice(dev), WithContext(c), WithGrad())
	y := Conv2d(x, w, b, ConvOptions{Groups: 2, Padding: [2]int{1, 1}})
	y = MaxPool2d(y, [2]int{2, 2}, [2]int{}, [2]int{})
	y = AvgPool2d(y, [2]int{3, 3}, [2]int{1, 1}, [2]int{1, 1}, false)
	y.Sum().Backward()
	require.Equal(t, Shape{4, 2, 3, 3}, w.Grad().Shape())
	x.ZeroGrad()
	w.ZeroGrad()
	b.ZeroGrad()
	c.Close()
	require.Equal(t, before, cpuAllocated(t, dev))

	// Without grad, max pooling releases its index at once.
	root := NewContext()
	x = Randn(Shape{1, 1, 64, 64}, WithDevice(dev), WithContext(root.NoGrad()))
	mid := cpuAllocated(t, dev)
	MaxPool2d(x, [2]int{2, 2}, [2]int{}, [2]int{})
	require.Equal(t, int64(32*32*4), cpuAllocated(t, dev)-mid, "only the float32 output stays")
	root.Close()
	require.Equal(t, before, cpuAllocated(t, dev))
}

// dot is Σ a·b.
func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// TestConv2dLargeAdjoint checks shapes big enough to split Im2Col, Col2Im and the GEMMs
// over workers: the forward against direct convolution, and both gradients through
// the adjoint identities of a bilinear map, ⟨g, conv(x, w)⟩ = ⟨gx, x⟩ = ⟨gw, w⟩.
func TestConv2dLargeAdjoint(t *testing.T) {
	c := NewContext()
	defer c.Close()
	xs, ws := Shape{3, 8, 20, 18}, Shape{12, 4, 3, 3}
	o := ConvOptions{Padding: [2]int{1, 2}, Stride: [2]int{1, 2}, Groups: 2}
	xv, wv := randVals(71, xs.Numel(), 1), randVals(72, ws.Numel(), 1)
	want, ys := refConv2d(xv, wv, nil, xs, ws, o)
	x := FromSlice(xv, xs, WithContext(c), WithGrad())
	w := FromSlice(wv, ws, WithContext(c), WithGrad())
	y := Conv2d(x, w, nil, o)
	require.Equal(t, ys, y.Shape())
	requireClose(t, want, y.Float64s(), 1e-12, "forward")
	gv := randVals(73, ys.Numel(), 1)
	y.Backward(GradOutput(FromSlice(gv, ys, WithContext(c))))
	lhs := dot(gv, want)
	require.InDelta(t, lhs, dot(x.Grad().Float64s(), xv), 1e-9*math.Abs(lhs))
	require.InDelta(t, lhs, dot(w.Grad().Float64s(), wv), 1e-9*math.Abs(lhs))

	// float32 agrees with float64 at this size too.
	x32 := FromSlice(xv, xs, WithDType(Float32), WithContext(c), WithGrad())
	w32 := FromSlice(wv, ws, WithDType(Float32), WithContext(c), WithGrad())
	Conv2d(x32, w32, nil, o).Backward(GradOutput(FromSlice(gv, ys, WithDType(Float32), WithContext(c))))
	requireClose(t, x.Grad().Float64s(), x32.Grad().Float64s(), 1e-4, "float32 gx")
	requireClose(t, w.Grad().Float64s(), w32.Grad().Float64s(), 1e-4, "float32 gw")
}

func ExampleConv2d() {
	// Sum each 2×2 block of a 4×4 image: a ones kernel with stride 2.
	x := Arange(1, 17, 1).Reshape(1, 1, 4, 4)
	w := Ones(Shape{1, 1, 2, 2})
	y := Conv2d(x, w, nil, ConvOptions{Stride: [2]int{2, 2}})
	fmt.Println(y.Shape(), y.Float64s())
	fmt.Println(MaxPool2d(x, [2]int{2, 2}, [2]int{}, [2]int{}).Float64s())
	// Output:
	// [1 1 2 2] [14 22 46 54]
	// [6 8 14 16]
}
