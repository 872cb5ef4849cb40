package dist

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/scaler"
	"github.com/gamp-ml/gamp/tensor"
)

// runCfg describes one small training run, done either by one process on the full
// batch (the reference) or by every rank of a group on its share of each batch.
type runCfg struct {
	Mode        string // fp32, fp16 (O1), bf16 (O1) or fp16-O2
	Steps       int
	Accum       string // "": one micro-batch; "nosync": 2 micro-batches by hand, the first in NoSync; "trainer": amp.Trainer with Accum 2
	InjectStep  int    // step at which rank InjectRank gets an Inf gradient (-1: never)
	InjectRank  int
	InjectHow   string // "after": after the all-reduce (only the found-inf flag spreads it); "hook": as backward produces it
	Dynamic     bool
	BucketBytes int
	SGD         bool
	Shared      bool // the model uses one Linear twice (its gradient arrives twice per backward)
	BN          bool // the model has a BatchNorm1d, synchronised under DDP
	GPU         bool // model, batches and trainer on cuda:0
}

type runResult struct {
	Weights [][]float32
	Skipped []bool
	Scales  []float64
	Buckets [][]string
}

const (
	testBatch    = 8
	testFeatures = 6
	testClasses  = 3
)

func testModel(seed uint64) *nn.Sequential {
	return nn.NewSequential(
		nn.NewLinear(testFeatures, 16, nn.Seeded(seed)), nn.NewReLU(),
		nn.NewLinear(16, 12, nn.Seeded(seed+1)), nn.NewTanh(),
		nn.NewLinear(12, testClasses, nn.Seeded(seed+2)))
}

// sharedModel applies one Linear twice: its parameters get two gradients per backward.
func sharedModel(seed uint64) *nn.Sequential {
	l := nn.NewLinear(testFeatures, testFeatures, nn.Seeded(seed))
	return nn.NewSequential(l, nn.NewTanh(), nn.NewLinear(testFeatures, testFeatures, nn.Seeded(seed+1)), nn.NewTanh(), l,
		nn.NewReLU(), nn.NewLinear(testFeatures, testClasses, nn.Seeded(seed+2)))
}

func bnModel(seed uint64) *nn.Sequential {
	return nn.NewSequential(nn.NewLinear(testFeatures, 8, nn.Seeded(seed)), nn.NewBatchNorm1d(8), nn.NewReLU(),
		nn.NewLinear(8, testClasses, nn.Seeded(seed+1)))
}

// testBatchRows returns rows [lo, hi) of step's batch.
func testBatchRows(step, lo, hi int) (*tensor.Tensor, *tensor.Tensor) {
	var xs []float32
	var ys []int64
	for i := lo; i < hi; i++ {
		for j := range testFeatures {
			xs = append(xs, float32(2*math.Sin(float64(7*i+3*j+11*step))))
		}
		ys = append(ys, int64((i+step)%testClasses))
	}
	return tensor.FromSlice(xs, tensor.Shape{hi - lo, testFeatures}), tensor.FromSlice(ys, nil)
}

// poisonOpt fills the first master gradient with +Inf when at() says so: a fault after
// the all-reduce, on one process only.
type poisonOpt struct {
	optim.Optimizer
	at func() bool
}

func (p *poisonOpt) MasterGrads() []*tensor.Tensor {
	gs := p.Optimizer.MasterGrads()
	if p.at() {
		gs[0].FillInPlace(math.Inf(1))
	}
	return gs
}

