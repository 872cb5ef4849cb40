package profiler_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/autocast"
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/profiler"
	"github.com/gamp-ml/gamp/tensor"
)

type mlp struct{ w1, b1, w2, b2 *tensor.Tensor }

func newMLP(t *testing.T) *mlp {
	g := tensor.NewGenerator(3)
	ctx := tensor.NewContext(tensor.UseGenerator(g), tensor.NoGradMode())
	defer ctx.Close()
	param := func(shape ...int) *tensor.Tensor {
		p := tensor.Randn(tensor.Shape(shape), tensor.WithContext(ctx)).MulScalar(0.1)
		ctx.Keep(p)
		return p.SetRequiresGrad(true)
	}
	m := &mlp{param(32, 16), param(32), param(10, 32), param(10)}
	t.Cleanup(func() {
		for _, p := range []*tensor.Tensor{m.w1, m.b1, m.w2, m.b2} {
			p.ZeroGrad()
			p.Release()
		}
	})
	return m
}

// step runs forward and backward of the MLP on a batch of 8 in ctx.
func (m *mlp) step(ctx *tensor.Context) {
	x := tensor.Randn(tensor.Shape{8, 16}, tensor.WithContext(ctx))
	y := tensor.FromSlice([]int64{0, 1, 2, 3, 4, 5, 6, 7}, nil, tensor.WithContext(ctx))
	h := tensor.Linear(x, m.w1, m.b1).Relu()
	logits := tensor.Linear(h, m.w2, m.b2)
	loss := tensor.CrossEntropyWith(logits, y, tensor.CrossEntropyOptions{Reduction: tensor.ReductionNone}).Sum()
	loss.Backward()
}

// profiledStep runs one MLP step in a profiled Context and returns the profiler.
func profiledStep(t *testing.T) *profiler.Profiler {
	m := newMLP(t)
	p := profiler.New()
	t.Cleanup(p.Close)
	ctx := p.Context()
	m.step(ctx)
	ctx.Close()
	return p
}

func count(recs []profiler.Record, op string, pass profiler.Pass) int {
	n := 0
	for _, r := range recs {
		if r.Op == op && r.Pass == pass {
			n++
		}
	}
	return n
}

func TestProfileMLPStep(t *testing.T) {
	p := profiledStep(t)
	recs := p.Records()
	for op, n := range map[string]int{"linear": 2, "relu": 1, "cross_entropy": 1, "sum": 1} {
		require.Equal(t, n, count(recs, op, profiler.Forward), "%s forward", op)
		require.Equal(t, n, count(recs, op, profiler.Backward), "%s backward", op)
	}
	for i, r := range recs {
		require.GreaterOrEqual(t, r.Dur, time.Duration(0), "record %d", i)
		require.GreaterOrEqual(t, r.Self, time.Duration(0))
		require.LessOrEqual(t, r.Self, r.Dur)
		require.GreaterOrEqual(t, r.Start, time.Duration(0))
		require.Equal(t, tensor.CPU, r.Device)
		if r.Pass == profiler.Backward {
			require.GreaterOrEqual(t, r.ForwardIndex, 0, "backward of %s knows its forward", r.Op)
			require.Equal(t, r.Op, recs[r.ForwardIndex].Op)
			require.Equal(t, profiler.Forward, recs[r.ForwardIndex].Pass)
		}
	}
	first := recs[0] // the first linear finished first
	require.Equal(t, "linear", first.Op)
	require.Equal(t, []tensor.Shape{{8, 16}, {32, 16}, {32}}, first.InShapes)
	require.Equal(t, []tensor.DType{tensor.Float32, tensor.Float32, tensor.Float32}, first.InDTypes)
	require.Equal(t, tensor.Float32, first.OutDType)
	require.GreaterOrEqual(t, first.Bytes, int64(8*32*4), "at least its output")
	require.False(t, first.Unmatched)
	require.Equal(t, 0, first.Depth)

	rows := p.Rows(false)
	require.Len(t, rows, 8, "four ops, two passes")
	for i := 1; i < len(rows); i++ {
		require.GreaterOrEqual(t, rows[i-1].Total, rows[i].Total, "sorted by total time")
	}
	var calls int
	for _, r := range rows {
		calls += r.Calls
	}
	require.Equal(t, len(recs), calls)

	sum := p.Summary()
	for _, want := range []string{"Name", "Calls", "Self %", "Total %", "Mean", "Bytes", "cross_entropy", "backward", "Self time total"} {
		require.Contains(t, sum, want)
	}
	var tbl bytes.Buffer
	require.NoError(t, p.Table(&tbl, profiler.ByDType(), profiler.Limit(3)))
	require.Contains(t, tbl.String(), "float32")
	require.Equal(t, 3+5, bytes.Count(tbl.Bytes(), []byte("\n")), "3 rows, 3 rules, header, total")
}

