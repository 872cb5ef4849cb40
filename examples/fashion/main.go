// Command fashion trains an MLP or a CNN on Fashion-MNIST with mixed precision — gamp's
// main job. On a terminal it shows a progress bar with loss and throughput (one line
// per epoch when stderr is a file or a pipe) and, with -json, ends with one JSON line
// for scripts (NaN and Inf written as null). A run that diverges stops with a message
// and exit status 1; bad flags exit with status 2:
//
//	fashion -model cnn -precision bf16 -epochs 3
//	fashion -model mlp -precision fp16 -opt-level O2 -json
//
// With -ddp it is one rank of a data-parallel job (start it with gamprun): every rank
// trains on its share of each batch and DDP averages the gradients; rank 0 reports.
//
//	gamprun -n 2 -- fashion -ddp -model mlp -epochs 1 -json
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/cuda"
	"github.com/gamp-ml/gamp/data"
	"github.com/gamp-ml/gamp/dist"
	"github.com/gamp-ml/gamp/internal/cli"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
)

type options struct {
	model, precision, optLevel, device, dataDir, save, resume, schedule, channels string
	epochs, batch, accum, limit                                                   int
	lr                                                                            float64
	seed                                                                          uint64
	jsonOut, quiet, ddp                                                           bool
	plan                                                                          bool   // -plan: amp.Plan picks -accum and checkpointing
	masters                                                                       string // -masters: what bf16 weights keep (optim.ParseMasters)
	cpuProfile                                                                    string // -cpuprofile: a Go CPU profile of the run
	// bar redraws one progress line with \r; set by main only when stderr is a
	// terminal, so a log file or a pipe gets one plain line per epoch instead.
	bar bool
}

// defaultLR is -lr's default, quoted in the advice for a diverged run.
const defaultLR = 2e-3

// summary is the JSON line printed with -json. Floats that can be NaN or ±Inf (a
// diverged run's loss) are jsonFloat, written as null, since JSON has no NaN.
type summary struct {
	Model            string    `json:"model"`
	Precision        string    `json:"precision"`
	OptLevel         string    `json:"opt_level"`
	Device           string    `json:"device"`
	Epochs           int       `json:"epochs"`
	Steps            int64     `json:"steps"`
	SkippedSteps     int64     `json:"skipped_steps"`
	FinalScale       jsonFloat `json:"final_scale"`
	TrainSeconds     jsonFloat `json:"train_seconds"`
	SamplesPerSecond jsonFloat `json:"samples_per_second"`
	TestAccuracy     jsonFloat `json:"test_accuracy"`
	PeakMemoryBytes  int64     `json:"peak_memory_bytes"`
	PeakActiveBytes  int64     `json:"peak_active_bytes"`            // the peak of the blocks in use (with the allocator's rounding): what -plan predicts
	PlannedPeakBytes int64     `json:"planned_peak_bytes,omitempty"` // -plan's predicted peak
	FinalLoss        jsonFloat `json:"final_loss"`
	WorldSize        int       `json:"world_size"`
	Diverged         bool      `json:"diverged"`
	Error            string    `json:"error,omitempty"`

	rank int
}

// jsonFloat is a float64 that encodes NaN and ±Inf as null instead of failing
// json.Marshal (which would lose the whole line).
type jsonFloat float64

// MarshalJSON writes the number, or null when it is not finite.
func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(v)
}

// usagef makes a bad-command-line error: exit status 2, as in every gamp command.
var usagef = cli.Usagef

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr, cli.IsTerminal(os.Stderr)))
}

// runMain is the command: it parses args, trains, prints the JSON line with -json and
// returns the exit status (0 ok, 1 a failed or diverged run, 2 a bad command line).
func runMain(args []string, stdout, stderr io.Writer, tty bool) int {
	o, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		printErr(stderr, err)
		return 2
	}
	o.bar = tty && !o.quiet
	s, err := cli.Profiled(o.cpuProfile, func() (summary, error) { return run(o, stderr) })
	status := cli.ExitStatus(err)
	if err != nil {
		printErr(stderr, err)
	}
	if o.jsonOut && s.rank == 0 && s.Model != "" {
		if err != nil {
			s.Error = err.Error()
		}
		b, jerr := json.Marshal(s)
		if jerr == nil {
			_, jerr = fmt.Fprintln(stdout, string(b))
		}
		if jerr != nil {
			fmt.Fprintln(stderr, "fashion: writing the JSON summary:", jerr)
			return 1
		}
	}
	return status
}

