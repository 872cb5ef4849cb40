// Command chargpt trains a character-level GPT on real text with mixed precision —
// gamp's second main job, nanoGPT's shakespeare-char run in Go. By default it reads
// Debian's fortunes corpus (apt-get install fortunes; about 2.6 million characters),
// trains with AdamW, warm-up and cosine decay, gradient clipping and BF16 autocast on
// the CPU (FP16 with loss scaling on a GPU), reports the validation loss as it goes,
// and ends by sampling text from the model:
//
//	chargpt                                 # CPU defaults: 4 blocks, width 128, 4 heads, context 128, batch 32
//	chargpt -precision fp32 -steps 200 -json
//	chargpt -text input.txt -plot loss.png -save state.safetensors
//	chargpt -resume state.safetensors -steps 1200
//
// With -json it ends with one JSON line of results on stdout.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/cuda"
	"github.com/gamp-ml/gamp/data"
	"github.com/gamp-ml/gamp/internal/cli"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/profiler"
	"github.com/gamp-ml/gamp/tensor"
)

type options struct {
	precision, optLevel, device, textPath, fortunesDir, save, resume, schedule string
	plot, prompt, exportInit, cpuProfile                                       string
	steps, stopAt, batch, accum, context, layers, dim, heads, warmup           int
	evalEvery, evalBatches, sampleLen, topK                                    int
	lr, clip, weightDecay, dropout, temperature                                float64
	seed, sampleSeed                                                           uint64
	jsonOut, quiet, tie, checkpoint, composed, flops                           bool
}

// point is one step of a loss curve.
type point struct {
	Step int64   `json:"step"`
	Loss float64 `json:"loss"`
}

// summary is the JSON line printed with -json.
type summary struct {
	Text            string  `json:"text"`
	Vocab           int     `json:"vocab"`
	Params          int     `json:"params"`
	Precision       string  `json:"precision"`
	OptLevel        string  `json:"opt_level"`
	Device          string  `json:"device"`
	Steps           int64   `json:"steps"`
	SkippedSteps    int64   `json:"skipped_steps"`
	FinalScale      float64 `json:"final_scale"`
	TrainLoss       float64 `json:"train_loss"` // mean over the last evaluation interval
	ValLoss         float64 `json:"val_loss"`
	UnigramLoss     float64 `json:"unigram_loss"` // entropy of the training characters: the loss of a model without context
	TrainSeconds    float64 `json:"train_seconds"`
	TokensPerSecond float64 `json:"tokens_per_second"`
	MedianStepMS    float64 `json:"median_step_ms"`
	// StepMS holds each step's wall time in this run, in order (a resumed run lists
	// only the steps it ran), so that a benchmark can leave out its warm-up steps.
	StepMS []float64 `json:"step_ms"`
	// ProductGFLOP (with -flops) is the median over the steps of a training step's
	// product FLOPs (profiler.Record.FLOPs: the linear layers, the head and attention,
	// forward and backward; causally masked scores counted as computed), in GFLOP.
	ProductGFLOP    *float64 `json:"products_gflop_per_step,omitempty"`
	PeakMemoryBytes int64    `json:"peak_memory_bytes"`
	Sample          string   `json:"sample"`
	TrainCurve      []point  `json:"train_curve"`
	ValCurve        []point  `json:"val_curve"`
}

// defaultOptions are the flags' defaults.
func defaultOptions() options {
	fs := flag.NewFlagSet("chargpt", flag.ContinueOnError)
	var o options
	defineFlags(fs, &o)
	return o
}

func main() {
	var o options
	defineFlags(flag.CommandLine, &o)
	flag.Parse()
	s, err := cli.Profiled(o.cpuProfile, func() (summary, error) { return run(o, os.Stderr) })
	if err != nil {
		os.Exit(cli.Report(os.Stderr, "chargpt", err)) // 2 for a bad flag value
	}
	if !o.quiet && s.Sample != "" {
		fmt.Fprintf(os.Stderr, "\n--- sample (temperature %g, top-k %d, seed %d) ---\n%s\n---\n", o.temperature, o.topK, o.sampleSeed, s.Sample)
	}
	if o.jsonOut {
		b, _ := json.Marshal(s)
		fmt.Println(string(b))
	}
}

