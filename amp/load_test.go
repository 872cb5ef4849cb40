package amp

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withSched gives tr a cosine schedule.
func withSched(t testing.TB, tr *Trainer) *Trainer {
	s, err := optim.NewScheduler(tr.Opt, optim.CosineAnnealing{TMax: 50})
	require.NoError(t, err)
	tr.Sched = s
	return tr
}

// savedState trains a trainer made by mk for 3 steps and saves it.
func savedState(t *testing.T, dir string, mk func() *Trainer) string {
	path := filepath.Join(dir, "saved.safetensors")
	tr := mk()
	trainSteps(t, tr, 0, 3)
	require.NoError(t, Save(path, tr, SaveInfo{Epoch: 3}))
	return path
}

// rewrite copies the state file src to a new file, changing its training-state
// metadata (decoded with numbers kept exact) and tensors; the copy has valid checksums.
func rewrite(t *testing.T, src string, meta func(m map[string]any), tensors func(ts map[string]*tensor.Tensor)) string {
	ts, md, err := nn.LoadFile(src)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader([]byte(md[metaKey])))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m))
	if meta != nil {
		meta(m)
	}
	js, err := json.Marshal(m)
	require.NoError(t, err)
	md[metaKey] = string(js)
	if tensors != nil {
		tensors(ts)
	}
	dst := filepath.Join(t.TempDir(), "changed.safetensors")
	require.NoError(t, nn.SaveFileWith(dst, ts, md, nn.SaveOptions{Checksums: true}))
	return dst
}

func sub(m map[string]any, key string) map[string]any { return m[key].(map[string]any) }

// Every bad or mismatched file is refused before anything is restored: the trainer is
// bit for bit what it was (parameters, buffers, optimizer moments and counters, scaler,
// scheduler, generator, step count).
func TestLoadFailuresLeaveTrainerUnchanged(t *testing.T) {
	dir := t.TempDir()
	fp16 := func() *Trainer { return withSched(t, newTrainer(t, O1, tensor.Float16, 1)) }
	good := savedState(t, dir, fp16)
	bf16File := savedState(t, t.TempDir(), func() *Trainer { return withSched(t, newTrainer(t, O1, tensor.BFloat16, 1)) })
	noSchedFile := savedState(t, t.TempDir(), func() *Trainer { return newTrainer(t, O1, tensor.Float16, 1) })

	flipped := filepath.Join(dir, "flipped.safetensors")
	raw, err := os.ReadFile(good)
	require.NoError(t, err)
	raw[len(raw)-3] ^= 0x40 // inside the last tensor's data
	require.NoError(t, os.WriteFile(flipped, raw, 0o644))

	cases := []struct {
		name   string
		file   func() string
		target func() *Trainer
		want   string
	}{
		{"bf16 file into an fp16 trainer", func() string { return bf16File }, fp16, "computes in"},
		{"scale -1", func() string {
			return rewrite(t, good, func(m map[string]any) { sub(m, "scaler")["scale"] = -1 }, nil)
		}, fp16, "scale"},
		{"scale 1e39", func() string {
			return rewrite(t, good, func(m map[string]any) { sub(m, "scaler")["scale"] = 1e39 }, nil)
		}, fp16, "scale"},
		{"growth tracker above the interval", func() string {
			return rewrite(t, good, func(m map[string]any) { sub(m, "scaler")["growth_tracker"] = 1 << 30 }, nil)
		}, fp16, "growth tracker"},
		{"negative step count", func() string {
			return rewrite(t, good, func(m map[string]any) { m["steps"] = -20 }, nil)
		}, fp16, "step count -20"},
		{"negative epoch", func() string {
			return rewrite(t, good, func(m map[string]any) { sub(m, "info")["epoch"] = -2 }, nil)
		}, fp16, "epoch -2"},
		{"mismatched low dtype", func() string {
			return rewrite(t, good, func(m map[string]any) { m["low_dtype"] = "bfloat16" }, nil)
		}, fp16, "saved computing in bfloat16"},
		{"low dtype not half", func() string {
			return rewrite(t, good, func(m map[string]any) { m["low_dtype"] = "float32" }, nil)
		}, fp16, "low_dtype"},
		{"scaler saved disabled", func() string {
			return rewrite(t, good, func(m map[string]any) { sub(sub(m, "scaler"), "config")["disabled"] = true }, nil)
		}, fp16, "loss scaling off"},
		{"scaler saved disabled, old format", func() string { return oldFormat(t, good, false) }, fp16, "loss scaling off"},
		{"bf16 file, old format, into an fp16 trainer", func() string { return oldFormat(t, bf16File, false) }, fp16, "saved computing in bfloat16"},
		{"file without scheduler into a trainer with one", func() string { return noSchedFile }, fp16, "without an LR scheduler"},
		{"file with scheduler into a trainer without", func() string { return good }, func() *Trainer { return newTrainer(t, O1, tensor.Float16, 1) }, "set t.Sched"},
		{"negative scheduler step", func() string {
			return rewrite(t, good, func(m map[string]any) { sub(m, "scheduler")["step"] = -1 }, nil)
		}, fp16, "scheduler"},
		{"optimizer learning rate -1", func() string {
			return rewrite(t, good, func(m map[string]any) { sub(m, "optimizer_scalars")["lr"] = -1 }, nil)
		}, fp16, "optimizer"},
		{"optimizer moment of the wrong shape", func() string {
			return rewrite(t, good, nil, func(ts map[string]*tensor.Tensor) {
				ts["optimizer.state.0.exp_avg"] = tensor.Zeros(tensor.Shape{3})
			})
		}, fp16, "exp_avg"},
		{"optimizer moment missing", func() string {
			return rewrite(t, good, nil, func(ts map[string]*tensor.Tensor) { delete(ts, "optimizer.state.1.exp_avg_sq") })
		}, fp16, "incomplete"},
		{"flipped data byte", func() string { return flipped }, fp16, "checksum"},
		{"opt level", func() string { return good }, func() *Trainer { return withSched(t, newTrainer(t, O2, tensor.Float16, 1)) }, "opt level"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := tc.target()
			trainSteps(t, tr, 10, 11) // moments, counters and a scale of its own
			before := stateOf(tr)
			_, err := Load(tc.file(), tr)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			require.Equal(t, before, stateOf(tr), "a failed load changed the trainer")
		})
	}

	t.Run("good file loads", func(t *testing.T) {
		tr := fp16()
		info, err := Load(good, tr)
		require.NoError(t, err)
		require.Equal(t, 3, info.Epoch)
		require.Equal(t, int64(3), tr.Sched.StepCount())
	})
	t.Run("files saved before Config.Disabled load", func(t *testing.T) {
		bf16 := func() *Trainer { return withSched(t, newTrainer(t, O1, tensor.BFloat16, 1)) }
		for _, c := range []struct {
			file, old string
			mk        func() *Trainer
		}{{good, oldFormat(t, good, true), fp16}, {bf16File, oldFormat(t, bf16File, false), bf16}} {
			want, got := c.mk(), c.mk()
			_, err := Load(c.file, want)
			require.NoError(t, err)
			info, err := Load(c.old, got)
			require.NoError(t, err)
			require.Equal(t, 3, info.Epoch)
			require.Equal(t, stateOf(want), stateOf(got))
			require.Equal(t, want.Scaler.StateDict(), got.Scaler.StateDict())
		}
	})
}

