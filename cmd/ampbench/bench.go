package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/backend/cpu"
	"github.com/gamp-ml/gamp/data"
	"github.com/gamp-ml/gamp/internal/cli"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/profiler"
	"github.com/gamp-ml/gamp/scaler"
	"github.com/gamp-ml/gamp/tensor"
)

// optimizers are the -optim choices: each makes the optimizer every configuration
// trains with, keeping masters as the opt level asks (seed: stochastic rounding's), and
// says what it is in the table's header.
var optimizers = map[string]struct {
	desc string
	make func(ps []*nn.Param, masters optim.Masters, seed uint64) (optim.Optimizer, error)
}{
	"sgd": {"SGD lr 0.01 momentum 0.9", func(ps []*nn.Param, masters optim.Masters, seed uint64) (optim.Optimizer, error) {
		return optim.NewSGD(ps, optim.SGDConfig{LR: 0.01, Momentum: 0.9, Masters: masters, RoundingSeed: seed})
	}},
	"adam": {"Adam lr 0.001", func(ps []*nn.Param, masters optim.Masters, seed uint64) (optim.Optimizer, error) {
		cfg := optim.DefaultAdam()
		cfg.Masters, cfg.RoundingSeed = masters, seed
		return optim.NewAdam(ps, cfg)
	}},
	"adamw": {"AdamW lr 0.001 weight decay 0.01", func(ps []*nn.Param, masters optim.Masters, seed uint64) (optim.Optimizer, error) {
		cfg := optim.DefaultAdamW()
		cfg.Masters, cfg.RoundingSeed = masters, seed
		return optim.NewAdamW(ps, cfg)
	}},
}

// maxPool bounds the distinct batches generated: steps past it reuse them in turn.
const maxPool = 8

// variant is one precision setting to compare.
type variant struct {
	precision string       // fp32, fp16 or bf16
	level     amp.OptLevel // O0 for fp32
	low       tensor.DType // the half dtype; 0 for fp32
	masters   optim.Masters
}

func (v variant) String() string {
	if v.low == 0 {
		return v.precision
	}
	return v.precision + " " + v.levelName()
}

// levelName is the opt level with the masters choice: O2, O3+sr, O3+16+16, O3+rn.
func (v variant) levelName() string {
	return v.level.String() + mastersSuffix[v.masters]
}

// mastersSuffix spells the optimizer's Masters choice in -opt-level: "O3+16+16" is O3
// with 16+16 split masters, "O3+sr" with stochastic rounding, "O3+rn" bfloat16 weights
// rounded to nearest with no master (the baseline the other two fix).
var mastersSuffix = map[optim.Masters]string{optim.FP32Masters: "", optim.SplitMasters: "+16+16", optim.StochasticRounding: "+sr", optim.NoMasters: "+rn"}

// parseLevel parses an -opt-level entry: an opt level, optionally with a masters suffix.
func parseLevel(s string) (amp.OptLevel, optim.Masters, error) {
	for m, suf := range mastersSuffix {
		if suf == "" {
			continue
		}
		if base, ok := strings.CutSuffix(strings.ToLower(s), suf); ok {
			l, err := amp.ParseOptLevel(base)
			if err == nil && l < amp.O2 {
				err = fmt.Errorf("%s needs half weights: use it with O2 or O3", suf)
			}
			return l, m, err
		}
	}
	l, err := amp.ParseOptLevel(s)
	return l, optim.FP32Masters, err
}

// plan is the validated options.
type plan struct {
	options
	variants []variant
	dev      tensor.Device // the requested device (its kind decides the per-configuration devices)
	micro    int           // examples per micro-batch
}

