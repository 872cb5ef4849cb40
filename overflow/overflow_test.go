package overflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/autocast"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/scaler"
	"github.com/gamp-ml/gamp/tensor"
)

func TestFractionsOnHandMadeTensor(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	vals := []float32{
		0, float32(math.Copysign(0, -1)), // zeros
		1e-30, -1e-8, // flush: 0 < |x| < 2^-24 ≈ 5.96e-8
		0x1p-24, 1e-5, -6e-5, // subnormal: 2^-24 ≤ |x| < 2^-14 ≈ 6.1e-5
		0x1p-14, 1, -2.5, 65504, // normal float16
		65505, -7e4, 1e10, // overflow
		float32(inf), float32(-inf), float32(nan),
	}
	n := float64(len(vals))
	x := tensor.FromSlice(vals, nil)
	defer x.Release()
	var sc scratch
	s := sc.measure(x)
	assert.Equal(t, int64(len(vals)), s.n)
	assert.Equal(t, int64(2), s.inf)
	assert.Equal(t, int64(1), s.nan)
	assert.Equal(t, int64(2), s.zero)
	assert.Equal(t, int64(2), s.flush)
	assert.Equal(t, int64(3), s.sub)
	assert.Equal(t, int64(3), s.over)
	assert.Equal(t, 1e10, math.Round(s.maxAbs()/1e3)*1e3, "max finite |x|")

	// The same numbers as the backend's NonFiniteStats.
	bi, bn, bmax := x.NonFiniteStats()
	assert.Equal(t, int64(bi), s.inf)
	assert.Equal(t, int64(bn), s.nan)
	assert.Equal(t, bmax, s.maxAbs())

	a := &acc{st: s}
	r := a.row()
	assert.InDelta(t, 3/n, r.OverflowFraction, 1e-12)
	assert.InDelta(t, 2/n, r.UnderflowFraction, 1e-12)
	assert.InDelta(t, 3/n, r.SubnormalFraction, 1e-12)
	assert.InDelta(t, 2/n, r.ZeroFraction, 1e-12)
	assert.Equal(t, int64(1), r.Hist.Count(0), "1 is in [2^0, 2^1)")
	assert.Equal(t, int64(1), r.Hist.Count(1), "2.5 is in [2^1, 2^2)")
	assert.Equal(t, int64(1), r.Hist.Count(-14), "2^-14")
	assert.Equal(t, int64(1), r.Hist.Count(-15), "6e-5 is just below 2^-14")
	lo, hi, ok := r.Hist.Range()
	assert.True(t, ok)
	assert.Equal(t, -100, lo, "1e-30 ≈ 2^-99.7")
	assert.Equal(t, 33, hi, "1e10 ≈ 2^33.2")
	assert.Equal(t, int64(len(vals)-5), r.Hist.Total(), "finite non-zero values")

	// Half tensors: float16 keeps no overflow or flush (rounding did that), but its
	// subnormals count; bfloat16 holds float32's range.
	h := tensor.FromSlice([]float32{0, 0x1p-20, -0x1p-24, 1, 65504, float32(inf), float32(nan)}, nil, tensor.WithDType(tensor.Float16))
	defer h.Release()
	s = sc.measure(h)
	assert.Equal(t, [7]int64{7, 1, 1, 1, 0, 0, 2}, [7]int64{s.n, s.inf, s.nan, s.zero, s.over, s.flush, s.sub})
	assert.Equal(t, 65504.0, s.maxAbs())
	assert.Equal(t, int64(1), s.hist.Count(-20))
	assert.Equal(t, int64(1), s.hist.Count(-24))
	assert.Equal(t, int64(1), s.hist.Count(15))

	b := tensor.FromSlice([]float32{1e-30, 1e-6, 1e6, -3e38}, nil, tensor.WithDType(tensor.BFloat16))
	defer b.Release()
	s = sc.measure(b)
	assert.Equal(t, [4]int64{1, 1, 2, 4}, [4]int64{s.flush, s.sub, s.over, s.n})

	// Non-contiguous and float64 tensors go through the conversion path.
	c := tensor.NewContext()
	defer c.Close()
	m := tensor.FromSlice([]float32{1, 1e-30, 70000, 2}, tensor.Shape{2, 2}, tensor.WithContext(c)).Permute(1, 0)
	require.False(t, m.IsContiguous())
	s = sc.measure(m)
	assert.Equal(t, [3]int64{1, 1, 4}, [3]int64{s.flush, s.over, s.n})
	d := tensor.FromSlice([]float64{1e-30, 1e-6, 1e300, math.Inf(-1)}, nil, tensor.WithContext(c))
	s = sc.measure(d)
	assert.Equal(t, [4]int64{1, 1, 1, 1}, [4]int64{s.flush, s.sub, s.over, s.inf})
	assert.Equal(t, 1e300, s.maxAbs())
}