// trainRun trains testModel for cfg.Steps steps. pg nil: the single-process reference
// on the full batch.
func trainRun(t testing.TB, pg ProcessGroup, cfg runCfg) runResult {
	rank, size := 0, 1
	if pg != nil {
		rank, size = pg.Rank(), pg.Size()
	}
	// Replicas start from different seeds: DDP's broadcast makes them rank 0's.
	var model nn.Module = testModel(uint64(1 + 100*rank))
	switch {
	case cfg.Shared:
		model = sharedModel(uint64(1 + 100*rank))
	case cfg.BN:
		model = bnModel(uint64(1 + 100*rank))
		if pg != nil {
			model = ConvertSyncBatchNorm(model, pg)
		}
	}
	level, low := amp.O0, tensor.DType(0)
	switch cfg.Mode {
	case "fp16":
		level, low = amp.O1, tensor.Float16
	case "bf16":
		level, low = amp.O1, tensor.BFloat16
	case "fp16-O2":
		level, low = amp.O2, tensor.Float16
	}
	step := 0
	dev := tensor.CPU
	if cfg.GPU {
		dev = tensor.CUDA(0)
		nn.To(model, dev)
	}
	// rows returns rows [a, b) of step's batch on dev.
	rows := func(a, b int) (*tensor.Tensor, *tensor.Tensor) {
		x, y := testBatchRows(step, a, b)
		if dev == tensor.CPU {
			return x, y
		}
		xd, yd := x.To(dev), y.To(dev)
		x.Release()
		y.Release()
		return xd, yd
	}
	amp.Prepare(model, level, low) // O2: half parameters, FP32 masters in the optimizer
	var opt optim.Optimizer
	var err error
	if cfg.SGD {
		opt, err = optim.NewSGD(model.Params(), optim.SGDConfig{LR: 0.1, Momentum: 0.9})
	} else {
		opt, err = optim.NewAdamW(model.Params(), optim.AdamConfig{LR: 0.01, WeightDecay: 0.01})
	}
	require.NoError(t, err)
	inject := cfg.InjectStep >= 0 && (pg == nil || rank == cfg.InjectRank)
	if inject && cfg.InjectHow == "hook" {
		// Registered before NewDDP, so DDP reads the poisoned gradient.
		model.Params()[2].T.RegisterHook(func(g *tensor.Tensor) *tensor.Tensor {
			if step == cfg.InjectStep {
				return tensor.FullLike(g, math.Inf(1))
			}
			return nil
		})
	}
	var m nn.Module = model
	o := opt
	var d *DDP
	if pg != nil {
		d, err = NewDDP(model, pg, DDPOptions{DynamicGraph: cfg.Dynamic, BucketBytes: cfg.BucketBytes, FirstBucketBytes: cfg.BucketBytes})
		require.NoError(t, err)
		m = d
		o, err = d.Optimizer(opt)
		require.NoError(t, err)
	}
	if inject && cfg.InjectHow == "after" {
		o = &poisonOpt{Optimizer: o, at: func() bool { return step == cfg.InjectStep }}
	}
	sc := scaler.DefaultConfig()
	sc.InitScale = 1024 // the reference's full-batch fp16 gradients stay finite
	accum := 1
	if cfg.Accum == "trainer" {
		accum = 2
	}
	loss := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }
	tr, err := amp.NewTrainer(m, o, loss, dev, amp.Config{Level: level, Low: low, Accum: accum, Scaler: sc})
	require.NoError(t, err)
	if pg != nil {
		SyncScaler(tr.Scaler, pg)
	}
	var res runResult
	per := testBatch / size
	for step = range cfg.Steps {
		lo := rank * per
		switch cfg.Accum {
		case "nosync":
			// By hand: two micro-batches, the first without communication.
			half := per / 2
			micro := func(a, b int) {
				ctx := tensor.NewContext()
				defer ctx.Close()
				x, y := rows(a, b)
				defer x.Release()
				defer y.Release()
				out, region := tr.Forward(ctx, x)
				defer region.Close()
				l := loss(out, region.Bind(y)).MulScalar(0.5)
				tr.Scaler.Scale(l).Backward()
			}
			if d != nil {
				d.NoSync(func() { micro(lo, lo+half) })
			} else {
				micro(lo, lo+half)
			}
			micro(lo+half, lo+per)
			tr.Scaler.Unscale(o)
			res.Skipped = append(res.Skipped, !tr.Scaler.Step(o))
			require.NoError(t, tr.Scaler.Update())
			o.ZeroGrad()
			res.Scales = append(res.Scales, tr.Scaler.ScaleValue())
		default:
			var xs, ys []*tensor.Tensor
			for k := range accum {
				a := lo + k*per/accum
				x, y := rows(a, a+per/accum)
				xs, ys = append(xs, x), append(ys, y)
			}
			r, err := tr.Step(xs, ys)
			require.NoError(t, err)
			for k := range xs {
				xs[k].Release()
				ys[k].Release()
			}
			res.Skipped = append(res.Skipped, r.Skipped)
			res.Scales = append(res.Scales, r.Scale)
		}
	}
	for _, p := range append(model.Params(), model.Buffers()...) {
		res.Weights = append(res.Weights, p.T.Float32s())
	}
	if d != nil {
		res.Buckets = d.Buckets()
	}
	return res
}

