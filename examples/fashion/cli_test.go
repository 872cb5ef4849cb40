package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/internal/testenv"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// fashionData writes a small learnable data set and returns its directory.
func fashionData(t *testing.T, train int) string {
	dir := t.TempDir()
	writeIDX(t, dir, "train", train, 1)
	writeIDX(t, dir, "t10k", 64, 2)
	return dir
}

// runCLI runs the command in-process and returns its exit status, stdout and stderr.
func runCLI(tty bool, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := runMain(args, &out, &errb, tty)
	return code, out.String(), errb.String()
}

func TestUsageErrorsExit2OneLineEach(t *testing.T) {
	code, _, stderr := runCLI(false, "-precision", "fp8")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "want fp32, fp16, bf16 or auto")

	code, _, stderr = runCLI(false, "-epochs", "0", "-batch", "0", "-accum", "0", "-lr", "-1")
	require.Equal(t, 2, code)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	require.Len(t, lines, 4, stderr)
	for i, flag := range []string{"-epochs must be ≥ 1, got 0", "-batch must be ≥ 1, got 0", "-accum must be ≥ 1, got 0", "-lr must be a positive number, got -1"} {
		require.Equal(t, "fashion: "+flag, lines[i])
	}

	code, _, stderr = runCLI(false, "-nosuchflag")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "fashion -h lists the flags")
	code, _, _ = runCLI(false, "extra")
	require.Equal(t, 2, code)
	code, _, stderr = runCLI(false, "-model", "cnn", "-channels", "32")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "bad -channels")

	code, _, stderr = runCLI(false, "-device", "cpu:x")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "bad cpu device index")
	require.NotContains(t, stderr, "cuda")
}

func TestHelpHasADescription(t *testing.T) {
	code, stdout, stderr := runCLI(false, "-h")
	require.Equal(t, 0, code)
	require.Empty(t, stdout)
	require.True(t, strings.HasPrefix(stderr, "usage: fashion [flags]\n\nTrains an MLP or a CNN on Fashion-MNIST"), stderr)
	require.Contains(t, stderr, "-precision")
}

func TestProgressOnlyOnATerminal(t *testing.T) {
	dir := fashionData(t, 256)
	args := []string{"-model", "mlp", "-precision", "fp32", "-epochs", "2", "-batch", "32", "-data", dir}
	code, _, log := runCLI(false, args...)
	require.Equal(t, 0, code, log)
	require.NotContains(t, log, "\r", "a file or pipe gets no carriage returns")
	require.Equal(t, 1, strings.Count(log, "epoch 1/2: 8 steps, loss "), log)
	require.Equal(t, 1, strings.Count(log, "epoch 2/2: 8 steps, loss "), log)
	require.Contains(t, log, "test accuracy")

	code, _, log = runCLI(true, args...)
	require.Equal(t, 0, code, log)
	require.Contains(t, log, "\repoch 1/2 ", "a terminal gets the bar")

	code, _, log = runCLI(false, append(args, "-quiet")...)
	require.Equal(t, 0, code)
	require.Empty(t, log)
}

// A diverging run stops with a message and status 1 in every precision, and -json still
// prints one parseable line (NaN as null) instead of an empty one.
func TestDivergedRunSaysSo(t *testing.T) {
	dir := fashionData(t, 1024)
	for _, p := range []string{"fp32", "bf16", "fp16"} {
		code, stdout, stderr := runCLI(false, "-model", "mlp", "-precision", p, "-lr", "1e4", "-epochs", "2", "-batch", "32", "-data", dir, "-json")
		require.Equal(t, 1, code, "%s: %s", p, stderr)
		require.Contains(t, stderr, "fashion: the run diverged in epoch 1 at step", p)
		require.Contains(t, stderr, "try a lower -lr (this run: 10000; the default is 0.002)", p)
		line := strings.TrimSpace(stdout)
		require.NotEmpty(t, line, "%s: -json printed nothing", p)
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &got), line)
		require.Equal(t, true, got["diverged"], line)
		require.Contains(t, got["error"], "diverged")
		if p == "fp16" {
			require.Nil(t, got["final_loss"], "a NaN loss is null: %s", line)
		}
		require.Nil(t, got["test_accuracy"], "no epoch was evaluated: %s", line)
	}
}

func TestJSONFloatEncodesNonFinite(t *testing.T) {
	b, err := json.Marshal(summary{FinalLoss: jsonFloat(math.NaN()), FinalScale: jsonFloat(math.Inf(1)), TestAccuracy: 0.5})
	require.NoError(t, err)
	require.Contains(t, string(b), `"final_loss":null`)
	require.Contains(t, string(b), `"final_scale":null`)
	require.Contains(t, string(b), `"test_accuracy":0.5`)
}

