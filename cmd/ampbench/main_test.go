package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets TestExitStatus run the real main in a child process.
func TestMain(m *testing.M) {
	if os.Getenv("AMPBENCH_RUN_MAIN") == "1" {
		os.Args = append([]string{"ampbench"}, strings.Fields(os.Getenv("AMPBENCH_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tiny returns options for a fast run of model.
func tiny(model string, batch int) options {
	o := defaultOptions()
	o.model, o.batch, o.steps, o.warmup, o.jsonOut = model, batch, 2, 1, true
	return o
}

// runJSON runs o and returns the raw document and its decoded report.
func runJSON(t *testing.T, o options) (map[string]any, report) {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(o, &out, io.Discard))
	var raw map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &raw), out.String())
	var rep report
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	return raw, rep
}

var (
	topKeys    = []string{"batch", "device", "model", "optimizer", "results", "steps"}
	resultKeys = []string{
		"accum", "activation_memory_bytes", "checkpoint", "final_loss", "max_ms", "median_ms", "min_ms",
		"opt_level", "param_optimizer_memory_bytes", "peak_memory_bytes", "precision", "samples_per_second",
		"skipped_steps", "speedup_vs_fp32",
	}
)

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

func TestJSONPerModel(t *testing.T) {
	for _, tc := range []struct {
		model string
		batch int
	}{{"mlp", 32}, {"cnn", 8}, {"transformer", 4}} {
		t.Run(tc.model, func(t *testing.T) {
			raw, rep := runJSON(t, tiny(tc.model, tc.batch))
			require.Equal(t, topKeys, sortedKeys(raw))
			for _, r := range raw["results"].([]any) {
				require.Equal(t, resultKeys, sortedKeys(r.(map[string]any)))
			}
			assert.Equal(t, tc.model, rep.Model)
			assert.Equal(t, "cpu", rep.Device)
			assert.Equal(t, tc.batch, rep.Batch)
			assert.Equal(t, 2, rep.Steps)
			require.Len(t, rep.Results, 3)
			var precisions []string
			for _, r := range rep.Results {
				precisions = append(precisions, r.Precision)
				assert.Equal(t, 1, r.Accum)
				assert.False(t, r.Checkpoint)
				assert.Positive(t, r.MedianMS)
				assert.LessOrEqual(t, r.MinMS, r.MedianMS)
				assert.LessOrEqual(t, r.MedianMS, r.MaxMS)
				assert.InDelta(t, float64(tc.batch)/(r.MedianMS/1000), r.SamplesPerSecond, 1e-6*r.SamplesPerSecond)
				require.NotNil(t, r.SpeedupVsFP32)
				assert.Positive(t, *r.SpeedupVsFP32)
				assert.Positive(t, r.PeakMemory)
				assert.Positive(t, r.ActivationMemory)
				assert.Positive(t, r.ParamOptimMemory)
				// After warm-up the held memory is stable, so the peak is exactly what
				// is held plus what a step adds.
				assert.Equal(t, r.ParamOptimMemory+r.ActivationMemory, r.PeakMemory, r.Precision)
				if r.Precision != "fp16" { // fp16 may skip while its loss scale settles
					assert.Zero(t, r.SkippedSteps)
				}
				require.NotNil(t, r.FinalLoss)
				assert.Positive(t, *r.FinalLoss)
			}
			assert.Equal(t, []string{"fp32", "fp16", "bf16"}, precisions)
			assert.Equal(t, 1.0, *rep.Results[0].SpeedupVsFP32)
			assert.Equal(t, "O0", rep.Results[0].OptLevel)
			assert.Equal(t, "O1", rep.Results[1].OptLevel)
			if tc.model == "mlp" {
				// Same init, same batches: the precisions train alike.
				for _, r := range rep.Results[1:] {
					assert.InDelta(t, *rep.Results[0].FinalLoss, *r.FinalLoss, 0.05)
				}
			}
		})
	}
}

// At O1 the weights stay FP32, so params+optimizer memory equals FP32's, and the
// activations are stored in half. With the MLP's default batch the step's peak is in
// the gradient-norm pass (float64 copies of the largest gradient) rather than in the
// activations, so a batch of 1024 is needed to see the activations dominate.
func TestHalfSavesActivationMemory(t *testing.T) {
	o := tiny("mlp", 1024)
	o.steps = 1
	_, rep := runJSON(t, o)
	fp32 := rep.Results[0]
	for _, r := range rep.Results[1:] {
		assert.Less(t, r.ActivationMemory, fp32.ActivationMemory, r.Precision)
		assert.Less(t, r.PeakMemory, fp32.PeakMemory, r.Precision)
		assert.Equal(t, fp32.ParamOptimMemory, r.ParamOptimMemory, r.Precision)
	}
}

func TestOptLevelsAndNoFP32(t *testing.T) {
	o := tiny("mlp", 16)
	o.precision, o.optLevel, o.accum = "bf16", "O1,O2", 2
	_, rep := runJSON(t, o)
	require.Len(t, rep.Results, 2)
	assert.Equal(t, "O1", rep.Results[0].OptLevel)
	assert.Equal(t, "O2", rep.Results[1].OptLevel)
	for _, r := range rep.Results {
		assert.Nil(t, r.SpeedupVsFP32, "no fp32 row: speedup is null")
		assert.Equal(t, 2, r.Accum)
	}
	// O2 keeps bf16 weights plus FP32 masters and momentum: 2+4+4 bytes per parameter
	// against O1's 4+4.
	assert.Greater(t, rep.Results[1].ParamOptimMemory, rep.Results[0].ParamOptimMemory)
}

// -optim picks the optimizer: the JSON names it, the table's header describes it, and
// Adam's two moments hold more than SGD's momentum (O1, and O2 beside its masters).
func TestOptimizer(t *testing.T) {
	held := map[string][]int64{}
	for _, name := range []string{"sgd", "adam", "adamw"} {
		o := tiny("mlp", 16)
		o.precision, o.optLevel, o.optimizer = "bf16", "O1,O2", name
		_, rep := runJSON(t, o)
		assert.Equal(t, name, rep.Optimizer)
		require.Len(t, rep.Results, 2)
		for _, r := range rep.Results {
			require.NotNil(t, r.FinalLoss, "%s %s: finite loss", name, r.OptLevel)
			held[name] = append(held[name], r.ParamOptimMemory)
		}
	}
	for i, level := range []string{"O1", "O2"} {
		assert.Greater(t, held["adam"][i], held["sgd"][i], level)
		assert.Equal(t, held["adam"][i], held["adamw"][i], level)
	}
	o := tiny("mlp", 16)
	o.jsonOut, o.steps, o.precision, o.optimizer = false, 1, "fp32", "adamw"
	var out bytes.Buffer
	require.NoError(t, run(o, &out, io.Discard))
	assert.Contains(t, out.String(), "AdamW lr 0.001 weight decay 0.01")
}

func TestTable(t *testing.T) {
	o := tiny("mlp", 16)
	o.jsonOut, o.steps = false, 1
	var out, errOut bytes.Buffer
	require.NoError(t, run(o, &out, &errOut))
	s := out.String()
	for _, want := range []string{"model:  mlp", "device: cpu", "host:   go", "batch 16", "median ms", "params+optim", "fp32 ", "fp16 O1", "bf16 O1", "1.00x"} {
		assert.Contains(t, s, want)
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	table := lines[len(lines)-4:]
	for _, l := range table[1:] {
		assert.Len(t, []rune(l), len([]rune(table[0])), "rows align with the header")
	}
}

// -ops prints each configuration's ops over the timed steps only, per step, the self
// times adding up to the time in ops.
func TestOps(t *testing.T) {
	for _, limit := range []int{50, 2} {
		o := tiny("mlp", 16)
		o.jsonOut, o.precision, o.steps, o.warmup, o.ops = false, "fp32,bf16", 2, 2, limit
		var out bytes.Buffer
		require.NoError(t, run(o, &out, io.Discard))
		s := out.String()
		for _, v := range []string{"fp32", "bf16 O1"} {
			i := strings.Index(s, "ops of "+v+", per timed step (2 steps): ")
			require.GreaterOrEqual(t, i, 0, "no ops table for %s in\n%s", v, s)
			lines := strings.Split(strings.TrimSpace(s[i:]), "\n")
			if j := strings.Index(s[i+1:], "\nops of "); j >= 0 {
				lines = strings.Split(strings.TrimSpace(s[i:i+1+j]), "\n")
			}
			var inOps, sum float64
			ratios := 0
			_, err := fmt.Sscanf(lines[0][strings.Index(lines[0], "): ")+3:], "%f ms in ops", &inOps)
			require.NoError(t, err, lines[0])
			head := []string{"op", "pass", "calls", "self", "ms", "of", "step", "total", "ms", "GFLOP/s"}
			half := v != "fp32" // set against the fp32 configuration of the run
			if half {
				head = append(head, "÷fp32")
			}
			require.Equal(t, head, strings.Fields(lines[1]))
			// The products' line closes the table: the linear layers' multiply-adds.
			last := lines[len(lines)-1]
			require.True(t, strings.HasPrefix(last, "products: "), last)
			var gflop float64
			_, err = fmt.Sscanf(last, "products: %f GFLOP a step", &gflop)
			require.NoError(t, err, last)
			assert.Greater(t, gflop, 0.0, last)
			lines = lines[:len(lines)-1]
			calls := map[string]string{}
			for _, l := range lines[2:] {
				f := strings.Fields(l)
				if strings.HasPrefix(l, "(") || strings.HasSuffix(f[1], "more)") {
					require.Len(t, f, 3, l)
					more, err := strconv.ParseFloat(f[2], 64)
					require.NoError(t, err)
					sum += more
					continue
				}
				cols := 7
				if strings.HasPrefix(f[0], "linear") {
					// A product: its rate in the column after the total.
					cols++
					rate, err := strconv.ParseFloat(f[7], 64)
					require.NoError(t, err, l)
					assert.Greater(t, rate, 0.0, l)
				}
				if half && f[0] != "cast" {
					// Every op but the casts ran in fp32 too: its time against that.
					cols++
					vs, err := strconv.ParseFloat(f[cols-1], 64)
					require.NoError(t, err, l)
					assert.Greater(t, vs, 0.0, l)
					ratios++
				}
				require.Len(t, f, cols, l)
				self, err := strconv.ParseFloat(f[3], 64)
				require.NoError(t, err)
				sum += self
				calls[f[0]+" "+f[1]] = f[2]
			}
			assert.InDelta(t, inOps, sum, 0.02*float64(len(lines)), "the self times add up to the time in ops")
			if half {
				assert.Positive(t, ratios, "rows set against fp32")
			}
			if limit == 2 {
				assert.Len(t, lines, 5, "two ops and the rest")
				continue
			}
			// Two linear layers with a ReLU and the classifier's a step: the warm-up
			// steps' records were dropped.
			assert.Equal(t, "2", calls["linear_relu forward"], s[i:])
			assert.Equal(t, "1", calls["linear forward"], s[i:])
		}
	}
}

// -op-shapes gives each layer its rows: the tiny MLP's two hidden layers (inputs 784
// and 1024 wide) each have a forward and a backward row under their input shapes, the
// backward's those of its forward, and in the bf16 table each is set against fp32's.
func TestOpShapes(t *testing.T) {
	o := tiny("mlp", 16)
	o.jsonOut, o.precision, o.steps, o.warmup, o.ops, o.opShapes = false, "fp32,bf16", 2, 1, 100, true
	var out bytes.Buffer
	require.NoError(t, run(o, &out, io.Discard))
	s := out.String()
	i := strings.Index(s, "ops of bf16 O1")
	require.GreaterOrEqual(t, i, 0, s)
	fp32, bf16 := s[strings.Index(s, "ops of fp32"):i], s[i:]
	for _, tbl := range []string{fp32, bf16} {
		lines := strings.Split(tbl, "\n")
		require.True(t, strings.HasSuffix(strings.TrimSpace(lines[1]), "input shapes"), lines[1])
		rows := map[string]string{} // op pass shapes: the row
		for _, l := range lines[2:] {
			if j := strings.Index(l, "[["); j >= 0 {
				f := strings.Fields(l[:j])
				rows[f[0]+" "+f[1]+" "+l[j:]] = l
			}
		}
		for _, sh := range []string{"[[16, 784], [1024, 784], [1024]]", "[[16, 1024], [1024, 1024], [1024]]"} {
			for _, pass := range []string{"forward", "backward"} {
				l, ok := rows["linear_relu "+pass+" "+sh]
				require.True(t, ok, "no row for linear_relu %s %s in\n%s", pass, sh, tbl)
				f := strings.Fields(l[:strings.Index(l, "[[")])
				require.Equal(t, "1", f[2], "one call a step: %s", l)
				if tbl == bf16 {
					require.Len(t, f, 9, "rate and ÷fp32: %s", l)
					vs, err := strconv.ParseFloat(f[8], 64)
					require.NoError(t, err, l)
					assert.Positive(t, vs, l)
				}
			}
		}
	}
}

// -ops with -json puts the products' GFLOP and time a step into each result: the
// tiny MLP's two linear layers and its classifier, forward and backward, whatever the
// precision; absent without -ops.
func TestOpsJSON(t *testing.T) {
	o := tiny("mlp", 16)
	o.precision, o.steps, o.warmup, o.ops = "fp32,bf16", 2, 1, 5
	raw, rep := runJSON(t, o)
	require.Len(t, rep.Results, 2)
	for _, r := range raw["results"].([]any) {
		m := r.(map[string]any)
		assert.Contains(t, m, "products_gflop_per_step")
		assert.Contains(t, m, "products_ms_per_step")
		assert.Contains(t, m, "other_ms_per_step")
	}
	for _, r := range rep.Results {
		require.NotNil(t, r.ProductGFLOP, r.Precision)
		require.NotNil(t, r.ProductMS, r.Precision)
		assert.Greater(t, *r.ProductGFLOP, 0.0)
		assert.Greater(t, *r.ProductMS, 0.0)
		require.NotNil(t, r.OtherMS)
		assert.LessOrEqual(t, *r.ProductMS, r.MaxMS, "the products' time is part of a step's")
		assert.Greater(t, *r.OtherMS, 0.0, "a step has more than its products")
		assert.LessOrEqual(t, *r.OtherMS, r.MaxMS)
	}
	assert.Equal(t, *rep.Results[0].ProductGFLOP, *rep.Results[1].ProductGFLOP, "the same products in both precisions")
	o.ops = 0
	raw, rep = runJSON(t, o)
	for _, r := range raw["results"].([]any) {
		assert.NotContains(t, r.(map[string]any), "products_gflop_per_step", "only with -ops")
	}
	for _, r := range rep.Results {
		assert.Nil(t, r.ProductGFLOP)
		assert.Nil(t, r.ProductMS)
	}
}

func TestPlot(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"bench.png", "bench.svg"} {
		t.Run(name, func(t *testing.T) {
			o := tiny("mlp", 16)
			o.steps, o.warmup = 1, 0
			o.plot = filepath.Join(dir, name)
			runJSON(t, o)
			b, err := os.ReadFile(o.plot)
			require.NoError(t, err)
			require.NotEmpty(t, b)
			if strings.HasSuffix(name, ".png") {
				assert.True(t, bytes.HasPrefix(b, []byte("\x89PNG")))
			} else {
				assert.Contains(t, string(b), "<svg")
				assert.Contains(t, string(b), "fp16 O1")
			}
		})
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-model", "resnet"},
		{"-precision", "fp8"},
		{"-precision", "fp32,fp32"},
		{"-precision", ""},
		{"-opt-level", "O4"},
		{"-opt-level", "O0"},
		{"-steps", "0"},
		{"-steps", "-3"},
		{"-warmup", "-1"},
		{"-batch", "0"},
		{"-batch", "-5"},
		{"-accum", "0"},
		{"-batch", "10", "-accum", "3"},
		{"-plot", "out.pdf"},
		{"-plot", "out"},
		{"-device", "cuda:0"},
		{"-device", "tpu"},
		{"-device", "cpu:99"},
		{"-ops", "-1"},
		{"-ops", "5", "-plan"},
		{"-op-shapes"},
		{"-ops", "5", "-op-shapes", "-json"},
		{"-optim", "lamb"},
		{"-optim", ""},
		{"-no-such-flag"},
		{"extra"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			o, err := parseArgs(args, io.Discard)
			if err == nil {
				err = run(o, io.Discard, io.Discard)
			}
			require.Error(t, err)
			var u *usageError
			assert.True(t, errors.As(err, &u), "%v is a usage error", err)
		})
	}
}

func TestParseArgs(t *testing.T) {
	o, err := parseArgs([]string{"-model", "cnn", "-precision", "bf16", "-opt-level", "O2", "-steps", "5", "-json", "-plot", "x.svg", "-seed", "7"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "cnn", o.model)
	assert.Equal(t, "bf16", o.precision)
	assert.Equal(t, 5, o.steps)
	assert.Equal(t, 3, o.warmup)
	assert.Equal(t, 0, o.batch, "0 asks for the model's default")
	assert.Equal(t, uint64(7), o.seed)
	assert.True(t, o.jsonOut)
	p, err := resolve(o)
	require.NoError(t, err)
	assert.Equal(t, 128, p.batch)
	_, err = parseArgs([]string{"-h"}, io.Discard)
	assert.ErrorIs(t, err, flag.ErrHelp)
}

// transformer-base is the GPU-sized model: BERT-base's shape, batch 16, and a parameter
// count to match (about 86 M in the blocks).
func TestTransformerBase(t *testing.T) {
	o, err := parseArgs([]string{"-model", "transformer-base"}, io.Discard)
	require.NoError(t, err)
	p, err := resolve(o)
	require.NoError(t, err)
	assert.Equal(t, 16, p.batch)
	assert.Contains(t, describe("transformer-base"), "12 layers, width 768, 12 heads, 512 tokens")
	n := 0
	for _, q := range buildModel("transformer-base", 1).Params() {
		n += q.T.Numel()
		q.T.Release()
	}
	assert.InDelta(t, 86e6, n, 1e6, "parameters")
	b := makeBatches("transformer-base", 1, 2, 1)
	assert.Equal(t, []int{2, 512}, []int(b[0].shape))
}

func TestExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	for _, tc := range []struct {
		args string
		code int
		msg  string
	}{
		{"-model nope", 2, "unknown -model"},
		{"-steps 0", 2, "-steps must be"},
		{"-plot x.gif", 2, ".png or .svg"},
		{"-h", 0, "usage: ampbench"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "AMPBENCH_RUN_MAIN=1", "AMPBENCH_ARGS="+tc.args)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		assert.Equal(t, tc.code, code, tc.args)
		assert.Contains(t, string(out), tc.msg, tc.args)
	}
}

// Checkpointing recomputes the same forward, so the losses match the plain run
// exactly; on the transformer (uniform blocks, the peak at the end of the forward) it
// lowers the activation memory. Not on the CNN: since max-pool keeps no index, its peak
// is in the first block's backward, where the recomputed segment holds what the plain
// run kept (amp.Plan measures this and does not pick checkpointing there).
func TestCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		model string
		batch int
	}{{"mlp", 32}, {"cnn", 16}, {"transformer", 4}} {
		t.Run(tc.model, func(t *testing.T) {
			o := tiny(tc.model, tc.batch)
			o.precision, o.steps = "fp32,bf16", 1
			_, plain := runJSON(t, o)
			o.checkpoint = true
			_, ck := runJSON(t, o)
			require.Len(t, ck.Results, 2)
			for i, r := range ck.Results {
				assert.True(t, r.Checkpoint)
				assert.False(t, plain.Results[i].Checkpoint)
				assert.Equal(t, *plain.Results[i].FinalLoss, *r.FinalLoss, r.Precision)
				assert.Equal(t, plain.Results[i].ParamOptimMemory, r.ParamOptimMemory, r.Precision)
				if tc.model == "transformer" {
					assert.Less(t, r.ActivationMemory, plain.Results[i].ActivationMemory, r.Precision)
				}
			}
		})
	}
}

func TestSegmentsFor(t *testing.T) {
	for n, want := range map[int]int{0: 1, 1: 1, 2: 2, 3: 2, 6: 2, 12: 3, 16: 4} {
		assert.Equal(t, want, segmentsFor(n), "n=%d", n)
	}
}
