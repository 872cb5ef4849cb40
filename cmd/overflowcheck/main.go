// Command overflowcheck trains a model in float16 (amp O1, dynamic loss scale) on
// synthetic data with the overflow harness watching every op, and prints which modules
// and ops come close to float16's limits — the largest |x|, Inf and NaN counts, the
// fractions that overflow (> 65504) or flush to zero (< 2^-24) — riskiest first, and the
// first op that produced an Inf or NaN. -inject-inf and -inject-nan put a fault into
// the first parameter's gradient at a step (steps count from 0) to show what a skipped
// step looks like:
//
//	overflowcheck -model cnn -steps 20 -inject-inf 5
//	overflowcheck -model transformer -steps 10 -json
//
// Exit status 2 means bad flags, 1 a failed run.
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

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/data"
	"github.com/gamp-ml/gamp/internal/cli"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/overflow"
	"github.com/gamp-ml/gamp/scaler"
	"github.com/gamp-ml/gamp/tensor"

	// The CUDA backend registers itself on import, so the GPU is used when present.
	_ "github.com/gamp-ml/gamp/cuda"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type options struct {
	model                string
	steps, batch, top    int
	injectInf, injectNaN int
	seed                 uint64
	lr                   float64
	device               string
	jsonOut              bool
}

// usageError is a bad command line (exit status 2, as in every gamp command).
type usageError = cli.UsageError

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("overflowcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.model, "model", "mlp", "mlp (784-1024-1024-10), cnn (the Fashion-MNIST CNN) or transformer (the default encoder)")
	fs.IntVar(&o.steps, "steps", 20, "optimizer steps")
	fs.IntVar(&o.injectInf, "inject-inf", -1, "put +Inf into the first parameter's gradient at this step (from 0; -1: never)")
	fs.IntVar(&o.injectNaN, "inject-nan", -1, "put NaN into the first parameter's gradient at this step (from 0; -1: never)")
	fs.IntVar(&o.batch, "batch", 32, "examples per step")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed (initialisation, data)")
	fs.Float64Var(&o.lr, "lr", 1e-3, "AdamW learning rate")
	fs.StringVar(&o.device, "device", "", "cpu, cpu:N or cuda:N (default: a GPU when present, else the CPU)")
	fs.IntVar(&o.top, "top", 30, "rows of the table to print (0: all; -json prints all)")
	fs.BoolVar(&o.jsonOut, "json", false, "print the report as JSON instead of a table")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: overflowcheck [flags]\n\n"+
			"Trains a model in float16 (amp O1, dynamic loss scale) on synthetic data with the\n"+
			"overflow harness watching every op, and prints which modules and ops come close to\n"+
			"float16's limits, riskiest first, and the first op that produced an Inf or NaN.\n"+
			"Exit status 2 means bad flags, 1 a failed run.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	bad := func(format string, a ...any) (options, error) {
		return o, cli.Usagef(format, a...)
	}
	switch {
	case fs.NArg() > 0:
		return bad("unexpected arguments %q", fs.Args())
	case o.model != "mlp" && o.model != "cnn" && o.model != "transformer":
		return bad("unknown -model %q (want mlp, cnn or transformer)", o.model)
	case o.steps < 1:
		return bad("-steps must be ≥ 1, got %d", o.steps)
	case o.batch < 1:
		return bad("-batch must be ≥ 1, got %d", o.batch)
	case !(o.lr > 0) || math.IsInf(o.lr, 0):
		return bad("-lr must be a positive number, got %g", o.lr)
	case o.top < 0:
		return bad("-top must be ≥ 0, got %d", o.top)
	}
	for _, f := range []struct {
		name string
		step int
	}{{"-inject-inf", o.injectInf}, {"-inject-nan", o.injectNaN}} {
		if f.step < -1 || f.step >= o.steps {
			return bad("%s %d is not a step of the run (0 … %d, or -1 for none)", f.name, f.step, o.steps-1)
		}
	}
	if o.injectInf >= 0 && o.injectInf == o.injectNaN {
		return bad("-inject-inf and -inject-nan name the same step %d; pick two steps", o.injectInf)
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(stderr, "overflowcheck:", err)
		} // the flag package has printed its own message and the usage
		return 2
	}
	var rep overflow.Report
	// Running out of memory, building the model included, is a message, not a panic.
	if oom := tensor.CatchOOM(func() { rep, err = check(o, stderr) }); oom != nil {
		err = fmt.Errorf("%w\nuse a smaller -batch or -model (or raise GAMP_CPU_MEMORY_LIMIT)", oom)
	}
	if err != nil {
		fmt.Fprintln(stderr, "overflowcheck:", err)
		var ue *usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	if o.jsonOut {
		b, err := json.Marshal(rep)
		if err != nil {
			fmt.Fprintln(stderr, "overflowcheck:", err)
			return 1
		}
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	if err := rep.TableTop(stdout, o.top); err != nil {
		fmt.Fprintln(stderr, "overflowcheck:", err)
		return 1
	}
	return 0
}

// batches yields the inputs and labels of step i.
type batches func(i int) (x, y *tensor.Tensor)

// check trains the model with the Watcher attached and returns its report.
func check(o options, log io.Writer) (overflow.Report, error) {
	dev, err := cli.OpenDevice(o.device)
	if err != nil {
		return overflow.Report{}, err
	}
	var model nn.Module
	var next batches
	switch o.model {
	case "mlp":
		model = models.MLP(784, []int{1024, 1024}, 10, nn.Seeded(o.seed))
		next = synthetic(o, tensor.Shape{784}, dev)
	case "cnn":
		model = models.FashionCNN(models.CNNConfig{}, nn.Seeded(o.seed))
		next = synthetic(o, tensor.Shape{1, 28, 28}, dev)
	case "transformer":
		tm := models.NewTransformer(models.TransformerConfig{}, nn.Seeded(o.seed))
		model = tm
		next = tokens(o, tm.Config(), dev)
	}
	nn.To(model, dev)
	// O1 keeps the parameters in float32, so Prepare changes nothing; it is called so
	// the Watcher's gradient hooks land on the tensors training uses.
	amp.Prepare(model, amp.O1, tensor.Float16)
	w := overflow.Watch(model)
	defer w.Close()
	first := model.Params()[0]
	if o.injectInf >= 0 {
		w.InjectGrad(first, []int{o.injectInf}, math.Inf(1))
	}
	if o.injectNaN >= 0 {
		w.InjectGrad(first, []int{o.injectNaN}, math.NaN())
	}
	opt, err := optim.NewAdamW(model.Params(), optim.AdamWConfig{LR: o.lr})
	if err != nil {
		return overflow.Report{}, err
	}
	loss := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }
	// The divergence check is off: this command exists to look at runs that overflow,
	// and its report says more about one that diverges than stopping would.
	tr, err := amp.NewTrainer(w.Model(), opt, loss, dev, amp.Config{Level: amp.O1, Low: tensor.Float16, Scaler: scaler.DefaultConfig(),
		Divergence: amp.DivergenceConfig{Off: true}})
	if err != nil {
		return overflow.Report{}, err
	}
	tr.Gen.Seed(o.seed)
	if !o.jsonOut {
		fmt.Fprintf(log, "overflowcheck: %s on %s, float16 O1, %d steps of %d examples\n", o.model, dev, o.steps, o.batch)
	}
	for i := range o.steps {
		x, y := next(i)
		r, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
		x.Release()
		y.Release()
		if err != nil {
			return overflow.Report{}, fmt.Errorf("step %d: %w", i, err)
		}
		w.Record(r)
	}
	return w.Report(), nil
}