func defineFlags(flag *flag.FlagSet, o *options) {
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the run to `FILE` (go tool pprof reads it)")
	flag.StringVar(&o.precision, "precision", "auto", "fp32, fp16, bf16 or auto (bf16 on the CPU, fp16 on a GPU)")
	flag.StringVar(&o.optLevel, "opt-level", "", "O0, O1, O2 or O3 (default: O0 for fp32, O1 otherwise)")
	flag.StringVar(&o.device, "device", "", "cpu, cpu:N or cuda:N (default: the best device present)")
	flag.StringVar(&o.textPath, "text", "", "train on this UTF-8 text file instead of the fortunes corpus")
	flag.StringVar(&o.fortunesDir, "fortunes", data.FortunesDir, "directory of Debian's fortune files (apt-get install fortunes)")
	flag.IntVar(&o.steps, "steps", 600, "optimizer steps in all (a resumed run continues up to this count)")
	flag.IntVar(&o.stopAt, "stop-at", 0, "stop after this step, saving the state (-save), to continue later with -resume; the schedule still spans -steps (0: run to -steps)")
	flag.IntVar(&o.batch, "batch", 32, "sequences per optimizer step (split into -accum micro-batches)")
	flag.IntVar(&o.accum, "accum", 1, "micro-batches per optimizer step (gradient accumulation)")
	flag.IntVar(&o.context, "context", 128, "context length in characters")
	flag.IntVar(&o.layers, "layers", 4, "transformer blocks")
	flag.IntVar(&o.dim, "dim", 128, "model width")
	flag.IntVar(&o.heads, "heads", 4, "attention heads")
	flag.Float64Var(&o.dropout, "dropout", 0, "dropout probability")
	flag.BoolVar(&o.tie, "tie", false, "tie the output head to the token embedding")
	flag.Float64Var(&o.lr, "lr", 6e-3, "AdamW peak learning rate")
	flag.Float64Var(&o.weightDecay, "weight-decay", 0.1, "AdamW decoupled weight decay")
	flag.IntVar(&o.warmup, "warmup", 50, "linear warm-up steps")
	flag.StringVar(&o.schedule, "schedule", "cosine", "after warm-up: cosine (to lr/10 at -steps) or constant")
	flag.Float64Var(&o.clip, "clip", 1, "clip the global gradient norm to this (0: off)")
	flag.BoolVar(&o.checkpoint, "checkpoint", false, "activation checkpointing: recompute each block in backward")
	flag.BoolVar(&o.composed, "composed-attention", false, "attention from matmul+mask+softmax instead of the fused op (memory grows with context²)")
	flag.IntVar(&o.evalEvery, "eval-every", 100, "validation loss every N steps (0: only at the end)")
	flag.IntVar(&o.evalBatches, "eval-batches", 10, "batches of -batch sequences per validation loss")
	flag.Uint64Var(&o.seed, "seed", 1, "random seed (initialisation, batches, dropout)")
	flag.StringVar(&o.save, "save", "", "save the training state to FILE at every validation")
	flag.StringVar(&o.resume, "resume", "", "resume from a state FILE written by -save")
	flag.StringVar(&o.exportInit, "export-init", "", "write the initial weights to FILE (safetensors) before training")
	flag.StringVar(&o.plot, "plot", "", "write the loss curves to FILE.png (or .svg)")
	flag.IntVar(&o.sampleLen, "sample", 500, "characters to sample after training (0: none)")
	flag.StringVar(&o.prompt, "prompt", "\n", "text the sample starts from")
	flag.Float64Var(&o.temperature, "temperature", 0.8, "sampling temperature (0: always the most likely character)")
	flag.IntVar(&o.topK, "top-k", 10, "sample among the k most likely characters (0: all)")
	flag.Uint64Var(&o.sampleSeed, "sample-seed", 1, "seed of the sampler")
	flag.BoolVar(&o.jsonOut, "json", false, "end with one JSON line of results on stdout")
	flag.BoolVar(&o.quiet, "quiet", false, "no progress bar")
	flag.BoolVar(&o.flops, "flops", false, "count each training step's product FLOPs with package profiler attached to the trainer (its bookkeeping is then in the step times); the JSON gets products_gflop_per_step")
}