// tiny is a small classifier whose layers have paths "0", "1", "2".
func tiny() *nn.Sequential {
	return nn.NewSequential(nn.NewLinear(4, 8, nn.Seeded(1)), nn.NewReLU(), nn.NewLinear(8, 3, nn.Seeded(2)))
}

func batch() (x, y *tensor.Tensor) {
	g := tensor.NewContext(tensor.UseGenerator(tensor.NewGenerator(7)))
	x = tensor.Randn(tensor.Shape{6, 4}, tensor.WithContext(g))
	g.Keep(x)
	g.Close()
	return x, tensor.FromSlice([]int64{0, 1, 2, 0, 1, 2}, nil)
}

func ce(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }

// fp16Trainer trains model at O1 in float16 with SGD through the Watcher.
func fp16Trainer(t *testing.T, w *Watcher, model nn.Module) *amp.Trainer {
	opt, err := optim.NewSGD(model.Params(), optim.SGDConfig{LR: 0.1})
	require.NoError(t, err)
	tr, err := amp.NewTrainer(w.Model(), opt, ce, tensor.CPU, amp.Config{Level: amp.O1, Low: tensor.Float16, Scaler: scaler.DefaultConfig()})
	require.NoError(t, err)
	return tr
}

func train(t *testing.T, w *Watcher, tr *amp.Trainer, steps int) []amp.Result {
	x, y := batch()
	defer x.Release()
	defer y.Release()
	var rs []amp.Result
	for range steps {
		r, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
		require.NoError(t, err)
		w.Record(r)
		rs = append(rs, r)
	}
	return rs
}

func TestScaledOutputOverflowsInForward(t *testing.T) {
	model := tiny()
	w := Watch(model)
	defer w.Close()
	undo := w.ScaleOutput(model.At(0), 1e6, []int{2})
	tr := fp16Trainer(t, w, model)
	rs := train(t, w, tr, 4)
	require.Equal(t, []bool{false, false, true, false}, skipped(rs))

	rep := w.Report()
	require.NotNil(t, rep.FirstNonFinite)
	require.Equal(t, Event{Module: "0", ModuleType: "Linear", Op: "mul_scalar", Pass: PassForward, Step: 2}, *rep.FirstNonFinite)
	require.Equal(t, 4, rep.Steps)
	require.Equal(t, []int{2}, rep.SkippedSteps)
	top := rep.Ops[0]
	require.Equal(t, [3]string{"0", "mul_scalar", "forward"}, [3]string{top.Module, top.Op, string(top.Pass)})
	require.Positive(t, top.Inf)
	require.Equal(t, 2, top.FirstNonFiniteStep)
	require.Equal(t, []Event{{Module: "0", ModuleType: "Linear", Op: "mul_scalar", Pass: PassForward, Step: 2}}, rep.NonFiniteSteps)

	// Rows carry module paths in both passes; the loss runs outside the model.
	keys := map[rowKey]bool{}
	for _, r := range rep.Ops {
		keys[rowKey{r.Module, r.Op, r.Pass}] = true
	}
	for _, k := range []rowKey{
		{"0", "linear", PassForward}, {"0", "linear", PassBackward}, {"1", "relu", PassForward},
		{"2", "linear", PassBackward}, {"0", "cast", PassForward}, {Outside, "cross_entropy", PassForward},
		{"0", "accumulate_grad(weight)", PassBackward}, {"2", "accumulate_grad(bias)", PassBackward},
	} {
		require.True(t, keys[k], "no row %v in %v", k, keys)
	}

	// Disarmed, the fault no longer fires.
	undo()
	w.SetStep(2)
	r, err := tr.Step(oneBatch())
	require.NoError(t, err)
	require.False(t, r.Skipped)
}

