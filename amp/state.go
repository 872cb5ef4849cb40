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
// file, with a CRC-32C checksum of every tensor in its metadata (other safetensors
// readers still open it). The write is atomic: on any error the previous file is left
// intact.
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
	if err := nn.SaveFileWith(path, tensors, map[string]string{metaKey: string(js)}, nn.SaveOptions{Checksums: true}); err != nil {
		return fmt.Errorf("amp: save: %w", err)
	}
	return nil
}

// LoadOptions are LoadWith's options; the zero value is Load's behaviour.
type LoadOptions struct {
	// CheckFinite refuses a file whose model parameters or buffers hold NaN or ±Inf,
	// with an error wrapping nn.ErrNonFinite that names the tensor (a run that
	// diverged before it was saved, or a file damaged where no checksum covers it).
	CheckFinite bool
}

// Load restores a state written by Save into t; it is LoadWith with no options.
func Load(path string, t *Trainer) (SaveInfo, error) { return LoadWith(path, t, LoadOptions{}) }

// LoadWith restores a state written by Save into t, whose model and optimizer must
// have the same structure (names, shapes, dtypes) as when it was saved, and whose
// configuration must match the file's: the opt level, the half dtype (at O1–O3),
// loss scaling on or off, and an LR scheduler on both sides or on neither (a file
// saved without a scheduler does not say where the schedule stands, so loading it
// into a trainer with one is an error rather than a silent restart at step 0; set
// t.Sched after loading to start a schedule afresh).
//
// Nothing in t is changed unless the whole file is valid and matches: the header and
// the training-state metadata (ranges of the scale, trackers and counters) are checked
// first, then every tensor's bytes are read once against their checksums (files saved
// before checksums existed load without that check), and only then is the state
// restored, each tensor read straight into its parameter or optimizer buffer. The load
// needs memory for one tensor beyond the trainer's own, not for the file.
func LoadWith(path string, t *Trainer, opts LoadOptions) (SaveInfo, error) {
	f, err := nn.OpenTensorFile(path)
	if err != nil {
		return SaveInfo{}, fmt.Errorf("amp: load: %w", err)
	}
	defer f.Close()
	meta, err := decodeMeta(path, f.Metadata())
	if err != nil {
		return SaveInfo{}, err
	}
	if err := t.checkMeta(path, meta); err != nil {
		return SaveInfo{}, err
	}
	params := nn.State(t.Model)
	if err := checkModel(path, f, params); err != nil {
		return SaveInfo{}, err
	}
	ospec := optim.StateSpec{Scalars: meta.OptScalar, Tensors: map[string]optim.TensorSpec{}}
	for _, info := range f.Tensors() {
		if name, ok := strings.CutPrefix(info.Name, optPrefix); ok {
			ospec.Tensors[name] = optim.TensorSpec{Shape: info.Shape, DType: info.DType}
		} else if !strings.HasPrefix(info.Name, modelPrefix) {
			return SaveInfo{}, fmt.Errorf("amp: load %s: unexpected tensor %q (neither model. nor optimizer.)", path, info.Name)
		}
	}
	sl, streaming := t.Opt.(optim.StreamLoader)
	if streaming {
		if err := sl.CheckState(ospec); err != nil {
			return SaveInfo{}, fmt.Errorf("amp: load %s: optimizer: %w", path, err)
		}
	}
	var finite func(string) bool
	if opts.CheckFinite {
		finite = func(name string) bool { return strings.HasPrefix(name, modelPrefix) }
	}
	if err := f.Verify(finite); err != nil {
		return SaveInfo{}, fmt.Errorf("amp: load: %w", err)
	}

	// Everything is checked; restore. Only an out-of-memory error (nothing changed)
	// or a read failure of a file that changed since it was checked can happen now.
	readFailed := false
	read := func(key string, dst *tensor.Tensor) error {
		if err := f.ReadInto(optPrefix+key, dst); err != nil {
			readFailed = true
			return err
		}
		return nil
	}
	if streaming {
		err = sl.LoadStateFrom(ospec, read)
	} else {
		err = loadOptimizerInMemory(f, t.Opt, ospec)
	}
	if err != nil {
		if readFailed {
			return SaveInfo{}, fmt.Errorf("amp: load %s: the trainer is partly loaded (the file changed or could not be read after it was checked); load a good file before training: %w", path, err)
		}
		return SaveInfo{}, fmt.Errorf("amp: load %s: optimizer: %w", path, err)
	}
	if err := t.Scaler.LoadStateDict(meta.Scaler); err != nil { // checked by checkMeta
		return SaveInfo{}, fmt.Errorf("amp: load %s: scaler: %w", path, err)
	}
	if t.Sched != nil {
		if err := t.Sched.LoadStateDict(*meta.Sched); err != nil { // checked by decodeMeta
			return SaveInfo{}, fmt.Errorf("amp: load %s: scheduler: %w", path, err)
		}
	}
	for name, p := range params {
		if err := f.ReadInto(modelPrefix+name, p.T); err != nil {
			return SaveInfo{}, fmt.Errorf("amp: load %s: the trainer is partly loaded (the file changed or could not be read after it was checked); load a good file before training: %w", path, err)
		}
	}
	t.Gen.SetState(backend.RNG{Seed: meta.GenSeed, Offset: meta.GenOffset})
	t.steps = meta.Steps
	return meta.Info, nil
}