// resolve checks the options; every error is a usageError.
func resolve(o options) (plan, error) {
	p := plan{options: o}
	if _, ok := modelBatch[o.model]; !ok {
		return p, usagef("unknown -model %q (want mlp, cnn, transformer, transformer-large or transformer-base)", o.model)
	}
	if o.batch == 0 {
		p.batch = modelBatch[o.model]
	}
	switch {
	case p.batch < 0:
		return p, usagef("-batch must be ≥ 1, got %d", p.batch)
	case o.steps <= 0:
		return p, usagef("-steps must be ≥ 1, got %d", o.steps)
	case o.warmup < 0:
		return p, usagef("-warmup must be ≥ 0, got %d", o.warmup)
	case o.accum <= 0:
		return p, usagef("-accum must be ≥ 1, got %d", o.accum)
	case p.batch%o.accum != 0:
		return p, usagef("-batch %d is not divisible by -accum %d (the batch is split into -accum micro-batches)", p.batch, o.accum)
	}
	p.micro = p.batch / o.accum
	if _, ok := optimizers[o.optimizer]; !ok {
		return p, usagef("unknown -optim %q (want sgd, adam or adamw)", o.optimizer)
	}
	switch {
	case o.ops < 0:
		return p, usagef("-ops must be ≥ 0, got %d", o.ops)
	case o.ops > 0 && o.plan:
		return p, usagef("-ops profiles the timed steps: it cannot be combined with -plan, which runs none")
	case o.opShapes && o.ops == 0:
		return p, usagef("-op-shapes splits the rows of -ops: give -ops N too")
	case o.opShapes && o.jsonOut:
		return p, usagef("-op-shapes splits the rows of the -ops tables, which -json does not print")
	}
	if o.plot != "" {
		if _, err := plotFormat(o.plot); err != nil {
			return p, err
		}
		// Checked now, not after the whole benchmark has run.
		if err := cli.CheckWritable(o.plot); err != nil {
			return p, fmt.Errorf("-plot %s: %w", o.plot, err)
		}
	}
	var err error
	if p.variants, err = parseVariants(o.precision, o.optLevel); err != nil {
		return p, err
	}
	if p.dev, err = cli.OpenDevice(o.device); err != nil {
		return p, err
	}
	if p.dev.Kind == backend.KindCPU {
		p.dev = tensor.CPU // the configurations get cpu:1, cpu:2, … whichever was named
	}
	if p.dev.Kind == backend.KindCPU && len(p.variants) > cpu.MaxDevices-1 {
		return p, usagef("%d configurations do not fit on the %d logical CPU devices (cpu:1 … cpu:%d)", len(p.variants), cpu.MaxDevices-1, cpu.MaxDevices-1)
	}
	return p, nil
}

// modelBatch is the default batch of each model, and the set of model names.
var modelBatch = map[string]int{"mlp": 256, "cnn": 128, "transformer": 32, "transformer-large": 16, "transformer-base": 16}

// transformerSizes are the transformer configurations by model name: the small default
// a larger one (width 512, 4 blocks, 128 tokens) that shows how a step scales, and one
// of BERT-base's (GPT-2-small's) size for GPUs (width 768, 12 heads, 12 blocks, 512
// tokens), large enough that a GPU step is not bound by kernel launches.
var transformerSizes = map[string]models.TransformerConfig{
	"transformer":       {},
	"transformer-large": {Dim: 512, Heads: 8, Layers: 4, SeqLen: 128},
	"transformer-base":  {Dim: 768, Heads: 12, Layers: 12, SeqLen: 512},
}

