package optim

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/tensor"
)

// fuzzState is a State as JSON: scalars, and tensors by shape and dtype (filled with a
// pattern), so the fuzzer can change keys, numbers, shapes and dtypes.
type fuzzState struct {
	Scalars map[string]float64 `json:"scalars"`
	Tensors map[string]struct {
		Shape []int  `json:"shape"`
		DType string `json:"dtype"`
	} `json:"tensors"`
}

func encodeFuzzState(s State) []byte {
	var fs fuzzState
	fs.Scalars = s.Scalars
	fs.Tensors = map[string]struct {
		Shape []int  `json:"shape"`
		DType string `json:"dtype"`
	}{}
	for k, t := range s.Tensors {
		fs.Tensors[k] = struct {
			Shape []int  `json:"shape"`
			DType string `json:"dtype"`
		}{t.Shape(), t.DType().String()}
	}
	b, _ := json.Marshal(fs)
	return b
}

// decodeFuzzState builds the State data describes; ok is false for input the fuzzer
// cannot turn into tensors (bad JSON, unknown dtype, huge or negative shapes).
func decodeFuzzState(data []byte) (State, bool) {
	var fs fuzzState
	if json.Unmarshal(data, &fs) != nil {
		return State{}, false
	}
	s := State{Scalars: fs.Scalars, Tensors: map[string]*tensor.Tensor{}}
	for k, spec := range fs.Tensors {
		dt, err := tensor.ParseDType(spec.DType)
		n := 1
		for _, d := range spec.Shape {
			if d < 0 || d > 64 {
				err = errBadShape
			}
			n *= d
		}
		if err != nil || n > 4096 || len(spec.Shape) > 4 || dt == tensor.Bool {
			s.Release()
			return State{}, false
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Sin(float64(i) + 1)
		}
		s.Tensors[k] = tensor.FromSlice(v, tensor.Shape(spec.Shape), tensor.WithDType(dt))
	}
	return s, true
}

var errBadShape = errors.New("bad shape")

// FuzzLoadStateDict feeds optimizers states the fuzzer made from real ones: loading
// never panics, and a refused state leaves the optimizer exactly as it was.
func FuzzLoadStateDict(f *testing.F) {
	for _, opt := range fuzzOptimizers() {
		setGrads(opt.Params(), 1)
		opt.Step()
		s := opt.StateDict()
		f.Add(encodeFuzzState(s))
		s.Release()
	}
	f.Add([]byte(`{"scalars":{"lr":-1,"step":-3,"num_params":2},"tensors":{"state.9.exp_avg":{"shape":[2,3],"dtype":"float16"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, ok := decodeFuzzState(data)
		if !ok {
			return
		}
		defer s.Release()
		for _, opt := range fuzzOptimizers() {
			setGrads(opt.Params(), 1)
			opt.Step()
			before := opt.StateDict()
			w := values(opt.Params())
			if err := opt.LoadStateDict(s); err != nil {
				after := opt.StateDict()
				requireStateEqual(t, before, after)
				after.Release()
				if got := values(opt.Params()); !equalValues(w, got) {
					t.Fatalf("a refused state changed the parameters: %v", err)
				}
			} else {
				again := opt.StateDict()
				for k, v := range s.Scalars {
					if !isSpecial(k) && again.Scalars[k] != v {
						t.Fatalf("scalar %q loaded as %g, state had %g", k, again.Scalars[k], v)
					}
				}
				again.Release()
			}
			before.Release()
		}
	})
}

func isSpecial(k string) bool {
	switch k {
	case "amsgrad", "maximize", "nesterov", "decoupled": // flags: any non-zero is 1
		return true
	}
	return false
}

func equalValues(a, b [][]float64) bool {
	for i := range a {
		for j := range a[i] {
			if math.Float64bits(a[i][j]) != math.Float64bits(b[i][j]) {
				return false
			}
		}
	}
	return true
}

func fuzzOptimizers() []Optimizer {
	var out []Optimizer
	mk := func(o Optimizer, err error) {
		if err != nil {
			panic(err)
		}
		out = append(out, o)
	}
	mk(NewAdamW(mixedParams(), AdamConfig{LR: 0.01, AMSGrad: true, WeightDecay: 0.1}))
	mk(NewAdam(makeParams(tensor.Float32), AdamConfig{LR: 0.01}))
	mk(NewSGD(mixedParams(), SGDConfig{LR: 0.1, Momentum: 0.9, Nesterov: true}))
	return out
}