func oneBatch() ([]*tensor.Tensor, []*tensor.Tensor) {
	x, y := batch()
	return []*tensor.Tensor{x}, []*tensor.Tensor{y}
}

func skipped(rs []amp.Result) []bool {
	out := make([]bool, len(rs))
	for i, r := range rs {
		out[i] = r.Skipped
	}
	return out
}

func TestInjectedNaNGradNamesTheParameterModule(t *testing.T) {
	model := tiny()
	w := Watch(model)
	defer w.Close()
	p := model.Params()[2] // "2.weight"
	require.Equal(t, "2.weight", p.Name)
	w.InjectGrad(p, []int{1}, math.NaN())
	tr := fp16Trainer(t, w, model)

	var before, after *Snapshot
	var rs []amp.Result
	for step := range 4 {
		if step == 1 {
			before = SnapshotTraining(model, tr.Opt, tr.Scaler)
		}
		rs = append(rs, train(t, w, tr, 1)...)
		if step == 1 {
			after = SnapshotTraining(model, tr.Opt, tr.Scaler)
		}
	}
	require.Equal(t, []bool{false, true, false, false}, skipped(rs))
	AssertUnchanged(t, before, after)
	AssertScaleBackedOff(t, before.Scaler.Scale, after.Scaler.Scale)
	AssertScaleBackedOff(t, rs[0].Scale, rs[1].Scale)
	AssertRecovers(t, rs, 1, 1)

	rep := w.Report()
	require.NotNil(t, rep.FirstNonFinite)
	require.Equal(t, Event{Module: "2", ModuleType: "Linear", Op: "accumulate_grad(weight)", Pass: PassBackward, Step: 1}, *rep.FirstNonFinite)
	require.Equal(t, int64(1), rep.Ops[0].NaN, "one element of the gradient")
	require.Equal(t, "accumulate_grad(weight)", rep.Ops[0].Op)
}

func TestInjectedInfWithOwnLoop(t *testing.T) {
	// A hand-written loop: the Watcher attached through Context, modules called
	// through nn.Call.
	model := tiny()
	w := Watch(model)
	defer w.Close()
	w.InjectGrad(model.Params()[1], nil, math.Inf(-1)) // every step, "0.bias"
	x, y := batch()
	defer x.Release()
	defer y.Release()
	for step := range 2 {
		w.SetStep(step + 10)
		ctx := w.Context(tensor.NewContext())
		region := autocast.Enter(ctx, autocast.Half(tensor.Float16))
		out := nn.Call(model, region.Bind(x))
		ce(out, region.Bind(y)).Backward()
		region.Close()
		ctx.Root().Close()
		g := model.Params()[1].Grad().Float32s()
		require.True(t, math.IsInf(float64(g[0]), -1))
		for _, p := range model.Params() {
			p.T.ZeroGrad()
		}
	}
	rep := w.Report()
	require.Equal(t, Event{Module: "0", ModuleType: "Linear", Op: "accumulate_grad(bias)", Pass: PassBackward, Step: 10}, *rep.FirstNonFinite)
	require.Equal(t, 2, rep.Steps, "steps seen")
	require.Len(t, rep.NonFiniteSteps, 2)
	require.Empty(t, rep.SkippedSteps)
}

