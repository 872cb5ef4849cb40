package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gamp-ml/gamp/internal/cli"
	"github.com/gamp-ml/gamp/nn"
	"github.com/stretchr/testify/require"
)

// tinyText writes a small, very regular text: a model learns it in a few dozen steps.
func tinyText(t *testing.T) string {
	var b strings.Builder
	words := []string{"the cat sat on the mat.", "a dog ran in the fog.", "we sing a song all day long."}
	for i := 0; i < 400; i++ {
		b.WriteString(words[i%len(words)])
		b.WriteByte('\n')
	}
	p := filepath.Join(t.TempDir(), "tiny.txt")
	require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o644))
	return p
}

func tinyOptions(text string) options {
	o := defaultOptions()
	o.textPath, o.device, o.quiet = text, "cpu", true
	o.layers, o.dim, o.heads, o.context, o.batch = 2, 32, 2, 32, 8
	o.steps, o.warmup, o.evalEvery, o.evalBatches, o.lr = 60, 5, 20, 2, 5e-3
	o.sampleLen = 40
	return o
}

func TestTrainsOnTinyText(t *testing.T) {
	dir := t.TempDir()
	o := tinyOptions(tinyText(t))
	o.precision = "bf16"
	o.plot = filepath.Join(dir, "loss.png")
	o.exportInit = filepath.Join(dir, "init.safetensors")
	o.save = filepath.Join(dir, "state.safetensors")
	s, err := run(o, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "bf16", s.Precision)
	require.Equal(t, "O1", s.OptLevel)
	require.Equal(t, int64(60), s.Steps)
	require.Len(t, s.TrainCurve, 60)
	require.Len(t, s.ValCurve, 3)
	require.Less(t, s.ValLoss, s.UnigramLoss-1, "the model should use the context")
	require.Greater(t, s.TokensPerSecond, 0.0)
	require.Len(t, s.StepMS, 60)
	require.Equal(t, median(s.StepMS), s.MedianStepMS)
	require.Greater(t, s.PeakMemoryBytes, int64(0))
	require.Zero(t, s.SkippedSteps)
	require.True(t, strings.HasPrefix(s.Sample, "\n"))
	require.Equal(t, 41, utf8.RuneCountInString(s.Sample))
	st, err := os.Stat(o.plot)
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(1000))
	init, _, err := nn.LoadFile(o.exportInit)
	require.NoError(t, err)
	require.Contains(t, init, "blocks.1.attn.qkv.weight")

	// Resume from the state saved at step 60 and continue to 80: the curves continue.
	more := o
	more.resume, more.steps, more.save, more.plot, more.exportInit = o.save, 80, "", "", ""
	s2, err := run(more, io.Discard)
	require.NoError(t, err)
	require.Equal(t, int64(80), s2.Steps)
	require.Len(t, s2.TrainCurve, 80)
	require.Len(t, s2.StepMS, 20, "a resumed run times only the steps it ran")
	require.Equal(t, s.TrainCurve, s2.TrainCurve[:60])
	require.Len(t, s2.ValCurve, 4)
}

// Resuming gives the same losses as an uninterrupted run (FP32, same batches).
func TestResumeMatchesUninterrupted(t *testing.T) {
	dir := t.TempDir()
	o := tinyOptions(tinyText(t))
	o.precision, o.steps, o.evalEvery, o.sampleLen = "fp32", 20, 10, 0
	full, err := run(o, io.Discard)
	require.NoError(t, err)
	half := o
	half.stopAt, half.save = 10, filepath.Join(dir, "s.safetensors")
	_, err = run(half, io.Discard)
	require.NoError(t, err)
	rest := o
	rest.resume = half.save
	r, err := run(rest, io.Discard)
	require.NoError(t, err)
	for i := range full.TrainCurve {
		require.InDelta(t, full.TrainCurve[i].Loss, r.TrainCurve[i].Loss, 1e-6, "step %d", i+1)
	}
}

