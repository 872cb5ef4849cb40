package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/kernels"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
)

// TestShimUnscaleCheck unscales three gradients in one launch and compares data and
// flag with the CPU backend's UnscaleCheck per gradient.
func TestShimUnscaleCheck(t *testing.T) {
	s := loadShim(t)
	lens := []int{1000, 7, 4097}
	for _, dt := range floatDTypes {
		for ci, c := range []struct {
			inv    float32
			poison int // gradient holding an Inf (-1: none)
			big    bool
		}{{1.0 / 1024, -1, false}, {1.0 / 3, 1, false}, {4, -1, true}, {0.5, 2, false}} {
			r := newRand(uint64(ci))
			var bufs []*buf
			wantFound := false
			ptrs, lb := newBuf(backend.Int64, len(lens)), newBuf(backend.Int64, len(lens))
			var wants []*buf
			for k, n := range lens {
				v := randVals(r, n, false)
				if k == c.poison {
					v[n/2] = math.Inf(-1)
				}
				if c.big && k == 2 {
					v[3] = 60000 // overflows half once scaled by 4
				}
				b := bufOf(dt, v)
				gs := up(b)
				wantFound = cpuB().UnscaleCheck(gs, n, c.inv) || wantFound
				wants = append(wants, down(gs, n))
				bufs = append(bufs, b)
				ptrs.i64()[k] = int64(b.ptr())
				lb.i64()[k] = int64(n)
			}
			found := newBuf(backend.Int32, 1)
			name := kernels.Name("unscale_check", dt)
			s.run(t, name, ptrs.ptr(), lb.ptr(), int32(len(lens)), c.inv, found.ptr())
			for k := range bufs {
				sameBits(t, fmt.Sprintf("%s case %d gradient %d", name, ci, k), bufs[k], wants[k])
			}
			if (found.i32()[0] != 0) != wantFound {
				t.Errorf("%s case %d: found = %d, the CPU backend says %v", name, ci, found.i32()[0], wantFound)
			}
		}
	}
}

func TestShimCountNonFinite(t *testing.T) {
	s := loadShim(t)
	for _, dt := range floatDTypes {
		r := newRand(3)
		v := randVals(r, 5000, true)
		v[100], v[200], v[300] = math.Inf(1), math.NaN(), 1e6
		b := bufOf(dt, v)
		bs := up(b)
		inf, nan, mx := cpuB().CountNonFinite(bs, b.n)
		cpuB().Free(bs)
		out := newBuf(backend.Int64, 3)
		s.run(t, kernels.Name("count_nonfinite", dt), b.ptr(), int64(b.n), out.ptr())
		gi, gn, gm := out.i64()[0], out.i64()[1], math.Float64frombits(uint64(out.i64()[2]))
		if gi != int64(inf) || gn != int64(nan) || gm != mx {
			t.Errorf("count_nonfinite_%s = %d, %d, %v; the CPU backend %d, %d, %v", kernels.Suffix(dt), gi, gn, gm, inf, nan, mx)
		}
	}
}

// optimParam builds a one-parameter model of dtype dt for the optim package.
func optimParam(dt backend.DType, vals []float64) *nn.Param {
	return &nn.Param{Name: "w", T: tensor.FromSlice(vals, tensor.Shape{len(vals)}, tensor.WithDType(dt), tensor.WithGrad())}
}

// paramBits returns a tensor's bits as a buffer.
func tensorBuf(tt *tensor.Tensor) *buf {
	n := tt.Numel()
	b := newBuf(tt.DType(), n)
	switch tt.DType() {
	case backend.Float32:
		copy(b.f32(), tt.Float32s())
	case backend.Float64:
		copy(b.f64(), tt.Float64s())
	default:
		copy(b.u16(), tt.Uint16s())
	}
	return b
}

// optimState is the shim side of one parameter: master weights (the parameter itself
// for float32 and float64), the half copy, and the optimizer state.
type optimState struct {
	dt, mdt        backend.DType
	w, p           *buf
	buf, m, v, vmx *buf
}

func newOptimState(dt backend.DType, vals []float64) *optimState {
	mdt := dt
	if dt.IsHalf() {
		mdt = backend.Float32
	}
	p := bufOf(dt, vals)
	w := newBuf(mdt, len(vals))
	for i := range vals {
		w.set(i, p.at(i)) // exact
	}
	n := len(vals)
	return &optimState{dt, mdt, w, p, newBuf(mdt, n), newBuf(mdt, n), newBuf(mdt, n), newBuf(mdt, n)}
}

