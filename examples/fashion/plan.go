package main

import (
	"fmt"
	"io"
	"math"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/checkpoint"
	"github.com/gamp-ml/gamp/data"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
)

// checkpointed wraps the model's layer chain in activation checkpointing of segments
// segments (0: the model as it is).
func checkpointed(m nn.Module, segments int) (nn.Module, error) {
	if segments == 0 {
		return m, nil
	}
	seq, ok := m.(*nn.Sequential)
	if !ok {
		return nil, fmt.Errorf("-plan: checkpointing needs a layer chain, the model is %T", m)
	}
	return checkpoint.NewSequentialModule(seq, segments), nil
}

// planRun measures a few steps with amp.Plan and returns the accumulation steps and
// checkpoint segments that fit the device's free memory, and the predicted peak of
// the device's allocated memory.
func planRun(o options, level amp.OptLevel, low tensor.DType, dev tensor.Device, train *data.Dataset, log io.Writer) (accum, segments int, peak int64, err error) {
	build := func(segments int) (*amp.Trainer, error) {
		model, _, err := buildModel(o.model, o.channels, o.seed)
		if err != nil {
			return nil, err
		}
		if model, err = checkpointed(model, segments); err != nil {
			return nil, err
		}
		nn.To(model, dev)
		amp.Prepare(model, level, low)
		masters, _ := optim.ParseMasters(o.masters)
		opt, err := optim.NewAdamW(model.Params(), optim.AdamWConfig{LR: o.lr, WeightDecay: 1e-4, Masters: masters, RoundingSeed: o.seed})
		if err != nil {
			return nil, err
		}
		loss := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }
		return amp.NewTrainer(model, opt, loss, dev, amp.Config{Level: level, Low: low})
	}
	sample, shape, err := buildModel(o.model, o.channels, o.seed)
	if err != nil {
		return 0, 0, 0, err
	}
	var segs []int
	if seq, ok := sample.(*nn.Sequential); ok && o.model == "cnn" {
		// √n segments, as ampbench -checkpoint: the classic memory/recompute balance.
		segs = []int{max(2, int(math.Round(math.Sqrt(float64(seq.Len())))))}
	}
	for _, p := range nn.State(sample) {
		p.T.Release()
	}
	// A sample of a quarter batch: amp.Plan measures steps of a quarter and an eighth.
	loader, err := data.NewLoader(train, data.LoaderOptions{BatchSize: max(2, o.batch/4), DropLast: true, Shape: shape, Device: dev})
	if err != nil {
		return 0, 0, 0, err
	}
	it := loader.Epoch(0)
	if !it.Next() {
		it.Close()
		return 0, 0, 0, fmt.Errorf("-plan: the training set has no batch of %d", o.batch/4)
	}
	x, y := it.Batch().Tensors()
	it.Close()
	defer x.Release()
	defer y.Release()
	base := backend.MustGet(dev).MemoryStats().Allocated
	res, err := amp.Plan(x, y, amp.PlanConfig{Build: build, Batch: o.batch, Segments: segs})
	if res != nil && !o.quiet {
		res.Report(log)
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("-plan: %w", err)
	}
	b := res.Best
	if !o.quiet {
		fmt.Fprintf(log, "plan: micro-batch %d × %d accumulated, %d checkpoint segments, predicted peak %.2f MiB\n",
			b.Micro, b.Accum, b.Segments, float64(base+b.PredictedPeak)/(1<<20))
	}
	return b.Accum, b.Segments, base + b.PredictedPeak, nil
}