// printErr writes each line of err (errors.Join puts one bad flag per line) with the
// command's name in front.
func printErr(w io.Writer, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintln(w, "fashion:", line)
	}
}

// parseArgs parses and checks the command line; -h prints the usage and returns
// flag.ErrHelp.
func parseArgs(args []string, stderr io.Writer) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("fashion", flag.ContinueOnError)
	fs.StringVar(&o.model, "model", "cnn", "mlp or cnn (2×[conv 5×5 + BatchNorm + ReLU + max-pool] + 2 linear)")
	fs.StringVar(&o.precision, "precision", "auto", "fp32, fp16, bf16 or auto (bf16 on the CPU, fp16 on a GPU)")
	fs.StringVar(&o.optLevel, "opt-level", "", "O0, O1, O2 or O3 (default: O0 for fp32, O1 otherwise)")
	fs.IntVar(&o.epochs, "epochs", 3, "training epochs")
	fs.IntVar(&o.batch, "batch", 128, "examples per optimizer step (split into -accum micro-batches)")
	fs.Float64Var(&o.lr, "lr", defaultLR, "AdamW peak learning rate")
	fs.StringVar(&o.schedule, "schedule", "cosine", "learning-rate schedule: cosine (anneal to 0 over the run) or constant")
	fs.IntVar(&o.accum, "accum", 1, "micro-batches per optimizer step (gradient accumulation)")
	fs.StringVar(&o.device, "device", "", "cpu, cpu:N or cuda:N (default: the best device present)")
	fs.StringVar(&o.dataDir, "data", data.DefaultDir, "directory with the Fashion-MNIST IDX files")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed (initialisation, shuffling, dropout)")
	fs.StringVar(&o.save, "save", "", "save the training state to `FILE` after each epoch")
	fs.StringVar(&o.resume, "resume", "", "resume from a state `FILE` written by -save")
	fs.BoolVar(&o.jsonOut, "json", false, "end with one JSON line of results on stdout")
	fs.StringVar(&o.channels, "channels", "32,64", "CNN channels of the two conv blocks")
	fs.IntVar(&o.limit, "limit", 0, "use only the first N training examples (0: all)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress output")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the run to `FILE` (go tool pprof reads it)")
	fs.StringVar(&o.masters, "masters", "fp32", "what half weights keep at O2/O3: fp32 (FP32 master copies), 16+16 (bf16 weight plus the master's low 16 bits), sr (stochastic rounding, no master) or rn (round to nearest, no master)")
	fs.BoolVar(&o.plan, "plan", false, "measure a few steps and pick the micro-batch (-accum) and activation checkpointing that fit the device's free memory (on the CPU: GAMP_CPU_MEMORY_LIMIT), printing the candidates")
	fs.BoolVar(&o.ddp, "ddp", false, "data-parallel rank started by gamprun: train on this rank's share of every batch, average gradients over the ranks")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: fashion [flags]\n\n"+
			"Trains an MLP or a CNN on Fashion-MNIST with mixed precision and reports test\n"+
			"accuracy, speed and memory. Progress goes to stderr (a bar on a terminal, one line\n"+
			"per epoch otherwise); -json ends with one line of results on stdout. A run that\n"+
			"diverges stops with exit status 1; bad flags exit with 2.\n\n")
		fs.PrintDefaults()
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.Usage()
			return o, err
		}
		return o, usagef("%v (fashion -h lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return o, usagef("unexpected argument %q (fashion takes flags only)", fs.Arg(0))
	}
	return o, validate(o)
}