// runInproc trains on n goroutine ranks and returns each rank's result.
func runInproc(t *testing.T, n int, cfg runCfg) []runResult {
	pgs := inprocGroups(n)
	out := make([]runResult, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { out[r] = trainRun(t, pgs[r], cfg) })
	}
	wg.Wait()
	return out
}

// requireClose checks every weight of got against want within tol (absolute plus
// relative).
func requireClose(t *testing.T, want, got runResult, tol float64, what string) {
	t.Helper()
	require.Equal(t, len(want.Weights), len(got.Weights))
	worst := 0.0
	for i := range want.Weights {
		for j := range want.Weights[i] {
			w, g := float64(want.Weights[i][j]), float64(got.Weights[i][j])
			d := math.Abs(w-g) / (1 + math.Abs(w))
			worst = max(worst, d)
			require.LessOrEqual(t, d, tol, "%s: parameter %d element %d: want %g, got %g", what, i, j, w, g)
		}
	}
	t.Logf("%s: largest weight difference %.3g (tolerance %g)", what, worst, tol)
}

var ddpCases = []struct {
	name string
	cfg  runCfg
	tol  float64
}{
	{"fp32", runCfg{Mode: "fp32", Steps: 4, InjectStep: -1}, 1e-6},
	{"fp32-sgd", runCfg{Mode: "fp32", Steps: 4, InjectStep: -1, SGD: true}, 1e-6},
	{"fp32-small-buckets", runCfg{Mode: "fp32", Steps: 4, InjectStep: -1, BucketBytes: 200}, 1e-6},
	{"fp32-dynamic", runCfg{Mode: "fp32", Steps: 4, InjectStep: -1, Dynamic: true, BucketBytes: 200}, 1e-6},
	{"fp32-nosync-accum", runCfg{Mode: "fp32", Steps: 3, Accum: "nosync", InjectStep: -1, BucketBytes: 200}, 1e-6},
	{"fp32-shared-weights", runCfg{Mode: "fp32", Steps: 4, InjectStep: -1, Shared: true, BucketBytes: 100}, 1e-6},
	{"fp32-syncbn", runCfg{Mode: "fp32", Steps: 4, InjectStep: -1, BN: true, SGD: true}, 1e-6},
	{"bf16-syncbn", runCfg{Mode: "bf16", Steps: 4, InjectStep: -1, BN: true, SGD: true}, 1e-3},
	{"fp32-trainer-accum", runCfg{Mode: "fp32", Steps: 3, Accum: "trainer", InjectStep: -1}, 1e-6},
	{"fp16", runCfg{Mode: "fp16", Steps: 4, InjectStep: -1}, 5e-4},
	{"bf16", runCfg{Mode: "bf16", Steps: 4, InjectStep: -1}, 2e-2},
	{"fp16-sgd", runCfg{Mode: "fp16", Steps: 4, InjectStep: -1, SGD: true}, 1e-4},
	{"bf16-sgd", runCfg{Mode: "bf16", Steps: 4, InjectStep: -1, SGD: true}, 1e-3},
	{"fp16-O2", runCfg{Mode: "fp16-O2", Steps: 4, InjectStep: -1, SGD: true}, 1e-3},
	{"fp16-nosync-accum", runCfg{Mode: "fp16", Steps: 3, Accum: "nosync", InjectStep: -1}, 2e-3},
}

