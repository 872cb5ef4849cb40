package parallel

import (
	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
)

// Trainer is an amp.Trainer that computes the loss inside the replicas of a
// DataParallel (ForwardLoss) instead of on the gathered outputs. Everything else is
// amp's: opt levels, loss scaling, accumulation, clipping, schedules, Evaluate (which
// gathers outputs), and amp.Save/amp.Load on t.Trainer.
//
// To compute the loss on the gathered outputs instead, drive the DataParallel with a
// plain amp.NewTrainer(dp, …): it is an nn.Module.
type Trainer struct {
	*amp.Trainer
	dp *DataParallel
}

// NewTrainer returns a Trainer for dp; opt must be built on dp.Params() after
// amp.Prepare(dp, cfg.Level, …). The half dtype defaults to that of dp's main device.
func NewTrainer(dp *DataParallel, opt optim.Optimizer, loss amp.LossFunc, cfg amp.Config) (*Trainer, error) {
	inner := func(out, target *tensor.Tensor) *tensor.Tensor {
		if cfg.Level == amp.O2 {
			// As amp.Trainer.Forward does with the model's output: at O2 the loss runs
			// on float32 outputs, there being no autocast to do it.
			out = out.Cast(tensor.Float32)
		}
		return loss(out, target)
	}
	replicaLoss := func(out, target *tensor.Tensor) *tensor.Tensor {
		if x := dp.takePending(); x != nil {
			return dp.ForwardLoss(x, target, inner)
		}
		return loss(out, target)
	}
	at, err := amp.NewTrainer(dp, opt, replicaLoss, dp.devices[0], cfg)
	if err != nil {
		return nil, err
	}
	return &Trainer{Trainer: at, dp: dp}, nil
}

// Step runs one optimizer step from len(xs) == Accum micro-batches, as amp.Trainer.Step,
// with each micro-batch's loss computed inside the replicas.
//
// amp.Trainer runs the model, then the loss on the model's output and the target.
// During Step the DataParallel's Forward only records its input (already in amp's
// autocast region and, at O2/O3, cast to half) and returns it; the trainer's loss
// function then runs ForwardLoss on that input and the target. So amp keeps doing
// everything else, and its step counter and saved state stay right.
func (t *Trainer) Step(xs, ys []*tensor.Tensor) (amp.Result, error) {
	t.dp.setDeferLoss(true)
	defer t.dp.setDeferLoss(false)
	return t.Trainer.Step(xs, ys)
}

func (dp *DataParallel) setDeferLoss(on bool) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	dp.deferLoss, dp.pending = on, nil
}

// takePending returns and forgets the input Forward recorded while the loss is
// deferred (nil when none).
func (dp *DataParallel) takePending() *tensor.Tensor {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	x := dp.pending
	dp.pending = nil
	return x
}