// validate checks every flag value and reports each bad one on a line of its own (all
// of them at once, so a user fixes the command line in one go).
func validate(o options) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, usagef(format, args...)) }
	if o.model != "mlp" && o.model != "cnn" {
		bad("unknown -model %q (want mlp or cnn)", o.model)
	}
	if _, err := parsePrecision(o.precision); err != nil {
		errs = append(errs, err)
	}
	if o.optLevel != "" {
		if _, err := amp.ParseOptLevel(o.optLevel); err != nil {
			bad("-opt-level: %v", err)
		}
	}
	if o.epochs < 1 {
		bad("-epochs must be ≥ 1, got %d", o.epochs)
	}
	if o.batch < 1 {
		bad("-batch must be ≥ 1, got %d", o.batch)
	}
	if m, err := optim.ParseMasters(o.masters); err != nil {
		bad("-masters: %v", err)
	} else if l, _ := amp.ParseOptLevel(o.optLevel); m != optim.FP32Masters && l != amp.O2 && l != amp.O3 {
		bad("-masters %s needs half weights: give -opt-level O2 or O3", o.masters)
	}
	if o.plan && o.ddp {
		bad("-plan plans one device; leave it out with -ddp")
	}
	if o.accum < 1 {
		bad("-accum must be ≥ 1, got %d", o.accum)
	}
	if o.batch >= 1 && o.accum >= 1 && o.batch%o.accum != 0 {
		bad("-batch %d is not divisible by -accum %d", o.batch, o.accum)
	}
	if !(o.lr > 0) || math.IsInf(o.lr, 0) {
		bad("-lr must be a positive number, got %g", o.lr)
	}
	if o.limit < 0 {
		bad("-limit must be ≥ 0 (0: all examples), got %d", o.limit)
	}
	switch o.schedule {
	case "cosine", "constant", "":
	default:
		bad("unknown -schedule %q (want cosine or constant)", o.schedule)
	}
	if o.model == "cnn" {
		if _, _, err := parseChannels(o.channels); err != nil {
			errs = append(errs, err)
		}
	}
	if o.device != "" {
		if _, err := tensor.ParseDevice(o.device); err != nil {
			bad("-device: %v", err)
		}
	}
	return errors.Join(errs...)
}

// checkOutputs fails before any work when -save cannot be written or -resume cannot
// be read, rather than after a whole run (or, for a FIFO, never).
func checkOutputs(o options) error {
	if o.save != "" {
		if err := cli.CheckWritable(o.save); err != nil {
			return fmt.Errorf("-save %s: %w", o.save, err)
		}
	}
	if o.resume != "" {
		if err := cli.CheckReadableFile(o.resume); err != nil {
			return fmt.Errorf("-resume: %w; give a state file written by -save", err)
		}
	}
	return nil
}

// parsePrecision returns the half dtype of a -precision value (0 for fp32); "auto" is
// resolved before this by run and is accepted here.
func parsePrecision(p string) (tensor.DType, error) {
	switch strings.ToLower(p) {
	case "fp32", "float32", "auto":
		return 0, nil
	case "fp16", "float16":
		return tensor.Float16, nil
	case "bf16", "bfloat16":
		return tensor.BFloat16, nil
	}
	return 0, usagef("unknown -precision %q (want fp32, fp16, bf16 or auto)", p)
}

func levelFor(o options) (amp.OptLevel, tensor.DType, error) {
	low, err := parsePrecision(o.precision)
	if err != nil {
		return 0, 0, err
	}
	level := amp.O0
	if low != 0 {
		level = amp.O1
	}
	if o.optLevel != "" {
		l, err := amp.ParseOptLevel(o.optLevel)
		if err != nil {
			return 0, 0, usagef("-opt-level: %v", err)
		}
		if l != amp.O0 && low == 0 {
			return 0, 0, usagef("-opt-level %s needs -precision fp16 or bf16", l)
		}
		level = l
	}
	if low == 0 {
		low = tensor.BFloat16 // unused at O0
	}
	return level, low, nil
}

// parseChannels reads -channels, two positive counts such as 32,64.
func parseChannels(channels string) (c1, c2 int, err error) {
	if channels == "" {
		channels = "32,64"
	}
	if n, err := fmt.Sscanf(channels, "%d,%d", &c1, &c2); n != 2 || err != nil || c1 < 1 || c2 < 1 {
		return 0, 0, usagef("bad -channels %q (want two positive counts, e.g. 32,64)", channels)
	}
	return c1, c2, nil
}

// buildModel returns the network; seeded init makes runs reproducible.
func buildModel(kind, channels string, seed uint64) (nn.Module, string, error) {
	switch kind {
	case "mlp":
		return models.MLP(784, []int{256, 128}, 10, nn.Seeded(seed)), data.ShapeFlat, nil
	case "cnn":
		c1, c2, err := parseChannels(channels)
		if err != nil {
			return nil, "", err
		}
		return models.FashionCNN(models.CNNConfig{C1: c1, C2: c2}, nn.Seeded(seed)), data.ShapeImage, nil
	}
	return nil, "", usagef("unknown -model %q (want mlp or cnn)", kind)
}