// ddpCompare checks a DDP run (results per rank) against the single-process reference.
// Accumulation runs are compared with one step on the full batch.
func ddpCompare(t *testing.T, cfg runCfg, tol float64, ranks []runResult) {
	one := cfg
	one.Accum = ""
	ref := trainRun(t, nil, one)
	for r := range ranks {
		require.Equal(t, ranks[0].Weights, ranks[r].Weights, "rank %d's replica differs from rank 0's", r)
		require.Equal(t, ref.Skipped, ranks[r].Skipped, "skipped steps, rank %d", r)
		require.Equal(t, ref.Scales, ranks[r].Scales, "scales, rank %d", r)
	}
	requireClose(t, ref, ranks[0], tol, "DDP vs one process on the full batch")
}

// TestDDPInproc runs every case with two goroutine ranks (no MPI needed).
func TestDDPInproc(t *testing.T) {
	for _, c := range ddpCases {
		t.Run(c.name, func(t *testing.T) {
			ddpCompare(t, c.cfg, c.tol, runInproc(t, 2, c.cfg))
		})
	}
}

var injectCases = []struct {
	name string
	cfg  runCfg
}{
	{"after-allreduce", runCfg{Mode: "fp16", Steps: 4, InjectStep: 2, InjectRank: 1, InjectHow: "after"}},
	{"after-allreduce-rank0", runCfg{Mode: "fp16", Steps: 4, InjectStep: 1, InjectRank: 0, InjectHow: "after"}},
	{"in-backward", runCfg{Mode: "fp16", Steps: 4, InjectStep: 2, InjectRank: 1, InjectHow: "hook"}},
}

// checkInjected: every rank skipped exactly step k, backed off alike, and the replicas
// are still identical (and equal to the reference that skipped the same step).
func checkInjected(t *testing.T, cfg runCfg, ranks []runResult) {
	want := make([]bool, cfg.Steps)
	want[cfg.InjectStep] = true
	for r := range ranks {
		require.Equal(t, want, ranks[r].Skipped, "rank %d", r)
		require.Equal(t, ranks[0].Scales, ranks[r].Scales, "rank %d", r)
		require.Equal(t, ranks[0].Weights, ranks[r].Weights, "rank %d", r)
		for _, w := range ranks[r].Weights {
			for _, v := range w {
				require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0))
			}
		}
	}
	require.Equal(t, 512.0, ranks[0].Scales[cfg.InjectStep], "scale after the skipped step")
	ref := trainRun(t, nil, cfg)
	require.Equal(t, want, ref.Skipped)
	requireClose(t, ref, ranks[0], 5e-4, "DDP vs reference")
}

func TestDDPInjectInproc(t *testing.T) {
	for _, c := range injectCases {
		t.Run(c.name, func(t *testing.T) { checkInjected(t, c.cfg, runInproc(t, 2, c.cfg)) })
	}
}

// TestDDPMPI runs the same cases in two processes under mpirun.
func TestDDPMPI(t *testing.T) {
	needMPI(t)
	for _, c := range ddpCases {
		t.Run(c.name, func(t *testing.T) { ddpCompare(t, c.cfg, c.tol, runMPIChild(t, c.cfg)) })
	}
	for _, c := range injectCases {
		t.Run("inject-"+c.name, func(t *testing.T) { checkInjected(t, c.cfg, runMPIChild(t, c.cfg)) })
	}
}

// runMPIChild runs TestChildDDP in two MPI processes and reads their results.
func runMPIChild(t *testing.T, cfg runCfg) []runResult {
	dir := t.TempDir()
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	mpirun(t, 2, "TestChildDDP", "GAMP_DDP_CFG="+string(b), "GAMP_DDP_OUT="+dir)
	out := make([]runResult, 2)
	for r := range out {
		raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank%d.json", r)))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &out[r]))
	}
	return out
}

func TestChildDDP(t *testing.T) {
	if !isChild() {
		t.Skip("child of TestDDPMPI")
	}
	var cfg runCfg
	require.NoError(t, json.Unmarshal([]byte(os.Getenv("GAMP_DDP_CFG")), &cfg))
	pg, err := Init()
	require.NoError(t, err)
	defer func() { require.NoError(t, pg.Close()) }()
	res := trainRun(t, pg, cfg)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(os.Getenv("GAMP_DDP_OUT"), fmt.Sprintf("rank%d.json", pg.Rank())), b, 0o644))
}