// oldFormat rewrites a state file's scaler config as gamp wrote it before
// Config.Disabled replaced Config.Enabled.
func oldFormat(t *testing.T, src string, enabled bool) string {
	return rewrite(t, src, func(m map[string]any) {
		c := sub(sub(m, "scaler"), "config")
		delete(c, "disabled")
		c["enabled"], c["force_enabled"] = enabled, false
	}, nil)
}

// CheckFinite refuses a file whose weights hold NaN, naming the parameter; without it
// the file loads (the values are what was saved).
func TestLoadCheckFinite(t *testing.T) {
	good := savedState(t, t.TempDir(), func() *Trainer { return newTrainer(t, O0, tensor.Float16, 1) })
	nan := rewrite(t, good, nil, func(ts map[string]*tensor.Tensor) {
		w := ts["model.0.weight"]
		v := w.Float32s()
		v[7] = float32(math.NaN())
		ts["model.0.weight"] = tensor.FromSlice(v, w.Shape())
	})
	tr := newTrainer(t, O0, tensor.Float16, 1)
	before := stateOf(tr)
	_, err := LoadWith(nan, tr, LoadOptions{CheckFinite: true})
	require.ErrorIs(t, err, nn.ErrNonFinite)
	assert.Contains(t, err.Error(), `"model.0.weight": element 7`)
	require.Equal(t, before, stateOf(tr))

	_, err = Load(nan, tr)
	require.NoError(t, err)
	require.True(t, math.IsNaN(tr.Model.Params()[0].T.Float64s()[7]))
}

// LoadInfo reads the header only: a state whose tensor data was cut short still gives
// its epoch and step count, while Load refuses it.
func TestLoadInfoReadsTheHeaderOnly(t *testing.T) {
	path := savedState(t, t.TempDir(), func() *Trainer { return newTrainer(t, O1, tensor.Float16, 1) })
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, st.Size()-1000))
	info, steps, err := LoadInfo(path)
	require.NoError(t, err)
	require.Equal(t, 3, info.Epoch)
	require.Equal(t, int64(3), steps)
	_, err = Load(path, newTrainer(t, O1, tensor.Float16, 1))
	require.ErrorIs(t, err, nn.ErrCorrupt)
}

