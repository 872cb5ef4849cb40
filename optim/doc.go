// Package optim holds gamp's optimizers — SGD (momentum, Nesterov, weight decay), Adam
// and AdamW — with FP32 state and FP32 master weights for half-precision parameters,
// gradient-norm clipping and learning-rate schedules that hold on skipped steps.
//
// The happy path, with a loss scaler:
//
//	opt, err := optim.NewAdamW(model.Params(), optim.DefaultAdamW())
//	sched, err := optim.NewScheduler(opt, optim.LinearWarmup{Steps: 100, Then: optim.CosineAnnealing{TMax: 10_000}})
//	sc.Scale(loss).Backward(); sc.Unscale(opt)
//	optim.ClipGradNorm(opt.MasterGrads(), 1.0, 2)
//	sched.Step(sc.Step(opt)); err = sc.Update(); opt.ZeroGrad()
//
// The algorithms are PyTorch's, step for step (torch.optim.SGD, Adam, AdamW with their
// default single-tensor implementations), so a run can be compared with PyTorch.
//
// # Master weights
//
// For a float16 or bfloat16 parameter the optimizer keeps a float32 master copy, made
// when the optimizer is built. MasterGrads converts the half gradient into a float32
// master gradient (where the scaler unscales and checks it and clipping measures it);
// Step updates the master in float32 and writes it back, rounded to nearest even, into
// the half parameter. Updates far smaller than a half ULP therefore accumulate in the
// master instead of being rounded away. Build the optimizer after casting or moving the
// model: a parameter tensor replaced afterwards is a programming error (Step panics).
// Float32 and float64 parameters are updated in place, with state in their own dtype.
//
// # Memory
//
// State tensors (moments, masters, master gradients) live outside any tensor.Context and
// are released when replaced, by ZeroGrad (master gradients) and by Release. Every
// temporary of Step lives in a no-grad Context closed before Step returns.
package optim
