package scaler

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/gamp-ml/gamp/optim"
)

// FuzzLoadStateDict feeds a scaler JSON states the fuzzer made from real ones (as
// amp.Save stores them): loading never panics, a refused state changes nothing, and an
// accepted one gives a usable scale.
func FuzzLoadStateDict(f *testing.F) {
	cfg := DefaultConfig()
	cfg.GrowthInterval = 3
	cfg.Hysteresis = 2
	sc, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	m := newModel(false)
	opt, err := optim.NewSGD(m.params(), optim.SGDConfig{LR: 0.01, Momentum: 0.9})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 5 {
		m.backward(sc)
		if i == 2 {
			m.b.T.Grad().FillInPlace(math.Inf(1))
		}
		sc.Step(opt)
		_ = sc.Update()
		opt.ZeroGrad()
		b, _ := json.Marshal(sc.StateDict())
		f.Add(b)
	}
	f.Add([]byte(`{"scale":-1,"growth_tracker":0,"config":{"enabled":true}}`))
	f.Add([]byte(`{"scale":1e39,"growth_tracker":5000,"config":{"enabled":true,"growth_interval":2000}}`))
	f.Add([]byte(`{"scale":65536,"growth_tracker":0,"config":{"disabled":true}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var st State
		if json.Unmarshal(data, &st) != nil {
			return
		}
		s, err := New(DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		before := s.StateDict()
		if err := s.LoadStateDict(st); err != nil {
			if !reflect.DeepEqual(before, s.StateDict()) {
				t.Fatalf("a refused state changed the scaler: %v", err)
			}
			return
		}
		if v := s.ScaleValue(); !(v > 0) || math.IsInf(v, 0) {
			t.Fatalf("accepted a state with scale %g", v)
		}
		if err := s.StateDict().Check(); err != nil {
			t.Fatalf("the loaded state does not check: %v", err)
		}
	})
}