// result is what the optim package's parameter holds after a step.
func (o *optimState) result() *buf {
	if o.dt.IsHalf() {
		return o.p
	}
	return o.w
}

// grad returns gradient values rounded to the parameter's dtype, in the master dtype.
func (o *optimState) grad(vals []float64) *buf {
	g := bufOf(o.dt, vals)
	out := newBuf(o.mdt, len(vals))
	for i := range vals {
		out.set(i, g.at(i))
	}
	return out
}

func (o *optimState) halfArgs(ptrs ...any) []any {
	if !o.dt.IsHalf() {
		return ptrs
	}
	return append(ptrs, o.p.ptr())
}

func optimVals(k, n int) []float64 {
	v := make([]float64, n)
	for j := range v {
		v[j] = 0.8*math.Sin(1.3*float64(k)+0.7*float64(j)) + 0.01*float64(j%7)
	}
	return v
}

// TestShimSGD runs the fused SGD kernel and optim.SGD side by side for three steps and
// requires bit-identical parameters and momentum buffers.
func TestShimSGD(t *testing.T) {
	s := loadShim(t)
	const n = 257
	configs := []optim.SGDConfig{
		{LR: 0.1},
		{LR: 0.05, Momentum: 0.9},
		{LR: 0.05, Momentum: 0.9, Dampening: 0.1, WeightDecay: 0.01},
		{LR: 0.02, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-3},
		{LR: 0.1, Momentum: 0.5, Maximize: true},
	}
	for _, dt := range floatDTypes {
		for ci, cfg := range configs {
			init := optimVals(0, n)
			param := optimParam(dt, init)
			opt, err := optim.NewSGD([]*nn.Param{param}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			st := newOptimState(dt, init)
			ref := newRef(st)
			for step := 1; step <= 3; step++ {
				gv := optimVals(step, n)
				param.T.SetGrad(tensor.FromSlice(gv, tensor.Shape{n}, tensor.WithDType(dt)))
				opt.Step()
				ref.sgd(cfg, st.grad(gv), step)
				var flags int32
				if cfg.Nesterov {
					flags |= kernels.FlagNesterov
				}
				if cfg.Maximize {
					flags |= kernels.FlagMaximize
				}
				if step == 1 {
					flags |= kernels.FlagFirst
				}
				g := st.grad(gv)
				args := st.halfArgs(st.w.ptr(), g.ptr(), st.buf.ptr())
				args = append(args, int64(n), cfg.LR, cfg.Momentum, cfg.Dampening, cfg.WeightDecay, flags, uint64(0))
				name := kernels.Name("sgd", dt)
				s.run(t, name, args...)
				what := fmt.Sprintf("%s config %d step %d", name, ci, step)
				sameBits(t, what+" parameter", st.result(), tensorBuf(param.T))
				if cfg.Momentum != 0 {
					sameBits(t, what+" momentum", st.buf, tensorBuf(opt.StateDict().Tensors["state.0.momentum_buffer"]))
				}
				refClose(t, what+" against the float64 formulas", st.w, ref.w)
			}
		}
	}
}

// TestShimAdam runs the fused Adam/AdamW kernel and optim.Adam/AdamW side by side and
// requires bit-identical parameters and moments; a set found_inf skips the step.
func TestShimAdam(t *testing.T) {
	s := loadShim(t)
	const n = 257
	type config struct {
		cfg   optim.AdamConfig
		adamW bool
	}
	configs := []config{
		{optim.DefaultAdam(), false},
		{optim.AdamConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}, false},
		{optim.AdamConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.05}, true},
		{optim.AdamConfig{LR: 3e-3, Beta1: 0.8, Beta2: 0.999, Eps: 1e-8, AMSGrad: true}, false},
		{optim.AdamConfig{LR: 1e-3, Beta1: 0.3, Beta2: 0.9, Eps: 1e-8, Maximize: true, WeightDecay: 0.1}, true},
	}
	for _, dt := range floatDTypes {
		for ci, c := range configs {
			init := optimVals(0, n)
			param := optimParam(dt, init)
			newOpt := optim.NewAdam
			if c.adamW {
				newOpt = optim.NewAdamW
			}
			opt, err := newOpt([]*nn.Param{param}, c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			cfg := opt.Config()
			st := newOptimState(dt, init)
			var flags int32
			if c.adamW {
				flags |= kernels.FlagDecoupled
			}
			if cfg.AMSGrad {
				flags |= kernels.FlagAMSGrad
			}
			if cfg.Maximize {
				flags |= kernels.FlagMaximize
			}
			ref := newRef(st)
			for step := 1; step <= 3; step++ {
				gv := optimVals(step, n)
				param.T.SetGrad(tensor.FromSlice(gv, tensor.Shape{n}, tensor.WithDType(dt)))
				opt.Step()
				g := st.grad(gv)
				ref.adam(cfg, c.adamW, g, step)
				stepSize, bc2 := kernels.AdamScalars(cfg.LR, cfg.Beta1, cfg.Beta2, int64(step))
				args := st.halfArgs(st.w.ptr(), g.ptr(), st.m.ptr(), st.v.ptr(), st.vmx.ptr())
				args = append(args, int64(n), cfg.LR, cfg.Beta1, cfg.Beta2, cfg.Eps, cfg.WeightDecay, stepSize, bc2, flags, uint64(0))
				name := kernels.Name("adam", dt)
				s.run(t, name, args...)
				what := fmt.Sprintf("%s config %d step %d", name, ci, step)
				sameBits(t, what+" parameter", st.result(), tensorBuf(param.T))
				sd := opt.StateDict()
				sameBits(t, what+" exp_avg", st.m, tensorBuf(sd.Tensors["state.0.exp_avg"]))
				sameBits(t, what+" exp_avg_sq", st.v, tensorBuf(sd.Tensors["state.0.exp_avg_sq"]))
				if cfg.AMSGrad {
					sameBits(t, what+" max_exp_avg_sq", st.vmx, tensorBuf(sd.Tensors["state.0.max_exp_avg_sq"]))
				}
				refClose(t, what+" against the float64 formulas", st.w, ref.w)

				// With found_inf set nothing changes.
				found := newBuf(backend.Int32, 1)
				found.i32()[0] = 1
				before := st.result().clone()
				args[len(args)-1] = found.ptr()
				s.run(t, name, args...)
				sameBits(t, what+" skipped step", st.result(), before)
			}
		}
	}
}