// parseVariants expands the precision list: fp32 once at O0, each half precision at
// each opt level.
func parseVariants(precisions, levels string) ([]variant, error) {
	type levelMasters struct {
		l amp.OptLevel
		m optim.Masters
	}
	var lv []levelMasters
	for _, s := range splitList(levels) {
		l, m, err := parseLevel(s)
		if err != nil {
			return nil, usagef("bad -opt-level: %v", err)
		}
		if l == amp.O0 {
			return nil, usagef("-opt-level O0 is plain FP32; list fp32 in -precision instead and give O1, O2 or O3 for the half precisions")
		}
		if slices.Contains(lv, levelMasters{l, m}) {
			return nil, usagef("-opt-level lists %s twice", s)
		}
		lv = append(lv, levelMasters{l, m})
	}
	var out []variant
	seen := map[string]bool{}
	for _, s := range splitList(precisions) {
		var v variant
		switch strings.ToLower(s) {
		case "fp32", "float32":
			v = variant{precision: "fp32", level: amp.O0}
		case "fp16", "float16", "half":
			v = variant{precision: "fp16", low: tensor.Float16}
		case "bf16", "bfloat16":
			v = variant{precision: "bf16", low: tensor.BFloat16}
		default:
			return nil, usagef("unknown precision %q in -precision (want fp32, fp16 or bf16, comma-separated)", s)
		}
		if seen[v.precision] {
			return nil, usagef("-precision lists %s twice", v.precision)
		}
		seen[v.precision] = true
		if v.low == 0 {
			out = append(out, v)
			continue
		}
		if len(lv) == 0 {
			return nil, usagef("-opt-level is empty; give O1, O2 or O3 for %s", v.precision)
		}
		for _, l := range lv {
			v.level, v.masters = l.l, l.m
			if l.m == optim.SplitMasters && v.low != tensor.BFloat16 {
				return nil, usagef("-opt-level %s%s needs bfloat16 weights: give -precision bf16", l.l, mastersSuffix[l.m])
			}
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, usagef("-precision is empty; give e.g. fp32,fp16,bf16")
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// buildModel returns a freshly initialised network on the default device.
func buildModel(kind string, seed uint64) nn.Module {
	init := nn.Seeded(seed)
	switch kind {
	case "cnn":
		return models.FashionCNN(models.CNNConfig{}, init)
	case "transformer", "transformer-large", "transformer-base":
		return models.NewTransformer(transformerSizes[kind], init)
	}
	return models.MLP(784, []int{1024, 1024}, 10, init)
}

// describe names the network for the header.
func describe(kind string) string {
	switch kind {
	case "cnn":
		return "Fashion-MNIST CNN: 2×[conv 5×5 + BatchNorm + ReLU + max-pool] 16/32 channels, linear 1568-128-10"
	case "transformer", "transformer-large", "transformer-base":
		c := transformerConfig(kind)
		return fmt.Sprintf("transformer encoder: %d layers, width %d, %d heads, %d tokens of %d, %d classes",
			c.Layers, c.Dim, c.Heads, c.SeqLen, c.Vocab, c.Classes)
	}
	return "MLP 784-1024-1024-10, ReLU"
}

// transformerConfig is the named transformer configuration with its defaults filled
// in.
func transformerConfig(kind string) models.TransformerConfig {
	return transformerSizes[kind].WithDefaults()
}

// releaseModel frees m's parameters, buffers and gradients.
func releaseModel(m nn.Module) {
	for _, p := range append(m.Params(), m.Buffers()...) {
		p.T.ZeroGrad()
		p.T.Release()
	}
}

// hostBatch is one micro-batch on the host: float32 features or int64 token ids, and
// int64 labels.
type hostBatch struct {
	x     []float32
	ids   []int64
	y     []int64
	shape tensor.Shape
}

// upload copies the batch to dev as tensors outside any Context (the caller releases
// them).
func (b hostBatch) upload(dev tensor.Device) (x, y *tensor.Tensor) {
	if b.ids != nil {
		x = tensor.FromSlice(b.ids, b.shape, tensor.WithDevice(dev))
	} else {
		x = tensor.FromSlice(b.x, b.shape, tensor.WithDevice(dev))
	}
	return x, tensor.FromSlice(b.y, tensor.Shape{len(b.y)}, tensor.WithDevice(dev))
}

// makeBatches generates n micro-batches of size micro once; every configuration
// trains on the same ones. The MLP and the CNN see Fashion-MNIST-shaped Gaussian
// blobs, the transformer random tokens with random labels.
func makeBatches(kind string, n, micro int, seed uint64) []hostBatch {
	out := make([]hostBatch, n)
	if _, ok := transformerSizes[kind]; ok {
		c := transformerConfig(kind)
		r := rand.New(rand.NewPCG(seed, 0x70c3))
		for i := range out {
			b := hostBatch{ids: make([]int64, micro*c.SeqLen), y: make([]int64, micro), shape: tensor.Shape{micro, c.SeqLen}}
			for j := range b.ids {
				b.ids[j] = r.Int64N(int64(c.Vocab))
			}
			for j := range b.y {
				b.y[j] = r.Int64N(int64(c.Classes))
			}
			out[i] = b
		}
		return out
	}
	ds := data.Synthetic(n*micro, 10, tensor.Shape{1, 28, 28}, seed)
	f := ds.Features()
	for i := range out {
		b := hostBatch{x: make([]float32, 0, micro*f), y: make([]int64, micro), shape: tensor.Shape{micro, 1, 28, 28}}
		for j := range micro {
			x, y := ds.Example(i*micro + j)
			b.x = append(b.x, x...)
			b.y[j] = y
		}
		out[i] = b
	}
	return out
}

// bench is one configuration being measured.
type bench struct {
	variant
	dev   tensor.Device
	be    backend.Backend
	model nn.Module
	tr    *amp.Trainer

	// prof, with -ops, observes the trainer's ops; it holds the timed steps' records.
	prof *profiler.Profiler

	times []time.Duration // timed steps
	// prodTimes (with -ops): each timed step's time in product ops (profiler.Row
	// self times of the ops with FLOPs), and prodSeen their running total.
	prodTimes []time.Duration
	prodSeen  time.Duration
	held      int64 // bytes held between steps: params, optimizer state, masters
	peak      int64 // highest bytes in use during a timed step
	act       int64 // highest bytes a timed step added to what was held before it (inputs included)
	skipped   int
	loss      float64
}

// alloc is the bytes the configuration's device has in use.
func (b *bench) alloc() int64 { return b.be.MemoryStats().Allocated }

// setup builds the model on b.dev, prepares it for the opt level and makes the
// optimizer and trainer. What it leaves allocated is the configuration's held memory.
func (b *bench) setup(p plan) (err error) {
	if b.be, err = backend.Get(b.dev); err != nil {
		return fmt.Errorf("%s: %w", b.dev, err)
	}
	before := b.alloc()
	b.model = buildModel(p.model, p.seed)
	nn.To(b.model, b.dev)
	if p.checkpoint {
		if b.model, err = withCheckpointing(b.model); err != nil {
			return err
		}
	}
	low := b.low
	if low == 0 {
		low = tensor.BFloat16 // unused at O0
	}
	amp.Prepare(b.model, b.level, low)
	opt, err := optimizers[p.optimizer].make(b.model.Params(), b.masters, p.seed)
	if err != nil {
		return err
	}
	loss := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }
	// The divergence check is off: a benchmark measures every configuration, and one
	// that diverges (O3 in float16 often does) is a result to report, not a reason to
	// stop the others.
	var obs tensor.Observer
	if p.ops > 0 {
		b.prof = profiler.New()
		obs = b.prof
	}
	b.tr, err = amp.NewTrainer(b.model, opt, loss, b.dev, amp.Config{Level: b.level, Low: low, Accum: p.accum,
		Divergence: amp.DivergenceConfig{Off: true}, Observer: obs})
	if err != nil {
		return err
	}
	b.tr.Gen.Seed(p.seed)
	b.held = b.alloc() - before
	return nil
}

// step runs one optimizer step on batches and records it. Memory is accounted in
// deltas of the device's counters, so the figures are this configuration's own even
// when configurations share a device (CUDA).
func (b *bench) step(batches []hostBatch, timed bool) error {
	a0 := b.alloc()
	xs := make([]*tensor.Tensor, len(batches))
	ys := make([]*tensor.Tensor, len(batches))
	for i, hb := range batches {
		xs[i], ys[i] = hb.upload(b.dev)
	}
	defer func() {
		for i := range xs {
			xs[i].Release()
			ys[i].Release()
		}
	}()
	b.be.ResetPeak()
	start := time.Now()
	res, err := b.tr.Step(xs, ys)
	if err != nil && !errors.Is(err, scaler.ErrSkipAlarm) {
		return fmt.Errorf("%s: step: %w", b.variant, err)
	}
	if err := b.be.Synchronize(); err != nil {
		return fmt.Errorf("%s: %w", b.variant, err)
	}
	took := time.Since(start)
	pk := b.be.MemoryStats().PeakAllocated
	for i := range xs {
		xs[i].Release()
		ys[i].Release()
	}
	heldBefore := b.held
	b.held += b.alloc() - a0
	if res.Skipped {
		b.skipped++
	}
	b.loss = res.Loss
	if !timed && b.prof != nil {
		b.prof.Reset() // only the timed steps' ops are reported
	}
	if timed {
		b.times = append(b.times, took)
		if b.prof != nil {
			_, total := productTotals(b.prof.Rows(false))
			b.prodTimes = append(b.prodTimes, total-b.prodSeen)
			b.prodSeen = total
		}
		b.act = max(b.act, pk-a0)
		b.peak = max(b.peak, heldBefore+(pk-a0))
	}
	return nil
}

// release frees the model's tensors. optim offers no way to release the optimizer's
// state (momentum buffers, masters): that is left to the GC.
func (b *bench) release() {
	if b.model == nil {
		return
	}
	releaseModel(b.model)
	b.model, b.tr = nil, nil
	if b.prof != nil {
		b.prof.Close()
		b.prof = nil
	}
}

// run measures every configuration and writes the report.
func run(o options, stdout, stderr io.Writer) (err error) {
	// Running out of memory anywhere — building a model included — is a message with
	// advice, not a panic with a stack trace.
	if oom := tensor.CatchOOM(func() { err = runBench(o, stdout, stderr) }); oom != nil {
		hint := "use a smaller -batch or -model"
		if v := os.Getenv("GAMP_CPU_MEMORY_LIMIT"); v != "" {
			hint += fmt.Sprintf(", or raise GAMP_CPU_MEMORY_LIMIT (now %s)", v)
		}
		return fmt.Errorf("%w\n%s", oom, hint)
	}
	return err
}

// runBench is run without the out-of-memory guard.
func runBench(o options, stdout, stderr io.Writer) error {
	p, err := resolve(o)
	if err != nil {
		return err
	}
	if p.plan {
		return runPlan(p, stdout)
	}
	benches := make([]*bench, len(p.variants))
	for i, v := range p.variants {
		dev := p.dev
		if dev.Kind == backend.KindCPU {
			// A logical device per configuration: its allocator statistics are its own.
			dev = tensor.CPUDevice(1 + i)
		}
		benches[i] = &bench{variant: v, dev: dev}
	}
	defer settle(benches)
	for _, b := range benches {
		if err := b.setup(p); err != nil {
			return err
		}
	}
	rounds := p.warmup + p.steps
	pool := makeBatches(p.model, min(rounds, maxPool)*p.accum, p.micro, p.seed)
	if !p.jsonOut {
		fmt.Fprintf(stderr, "ampbench: %d configurations × %d steps (%d warm-up), interleaved…\n", len(benches), rounds, p.warmup)
	}
	for r := range rounds {
		k := (r % (len(pool) / p.accum)) * p.accum
		for _, b := range benches {
			if err := b.step(pool[k:k+p.accum], r >= p.warmup); err != nil {
				return err
			}
		}
	}
	rep := newReport(p, benches)
	if p.plot != "" {
		if err := writePlot(p.plot, rep); err != nil {
			return err
		}
	}
	if p.jsonOut {
		return rep.writeJSON(stdout)
	}
	rep.writeTable(stdout)
	if p.ops > 0 {
		// The FP32 configuration, when one ran, is what the others' ops are set against.
		var ref *bench
		for _, b := range benches {
			if b.low == 0 {
				ref = b
			}
		}
		for _, b := range benches {
			r := ref
			if r == b {
				r = nil
			}
			writeOps(stdout, b, r, p.ops, p.opShapes)
		}
	}
	return nil
}

// settle releases the models and gives the GC a moment to return what is left (the
// optimizer state, which optim offers no way to release), so that a later run in the
// same process (the tests) does not see those frees in the middle of its steps. It
// waits until the CPU devices' counters are zero or stop moving.
func settle(benches []*bench) {
	for _, b := range benches {
		b.release()
	}
	total := func() (n int64) {
		for _, b := range benches {
			if b.be != nil && b.dev.Kind == backend.KindCPU {
				n += b.alloc()
			}
		}
		return n
	}
	last := int64(-1)
	for range 20 {
		runtime.GC()
		n := total()
		if n == 0 || n == last {
			return
		}
		last = n
		time.Sleep(5 * time.Millisecond)
	}
}
