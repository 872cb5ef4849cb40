package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

func TestJSONWithInjectedInf(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"-model", "mlp", "-steps", "5", "-batch", "8", "-inject-inf", "2", "-json"}, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	require.Empty(t, errb.String())

	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(out.Bytes(), &m))
	require.ElementsMatch(t, []string{"steps", "skipped_steps", "first_nonfinite", "ops"}, slices.Collect(maps.Keys(m)))

	var rep struct {
		Steps          int   `json:"steps"`
		SkippedSteps   []int `json:"skipped_steps"`
		FirstNonFinite *struct {
			Module, Op, Pass string
			Step             int
		} `json:"first_nonfinite"`
		Ops []map[string]any `json:"ops"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.Equal(t, 5, rep.Steps)
	require.Equal(t, []int{2}, rep.SkippedSteps)
	require.NotNil(t, rep.FirstNonFinite)
	// The MLP is Flatten ("0") then Linear ("1"): the first parameter is 1.weight.
	require.Equal(t, "1", rep.FirstNonFinite.Module)
	require.Equal(t, "accumulate_grad(weight)", rep.FirstNonFinite.Op)
	require.Equal(t, "backward", rep.FirstNonFinite.Pass)
	require.Equal(t, 2, rep.FirstNonFinite.Step)

	require.NotEmpty(t, rep.Ops)
	top := rep.Ops[0]
	require.Equal(t, "1", top["module"])
	require.Equal(t, "Linear", top["module_type"], "a Sequential index comes with what ran there")
	for _, op := range rep.Ops {
		delete(op, "module_type")
		require.ElementsMatch(t, []string{"module", "op", "pass", "max_abs", "inf", "nan", "overflow_fraction", "underflow_fraction"}, slices.Collect(maps.Keys(op)))
	}
	require.Equal(t, "accumulate_grad(weight)", top["op"])
	require.Equal(t, 1.0, top["inf"], "riskiest row first")
}

func TestTableAndOtherModels(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"-model", "transformer", "-steps", "2", "-batch", "2", "-inject-nan", "1", "-top", "0"}, &out, &errb), errb.String())
	s := out.String()
	require.Contains(t, s, "first non-finite: ")
	require.Regexp(t, `steps: 2, skipped: \d \[(0 )?1\]`, s, "the NaN step is skipped")
	require.Contains(t, errb.String(), "transformer on cpu, float16 O1")
	// The transformer's first parameter is the root's position embedding "pos".
	var row []string
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[0] == "(root)" && f[1] == "(Transformer)" && f[2] == "accumulate_grad(pos)" {
			row = f[1:]
		}
	}
	require.NotNil(t, row, s)
	require.Equal(t, []string{"backward", "float32", "2"}, row[2:5])
	require.Equal(t, "1", row[7], "NaN column")
	require.NotContains(t, s, "more rows", "-top 0 prints every row")

	out.Reset()
	errb.Reset()
	require.Equal(t, 0, run([]string{"-model", "cnn", "-steps", "2", "-batch", "4", "-top", "3"}, &out, &errb), errb.String())
	require.Contains(t, out.String(), "MODULE")
	require.Contains(t, out.String(), "more rows")
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-model", "rnn"}, `unknown -model "rnn"`},
		{[]string{"-steps", "0"}, "-steps must be ≥ 1"},
		{[]string{"-steps", "4", "-inject-inf", "4"}, "-inject-inf 4 is not a step of the run (0 … 3"},
		{[]string{"-inject-nan", "-2"}, "-inject-nan -2 is not a step"},
		{[]string{"-inject-inf", "1", "-inject-nan", "1"}, "name the same step 1"},
		{[]string{"-batch", "0"}, "-batch must be ≥ 1"},
		{[]string{"-lr", "-1"}, "-lr must be a positive number"},
		{[]string{"-lr", "NaN"}, "-lr must be a positive number"},
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"-steps", "many"}, `invalid value "many" for flag -steps`},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-device", "tpu"}, "unknown device"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		require.Equal(t, 2, code, "%v: %s", tc.args, errb.String())
		require.Contains(t, errb.String(), tc.want, "%v", tc.args)
		require.Empty(t, out.String())
	}
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"-h"}, &out, &errb))
	require.True(t, strings.Contains(errb.String(), "-inject-inf"), "usage lists the flags")
}

func TestHelpHasADescription(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"-h"}, &out, &errb))
	require.True(t, strings.HasPrefix(errb.String(), "usage: overflowcheck [flags]\n\nTrains a model in float16"), errb.String())
	require.Contains(t, errb.String(), "-inject-inf")
	errb.Reset()
	require.Equal(t, 2, run([]string{"-device", "cpu:x"}, &out, &errb))
	require.Contains(t, errb.String(), "bad cpu device index")
	require.NotContains(t, errb.String(), "cuda")
}

// A diverging run still ends with its report (the command turns the Trainer's
// divergence check off: it is there to look at such runs).
func TestDivergingRunStillReports(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"-model", "mlp", "-steps", "14", "-batch", "8", "-lr", "1e4", "-top", "3"}, &out, &errb), errb.String())
	require.Contains(t, out.String(), "first non-finite: ")
}

func TestOutOfMemoryIsAMessage(t *testing.T) {
	be := backend.MustGet(tensor.CPU)
	old := be.MemoryStats().Limit
	be.SetMemoryLimit(1 << 20)
	defer be.SetMemoryLimit(old)
	var out, errb bytes.Buffer
	require.Equal(t, 1, run([]string{"-model", "mlp", "-device", "cpu", "-steps", "1"}, &out, &errb))
	require.Contains(t, errb.String(), "out of memory")
	require.Contains(t, errb.String(), "use a smaller -batch")
}
