// Command parallel trains one MLP on several devices of one process, twice: with
// DataParallel (the batch split over the devices, the loss on the gathered outputs or
// inside the replicas) and as a two-stage Pipeline (GPipe micro-batches). By default
// it uses logical CPU devices, so it runs anywhere; it prints the loss curve's end
// points, the time, each device's peak memory and the pipeline's bubble.
//
//	go run ./examples/parallel -devices cpu:1,cpu:2,cpu:3 -level O1 -loss-inside
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/autocast"
	"github.com/gamp-ml/gamp/data"
	"github.com/gamp-ml/gamp/memory"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/parallel"
	"github.com/gamp-ml/gamp/tensor"

	// The CUDA backend registers itself on import, so the GPU is used when present.
	_ "github.com/gamp-ml/gamp/cuda"
)

func main() {
	devFlag := flag.String("devices", "cpu:1,cpu:2", "comma-separated devices; the first is the main one")
	levelFlag := flag.String("level", "O1", "amp opt level (O0–O3)")
	epochs := flag.Int("epochs", 3, "epochs over the synthetic set")
	batch := flag.Int("batch", 128, "batch size")
	micro := flag.Int("micro", 4, "pipeline micro-batches")
	inside := flag.Bool("loss-inside", false, "compute the loss inside the replicas")
	flag.Parse()
	if err := run(*devFlag, *levelFlag, *epochs, *batch, *micro, *inside); err != nil {
		fmt.Fprintln(os.Stderr, "parallel:", err)
		os.Exit(1)
	}
}

func run(devFlag, levelFlag string, epochs, batch, micro int, inside bool) error {
	var devs []tensor.Device
	for _, s := range strings.Split(devFlag, ",") {
		d, err := tensor.ParseDevice(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		devs = append(devs, d)
	}
	level, err := amp.ParseOptLevel(levelFlag)
	if err != nil {
		return err
	}
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