// chromeTrace is the part of the trace format the test reads back.
type chromeTrace struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Cat  string         `json:"cat"`
		Ph   string         `json:"ph"`
		Ts   *float64       `json:"ts"`
		Dur  *float64       `json:"dur"`
		Pid  *int           `json:"pid"`
		Tid  *int           `json:"tid"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
}

func TestChromeTrace(t *testing.T) {
	p := profiledStep(t)
	recs := p.Records()

	var buf bytes.Buffer
	require.NoError(t, p.WriteChromeTrace(&buf))
	var tr chromeTrace
	require.NoError(t, json.Unmarshal(buf.Bytes(), &tr), "valid JSON")

	threads := map[int]string{}
	tids := map[string]map[int]bool{"forward": {}, "backward": {}}
	type span struct{ ts, end float64 }
	byTid := map[int][]span{}
	n := 0
	for _, e := range tr.TraceEvents {
		require.NotNil(t, e.Pid)
		require.NotNil(t, e.Tid)
		switch e.Ph {
		case "M":
			if e.Name == "thread_name" {
				threads[*e.Tid] = e.Args["name"].(string)
			}
		case "X":
			n++
			require.NotNil(t, e.Ts)
			require.NotNil(t, e.Dur)
			require.GreaterOrEqual(t, *e.Ts, 0.0)
			require.GreaterOrEqual(t, *e.Dur, 0.0)
			require.Contains(t, []string{"forward", "backward"}, e.Cat)
			tids[e.Cat][*e.Tid] = true
			for _, k := range []string{"device", "in_dtypes", "in_shapes", "out_dtype", "bytes"} {
				require.Contains(t, e.Args, k, "event %s", e.Name)
			}
			// The linear layers' events carry their FLOPs (JSON numbers), the rest none.
			if e.Name == "linear" {
				require.Greater(t, e.Args["flops"], 0.0, "event %s %s", e.Name, e.Cat)
			} else {
				require.NotContains(t, e.Args, "flops", "event %s", e.Name)
			}
			byTid[*e.Tid] = append(byTid[*e.Tid], span{*e.Ts, *e.Ts + *e.Dur})
		default:
			t.Fatalf("unexpected phase %q", e.Ph)
		}
	}
	require.Equal(t, len(recs), n, "one complete event per record")
	require.Len(t, tids["forward"], 1)
	require.Len(t, tids["backward"], 1)
	for ft := range tids["forward"] {
		require.False(t, tids["backward"][ft], "forward and backward on separate rows")
		require.Equal(t, "forward", threads[ft])
	}
	for bt := range tids["backward"] {
		require.Equal(t, "backward", threads[bt])
	}
	// Events on one row nest or are disjoint, as the viewers need (events are sorted).
	const eps = 1e-6
	for tid, spans := range byTid {
		var open []span
		for _, s := range spans {
			for len(open) > 0 && open[len(open)-1].end <= s.ts+eps {
				open = open[:len(open)-1]
			}
			if len(open) > 0 {
				require.LessOrEqual(t, s.end, open[len(open)-1].end+eps, "row %d: events overlap without nesting", tid)
			}
			open = append(open, s)
		}
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "trace.json")
	require.NoError(t, os.WriteFile(path, []byte("previous"), 0o644))
	require.NoError(t, p.SaveChromeTrace(path))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.JSONEq(t, buf.String(), string(data))
	entries, _ := os.ReadDir(dir)
	require.Len(t, entries, 1, "no temporary file left behind")
	require.Error(t, p.SaveChromeTrace(filepath.Join(dir, "missing", "trace.json")))
	entries, _ = os.ReadDir(dir)
	require.Len(t, entries, 1)
}

// Under autocast the casts of linear's inputs report Forward without a Begin of their
// own: zero-length events nested in linear.
func TestAutocastCastsAreZeroLengthNestedEvents(t *testing.T) {
	m := newMLP(t)
	p := profiler.New()
	ctx := p.Context(tensor.UseAutocast(autocast.Half(tensor.BFloat16)))
	x := tensor.Randn(tensor.Shape{8, 16}, tensor.WithContext(ctx))
	tensor.Linear(x, m.w1, m.b1).Float32s()
	ctx.Close()

	recs := p.Records()
	require.Equal(t, 1, count(recs, "linear", profiler.Forward))
	require.Equal(t, 3, count(recs, "cast", profiler.Forward), "x, weight and bias")
	var lin profiler.Record
	for _, r := range recs {
		if r.Op == "linear" {
			lin = r
		}
	}
	require.Equal(t, tensor.BFloat16, lin.OutDType)
	require.Equal(t, []tensor.DType{tensor.BFloat16, tensor.BFloat16, tensor.BFloat16}, lin.InDTypes)
	require.Equal(t, 0, lin.Depth)
	for _, r := range recs {
		if r.Op != "cast" {
			continue
		}
		require.True(t, r.Unmatched)
		require.Zero(t, r.Dur)
		require.Equal(t, 1, r.Depth, "nested in linear")
		require.Equal(t, lin.Lane, r.Lane)
		require.True(t, r.Start >= lin.Start && r.Start <= lin.Start+lin.Dur)
		require.Equal(t, int64(r.InShapes[0].Numel()*2), r.Bytes, "an unmatched record counts its bfloat16 output")
	}
	var byDT bool
	for _, r := range p.Rows(true) {
		if r.Op == "linear" && r.DType == tensor.BFloat16 {
			byDT = true
		}
	}
	require.True(t, byDT)
}

// A profiled autocast step leaves a weight cast's gradient deferred, as an unprofiled
// one does (tensor.WidenDeferrer): its backward record carries no output gradient and
// no time, and the gradients are the unprofiled run's bit for bit.
func TestProfiledCastGradientsStayDeferred(t *testing.T) {
	run := func(p *profiler.Profiler) [][]float32 {
		m := newMLP(t)
		opts := []tensor.ContextOption{tensor.UseAutocast(autocast.Half(tensor.BFloat16)), tensor.UseGenerator(tensor.NewGenerator(5))}
		if p != nil {
			opts = append(opts, tensor.UseObserver(p))
		}
		ctx := tensor.NewContext(opts...)
		x := tensor.Randn(tensor.Shape{8, 16}, tensor.WithContext(ctx))
		tensor.Linear(x, m.w1, m.b1).Sum().Backward()
		ctx.Close()
		return [][]float32{m.w1.Grad().Float32s(), m.b1.Grad().Float32s()}
	}
	want := run(nil)
	p := profiler.New()
	got := run(p)
	require.Equal(t, want, got)
	deferred := 0
	for _, r := range p.Records() {
		if r.Op != "cast" || r.Pass != profiler.Backward {
			continue
		}
		if r.OutDType == backend.Invalid {
			// A deferred cast: the bf16 gradient arrived, no float32 one was made, no
			// time taken.
			deferred++
			require.Equal(t, tensor.BFloat16, r.InDTypes[0])
			require.Zero(t, r.Bytes)
			require.Zero(t, r.Dur)
		}
	}
	require.Positive(t, deferred, "the weight's cast was widened at once")
}

// tickClock advances 1µs at every Mark, so the tests below know every time exactly.
type tickClock struct {
	mu sync.Mutex
	n  int64
}

func (c *tickClock) Mark(tensor.Device) profiler.Stamp {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += 1000
	return profiler.Stamp(c.n)
}

func (c *tickClock) Resolve(s profiler.Stamp) time.Duration { return time.Duration(s) }

func op(t *testing.T, name string) *tensor.Op {
	o, ok := tensor.LookupOp(name)
	require.True(t, ok, name)
	return o
}

// The Begin/Forward matching rules, driven directly.
func TestBeginForwardMatching(t *testing.T) {
	p := profiler.New(profiler.WithClock(&tickClock{}))
	c1, c2 := tensor.NewContext(), tensor.NewContext()
	defer c1.Close()
	defer c2.Close()
	out := tensor.Zeros(tensor.Shape{4}, tensor.WithContext(c1))
	relu, sum, exp, cmp, cast := op(t, "relu"), op(t, "sum"), op(t, "exp"), op(t, "compare"), op(t, "cast")

	p.Begin(c1, exp)              // t=1  outer op
	p.Begin(c2, sum)              // t=2  another Context: does not nest into c1's stack
	p.Begin(c1, relu)             // t=3
	p.Forward(c1, cast, nil, out) // t=4  no Begin: zero-length, inside relu
	p.Forward(c1, relu, nil, out) // t=5  relu [3, 5]
	p.Begin(c1, cmp)              // t=6  never gets a Forward (as compare does)
	p.Forward(c1, exp, nil, out)  // t=7  exp [1, 7]; the dangling compare is dropped
	p.Forward(c2, sum, nil, out)  // t=8  sum [2, 8]
	p.Forward(c1, relu, nil, out) // t=9  no open relu any more: zero-length
	p.Backward(relu, nil, out, nil, 2*time.Microsecond)

	recs := p.Records()
	require.Len(t, recs, 6)
	us := time.Microsecond
	type want struct {
		op               string
		start, dur, self time.Duration
		depth            int
		unmatched        bool
	}
	got := func(r profiler.Record) want {
		return want{r.Op, r.Start, r.Dur, r.Self, r.Depth, r.Unmatched}
	}
	require.Equal(t, want{"cast", 4 * us, 0, 0, 2, true}, got(recs[0]))
	require.Equal(t, want{"relu", 3 * us, 2 * us, 2 * us, 1, false}, got(recs[1]))
	require.Equal(t, want{"exp", 1 * us, 6 * us, 4 * us, 0, false}, got(recs[2]))
	require.Equal(t, want{"sum", 2 * us, 6 * us, 6 * us, 0, false}, got(recs[3]))
	require.Equal(t, want{"relu", 9 * us, 0, 0, 0, true}, got(recs[4]))
	require.Equal(t, recs[1].Lane, recs[2].Lane, "nested ops share a row")
	require.NotEqual(t, recs[2].Lane, recs[3].Lane, "overlapping ops of two Contexts do not")
	bw := recs[5]
	require.Equal(t, profiler.Backward, bw.Pass)
	require.Equal(t, 10*us-2*us, bw.Start, "a backward record ends when it is reported")
	require.Equal(t, 2*us, bw.Dur)
	require.Equal(t, -1, bw.ForwardIndex, "no tag from a forward")

	p.Stop()
	p.Begin(c1, relu)
	p.Forward(c1, relu, nil, out)
	require.Equal(t, 6, p.Len(), "nothing recorded while stopped")
	p.Start()
	p.Reset()
	require.Zero(t, p.Len())
}

// Two goroutines, two Contexts, two profilers: each sees only its own ops.
func TestTwoGoroutinesDoNotMix(t *testing.T) {
	m1, m2 := newMLP(t), newMLP(t)
	p1, p2 := profiler.New(), profiler.New()
	const steps = 5
	var wg sync.WaitGroup
	run := func(p *profiler.Profiler, m *mlp, act func(*tensor.Tensor) *tensor.Tensor) {
		defer wg.Done()
		for range steps {
			ctx := p.Context()
			x := tensor.Randn(tensor.Shape{8, 16}, tensor.WithContext(ctx))
			act(tensor.Linear(x, m.w1, m.b1)).Sum().Backward()
			ctx.Close()
		}
	}
	wg.Add(2)
	go run(p1, m1, (*tensor.Tensor).Tanh)
	go run(p2, m2, (*tensor.Tensor).Sigmoid)
	wg.Wait()

	for _, c := range []struct {
		p          *profiler.Profiler
		own, other string
	}{{p1, "tanh", "sigmoid"}, {p2, "sigmoid", "tanh"}} {
		recs := c.p.Records()
		require.Len(t, recs, 6*steps, "linear, activation, sum in both passes")
		require.Equal(t, steps, count(recs, c.own, profiler.Forward))
		require.Equal(t, steps, count(recs, c.own, profiler.Backward))
		require.Zero(t, count(recs, c.other, profiler.Forward))
		for _, r := range recs {
			require.Zero(t, r.Lane, "one goroutine per profiler: one row per pass")
			require.False(t, r.Unmatched)
		}
	}
}