// oomError is running out of memory anywhere in the run (building the model
// included): a message that says what to change, not a stack trace.
type oomError struct{ err error }

func (e *oomError) Error() string {
	hint := "use a smaller -batch or model (-model mlp, -channels)"
	if v := os.Getenv("GAMP_CPU_MEMORY_LIMIT"); v != "" {
		hint += fmt.Sprintf(", or raise GAMP_CPU_MEMORY_LIMIT (now %s)", v)
	}
	return fmt.Sprintf("%v\n%s", e.err, hint)
}

func (e *oomError) Unwrap() error { return e.err }

// divergedError is a run the Trainer's divergence check stopped, with advice in the
// command's own terms (flags, not Config fields).
type divergedError struct {
	epoch     int
	lr        float64
	precision string
	err       *amp.DivergenceError
}

func (e *divergedError) Error() string {
	also := ""
	if e.precision == "fp16" {
		also = ", or -precision bf16 (no loss scaling needed)"
	}
	return fmt.Sprintf("the run diverged in epoch %d at step %d: %d consecutive bad steps, the last because %s\n"+
		"try a lower -lr (this run: %g; the default is %g)%s",
		e.epoch, e.err.Step, e.err.BadSteps, e.err.Reason, e.lr, float64(defaultLR), also)
}

func (e *divergedError) Unwrap() error { return e.err }

// run trains as o says, logging progress to log. Running out of memory anywhere —
// building the model included — is returned as an error, not a panic.
func run(o options, log io.Writer) (res summary, err error) {
	if oom := tensor.CatchOOM(func() { res, err = train(o, log) }); oom != nil {
		return res, &oomError{oom}
	}
	return res, err
}

