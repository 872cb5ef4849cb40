package main

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/internal/testenv"
)

// torchPython returns the Python that has PyTorch ($GAMP_PYTHON, else /usr/bin/python3),
// or skips the test saying why.
func torchPython(t *testing.T) string {
	py := os.Getenv("GAMP_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if out, err := exec.Command(py, "-c", "import torch").CombinedOutput(); err != nil {
		testenv.Skip(t, testenv.PythonTorch, "no PyTorch for %s (or set GAMP_PYTHON to a Python that has it): %v: %s", py, err, out)
	}
	return py
}

type torchRun struct {
	TrainCurve []point `json:"train_curve"`
	ValCurve   []point `json:"val_curve"`
}

// runTorch runs scripts/torch_chargpt.py with o's settings from the weights in init.
func runTorch(t *testing.T, py, init string, o options) torchRun {
	args := []string{"../../scripts/torch_chargpt.py", "--init", init, "--text", o.textPath, "--precision", o.precision,
		"--steps", strconv.Itoa(o.steps), "--batch", strconv.Itoa(o.batch), "--accum", strconv.Itoa(o.accum),
		"--context", strconv.Itoa(o.context), "--layers", strconv.Itoa(o.layers), "--dim", strconv.Itoa(o.dim),
		"--heads", strconv.Itoa(o.heads), "--lr", strconv.FormatFloat(o.lr, 'g', -1, 64),
		"--weight-decay", strconv.FormatFloat(o.weightDecay, 'g', -1, 64), "--warmup", strconv.Itoa(o.warmup),
		"--clip", strconv.FormatFloat(o.clip, 'g', -1, 64), "--eval-every", strconv.Itoa(o.evalEvery),
		"--eval-batches", strconv.Itoa(o.evalBatches), "--seed", strconv.FormatUint(o.seed, 10)}
	cmd := exec.Command(py, args...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err)
	var r torchRun
	require.NoError(t, json.Unmarshal(out, &r))
	return r
}

// The same model, initial weights and batches in gamp and PyTorch: in FP32 the
// training and validation losses agree step for step (relative difference ≤ 1e-4 over
// 50 steps); under BF16 autocast the final validation losses agree within 0.02 nats.
func TestMatchesPyTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PyTorch")
	}
	py := torchPython(t)
	text := tinyText(t)
	for _, prec := range []string{"fp32", "bf16"} {
		t.Run(prec, func(t *testing.T) {
			o := tinyOptions(text)
			o.precision, o.steps, o.evalEvery, o.sampleLen, o.accum = prec, 50, 1, 0, 2
			o.exportInit = filepath.Join(t.TempDir(), "init.safetensors")
			g, err := run(o, io.Discard)
			require.NoError(t, err)
			tr := runTorch(t, py, o.exportInit, o)
			require.Len(t, tr.TrainCurve, 50)
			require.Len(t, tr.ValCurve, 50)
			if prec == "fp32" {
				for i := range g.TrainCurve {
					for _, c := range []struct {
						what        string
						gamp, torch point
					}{{"train", g.TrainCurve[i], tr.TrainCurve[i]}, {"validation", g.ValCurve[i], tr.ValCurve[i]}} {
						require.Equal(t, c.torch.Step, c.gamp.Step)
						rel := math.Abs(c.gamp.Loss-c.torch.Loss) / math.Abs(c.torch.Loss)
						require.LessOrEqual(t, rel, 1e-4, "%s loss at step %d: gamp %.7f, PyTorch %.7f", c.what, c.gamp.Step, c.gamp.Loss, c.torch.Loss)
					}
				}
				return
			}
			last := len(g.ValCurve) - 1
			require.InDelta(t, tr.ValCurve[last].Loss, g.ValCurve[last].Loss, 0.02, "final validation loss, gamp vs PyTorch BF16")
		})
	}
}