func TestAccumulationAndCheckpointing(t *testing.T) {
	o := tinyOptions(tinyText(t))
	o.precision, o.steps, o.warmup, o.evalEvery, o.sampleLen = "fp32", 5, 2, 0, 0
	base, err := run(o, io.Discard)
	require.NoError(t, err)
	for _, mod := range []func(*options){
		func(o *options) { o.accum = 2 },
		func(o *options) { o.checkpoint = true },
		func(o *options) { o.composed = true },
	} {
		v := o
		mod(&v)
		s, err := run(v, io.Discard)
		require.NoError(t, err)
		for i := range base.TrainCurve {
			require.InDelta(t, base.TrainCurve[i].Loss, s.TrainCurve[i].Loss, 1e-4, "step %d", i+1)
		}
	}
}

func TestBadInput(t *testing.T) {
	text := tinyText(t)
	for _, c := range []struct {
		mod    func(*options)
		want   string
		status int // cli.ExitStatus: 2 for a bad flag value
	}{
		{func(o *options) { o.precision = "int8" }, "unknown -precision", 2},
		{func(o *options) { o.batch = 7; o.accum = 2 }, "not divisible", 2},
		{func(o *options) { o.dim = 30; o.heads = 4 }, "not divisible", 2},
		{func(o *options) { o.warmup = 100 }, "-warmup", 2},
		{func(o *options) { o.textPath = filepath.Join(t.TempDir(), "missing.txt") }, "no such file", 1},
		{func(o *options) { o.textPath = ""; o.fortunesDir = t.TempDir() }, "apt-get install fortunes", 1},
		{func(o *options) { o.prompt = "€" }, "not in the", 1},
		{func(o *options) { o.resume = filepath.Join(t.TempDir(), "none.safetensors") }, "none.safetensors", 1},
		{func(o *options) { o.plot = filepath.Join(t.TempDir(), "loss.jpg") }, ".png or .svg", 2},
		{func(o *options) { o.plot = filepath.Join(t.TempDir(), "no", "dir", "loss.png") }, "-plot", 2},
		{func(o *options) { o.save = filepath.Join(t.TempDir(), "no", "dir", "s.safetensors") }, "-save", 2},
		{func(o *options) { o.optLevel = "O2"; o.precision = "fp32" }, "needs -precision", 2},
	} {
		o := tinyOptions(text)
		o.steps, o.warmup, o.sampleLen = 2, 1, 5
		c.mod(&o)
		s, err := run(o, io.Discard)
		require.ErrorContains(t, err, c.want)
		require.Equal(t, c.status, cli.ExitStatus(err), "%v", err)
		if c.status == 2 {
			require.Zero(t, s.Steps, "a bad flag value is refused before training: %v", err)
		}
	}
}

func TestPick(t *testing.T) {
	logits := []float64{0.1, 3, 2.9, -1}
	require.Equal(t, 1, pick(logits, 0, 0, nil))
	seen := map[int]int{}
	r := newRand(1)
	for range 2000 {
		seen[pick(logits, 1, 2, r)]++
	}
	require.Len(t, seen, 2, "top-k 2 draws only the two best")
	require.InDelta(t, 1.105, float64(seen[1])/float64(seen[2]), 0.15) // e^0.1
}

// -flops reports a training step's product FLOPs: the linear layers and the head
// (forward, input gradient, weight gradient) and attention (forward, and a backward of
// 2.5 forwards), with the validation passes between steps left out; without it the
// field is absent.
func TestFLOPs(t *testing.T) {
	o := tinyOptions(tinyText(t))
	o.precision, o.steps, o.evalEvery, o.sampleLen, o.flops = "bf16", 6, 2, 0, true
	s, err := run(o, io.Discard)
	require.NoError(t, err)
	require.NotNil(t, s.ProductGFLOP)
	tokens := int64(o.batch * o.context)
	d, v := int64(o.dim), int64(s.Vocab)
	perToken := int64(o.layers)*(d*3*d+d*d+d*4*d+4*d*d) + d*v // multiply-adds a token, forward
	linear := 3 * 2 * tokens * perToken
	attn := int64(o.layers) * 7 * 2 * int64(o.batch) * int64(o.context*o.context) * d // 2 forward products + 5 backward
	require.InDelta(t, float64(linear+attn)/1e9, *s.ProductGFLOP, 1e-12)

	o.flops = false
	s, err = run(o, io.Discard)
	require.NoError(t, err)
	require.Nil(t, s.ProductGFLOP)
}