// ref is a float64 implementation of the documented update formulas (PyTorch's).
type ref struct{ w, buf, m, v, vmx []float64 }

func newRef(st *optimState) *ref {
	n := st.w.n
	r := &ref{make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)}
	for i := range r.w {
		r.w[i] = st.w.at(i)
	}
	return r
}

func (r *ref) sgd(c optim.SGDConfig, g *buf, step int) {
	for i := range r.w {
		d := g.at(i)
		if c.Maximize {
			d = -d
		}
		d += c.WeightDecay * r.w[i]
		if c.Momentum != 0 {
			if step == 1 {
				r.buf[i] = d
			} else {
				r.buf[i] = c.Momentum*r.buf[i] + (1-c.Dampening)*d
			}
			if c.Nesterov {
				d += c.Momentum * r.buf[i]
			} else {
				d = r.buf[i]
			}
		}
		r.w[i] -= c.LR * d
	}
}

func (r *ref) adam(c optim.AdamConfig, decoupled bool, g *buf, step int) {
	bc1 := 1 - math.Pow(c.Beta1, float64(step))
	bc2 := 1 - math.Pow(c.Beta2, float64(step))
	for i := range r.w {
		d := g.at(i)
		if c.Maximize {
			d = -d
		}
		if decoupled {
			r.w[i] *= 1 - c.LR*c.WeightDecay
		} else {
			d += c.WeightDecay * r.w[i]
		}
		r.m[i] = c.Beta1*r.m[i] + (1-c.Beta1)*d
		r.v[i] = c.Beta2*r.v[i] + (1-c.Beta2)*d*d
		v := r.v[i]
		if c.AMSGrad {
			r.vmx[i] = math.Max(r.vmx[i], v)
			v = r.vmx[i]
		}
		r.w[i] -= c.LR / bc1 * r.m[i] / (math.Sqrt(v)/math.Sqrt(bc2) + c.Eps)
	}
}

// refClose compares master weights with the float64 reference: float32 masters within
// float32 rounding of the composed ops, float64 ones within float64 rounding (relative
// to the weights' scale, which is 1: an update that cancels to near zero keeps the
// absolute error of its operands).
func refClose(t *testing.T, what string, got *buf, want []float64) {
	t.Helper()
	rel := 2e-6
	if got.dt == backend.Float64 {
		rel = 1e-13
	}
	for i, w := range want {
		if g := got.at(i); math.Abs(g-w) > rel*(math.Abs(w)+1) {
			t.Errorf("%s: element %d is %v, the formulas give %v", what, i, g, w)
			return
		}
	}
}
