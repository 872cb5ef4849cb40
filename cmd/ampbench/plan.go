package main

import (
	"fmt"
	"io"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/checkpoint"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// runPlan plans every configuration for the batch with amp.Plan, with and without
// checkpointing, and prints each plan's report.
func runPlan(p plan, stdout io.Writer) error {
	for i, v := range p.variants {
		dev := p.dev
		if dev.Kind == backend.KindCPU {
			dev = tensor.CPUDevice(1 + i)
		}
		low := v.low
		if low == 0 {
			low = tensor.BFloat16 // unused at O0
		}
		build := func(segments int) (*amp.Trainer, error) {
			model := buildModel(p.model, p.seed)
			nn.To(model, dev)
			if segments > 0 {
				var err error
				if model, err = withCheckpointing(model); err != nil {
					return nil, err
				}
			}
			amp.Prepare(model, v.level, low)
			opt, err := optimizers[p.optimizer].make(model.Params(), v.masters, p.seed)
			if err != nil {
				return nil, err
			}
			loss := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }
			return amp.NewTrainer(model, opt, loss, dev, amp.Config{Level: v.level, Low: low, Divergence: amp.DivergenceConfig{Off: true}})
		}
		sample := makeBatches(p.model, 1, max(2, p.batch/4), p.seed)[0]
		x, y := sample.upload(dev)
		res, err := amp.Plan(x, y, amp.PlanConfig{Build: build, Batch: p.batch, Segments: []int{checkpointSegments(p.model, p.seed)}})
		x.Release()
		y.Release()
		fmt.Fprintf(stdout, "== %s (batch %d) ==\n", v, p.batch)
		if res != nil {
			res.Report(stdout)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
		b := res.Best
		fmt.Fprintf(stdout, "%s: -batch %d -accum %d", v, p.batch, b.Accum)
		if b.Segments > 0 {
			fmt.Fprint(stdout, " -checkpoint")
		}
		fmt.Fprintf(stdout, " (predicted peak %.2f MiB)\n\n", float64(b.PredictedPeak)/(1<<20))
	}
	return nil
}

// checkpointSegments is the number of segments -checkpoint gives the model.
func checkpointSegments(kind string, seed uint64) int {
	m := buildModel(kind, seed)
	defer releaseModel(m)
	c, err := withCheckpointing(m)
	if err != nil {
		return 0
	}
	switch c := c.(type) {
	case *checkpoint.SequentialModule:
		return c.Segments
	case *checkpointedTransformer:
		return c.segments
	}
	return 0
}
