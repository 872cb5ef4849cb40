// Command ampbench measures what mixed precision buys on one model: time per step and
// memory for FP32 and each half precision, trained side by side in one process.
//
//	ampbench -model mlp                          # fp32 (O0), fp16 and bf16 (O1)
//	ampbench -model cnn -opt-level O1,O2 -json   # one JSON document on stdout
//	ampbench -model transformer -plot bench.svg  # time and memory as bar charts
//
// Every configuration trains its own copy of the model (same seeded initialisation,
// same synthetic batches) with SGD and cross-entropy through amp.Trainer. The
// configurations take turns step by step (A B C A B C …), so a machine that speeds up
// or slows down during the run affects them all alike. On the CPU each configuration
// runs on a logical device of its own, so the allocator statistics are its own.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gamp-ml/gamp/internal/cli"

	// The CUDA backend registers itself on import, so the GPU is used when present.
	_ "github.com/gamp-ml/gamp/cuda"
)

// options are the command-line flags; run validates them.
type options struct {
	model      string // mlp, cnn or transformer
	precision  string // comma-separated: fp32, fp16, bf16
	optLevel   string // comma-separated opt levels for the half precisions
	steps      int    // timed steps per configuration
	warmup     int    // untimed steps before them
	batch      int    // examples per optimizer step; 0: the model's default
	accum      int    // micro-batches per step (the batch is split into them)
	device     string // "" (best present), cpu or cuda:N
	checkpoint bool   // activation checkpointing over the model's layer chain
	seed       uint64
	jsonOut    bool
	plot       string // .png or .svg file to draw; "" for none
	plan       bool   // plan each configuration with amp.Plan instead of benchmarking
	cpuProfile string // pprof CPU profile of the whole run to this file; "" for none
	ops        int    // print each configuration's ops ranked by time, this many rows; 0: none
	opShapes   bool   // with ops: a row per op, pass and input shapes
	optimizer  string // sgd, adam or adamw (optimizers)
}

// defaultOptions are the flag defaults.
func defaultOptions() options {
	return options{
		model: "mlp", precision: "fp32,fp16,bf16", optLevel: "O1", optimizer: "sgd",
		steps: 20, warmup: 3, accum: 1, seed: 1,
	}
}

// usageError is a bad flag value: main exits with status 2 for it, as every gamp
// command does.
type usageError = cli.UsageError

var usagef = cli.Usagef

// parseArgs parses the command line. -h returns flag.ErrHelp after printing the usage
// to stderr.
func parseArgs(args []string, stderr io.Writer) (options, error) {
	o := defaultOptions()
	fs := flag.NewFlagSet("ampbench", flag.ContinueOnError)
	fs.StringVar(&o.model, "model", o.model, "mlp (784-1024-1024-10), cnn (Fashion-MNIST CNN), transformer (small encoder, random tokens) transformer-large (width 512, 4 blocks, 128 tokens) or transformer-base (width 768, 12 heads, 12 blocks, 512 tokens, batch 16: a GPU-sized model)")
	fs.StringVar(&o.precision, "precision", o.precision, "comma-separated precisions to compare: fp32 (always O0), fp16, bf16")
	fs.StringVar(&o.optLevel, "opt-level", o.optLevel, "opt level(s) for the half precisions, comma-separated: O1, O2, O3; O3+16+16, O3+sr and O3+rn keep bf16 weights with 16+16 split masters, stochastic rounding or no master")
	fs.StringVar(&o.optimizer, "optim", o.optimizer, "optimizer every configuration trains with: sgd (lr 0.01, momentum 0.9), adam (lr 0.001) or adamw (lr 0.001, weight decay 0.01); betas (0.9, 0.999), eps 1e-8")
	fs.IntVar(&o.steps, "steps", o.steps, "timed steps per configuration")
	fs.IntVar(&o.warmup, "warmup", o.warmup, "untimed warm-up steps per configuration")
	fs.IntVar(&o.batch, "batch", 0, "examples per optimizer step (default 256 for mlp, 128 for cnn, 32 for transformer)")
	fs.IntVar(&o.accum, "accum", o.accum, "micro-batches per step: the batch is split into this many (gradient accumulation)")
	fs.StringVar(&o.device, "device", "", "cpu or cuda:N (default: CUDA when present, else the CPU)")
	fs.BoolVar(&o.checkpoint, "checkpoint", false, "recompute activations in backward (activation checkpointing, √n segments of the layer chain)")
	fs.Uint64Var(&o.seed, "seed", o.seed, "seed of the initialisation and the synthetic data")
	fs.BoolVar(&o.jsonOut, "json", false, "print one JSON document instead of the table")
	fs.StringVar(&o.plot, "plot", "", "also draw time per step and memory to `FILE` (.png or .svg)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the run to `FILE` (go tool pprof reads it)")
	fs.IntVar(&o.ops, "ops", 0, "after the table, print each configuration's `N` most expensive ops over the timed steps, per step (package profiler attached to the trainer: its bookkeeping is then in the step times); with -json, the products' GFLOP and ms a step go into each result instead")
	fs.BoolVar(&o.opShapes, "op-shapes", false, "with -ops, a row per op, pass and input shapes (torch.profiler's group_by_input_shape; a backward row goes by its forward's input shapes), so that each layer has rows of its own")
	fs.BoolVar(&o.plan, "plan", false, "instead of benchmarking, plan each configuration for -batch within the device's free memory (on the CPU: GAMP_CPU_MEMORY_LIMIT): micro-batch, accumulation and checkpointing, with the candidates weighed")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ampbench [flags]\n\nCompares time per step and memory of FP32 and mixed precision on one model.\n\n")
		fs.PrintDefaults()
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.Usage()
			return o, err
		}
		return o, usagef("%v (ampbench -h lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return o, usagef("unexpected argument %q (ampbench takes flags only)", fs.Arg(0))
	}
	batchSet := false
	fs.Visit(func(f *flag.Flag) { batchSet = batchSet || f.Name == "batch" })
	if batchSet && o.batch <= 0 {
		return o, usagef("-batch must be ≥ 1, got %d", o.batch)
	}
	return o, nil
}

func main() {
	o, err := parseArgs(os.Args[1:], os.Stderr)
	if err == nil {
		_, err = cli.Profiled(o.cpuProfile, func() (struct{}, error) { return struct{}{}, run(o, os.Stdout, os.Stderr) })
	}
	os.Exit(cli.Report(os.Stderr, "ampbench", err))
}