// Bad -save, -resume and too little data fail before any training.
func TestPathsAndDataCheckedUpFront(t *testing.T) {
	dir := fashionData(t, 256)
	ok := options{model: "mlp", precision: "fp32", epochs: 1, batch: 32, accum: 1, lr: 1e-3, dataDir: dir}
	file := filepath.Join(t.TempDir(), "plain-file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for name, tc := range map[string]struct {
		mod  func(o *options)
		want string
	}{
		"save under a file":   {func(o *options) { o.save = filepath.Join(file, "state.safetensors") }, "-save"},
		"save to a directory": {func(o *options) { o.save = t.TempDir() }, "is a directory"},
		"save, no directory":  {func(o *options) { o.save = "/nonexistent-dir/state.safetensors" }, "cannot write there"},
		"resume missing":      {func(o *options) { o.resume = filepath.Join(dir, "nope") }, "-resume"},
		"fewer than a batch":  {func(o *options) { o.limit, o.batch = 10, 32 }, "the training set has 10 examples (-limit 10), fewer than one batch of 32"},
	} {
		var log bytes.Buffer
		o := ok
		tc.mod(&o)
		_, err := run(o, &log)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), tc.want, name)
		require.NotContains(t, log.String(), "epoch", "%s: failed only after training", name)
	}
}

// Running out of memory while building the model is an error with advice, not a panic.
func TestOutOfMemoryBuildingTheModel(t *testing.T) {
	dir := fashionData(t, 64)
	be := backend.MustGet(tensor.CPU)
	old := be.MemoryStats().Limit
	be.SetMemoryLimit(1 << 20)
	defer be.SetMemoryLimit(old)
	_, err := run(options{model: "cnn", precision: "bf16", epochs: 1, batch: 32, accum: 1, lr: 1e-3, dataDir: dir, quiet: true}, io.Discard)
	require.Error(t, err)
	require.True(t, errors.Is(err, tensor.ErrOutOfMemory), "%v", err)
	require.Contains(t, err.Error(), "use a smaller -batch or model")
}

// The command itself, in a child process with GAMP_CPU_MEMORY_LIMIT (issue 16: exit 2
// with a stack trace from nn.NewLinear).
func TestOutOfMemoryCommand(t *testing.T) {
	if os.Getenv("FASHION_TEST_MAIN") == "1" {
		os.Exit(runMain(strings.Fields(os.Getenv("FASHION_TEST_ARGS")), os.Stdout, os.Stderr, false))
	}
	dir := fashionData(t, 64)
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutOfMemoryCommand$")
	cmd.Env = append(os.Environ(), "FASHION_TEST_MAIN=1", "GAMP_CPU_MEMORY_LIMIT=1MiB",
		"FASHION_TEST_ARGS=-model cnn -epochs 1 -batch 32 -data "+dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	require.Equal(t, 1, ee.ExitCode(), "%s", out)
	require.Contains(t, string(out), "fashion: cpu: out of memory")
	require.Contains(t, string(out), "raise GAMP_CPU_MEMORY_LIMIT (now 1MiB)")
	require.NotContains(t, string(out), "goroutine", "no stack trace")
	require.NotContains(t, string(out), "panic")
}

func TestDivergedErrorIsAmpError(t *testing.T) {
	err := error(&divergedError{epoch: 1, lr: 1, precision: "fp16", err: &amp.DivergenceError{Step: 3, BadSteps: 2, Reason: "the loss is NaN"}})
	require.ErrorIs(t, err, amp.ErrDiverged)
	require.Contains(t, err.Error(), "-precision bf16")
}

// make demo DATA=/wrong: scripts/ensure-data.sh says which files the directory lacks
// and never runs apt for it (issue 16: it re-ran apt, then advised installing the
// installed package).
func TestEnsureDataScript(t *testing.T) {
	bash := testenv.Programs(t, testenv.Bash, "bash")[0]
	script := filepath.Join("..", "..", "scripts", "ensure-data.sh")
	wrong := filepath.Join(t.TempDir(), "wrong")
	out, err := exec.Command(bash, script, wrong).CombinedOutput()
	require.Error(t, err)
	s := string(out)
	require.Contains(t, s, "Fashion-MNIST is not in "+wrong+" (no such directory): missing train-images-idx3-ubyte(.gz), train-labels-idx1-ubyte(.gz), t10k-images-idx3-ubyte(.gz), t10k-labels-idx1-ubyte(.gz).")
	require.NotContains(t, s, "installing")
	require.NotContains(t, s, "apt-get install dataset", "installing the package cannot fill another directory")

	dir := fashionData(t, 64)
	require.NoError(t, os.Remove(filepath.Join(dir, "t10k-labels-idx1-ubyte")))
	out, err = exec.Command(bash, script, dir).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "missing t10k-labels-idx1-ubyte(.gz).")

	out, err = exec.Command(bash, script, fashionData(t, 64)).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// failingWriter refuses every write, as a closed pipe does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// An error writing the -json line is reported and fails the run, never dropped.
func TestJSONWriteErrorIsReported(t *testing.T) {
	dir := fashionData(t, 64)
	var errb bytes.Buffer
	code := runMain([]string{"-model", "mlp", "-precision", "fp32", "-epochs", "1", "-batch", "32", "-data", dir, "-json", "-quiet"}, failingWriter{}, &errb, false)
	require.Equal(t, 1, code)
	require.Contains(t, errb.String(), "fashion: writing the JSON summary: broken pipe")
}
