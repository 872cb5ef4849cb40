package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// GradCheckOptions tunes GradCheck. Zero values select the defaults.
type GradCheckOptions struct {
	Eps  float64 // finite-difference step (default 1e-6)
	ATol float64 // absolute tolerance (default 1e-5)
	RTol float64 // relative tolerance (default 1e-4)
	Seed uint64  // seed of the random projection of the output
}

// GradCheck checks the gradients autograd computes for f against central finite
// differences, in float64. inputs are float64 leaves; those that require grad are
// checked element by element. f's output is reduced to a scalar by a fixed random
// projection, so every output element's gradient path is exercised. It returns an
// error naming the first mismatching input and element.
func GradCheck(f func(xs []*Tensor) *Tensor, inputs []*Tensor, o GradCheckOptions) error {
	if o.Eps == 0 {
		o.Eps = 1e-6
	}
	if o.ATol == 0 {
		o.ATol = 1e-5
	}
	if o.RTol == 0 {
		o.RTol = 1e-4
	}
	for i, x := range inputs {
		if x.dtype != Float64 && x.dtype.IsFloat() {
			return fmt.Errorf("gradcheck: input %d is %s; gradcheck needs float64 inputs", i, x.dtype)
		}
		if !x.IsLeaf() {
			return fmt.Errorf("gradcheck: input %d is not a leaf", i)
		}
	}
	var proj []float64
	objective := func(grad bool) (float64, *Context) {
		var c *Context
		if grad {
			c = NewContext()
		} else {
			c = NewContext(NoGradMode())
		}
		xs := make([]*Tensor, len(inputs))
		for i, x := range inputs {
			xs[i] = c.Bind(x)
		}
		y := f(xs)
		if proj == nil {
			r := rand.New(rand.NewPCG(o.Seed, 1))
			proj = make([]float64, y.Numel())
			for i := range proj {
				proj[i] = r.Float64()*2 - 1
			}
		}
		p := FromSlice(proj, y.shape, WithContext(c), WithDType(y.dtype))
		l := y.Mul(p).Sum()
		if grad {
			l.Backward()
		}
		v := l.Item()
		return v, c
	}
	for _, x := range inputs {
		x.ZeroGrad()
	}
	_, c := objective(true)
	c.Close()
	for i, x := range inputs {
		if !x.requiresGrad {
			continue
		}
		var analytic []float64
		if xg := x.Grad(); xg != nil {
			analytic = xg.Float64s()
		} else {
			analytic = make([]float64, x.Numel())
		}
		vals := x.Float64s()
		for j := range vals {
			orig := vals[j]
			vals[j] = orig + o.Eps
			x.ref.b.Upload(x.ref.s, x.offset, vals)
			lp, c1 := objective(false)
			c1.Close()
			vals[j] = orig - o.Eps
			x.ref.b.Upload(x.ref.s, x.offset, vals)
			lm, c2 := objective(false)
			c2.Close()
			vals[j] = orig
			x.ref.b.Upload(x.ref.s, x.offset, vals)
			num := (lp - lm) / (2 * o.Eps)
			if math.Abs(num-analytic[j]) > o.ATol+o.RTol*math.Abs(num) {
				return fmt.Errorf("gradcheck: input %d %v element %d: analytic %.10g, numeric %.10g", i, x.shape, j, analytic[j], num)
			}
		}
	}
	return nil
}