func levelFor(precision, optLevel string) (amp.OptLevel, tensor.DType, error) {
	var low tensor.DType
	switch strings.ToLower(precision) {
	case "fp32", "float32":
	case "fp16", "float16":
		low = tensor.Float16
	case "bf16", "bfloat16":
		low = tensor.BFloat16
	default:
		return 0, 0, fmt.Errorf("unknown -precision %q (want fp32, fp16, bf16 or auto)", precision)
	}
	level := amp.O0
	if low != 0 {
		level = amp.O1
	}
	if optLevel != "" {
		l, err := amp.ParseOptLevel(optLevel)
		if err != nil {
			return 0, 0, err
		}
		if l != amp.O0 && low == 0 {
			return 0, 0, fmt.Errorf("-opt-level %s needs -precision fp16 or bf16", l)
		}
		level = l
	}
	if low == 0 {
		low = tensor.BFloat16 // unused at O0
	}
	return level, low, nil
}

func (o options) validate() error {
	switch {
	case o.steps < 1 || o.batch < 1 || o.accum < 1 || o.context < 1 || o.layers < 1 || o.dim < 1 || o.heads < 1:
		return errors.New("-steps, -batch, -accum, -context, -layers, -dim and -heads must be ≥ 1")
	case o.batch%o.accum != 0:
		return fmt.Errorf("-batch %d is not divisible by -accum %d", o.batch, o.accum)
	case o.dim%o.heads != 0:
		return fmt.Errorf("-dim %d is not divisible by -heads %d", o.dim, o.heads)
	case !(o.lr > 0) || math.IsInf(o.lr, 0):
		return fmt.Errorf("-lr must be positive, got %g", o.lr)
	case !(o.dropout >= 0 && o.dropout < 1):
		return fmt.Errorf("-dropout must be in [0, 1), got %g", o.dropout)
	case o.warmup < 0 || o.warmup >= o.steps:
		return fmt.Errorf("-warmup %d must be in [0, -steps %d)", o.warmup, o.steps)
	case o.stopAt < 0 || o.stopAt > o.steps:
		return fmt.Errorf("-stop-at %d must be in [0, -steps %d]", o.stopAt, o.steps)
	case o.evalEvery < 0 || o.evalBatches < 1:
		return errors.New("-eval-every must be ≥ 0 and -eval-batches ≥ 1")
	case !(o.clip >= 0) || !(o.weightDecay >= 0) || !(o.temperature >= 0) || o.topK < 0 || o.sampleLen < 0:
		return errors.New("-clip, -weight-decay, -temperature, -top-k and -sample must be ≥ 0")
	case o.plot != "" && !slices.Contains([]string{".png", ".svg"}, strings.ToLower(filepath.Ext(o.plot))):
		return fmt.Errorf("-plot %q: want a .png or .svg file name", o.plot)
	}
	// Output paths are checked before the work starts, not after it.
	for _, f := range []struct{ flag, path string }{{"-save", o.save}, {"-plot", o.plot}} {
		if f.path != "" {
			if err := cli.CheckWritable(f.path); err != nil {
				return fmt.Errorf("%s %s: %v", f.flag, f.path, err)
			}
		}
	}
	return nil
}

// loadText reads -text, or the fortunes corpus.
func loadText(o options) (*data.Text, error) {
	if o.textPath != "" {
		return data.LoadTextFile(o.textPath)
	}
	return data.LoadFortunes(o.fortunesDir)
}