// loadOptimizerInMemory restores the state of an optimizer that cannot stream (not
// one of gamp's): its tensors are read into memory and handed to LoadStateDict, which
// checks them before changing anything.
func loadOptimizerInMemory(f *nn.TensorFile, opt optim.Optimizer, spec optim.StateSpec) error {
	st := optim.State{Scalars: spec.Scalars, Tensors: map[string]*tensor.Tensor{}}
	defer st.Release()
	for key, ts := range spec.Tensors {
		var t *tensor.Tensor
		if err := tensor.CatchOOM(func() { t = tensor.Empty(ts.Shape, tensor.WithDType(ts.DType)) }); err != nil {
			return err
		}
		st.Tensors[key] = t
		if err := f.ReadInto(optPrefix+key, t); err != nil {
			return err
		}
	}
	return opt.LoadStateDict(st)
}

// checkModel checks the file's model tensors against the model's parameters and
// buffers: the same names, shapes and dtypes.
func checkModel(path string, f *nn.TensorFile, params map[string]*nn.Param) error {
	var problems []string
	for name, p := range params {
		src, ok := f.Lookup(modelPrefix + name)
		switch {
		case !ok:
			problems = append(problems, "missing "+name)
		case !src.Shape.Equal(p.T.Shape()):
			problems = append(problems, fmt.Sprintf("%s: saved shape %v, model has %v", name, src.Shape, p.T.Shape()))
		case src.DType != p.T.DType():
			problems = append(problems, fmt.Sprintf("%s: saved %s, model has %s", name, src.DType, p.T.DType()))
		}
	}
	for _, info := range f.Tensors() {
		if name, ok := strings.CutPrefix(info.Name, modelPrefix); ok {
			if _, known := params[name]; !known {
				problems = append(problems, "unexpected "+name)
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("amp: load %s: the model does not match the saved state: %s", path, strings.Join(problems, "; "))
	}
	return nil
}

// ErrBadState is wrapped by the errors Load and LoadInfo return for training-state
// metadata that is malformed or out of range (check with errors.Is).
var ErrBadState = errors.New("invalid training state")

// decodeMeta parses and range-checks the training-state metadata of a file, on its
// own (checkMeta compares it with a trainer).
func decodeMeta(path string, md map[string]string) (trainerMeta, error) {
	raw, ok := md[metaKey]
	if !ok {
		return trainerMeta{}, fmt.Errorf("amp: load %s: not a gamp training state (no %q metadata); for model weights alone use nn.LoadState", path, metaKey)
	}
	var meta trainerMeta
	if err := json.Unmarshal([]byte(raw), &meta); err != nil {
		return trainerMeta{}, fmt.Errorf("amp: load %s: %w: corrupt training-state metadata: %w", path, ErrBadState, err)
	}
	bad := func(format string, args ...any) (trainerMeta, error) {
		return trainerMeta{}, fmt.Errorf("amp: load %s: %w: %s", path, ErrBadState, fmt.Sprintf(format, args...))
	}
	if meta.Format != 1 {
		return bad("unsupported state format %d (this gamp reads format 1)", meta.Format)
	}
	if _, err := ParseOptLevel(meta.Level); err != nil || !strings.HasPrefix(meta.Level, "O") {
		return bad("opt level %q is not O0, O1, O2 or O3", meta.Level)
	}
	if dt, err := tensor.ParseDType(meta.Low); err != nil || !dt.IsHalf() {
		return bad("low_dtype %q is not float16 or bfloat16", meta.Low)
	}
	if meta.Steps < 0 {
		return bad("step count %d is negative", meta.Steps)
	}
	if meta.Info.Epoch < 0 {
		return bad("epoch %d is negative", meta.Info.Epoch)
	}
	if !meta.Scaler.Config.Disabled {
		if err := meta.Scaler.Check(); err != nil {
			return bad("scaler: %v", err)
		}
	}
	if meta.Sched != nil {
		if err := meta.Sched.Validate(); err != nil {
			return bad("scheduler: %v", err)
		}
	}
	return meta, nil
}

// checkMeta checks that a file's metadata fits t's configuration.
func (t *Trainer) checkMeta(path string, meta trainerMeta) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("amp: load %s: %s", path, fmt.Sprintf(format, args...))
	}
	if meta.Level != t.cfg.Level.String() {
		return bad("saved at opt level %s, the trainer runs %s", meta.Level, t.cfg.Level)
	}
	if t.cfg.Level != O0 && meta.Low != t.low.String() {
		return bad("saved computing in %s, the trainer computes in %s; build the trainer with Config.Low = %s", meta.Low, t.low, meta.Low)
	}
	switch on := !meta.Scaler.Config.Disabled; {
	case on && !t.Scaler.Enabled():
		return bad("saved with loss scaling on, the trainer's scaler is disabled; build the trainer with the scaler the file was saved with")
	case !on && t.Scaler.Enabled():
		return bad("saved with loss scaling off (no scale to restore), the trainer scales the loss; build the trainer with the scaler disabled, as the file was saved")
	}
	switch {
	case meta.Sched == nil && t.Sched != nil:
		return bad("saved without an LR scheduler, the trainer has one: the file does not say where the schedule stands; load into a trainer without Sched and set it afterwards to start the schedule afresh")
	case meta.Sched != nil && t.Sched == nil:
		return bad("saved with an LR scheduler at step %d, the trainer has none; set t.Sched before loading", meta.Sched.Step)
	}
	return nil
}

// LoadInfo reads only the SaveInfo and step count of a state file (to print what a
// resume would do): it reads the file's header, not its tensors.
func LoadInfo(path string) (SaveInfo, int64, error) {
	md, err := nn.ReadMetadata(path)
	if err != nil {
		return SaveInfo{}, 0, err
	}
	meta, err := decodeMeta(path, md)
	if err != nil {
		return SaveInfo{}, 0, err
	}
	return meta.Info, meta.Steps, nil
}
