package parallel

import (
	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
)

// Trainer is an amp.Trainer that computes the loss inside the replicas of a
// DataParallel (ForwardLoss) instead of on the gathered outputs: it sets amp's
// Trainer.ForwardLoss seam. Everything else is amp's: opt levels, loss scaling,
// accumulation, clipping, schedules, Evaluate (which gathers outputs), and
// amp.Save/amp.Load on t.Trainer.
//
// To compute the loss on the gathered outputs instead, drive the DataParallel with a
// plain amp.NewTrainer(dp, …): it is an nn.Module.
type Trainer struct {
	*amp.Trainer
}

// NewTrainer returns a Trainer for dp; opt must be built on dp.Params() after
// amp.Prepare(dp, cfg.Level, …). The half dtype defaults to that of dp's main device.
func NewTrainer(dp *DataParallel, opt optim.Optimizer, loss nn.LossFunc, cfg amp.Config) (*Trainer, error) {
	at, err := amp.NewTrainer(dp, opt, loss, dp.devices[0], cfg)
	if err != nil {
		return nil, err
	}
	replicaLoss := func(out, target *tensor.Tensor) *tensor.Tensor {
		if cfg.Level == amp.O2 {
			// As amp.Trainer.Forward does with the model's output: at O2 the loss runs
			// on float32 outputs, there being no autocast to do it.
			out = out.Cast(tensor.Float32)
		}
		return loss(out, target)
	}
	at.ForwardLoss = func(x, target *tensor.Tensor) *tensor.Tensor {
		return dp.ForwardLoss(x, target, replicaLoss)
	}
	return &Trainer{Trainer: at}, nil
}
