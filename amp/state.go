package amp

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/scaler"
	"github.com/gamp-ml/gamp/tensor"
)

// SaveInfo is caller data stored with the training state.
type SaveInfo struct {
	Epoch int               `json:"epoch"`
	Extra map[string]string `json:"extra,omitempty"`
}

// trainerMeta is the trainer's own state, stored as JSON in the file's metadata.
type trainerMeta struct {
	Format    int                    `json:"format"`
	Level     string                 `json:"opt_level"`
	Low       string                 `json:"low_dtype"`
	Steps     int64                  `json:"steps"`
	GenSeed   uint64                 `json:"rng_seed"`
	GenOffset uint64                 `json:"rng_offset"`
	Info      SaveInfo               `json:"info"`
	OptScalar map[string]float64     `json:"optimizer_scalars"`
	Scaler    scaler.State           `json:"scaler"`
	Sched     *optim.SchedulerState  `json:"scheduler,omitempty"`
	Params    map[string]paramRecord `json:"params"`
}

type paramRecord struct {
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
}

const (
	metaKey     = "gamp.training_state"
	modelPrefix = "model."
	optPrefix   = "optimizer."
)

// Save writes the full training state — model parameters and buffers, optimizer state
// (moments, FP32 masters, counters), scaler state (scale, growth tracker, hysteresis),
// scheduler, step count and the trainer's random generator — to path as one safetensors
// file. The write is atomic: on any error the previous file is left intact.
func Save(path string, t *Trainer, info SaveInfo) error {
	tensors := map[string]*tensor.Tensor{}
	meta := trainerMeta{
		Format: 1, Level: t.cfg.Level.String(), Low: t.low.String(), Steps: t.steps,
		Info: info, Scaler: t.Scaler.StateDict(), Params: map[string]paramRecord{},
	}
	st := t.Gen.State()
	meta.GenSeed, meta.GenOffset = st.Seed, st.Offset
	for name, p := range nn.State(t.Model) {
		tensors[modelPrefix+name] = p.T
		meta.Params[name] = paramRecord{DType: p.T.DType().String(), Shape: p.T.Shape()}
	}
	os := t.Opt.StateDict()
	defer os.Release()
	meta.OptScalar = os.Scalars
	for k, v := range os.Tensors {
		tensors[optPrefix+k] = v
	}
	if t.Sched != nil {
		s := t.Sched.StateDict()
		meta.Sched = &s
	}
	js, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("amp: save %s: %w", path, err)
	}
	if err := nn.SaveFile(path, tensors, map[string]string{metaKey: string(js)}); err != nil {
		return fmt.Errorf("amp: save: %w", err)
	}
	return nil
}

// Load restores a state written by Save into t, whose model and optimizer must have
// the same structure (names, shapes, dtypes) as when it was saved. Nothing in t is
// changed unless the whole file is valid and matches.
func Load(path string, t *Trainer) (SaveInfo, error) {
	tensors, md, err := nn.LoadFile(path)
	if err != nil {
		return SaveInfo{}, fmt.Errorf("amp: load: %w", err)
	}
	defer func() {
		for _, v := range tensors {
			v.Release()
		}
	}()
	raw, ok := md[metaKey]
	if !ok {
		return SaveInfo{}, fmt.Errorf("amp: load %s: not a gamp training state (no %q metadata); for model weights alone use nn.LoadState", path, metaKey)
	}
	var meta trainerMeta
	if err := json.Unmarshal([]byte(raw), &meta); err != nil {
		return SaveInfo{}, fmt.Errorf("amp: load %s: corrupt training-state metadata: %w", path, err)
	}
	if meta.Format != 1 {
		return SaveInfo{}, fmt.Errorf("amp: load %s: unsupported state format %d", path, meta.Format)
	}
	if meta.Level != t.cfg.Level.String() {
		return SaveInfo{}, fmt.Errorf("amp: load %s: saved at opt level %s, the trainer runs %s", path, meta.Level, t.cfg.Level)
	}
	// Check the model before touching anything.
	params := nn.State(t.Model)
	var problems []string
	for name, p := range params {
		src, ok := tensors[modelPrefix+name]
		switch {
		case !ok:
			problems = append(problems, "missing "+name)
		case !src.Shape().Equal(p.T.Shape()):
			problems = append(problems, fmt.Sprintf("%s: saved shape %v, model has %v", name, src.Shape(), p.T.Shape()))
		case src.DType() != p.T.DType():
			problems = append(problems, fmt.Sprintf("%s: saved %s, model has %s", name, src.DType(), p.T.DType()))
		}
	}
	for k := range tensors {
		if name, ok := strings.CutPrefix(k, modelPrefix); ok {
			if _, known := params[name]; !known {
				problems = append(problems, "unexpected "+name)
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return SaveInfo{}, fmt.Errorf("amp: load %s: the model does not match the saved state: %s", path, strings.Join(problems, "; "))
	}
	ost := optim.State{Scalars: meta.OptScalar, Tensors: map[string]*tensor.Tensor{}}
	for k, v := range tensors {
		if name, ok := strings.CutPrefix(k, optPrefix); ok {
			ost.Tensors[name] = v
		}
	}
	// The optimizer validates its state fully before changing anything.
	if err := t.Opt.LoadStateDict(ost); err != nil {
		return SaveInfo{}, fmt.Errorf("amp: load %s: optimizer: %w", path, err)
	}
	if err := t.Scaler.LoadStateDict(meta.Scaler); err != nil {
		return SaveInfo{}, fmt.Errorf("amp: load %s: scaler: %w", path, err)
	}
	if t.Sched != nil && meta.Sched != nil {
		if err := t.Sched.LoadStateDict(*meta.Sched); err != nil {
			return SaveInfo{}, fmt.Errorf("amp: load %s: scheduler: %w", path, err)
		}
	}
	for name, p := range params {
		p.T.CopyFrom(tensors[modelPrefix+name])
	}
	t.Gen.SetState(backend.RNG{Seed: meta.GenSeed, Offset: meta.GenOffset})
	t.steps = meta.Steps
	return meta.Info, nil
}

// errNoState is returned by LoadInfo for a file without training state.
var errNoState = errors.New("no training state")

// LoadInfo reads only the SaveInfo of a state file (to print what a resume would do).
func LoadInfo(path string) (SaveInfo, int64, error) {
	tensors, md, err := nn.LoadFile(path)
	if err != nil {
		return SaveInfo{}, 0, err
	}
	for _, v := range tensors {
		v.Release()
	}
	raw, ok := md[metaKey]
	if !ok {
		return SaveInfo{}, 0, fmt.Errorf("amp: %s: %w", path, errNoState)
	}
	var meta trainerMeta
	if err := json.Unmarshal([]byte(raw), &meta); err != nil {
		return SaveInfo{}, 0, fmt.Errorf("amp: %s: corrupt metadata: %w", path, err)
	}
	return meta.Info, meta.Steps, nil
}