func TestFlushSmallGradsFreezesTheParameter(t *testing.T) {
	model := tiny()
	w := Watch(model)
	defer w.Close()
	p := model.Params()[0]
	w.FlushSmallGrads(p, math.Inf(1), []int{0})
	tr := fp16Trainer(t, w, model)
	before := valuesOf(p.T)
	train(t, w, tr, 1)
	require.Equal(t, before, valuesOf(p.T), "a flushed gradient does not move the weight")
	other := valuesOf(model.Params()[2].T)
	train(t, w, tr, 1)
	require.NotEqual(t, before, valuesOf(p.T), "step 1 is not flushed")
	require.NotEqual(t, other, valuesOf(model.Params()[2].T))
	for _, r := range w.Report().Ops {
		if r.Module == "0" && r.Op == "accumulate_grad(weight)" {
			require.Equal(t, int64(2), r.Calls)
			require.Greater(t, r.ZeroFraction, 0.49, "half of the calls were all zeros")
			return
		}
	}
	t.Fatal("no accumulate_grad row for 0.weight")
}

func TestReportSortedByRiskAndTable(t *testing.T) {
	rows := []Row{
		{Module: "a", Op: "safe", MaxAbs: 10, order: 0},
		{Module: "b", Op: "big", MaxAbs: 60000, order: 1},
		{Module: "c", Op: "under", UnderflowFraction: 0.01, MaxAbs: 1, order: 2},
		{Module: "d", Op: "over", OverflowFraction: 0.001, MaxAbs: 1e6, order: 3},
		{Module: "e", Op: "nan-late", NaN: 3, badSeq: 9, order: 4},
		{Module: "f", Op: "inf-early", Inf: 1, badSeq: 2, order: 5},
		{Module: "g", Op: "over-more", OverflowFraction: 0.5, MaxAbs: 1e5, order: 6},
		{Module: "h", Op: "safe-too", MaxAbs: 10, order: 7},
	}
	SortByRisk(rows)
	var got []string
	for _, r := range rows {
		got = append(got, r.Op)
	}
	require.Equal(t, []string{"inf-early", "nan-late", "over-more", "over", "under", "big", "safe", "safe-too"}, got)

	rep := Report{Steps: 3, SkippedSteps: []int{1}, FirstNonFinite: &Event{Module: "f", Op: "inf-early", Pass: PassBackward, Step: 1}, Ops: rows}
	var buf bytes.Buffer
	require.NoError(t, rep.Table(&buf))
	out := buf.String()
	require.Contains(t, out, "steps: 3, skipped: 1 [1]")
	require.Contains(t, out, "first non-finite: f inf-early (backward) at step 1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3+1+len(rows))
	require.True(t, strings.HasPrefix(lines[3], "MODULE"))
	for i, op := range got {
		require.Contains(t, lines[4+i], op)
	}
	buf.Reset()
	require.NoError(t, rep.TableTop(&buf, 2))
	require.Contains(t, buf.String(), "… 6 more rows")
}

func TestReportJSONShape(t *testing.T) {
	model := tiny()
	w := Watch(model)
	defer w.Close()
	tr := fp16Trainer(t, w, model)
	train(t, w, tr, 2)
	check := func(rep Report, wantFirst bool) {
		b, err := json.Marshal(rep)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		require.ElementsMatch(t, []string{"steps", "skipped_steps", "first_nonfinite", "ops"}, slices.Collect(maps.Keys(m)))
		require.NotNil(t, m["skipped_steps"], "an empty list, not null")
		if wantFirst {
			require.ElementsMatch(t, []string{"module", "module_type", "op", "pass", "step"}, slices.Collect(maps.Keys(m["first_nonfinite"].(map[string]any))))
		} else {
			require.Nil(t, m["first_nonfinite"])
		}
		ops := m["ops"].([]any)
		require.NotEmpty(t, ops)
		for _, o := range ops {
			row := o.(map[string]any)
			// Rows inside the model name the module's type; the loss's rows run outside it.
			if row["module"] != Outside {
				require.NotEmpty(t, row["module_type"], "%v", row)
			}
			delete(row, "module_type")
			require.ElementsMatch(t, []string{"module", "op", "pass", "max_abs", "inf", "nan", "overflow_fraction", "underflow_fraction"},
				slices.Collect(maps.Keys(row)))
		}
	}
	check(w.Report(), false)
	w.InjectGrad(model.Params()[0], nil, math.Inf(1))
	train(t, w, tr, 1)
	rep := w.Report()
	require.Equal(t, []int{2}, rep.SkippedSteps)
	check(rep, true)
}

// recordTB captures failures of the assertions under test.
type recordTB struct {
	testing.TB
	errs []string
}

func (r *recordTB) Helper() {}
func (r *recordTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestAssertionsCatchCorruption(t *testing.T) {
	model := nn.NewSequential(nn.NewLinear(2, 2, nn.Seeded(1)), nn.NewBatchNorm1d(2))
	opt, err := optim.NewAdam(model.Params(), optim.AdamConfig{LR: 0.1})
	require.NoError(t, err)
	sc, err := scaler.New(scaler.DefaultConfig())
	require.NoError(t, err)
	before := SnapshotTraining(model, opt, sc)
	same := SnapshotTraining(model, opt, sc)
	rec := &recordTB{TB: t}
	require.True(t, AssertUnchanged(rec, before, same))

	// A parameter bit flip, -0 for 0 in a buffer, an optimizer step: all caught.
	w := model.Params()[0]
	vals := w.T.Float32s()
	vals[3] = math.Nextafter32(vals[3], 10)
	w.T.CopyFrom(tensor.FromSlice(vals, w.T.Shape()))
	model.Buffers()[0].T.FillInPlace(math.Copysign(0, -1))
	c := tensor.NewContext()
	tensor.Linear(c.Bind(tensor.Ones(tensor.Shape{1, 2})), w.T, nil).Sum().Backward()
	c.Close()
	opt.Step()
	after := SnapshotTraining(model, opt, sc)
	rec = &recordTB{TB: t}
	require.False(t, AssertUnchanged(rec, before, after))
	require.Len(t, rec.errs, 1)
	msg := rec.errs[0]
	for _, want := range []string{`parameter "0.weight"`, `buffer "1.running_mean"`, `optimizer scalar "step"`, "optimizer step count: 0 → 1", `optimizer state "state.0.exp_avg" appeared`} {
		require.Contains(t, msg, want)
	}

	// ExceptRunningStats lets buffers move, not turn non-finite.
	bufOnly := SnapshotTraining(model, opt, sc)
	model.Buffers()[1].T.FillInPlace(3)
	rec = &recordTB{TB: t}
	require.True(t, AssertUnchanged(rec, bufOnly, SnapshotTraining(model, opt, sc), ExceptRunningStats()))
	model.Buffers()[1].T.FillInPlace(math.NaN())
	require.False(t, AssertUnchanged(rec, bufOnly, SnapshotTraining(model, opt, sc), ExceptRunningStats()))
	require.Contains(t, rec.errs[0], `buffer "1.running_var": element 0 became NaN`)

	rec = &recordTB{TB: t}
	require.True(t, AssertScaleBackedOff(rec, 65536, 32768))
	require.False(t, AssertScaleBackedOff(rec, 65536, 65536))
	require.False(t, AssertScaleBackedOff(rec, 65536, 0))
	require.Len(t, rec.errs, 2)

	rs := make([]amp.Result, 10)
	rs[3].Skipped, rs[4].Skipped = true, true
	rec = &recordTB{TB: t}
	require.True(t, AssertRecovers(rec, rs, 3, 1))
	require.False(t, AssertRecovers(rec, rs, 3, 0))
	require.Contains(t, rec.errs[0], "steps [4] were skipped")
	require.False(t, AssertRecovers(rec, rs, 8, 2), "too short to show recovery")
}

// countingObserver counts forward ops, to check the Watcher shares a Context.
type countingObserver struct {
	mu                sync.Mutex
	forward, backward int
}

func (o *countingObserver) Begin(*tensor.Context, *tensor.Op) {}
func (o *countingObserver) Forward(*tensor.Context, *tensor.Op, []*tensor.Tensor, *tensor.Tensor) any {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.forward++
	return o.forward
}
func (o *countingObserver) Backward(_ *tensor.Op, tag any, _ *tensor.Tensor, _ []*tensor.Tensor, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := tag.(int); !ok {
		panic("the other observer got a foreign tag")
	}
	o.backward++
}

func TestWatcherSharesAContextWithAnotherObserver(t *testing.T) {
	model := tiny()
	w := Watch(model)
	other := &countingObserver{}
	ctx := tensor.NewContext(tensor.UseObserver(other))
	defer ctx.Close()
	x, y := batch()
	defer x.Release()
	defer y.Release()
	out := nn.Call(model, ctx.Bind(x))
	ce(out, ctx.Bind(y)).Backward()
	require.Positive(t, other.forward)
	require.Positive(t, other.backward)
	rep := w.Report()
	require.NotEmpty(t, rep.Ops)
	wc := w.Context(ctx)
	require.Equal(t, tee{other, w}, wc.Observer())
	require.Same(t, wc, w.Context(wc), "already observed")

	// Closed, it records nothing more and the model runs without hooks.
	w.Close()
	w.Close()
	n := len(w.Report().Ops)
	calls := w.Report().Ops[0].Calls
	nn.Call(model, ctx.Bind(x))
	require.Len(t, w.Report().Ops, n)
	require.Equal(t, calls, w.Report().Ops[0].Calls)
}

// The containers in models call their children through nn.Call, so every module of a
// transformer gets its own rows, attention's own ops included.
func TestTransformerModulePaths(t *testing.T) {
	m := models.NewTransformer(models.TransformerConfig{Vocab: 20, SeqLen: 6, Dim: 8, Heads: 2, Layers: 2}, nn.Seeded(1))
	w := Watch(m)
	defer w.Close()
	c := tensor.NewContext()
	defer c.Close()
	ids := tensor.FromSlice([]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, tensor.Shape{2, 6}, tensor.WithContext(c))
	out := nn.Call(m, ids)
	ce(out, tensor.FromSlice([]int64{1, 2}, nil, tensor.WithContext(c))).Backward()

	got := map[string]map[string]bool{} // module → ops seen in forward
	for _, r := range w.Report().Ops {
		if r.Pass == PassForward {
			if got[r.Module] == nil {
				got[r.Module] = map[string]bool{}
			}
			got[r.Module][r.Op] = true
		}
	}
	for _, b := range []string{"blocks.0", "blocks.1"} {
		for _, want := range []struct{ module, op string }{
			{b + ".ln1", "layer_norm"}, {b + ".attn.qkv", "linear"}, {b + ".attn.out", "linear"},
			{b + ".attn", "self_attention"}, {b + ".ln2", "layer_norm"}, {b + ".fc1", "linear"},
			{b + ".fc2", "linear"}, {b, "add"},
		} {
			require.True(t, got[want.module][want.op], "no %s row for %s in %v", want.op, want.module, got)
		}
	}
	require.True(t, got["tok"]["embedding"])
	require.True(t, got[""]["add"], "the root adds the position embedding")
	require.True(t, got["head"]["linear"])
	require.True(t, got[Outside]["cross_entropy"])
}