// Load streams: the Go heap (which holds the CPU backend's memory too) grows by about
// one tensor during the load, not by the file's size.
func TestLoadStreamsTensors(t *testing.T) {
	mk := func() *Trainer {
		m := nn.NewSequential(nn.NewLinear(512, 512, nn.Seeded(1)), nn.NewReLU(), nn.NewLinear(512, 512, nn.Seeded(2)), nn.NewReLU(), nn.NewLinear(512, 5, nn.Seeded(3)))
		opt, err := optim.NewAdamW(m.Params(), optim.AdamWConfig{LR: 1e-3})
		require.NoError(t, err)
		tr, err := NewTrainer(m, opt, ce, tensor.CPU, Config{Level: O0})
		require.NoError(t, err)
		x := tensor.Randn(tensor.Shape{8, 512})
		y := tensor.FromSlice([]int64{0, 1, 2, 3, 4, 0, 1, 2}, nil)
		_, err = tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
		require.NoError(t, err)
		return tr
	}
	path := filepath.Join(t.TempDir(), "big.safetensors")
	src := mk()
	require.NoError(t, Save(path, src, SaveInfo{}))
	st, err := os.Stat(path)
	require.NoError(t, err)
	largest := int64(512 * 512 * 4)

	dst := mk()
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	_, err = Load(path, dst)
	runtime.ReadMemStats(&b)
	require.NoError(t, err)
	grew := int64(b.TotalAlloc - a.TotalAlloc)
	t.Logf("file %d bytes, largest tensor %d bytes, heap allocated during Load %d bytes", st.Size(), largest, grew)
	require.Less(t, grew, largest+largest/4)
	require.Equal(t, stateOf(src), stateOf(dst))
}

// FuzzLoadMetadata loads files whose training-state metadata the fuzzer made from a
// real save's: loading never panics, and a refused file leaves the trainer unchanged.
func FuzzLoadMetadata(f *testing.F) {
	dir := f.TempDir()
	tr := withSched(f, newTrainer(f, O1, tensor.Float16, 1))
	trainSteps(f, tr, 0, 2)
	path := filepath.Join(dir, "seed.safetensors")
	if err := Save(path, tr, SaveInfo{Epoch: 2, Extra: map[string]string{"k": "v"}}); err != nil {
		f.Fatal(err)
	}
	tensors, md, err := nn.LoadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(md[metaKey])
	f.Add(`{"format":1,"opt_level":"O1","low_dtype":"float16","steps":-1}`)
	f.Add(`{"format":1,"opt_level":"O1","low_dtype":"float16","scaler":{"scale":1e39,"config":{"enabled":true}}}`)
	f.Add(`{"format":1,"opt_level":"O1","low_dtype":"float16","scaler":{"scale":1e39,"config":{"disabled":false}}}`)
	f.Fuzz(func(t *testing.T, meta string) {
		if _, _, err := LoadInfo(path); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "f.safetensors")
		if err := nn.SaveFileWith(p, tensors, map[string]string{metaKey: meta}, nn.SaveOptions{Checksums: true}); err != nil {
			t.Fatal(err)
		}
		target := withSched(t, newTrainer(t, O1, tensor.Float16, 1))
		before := stateOf(target)
		info, steps, ierr := LoadInfo(p)
		if _, err := Load(p, target); err != nil {
			if !equalStates(before, stateOf(target)) {
				t.Fatalf("a refused file changed the trainer: %v", err)
			}
			return
		}
		if ierr != nil || info.Epoch < 0 || steps < 0 || target.Steps() != steps {
			t.Fatalf("loaded a state LoadInfo refuses or reports differently: %v, %+v, %d", ierr, info, steps)
		}
	})
}

func equalStates(a, b trainerState) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// A trainer on another device than the default one saves and loads bit for bit: the
// tensors are read into the parameters and optimizer buffers where they live.
func TestLoadOnNonDefaultDevice(t *testing.T) {
	src, _ := newOOMTrainer(t, O2, 0)
	for s := range 2 {
		_, err := oomStep(t, src, uint64(s), 32)
		require.NoError(t, err)
	}
	path := filepath.Join(t.TempDir(), "dev.safetensors")
	require.NoError(t, Save(path, src, SaveInfo{Epoch: 1}))
	for _, streaming := range []bool{true, false} {
		dst, wrapped := newOOMTrainer(t, O2, 0)
		if streaming {
			dst.Opt = wrapped.Optimizer // an optim.StreamLoader; the wrapper is not one
		}
		_, err := Load(path, dst)
		require.NoError(t, err)
		require.Equal(t, stateOf(src), stateOf(dst), "streaming %v", streaming)
		require.Equal(t, oomDev, dst.Model.Params()[0].T.Device())
	}
}