func train(o options, log io.Writer) (summary, error) {
	if err := validate(o); err != nil {
		return summary{}, err
	}
	if err := checkOutputs(o); err != nil {
		return summary{}, err
	}
	pg := dist.ProcessGroup(dist.NewLocal())
	if o.ddp {
		var err error
		if pg, err = dist.Init(); err != nil {
			return summary{}, err
		}
		defer pg.Close()
		if (o.batch/o.accum)%pg.Size() != 0 {
			return summary{rank: pg.Rank()}, usagef("-ddp: the micro-batch %d (-batch/-accum) does not split evenly over %d ranks", o.batch/o.accum, pg.Size())
		}
		if pg.Rank() != 0 {
			o.quiet, o.bar, o.save = true, false, ""
		}
	}
	dev, err := cli.OpenDevice(o.device)
	if err != nil {
		return summary{}, err
	}
	if err := tensor.SetDefaultDevice(dev); err != nil {
		return summary{}, err
	}
	if o.precision == "auto" {
		o.precision = cli.AutoPrecision(dev)
	}
	level, low, err := levelFor(o)
	if err != nil {
		return summary{}, err
	}
	train, test, err := data.LoadFashionMNIST(o.dataDir)
	if err != nil {
		return summary{}, err
	}
	if o.limit > 0 && o.limit < train.Len() {
		train = train.Head(o.limit)
	}
	segments := 0
	var planned int64
	if o.plan {
		if o.accum, segments, planned, err = planRun(o, level, low, dev, train, log); err != nil {
			return summary{}, err
		}
	}
	micro := o.batch / o.accum
	stepsPerEpoch := int64(train.Len() / micro / o.accum)
	if stepsPerEpoch < 1 {
		limit := ""
		if o.limit > 0 {
			limit = fmt.Sprintf(" (-limit %d)", o.limit)
		}
		return summary{}, fmt.Errorf("the training set has %d examples%s, fewer than one batch of %d (-batch): lower -batch or use more examples", train.Len(), limit, o.batch)
	}
	model, shape, err := buildModel(o.model, o.channels, o.seed)
	if err != nil {
		return summary{}, err
	}
	if model, err = checkpointed(model, segments); err != nil {
		return summary{}, err
	}
	nn.To(model, dev)
	amp.Prepare(model, level, low)
	masters, _ := optim.ParseMasters(o.masters)
	opt, err := optim.NewAdamW(model.Params(), optim.AdamWConfig{LR: o.lr, WeightDecay: 1e-4, Masters: masters, RoundingSeed: o.seed})
	if err != nil {
		return summary{}, err
	}
	lossFn := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }
	var trModel nn.Module = model
	var trOpt optim.Optimizer = opt
	if o.ddp {
		ddp, err := dist.NewDDP(model, pg, dist.DDPOptions{})
		if err != nil {
			return summary{}, err
		}
		if trOpt, err = ddp.Optimizer(opt); err != nil {
			return summary{}, err
		}
		trModel = ddp
	}
	tr, err := amp.NewTrainer(trModel, trOpt, lossFn, dev, amp.Config{Level: level, Low: low, Accum: o.accum})
	if err != nil {
		return summary{}, err
	}
	dist.SyncScaler(tr.Scaler, pg)
	dist.SyncDivergence(tr, pg) // every rank stops at the same step
	tr.Gen.Seed(o.seed)
	if o.schedule != "constant" {
		sched, err := optim.NewScheduler(opt, optim.CosineAnnealing{TMax: stepsPerEpoch * int64(o.epochs)})
		if err != nil {
			return summary{}, err
		}
		tr.Sched = sched
	}
	startEpoch := 0
	if o.resume != "" {
		st, err := amp.Load(o.resume, tr)
		if err != nil {
			return summary{}, err
		}
		startEpoch = st.Epoch
		if !o.quiet {
			fmt.Fprintf(log, "resumed from %s at epoch %d (step %d)\n", o.resume, startEpoch, tr.Steps())
		}
	}
	// With -ddp each rank loads its shard of the data, micro/size examples per
	// micro-batch; the ranks' micro-batches together make one of the full size.
	local := train
	if pg.Size() > 1 {
		local = shard(train, pg.Rank(), pg.Size())
	}
	loader, err := data.NewLoader(local, data.LoaderOptions{BatchSize: micro / pg.Size(), Shuffle: true, Seed: o.seed, DropLast: true, Shape: shape, Device: dev})
	if err != nil {
		return summary{}, err
	}
	be := backend.MustGet(dev)
	be.ResetPeak()
	// TestAccuracy stays NaN (null in JSON) until an epoch is evaluated: a run that
	// diverges in its first epoch has no accuracy, not an accuracy of 0.
	res := summary{Model: o.model, Precision: o.precision, OptLevel: level.String(), Device: dev.String(), Epochs: o.epochs,
		WorldSize: pg.Size(), rank: pg.Rank(), TestAccuracy: jsonFloat(math.NaN()), PlannedPeakBytes: planned}
	if !o.quiet {
		fmt.Fprintf(log, "fashion: %s, %s (%s, %s), %d train / %d test examples, batch %d×%d\n",
			o.model, dev, o.precision, level, train.Len(), test.Len(), o.accum, micro)
		if o.device == "" && dev.Kind == backend.KindCPU && !cuda.Available() {
			// Say why the GPU was not used: the first reason, not every path tried.
			why, _, _ := strings.Cut(cuda.Reason().Error(), ": tried")
			fmt.Fprintf(log, "fashion: no GPU: %s; training on the CPU\n", why)
		}
	}
	var trainTime time.Duration
	var samples int
	// finish fills in what the summary reports about the run so far, also when it
	// stops early (a diverged run still reports its steps and last loss).
	finish := func() {
		res.Steps = tr.Steps()
		res.FinalScale = jsonFloat(tr.Scaler.ScaleValue())
		res.TrainSeconds = jsonFloat(trainTime.Seconds())
		if trainTime > 0 {
			res.SamplesPerSecond = jsonFloat(float64(samples) / trainTime.Seconds())
		}
		st := be.MemoryStats()
		res.PeakMemoryBytes, res.PeakActiveBytes = st.PeakAllocated, st.PeakActive
	}
	for epoch := startEpoch; epoch < o.epochs; epoch++ {
		it := loader.Epoch(epoch)
		perEpoch := local.Len() / (micro / pg.Size()) / o.accum
		start := time.Now()
		var xs, ys []*tensor.Tensor
		step := 0
		var last amp.Result
		for it.Next() {
			b := it.Batch()
			x, y := b.Tensors()
			xs, ys = append(xs, x), append(ys, y)
			if len(xs) < o.accum {
				continue
			}
			r, err := tr.Step(xs, ys)
			for i := range xs {
				xs[i].Release()
				ys[i].Release()
			}
			xs, ys = xs[:0], ys[:0]
			var de *amp.DivergenceError
			if errors.As(err, &de) {
				// The step completed: count it, then stop.
				res.FinalLoss, res.Diverged = jsonFloat(r.Loss), true
				samples += o.batch
				if r.Skipped {
					res.SkippedSteps++
				}
				err = &divergedError{epoch: epoch + 1, lr: o.lr, precision: o.precision, err: de}
			}
			if err != nil {
				it.Close()
				trainTime += time.Since(start)
				if o.bar {
					fmt.Fprintln(log)
				}
				finish()
				return res, err
			}
			step++
			samples += o.batch
			res.FinalLoss = jsonFloat(r.Loss)
			last = r
			if r.Skipped {
				res.SkippedSteps++
			}
			if o.bar && (step%10 == 0 || step == perEpoch) {
				el := time.Since(start).Seconds()
				progress(log, epoch+1, o.epochs, step, perEpoch, r.Loss, float64(step*o.batch)/el, r.Scale)
			}
		}
		for i := range xs {
			xs[i].Release()
			ys[i].Release()
		}
		if err := it.Err(); err != nil {
			return res, err
		}
		it.Close()
		elapsed := time.Since(start)
		trainTime += elapsed
		if pg.Rank() != 0 {
			continue // rank 0 evaluates and reports; the replicas are identical
		}
		acc, err := evaluate(tr, test, shape, dev)
		if err != nil {
			return res, err
		}
		res.TestAccuracy = jsonFloat(acc)
		switch {
		case o.bar:
			fmt.Fprintf(log, "\nepoch %d: test accuracy %.4f\n", epoch+1, acc)
		case !o.quiet:
			// No terminal: one plain line per epoch, the same facts the bar shows.
			fmt.Fprintf(log, "epoch %d/%d: %d steps, loss %.4f, %.0f samples/s, scale %g, test accuracy %.4f\n",
				epoch+1, o.epochs, step, last.Loss, float64(step*o.batch)/elapsed.Seconds(), tr.Scaler.ScaleValue(), acc)
		}
		if o.save != "" {
			if err := amp.Save(o.save, tr, amp.SaveInfo{Epoch: epoch + 1}); err != nil {
				return res, err
			}
		}
	}
	finish()
	return res, nil
}

