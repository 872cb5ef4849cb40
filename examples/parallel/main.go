// Command parallel trains one MLP on several devices of one process, twice: with
// DataParallel (the batch split over the devices, the loss on the gathered outputs or
// inside the replicas) and as a two-stage Pipeline (GPipe micro-batches). By default
// it uses logical CPU devices, so it runs anywhere; it prints the loss curve's end
// points, the time, each device's peak memory and the pipeline's bubble.
//
//	go run ./examples/parallel -devices cpu:1,cpu:2,cpu:3 -level O1 -loss-inside
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/autocast"
	"github.com/gamp-ml/gamp/data"
	"github.com/gamp-ml/gamp/internal/cli"
	"github.com/gamp-ml/gamp/memory"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/parallel"
	"github.com/gamp-ml/gamp/tensor"

	// The CUDA backend registers itself on import, so the GPU is used when present.
	_ "github.com/gamp-ml/gamp/cuda"
)

// options are the command-line flags.
type options struct {
	devices []tensor.Device // the first is the main one
	level   amp.OptLevel
	epochs  int
	batch   int
	micro   int  // pipeline micro-batches
	inside  bool // the loss inside the replicas
}

// parseArgs parses and checks the command line: a bad value is a *cli.UsageError (exit
// status 2, as every gamp command); -h returns flag.ErrHelp after printing the usage.
func parseArgs(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("parallel", flag.ContinueOnError)
	devFlag := fs.String("devices", "cpu:1,cpu:2", "comma-separated devices; the first is the main one")
	levelFlag := fs.String("level", "O1", "amp opt level (O0–O3)")
	fs.IntVar(&o.epochs, "epochs", 3, "epochs over the synthetic set")
	fs.IntVar(&o.batch, "batch", 128, "batch size")
	fs.IntVar(&o.micro, "micro", 4, "pipeline micro-batches")
	fs.BoolVar(&o.inside, "loss-inside", false, "compute the loss inside the replicas")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return o, err
		}
		return o, cli.Usagef("%v (parallel -h lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return o, cli.Usagef("unexpected argument %q (parallel takes flags only)", fs.Arg(0))
	}
	for _, s := range strings.Split(*devFlag, ",") {
		d, err := tensor.OpenDevice(strings.TrimSpace(s))
		if err != nil {
			return o, cli.Usagef("-devices: %v", err)
		}
		o.devices = append(o.devices, d)
	}
	var err error
	if o.level, err = amp.ParseOptLevel(*levelFlag); err != nil {
		return o, cli.Usagef("-level: %v", err)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"epochs", o.epochs}, {"batch", o.batch}, {"micro", o.micro}} {
		if f.v < 1 {
			return o, cli.Usagef("-%s must be ≥ 1, got %d", f.name, f.v)
		}
	}
	return o, nil
}

func main() {
	o, err := parseArgs(os.Args[1:], os.Stderr)
	if err == nil {
		err = run(o)
	}
	os.Exit(cli.Report(os.Stderr, "parallel", err))
}

func run(o options) error {
	devs, level, epochs, batch, micro, inside := o.devices, o.level, o.epochs, o.batch, o.micro, o.inside
	cfg := amp.Config{Level: level, Low: autocast.Default(devs[0]).Low}
	train := data.Synthetic(4096, 10, tensor.Shape{64}, 1)
	loss := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }

	// Data parallelism.
	model := models.MLP(64, []int{256, 256}, 10, nn.Seeded(1))
	parallel.Place(model, devs[0])
	amp.Prepare(model, level, cfg.Low)
	dp, err := parallel.NewDataParallel(model, devs, parallel.Options{})
	if err != nil {
		return err
	}
	opt, err := optim.NewAdamW(dp.Params(), optim.AdamWConfig{LR: 1e-3})
	if err != nil {
		return err
	}
	var step func(xs, ys []*tensor.Tensor) (amp.Result, error)
	if inside {
		tr, err := parallel.NewTrainer(dp, opt, loss, cfg)
		if err != nil {
			return err
		}
		step = tr.Step
	} else {
		tr, err := amp.NewTrainer(dp, opt, loss, devs[0], cfg)
		if err != nil {
			return err
		}
		step = tr.Step
	}
	mode := "gathered outputs"
	if inside {
		mode = "loss inside the replicas"
	}
	fmt.Printf("DataParallel over %v, %s, %s\n", devs, level, mode)
	if err := fit(train, devs, devs[0], devs[0], epochs, batch, step); err != nil {
		return err
	}

	// Model parallelism: two stages, on the first two devices (or one, twice).
	a, b := devs[0], devs[len(devs)-1]
	init := nn.Seeded(1)
	s0 := nn.NewSequential(nn.NewLinear(64, 256, init), nn.NewReLU(), nn.NewLinear(256, 256, init), nn.NewReLU())
	s1 := nn.NewSequential(nn.NewLinear(256, 10, init))
	parallel.Place(s0, a)
	parallel.Place(s1, b)
	pipe, err := parallel.NewPipeline([]nn.Module{s0, s1}, []tensor.Device{a, b}, parallel.PipelineOptions{MicroBatches: micro})
	if err != nil {
		return err
	}
	amp.Prepare(pipe, level, cfg.Low)
	popt, err := optim.NewAdamW(pipe.Params(), optim.AdamWConfig{LR: 1e-3})
	if err != nil {
		return err
	}
	ptr, err := amp.NewTrainer(pipe, popt, loss, a, cfg)
	if err != nil {
		return err
	}
	fmt.Printf("Pipeline on %s → %s, %d micro-batches, %s\n", a, b, micro, level)
	if err := fit(train, []tensor.Device{a, b}, a, b, epochs, batch, ptr.Step); err != nil {
		return err
	}
	st := pipe.Stats()
	fmt.Printf("  bubble %.3f (theory), measured idle per stage %.3f\n", st.Bubble, st.Idle)
	return nil
}

// fit runs epochs over train with step, inputs on in and targets on out, and prints
// the first and last loss, the time and each device's peak memory.
func fit(train *data.Dataset, devs []tensor.Device, in, out tensor.Device, epochs, batch int, step func(xs, ys []*tensor.Tensor) (amp.Result, error)) error {
	for _, d := range devs {
		if err := memory.ResetPeak(d); err != nil {
			return err
		}
	}
	loader, err := data.NewLoader(train, data.LoaderOptions{BatchSize: batch, Shuffle: true, Seed: 1})
	if err != nil {
		return err
	}
	start := time.Now()
	var first, last amp.Result
	for e := range epochs {
		it := loader.Epoch(e)
		for it.Next() {
			x, y := it.Batch().Tensors(tensor.WithDevice(in))
			yo := y.To(out)
			res, err := step([]*tensor.Tensor{x}, []*tensor.Tensor{yo})
			x.Release()
			y.Release()
			yo.Release()
			if err != nil {
				return err
			}
			if res.Step == 1 {
				first = res
			}
			last = res
		}
	}
	fmt.Printf("  loss %.4f → %.4f in %d steps, %.2fs\n", first.Loss, last.Loss, last.Step, time.Since(start).Seconds())
	for _, d := range devs {
		peak, err := memory.MaxAllocated(d)
		if err != nil {
			return err
		}
		fmt.Printf("  peak memory on %s: %.2f MiB\n", d, float64(peak)/(1<<20))
	}
	return nil
}