func TestAssignBuckets(t *testing.T) {
	m := testModel(1) // 0.weight 16×6, 0.bias 16, 2.weight 12×16, 2.bias 12, 4.weight 3×12, 4.bias 3
	names := func(first, rest int) [][]string {
		var out [][]string
		for _, idx := range assignBuckets(m.Params(), first, rest) {
			var b []string
			for _, i := range idx {
				b = append(b, m.Params()[i].Name)
			}
			out = append(out, b)
		}
		return out
	}
	require.Equal(t, [][]string{{"4.bias", "4.weight", "2.bias", "2.weight", "0.bias", "0.weight"}}, names(1<<20, 25<<20))
	// 4.bias+4.weight = 39 floats = 156 bytes ≥ 100 closes the first bucket.
	require.Equal(t, [][]string{{"4.bias", "4.weight"}, {"2.bias", "2.weight"}, {"0.bias", "0.weight"}}, names(100, 400))
	require.Equal(t, [][]string{{"4.bias"}, {"4.weight"}, {"2.bias"}, {"2.weight"}, {"0.bias"}, {"0.weight"}}, names(1, 1))
}

func TestDDPLocal(t *testing.T) {
	// A world of one: DDP is a no-op wrapper that trains like the bare model.
	cfg := runCfg{Mode: "fp32", Steps: 3, InjectStep: -1}
	got := trainRun(t, NewLocal(), cfg)
	ref := trainRun(t, nil, cfg)
	require.Equal(t, ref.Weights, got.Weights)
}

// TestDDPOverlap checks that, once the first iteration taught DDP which gradients to
// expect, every bucket's all-reduce starts during backward, before Finish.
func TestDDPOverlap(t *testing.T) {
	pgs := inprocGroups(2)
	var wg sync.WaitGroup
	for r := range pgs {
		wg.Go(func() {
			model := testModel(1)
			d, err := NewDDP(model, pgs[r], DDPOptions{BucketBytes: 100, FirstBucketBytes: 100})
			require.NoError(t, err)
			require.Len(t, d.Buckets(), 3)
			for it := range 3 {
				ctx := tensor.NewContext()
				x, y := testBatchRows(it, 4*r, 4*r+4)
				tensor.CrossEntropy(d.Forward(ctx.Bind(x)), ctx.Bind(y), 0).Backward()
				if it == 0 {
					require.Equal(t, 0, d.next, "the first iteration learns: nothing starts before Finish")
				} else {
					require.Equal(t, len(d.buckets), d.next, "iteration %d: every bucket started during backward", it)
				}
				require.NoError(t, d.Finish())
				nn.ZeroGrad(model)
				ctx.Close()
				x.Release()
				y.Release()
			}
			// Backward twice without Forward or Finish: the second reaches launched buckets.
			ctx := tensor.NewContext()
			defer ctx.Close()
			x, y := testBatchRows(0, 4*r, 4*r+4)
			l := tensor.CrossEntropy(d.Forward(ctx.Bind(x)), ctx.Bind(y), 0)
			l.Backward(tensor.RetainGraph())
			defer func() {
				r := recover()
				require.NotNil(t, r)
				require.ErrorContains(t, r.(error), "received a gradient after its bucket was all-reduced")
				require.NoError(t, d.Finish())
			}()
			l.Backward()
		})
	}
	wg.Wait()
}

func TestDDPForwardHooksRunOnce(t *testing.T) {
	model := testModel(1)
	calls := 0
	nn.RegisterForwardHook(model, func(nn.Module, *tensor.Tensor, *tensor.Tensor) *tensor.Tensor { calls++; return nil })
	d, err := NewDDP(model, NewLocal(), DDPOptions{})
	require.NoError(t, err)
	ctx := tensor.NewContext()
	defer ctx.Close()
	x, _ := testBatchRows(0, 0, 2)
	nn.Call(d, ctx.Bind(x))
	require.Equal(t, 1, calls)
}