// synthetic returns batches of data.Synthetic Gaussian blobs (10 classes), cycling
// through a set of at most 64 batches.
func synthetic(o options, shape tensor.Shape, dev tensor.Device) batches {
	nb := min(o.steps, 64)
	ds := data.Synthetic(nb*o.batch, 10, shape, o.seed)
	return func(i int) (x, y *tensor.Tensor) {
		i %= nb
		xs := make([]float32, 0, o.batch*ds.Features())
		ys := make([]int64, o.batch)
		for j := range o.batch {
			v, label := ds.Example(i*o.batch + j)
			xs = append(xs, v...)
			ys[j] = label
		}
		full := append(tensor.Shape{o.batch}, shape...)
		return tensor.FromSlice(xs, full, tensor.WithDevice(dev)), tensor.FromSlice(ys, nil, tensor.WithDevice(dev))
	}
}

// tokens returns batches of random token sequences whose label is the bucket (id·C/V)
// most of their tokens fall in; each sequence leans towards a random class, so the
// label is learnable from the bag of tokens.
func tokens(o options, cfg models.TransformerConfig, dev tensor.Device) batches {
	return func(i int) (x, y *tensor.Tensor) {
		rng := rand.New(rand.NewPCG(o.seed, uint64(i)))
		ids := make([]int64, o.batch*cfg.SeqLen)
		labels := make([]int64, o.batch)
		width := max(cfg.Vocab/cfg.Classes, 1)
		for b := range o.batch {
			lean := rng.IntN(cfg.Classes)
			counts := make([]int, cfg.Classes)
			for t := range cfg.SeqLen {
				id := rng.IntN(cfg.Vocab)
				if rng.IntN(2) == 0 {
					id = min(lean*width+rng.IntN(width), cfg.Vocab-1)
				}
				ids[b*cfg.SeqLen+t] = int64(id)
				counts[min(id*cfg.Classes/cfg.Vocab, cfg.Classes-1)]++
			}
			for c := range counts {
				if counts[c] > counts[labels[b]] {
					labels[b] = int64(c)
				}
			}
		}
		return tensor.FromSlice(ids, tensor.Shape{o.batch, cfg.SeqLen}, tensor.WithDevice(dev)),
			tensor.FromSlice(labels, nil, tensor.WithDevice(dev))
	}
}