// shard is rank's share of ds, as PyTorch's DistributedSampler deals it: every
// size-th example from the rank-th, the same number for every rank (so all run the
// same number of steps).
func shard(ds *data.Dataset, rank, size int) *data.Dataset {
	idx := make([]int, 0, ds.Len()/size)
	for i := rank; len(idx) < ds.Len()/size; i += size {
		idx = append(idx, i)
	}
	return ds.Subset(idx)
}

func progress(w io.Writer, epoch, epochs, step, total int, loss, sps, scale float64) {
	const width = 30
	done := width * step / max(total, 1)
	bar := strings.Repeat("█", done) + strings.Repeat("·", width-done)
	fmt.Fprintf(w, "\repoch %d/%d %s %5d/%d  loss %.4f  %7.0f samples/s  scale %g ", epoch, epochs, bar, step, total, loss, sps, scale)
}

// evaluate computes test accuracy in eval mode without gradients.
func evaluate(tr *amp.Trainer, test *data.Dataset, shape string, dev tensor.Device) (float64, error) {
	loader, err := data.NewLoader(test, data.LoaderOptions{BatchSize: 500, Shape: shape, Device: dev})
	if err != nil {
		return 0, err
	}
	it := loader.Epoch(0)
	defer it.Close()
	correct, total := 0, 0
	for it.Next() {
		x, y := it.Batch().Tensors()
		out := tr.Evaluate(x)
		pred := out.ArgMax(1).Int64s()
		labels := y.Int64s()
		for i := range pred {
			if pred[i] == labels[i] {
				correct++
			}
		}
		total += len(pred)
		out.Release()
		x.Release()
		y.Release()
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	return float64(correct) / float64(max(total, 1)), nil
}