// unigramLoss is the entropy, in nats, of the characters of the training split: the
// loss of the best model that ignores context.
func unigramLoss(t *data.Text) float64 {
	counts := make([]float64, t.VocabSize())
	toks := t.Tokens(false)
	for _, id := range toks {
		counts[id]++
	}
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := c / float64(len(toks))
			h -= p * math.Log(p)
		}
	}
	return h
}

// lmLoss is the language-model loss: cross-entropy of logits [N, T, V] against the
// next characters [N, T].
func lmLoss(out, y *tensor.Tensor) *tensor.Tensor {
	s := out.Shape()
	return tensor.CrossEntropy(out.Reshape(s[0]*s[1], s[2]), y.Reshape(s[0]*s[1]), 0)
}

func run(o options, log io.Writer) (summary, error) {
	if err := o.validate(); err != nil {
		return summary{}, cli.Usagef("%v", err) // a bad flag value: exit status 2
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
	level, low, err := levelFor(o.precision, o.optLevel)
	if err != nil {
		return summary{}, cli.Usagef("%v", err)
	}
	text, err := loadText(o)
	if err != nil {
		return summary{}, err
	}
	trainB, err := text.NewBlocks(false, o.context, o.seed)
	if err != nil {
		return summary{}, err
	}
	// The validation loss is always taken on the same blocks, so the curve compares.
	valB, err := text.NewBlocks(true, o.context, o.seed+1)
	if err != nil {
		return summary{}, err
	}
	cfg := models.GPTConfig{Vocab: text.VocabSize(), Context: o.context, Dim: o.dim, Heads: o.heads, Layers: o.layers,
		Dropout: o.dropout, TieWeights: o.tie, Checkpoint: o.checkpoint, Composed: o.composed}
	model := models.NewGPT(cfg, nn.Seeded(o.seed))
	if o.exportInit != "" {
		if err := nn.SaveState(model, o.exportInit); err != nil {
			return summary{}, err
		}
	}
	nn.To(model, dev)
	amp.Prepare(model, level, low)
	opt, err := optim.NewAdamW(model.Params(), optim.AdamWConfig{LR: o.lr, Beta1: 0.9, Beta2: 0.99, WeightDecay: o.weightDecay})
	if err != nil {
		return summary{}, err
	}
	acfg := amp.Config{Level: level, Low: low, Accum: o.accum, ClipNorm: o.clip}
	var prof *profiler.Profiler // with -flops
	if o.flops {
		prof = profiler.New()
		defer prof.Close()
		acfg.Observer = prof
	}
	tr, err := amp.NewTrainer(model, opt, lmLoss, dev, acfg)
	if err != nil {
		return summary{}, err
	}
	tr.Gen.Seed(o.seed)
	var after optim.Schedule = optim.CosineAnnealing{TMax: int64(o.steps - o.warmup), EtaMin: o.lr / 10}
	switch o.schedule {
	case "cosine", "":
	case "constant":
		after = nil
	default:
		return summary{}, fmt.Errorf("unknown -schedule %q (want cosine or constant)", o.schedule)
	}
	sched, err := optim.NewScheduler(opt, optim.LinearWarmup{Steps: int64(o.warmup), Then: after})
	if err != nil {
		return summary{}, err
	}
	tr.Sched = sched
	vocab := string(text.Vocab())
	res := summary{Text: text.Name, Vocab: text.VocabSize(), Params: nn.NumParams(model), Precision: o.precision,
		OptLevel: level.String(), Device: dev.String(), UnigramLoss: unigramLoss(text)}
	if o.resume != "" {
		info, err := amp.Load(o.resume, tr)
		if err != nil {
			return summary{}, err
		}
		if info.Extra["vocab"] != vocab {
			return summary{}, fmt.Errorf("-resume %s: the state was trained on another text (its vocabulary differs from this text's %d characters); pass the same -text", o.resume, text.VocabSize())
		}
		draws, err := strconv.ParseUint(info.Extra["train_draws"], 10, 64)
		if err != nil {
			return summary{}, fmt.Errorf("-resume %s: no batch position saved (train_draws): %w", o.resume, err)
		}
		trainB.SetDraws(draws)
		if err := json.Unmarshal([]byte(info.Extra["curves"]), &[2]*[]point{&res.TrainCurve, &res.ValCurve}); err != nil {
			return summary{}, fmt.Errorf("-resume %s: bad saved loss curves: %w", o.resume, err)
		}
		fmt.Fprintf(log, "resumed from %s at step %d\n", o.resume, tr.Steps())
	}
	be := backend.MustGet(dev)
	be.ResetPeak()
	micro := o.batch / o.accum
	if !o.quiet {
		fmt.Fprintf(log, "chargpt: %s, %d characters (vocabulary %d), GPT %d×%d, %d heads, context %d, %d parameters; %s (%s, %s), batch %d×%d\n",
			text.Name, len(text.Tokens(false))+len(text.Tokens(true)), text.VocabSize(), o.layers, o.dim, o.heads, o.context,
			res.Params, dev, o.precision, level, o.accum, micro)
		fmt.Fprintf(log, "chargpt: unigram baseline %.4f nats per character\n", res.UnigramLoss)
		if o.device == "" && dev.Kind == backend.KindCPU && !cuda.Available() {
			why, _, _ := strings.Cut(cuda.Reason().Error(), ": tried")
			fmt.Fprintf(log, "chargpt: no GPU: %s; training on the CPU\n", why)
		}
	}
	save := func() error {
		if o.save == "" {
			return nil
		}
		curves, _ := json.Marshal([2][]point{res.TrainCurve, res.ValCurve})
		return amp.Save(o.save, tr, amp.SaveInfo{Extra: map[string]string{
			"vocab": vocab, "train_draws": strconv.FormatUint(trainB.Draws(), 10), "curves": string(curves)}})
	}
	var trainTime time.Duration
	var stepTimes, stepFLOPs []float64
	var tokens int64
	var window []float64
	stop := int64(o.steps)
	if o.stopAt > 0 {
		stop = int64(o.stopAt)
	}
	for tr.Steps() < stop {
		start := time.Now()
		var xs, ys []*tensor.Tensor
		for range o.accum {
			x, y := trainB.Next(micro, tensor.WithDevice(dev))
			xs, ys = append(xs, x), append(ys, y)
		}
		r, err := tr.Step(xs, ys)
		for i := range xs {
			xs[i].Release()
			ys[i].Release()
		}
		if err != nil {
			return res, err
		}
		el := time.Since(start)
		trainTime += el
		stepTimes = append(stepTimes, el.Seconds()*1e3)
		if prof != nil {
			// This step's records alone: the profiler is reset after each step and
			// after each evaluation.
			var f int64
			for _, row := range prof.Rows(false) {
				f += row.FLOPs
			}
			stepFLOPs = append(stepFLOPs, float64(f)/1e9)
			prof.Reset()
		}
		tokens += int64(o.batch * o.context)
		if r.Skipped {
			res.SkippedSteps++
		}
		res.TrainCurve = append(res.TrainCurve, point{r.Step, r.Loss})
		window = append(window, r.Loss)
		last := r.Step == stop
		if (o.evalEvery > 0 && r.Step%int64(o.evalEvery) == 0) || last {
			v := evaluate(tr, valB, o.evalBatches, micro, dev)
			if prof != nil {
				prof.Reset()
			}
			res.ValCurve = append(res.ValCurve, point{r.Step, v})
			res.ValLoss = v
			res.TrainLoss = mean(window)
			window = window[:0]
			if !o.quiet {
				fmt.Fprintf(log, "\nstep %d: train loss %.4f, validation loss %.4f\n", r.Step, res.TrainLoss, v)
			}
			if err := save(); err != nil {
				return res, err
			}
		}
		if !o.quiet {
			progress(log, r.Step, int64(o.steps), r.Loss, float64(tokens)/trainTime.Seconds(), sched.LR(), r.Scale)
		}
	}
	res.Steps = tr.Steps()
	res.FinalScale = tr.Scaler.ScaleValue()
	res.TrainSeconds = trainTime.Seconds()
	if res.TrainSeconds > 0 {
		res.TokensPerSecond = float64(tokens) / res.TrainSeconds
	}
	res.MedianStepMS = median(stepTimes)
	res.StepMS = stepTimes
	if len(stepFLOPs) > 0 {
		g := median(stepFLOPs)
		res.ProductGFLOP = &g
	}
	res.PeakMemoryBytes = be.MemoryStats().PeakAllocated
	if len(res.ValCurve) > 0 {
		res.ValLoss = res.ValCurve[len(res.ValCurve)-1].Loss
	}
	if o.sampleLen > 0 {
		s, err := sample(tr, text, o, dev)
		if err != nil {
			return res, err
		}
		res.Sample = s
	}
	if o.plot != "" {
		if err := writePlot(o.plot, &res, fmt.Sprintf("chargpt %s, %s, %s", text.Name, o.precision, dev)); err != nil {
			return res, err
		}
	}
	return res, nil
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	return s[len(s)/2]
}

func progress(w io.Writer, step, total int64, loss, tps, lr, scale float64) {
	const width = 30
	done := int(width * step / max(total, 1))
	bar := strings.Repeat("█", done) + strings.Repeat("·", width-done)
	fmt.Fprintf(w, "\rstep %s %5d/%d  loss %.4f  %7.0f tokens/s  lr %.2e  scale %g ", bar, step, total, loss, tps, lr, scale)
}

// evaluate returns the mean loss over the validation blocks (the same blocks at every
// call), in eval mode without gradients.
func evaluate(tr *amp.Trainer, val *data.Blocks, batches, batch int, dev tensor.Device) float64 {
	val.SetDraws(0)
	total := 0.0
	for range batches {
		x, y := val.Next(batch, tensor.WithDevice(dev))
		out := tr.Evaluate(x)
		c := tensor.NewContext(tensor.NoGradMode())
		total += lmLoss(c.Bind(out), c.Bind(y)).Item()
		c.Close()
		out.Release()
		x.Release()
		y.Release()
	}
	return total / float64(batches)
}

// sample generates o.sampleLen characters after the prompt, one forward pass per
// character over the last Context characters.
func sample(tr *amp.Trainer, text *data.Text, o options, dev tensor.Device) (string, error) {
	ids, err := text.Encode(o.prompt)
	if err != nil {
		return "", fmt.Errorf("-prompt: %w", err)
	}
	if len(ids) == 0 {
		return "", errors.New("-prompt is empty; give at least one character")
	}
	r := newRand(o.sampleSeed)
	start := len(ids)
	for range o.sampleLen {
		win := ids[max(0, len(ids)-o.context):]
		x := tensor.FromSlice(win, tensor.Shape{1, len(win)}, tensor.WithDevice(dev))
		out := tr.Evaluate(x)
		v := text.VocabSize()
		all := out.Float64s()
		logits := all[len(all)-v:]
		out.Release()
		x.Release()
		ids = append(ids, int64(pick(logits, o.temperature, o.topK, r)))
	}
	return o.prompt + text.Decode(ids[start:]), nil
}

// newRand is the sampler's generator.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// pick draws an index from softmax(logits/temperature) restricted to the topK largest
// (temperature 0: the largest).
func pick(logits []float64, temperature float64, topK int, r *rand.Rand) int {
	idx := make([]int, len(logits))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return logits[idx[a]] > logits[idx[b]] })
	if temperature == 0 {
		return idx[0]
	}
	if topK > 0 && topK < len(idx) {
		idx = idx[:topK]
	}
	top := logits[idx[0]]
	p := make([]float64, len(idx))
	sum := 0.0
	for i, j := range idx {
		p[i] = math.Exp((logits[j] - top) / temperature)
		sum += p[i]
	}
	u := r.Float64() * sum
	for i, j := range idx {
		if u -= p[i]; u < 0 {
			return j
		}
	}
	return idx[len(idx)-1]
}
