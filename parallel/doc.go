// Package parallel trains one model on several devices of one process: data
// parallelism (DataParallel, torch.nn.DataParallel) and model parallelism (Place,
// Pipeline, with GPipe micro-batching). Multi-process training is the dist package's.
// Every path runs on the logical CPU devices (tensor.CPUDevice(n)), so it is tested
// without a GPU.
//
//	parallel.Place(model, devs[0])                                          // the main device
//	dp, err := parallel.NewDataParallel(model, devs, parallel.Options{})
//	opt, err := optim.NewAdamW(dp.Params(), optim.AdamWConfig{LR: 1e-3})
//	tr, err := amp.NewTrainer(dp, opt, loss, devs[0], amp.Config{Level: amp.O1})
//	res, err := tr.Step(xs, ys)                                             // each batch split over devs
//
// # Replicas and gradients
//
// At every forward DataParallel copies the model's module tree (the module structs and
// their Params; everything else — options, hooks, closures, tensors the model holds
// without registering them — is shared) once per device. Each replica's parameters
// are leaves of their own: copies on its device, views of the model's parameters on
// the main device. A replica runs its forward and, later, its backward in a goroutine
// of its own, into its own leaves, so concurrent backward passes never add into one
// tensor. The replicas' gradients are then moved to the main device and summed in
// float32, in replica order, and the sum is handed to the autograd engine as the
// gradient of the model's parameters: it goes through their hooks and is accumulated
// like any other gradient (gradient accumulation works unchanged).
//
// The alternative — replica parameters made with To inside the step, so that To's
// backward carries gradients home — accumulates into the model's parameters from
// inside one serial backward pass, and cannot let the replicas' backward passes run
// concurrently: they would add into the same gradients at once.
//
// # The loss inside the replicas
//
// Forward gathers the replicas' outputs on the main device, where the loss and the
// start of backward run alone while the other devices wait, and where all the outputs
// take memory: the imbalance of torch's DataParallel. ForwardLoss computes the loss in
// each replica on its chunk and runs each replica's backward from its own loss; only
// one scalar per replica moves. The chunk losses are weighted by chunk size, so a mean
// loss gives the full-batch mean and gradient. Trainer drives it through amp.
//
// # State: autocast, grad mode, random numbers
//
// Each replica (and each pipeline stage) runs in a Context derived from its input's:
// the same grad mode, autocast policy and observer (an Observer must then be safe for
// concurrent use, or set Options.Serial), in the same memory scope, with a
// weight-cast cache of its own. Nothing is taken from a global, so two DataParallel
// models trained from two goroutines under two policies do not interfere — the failure
// of PyTorch's thread-local autocast (pytorch#50170). Random ops in a replica draw from
// a generator of its own, derived from the input's Context's generator, so dropout
// masks are reproducible whatever the goroutines' timing.
//
// # BatchNorm
//
// The main replica runs on the model's own buffers, so BatchNorm's running statistics
// record the main device's chunk; the other replicas update copies, dropped with the
// step — torch.nn.DataParallel's semantics. The statistics thus come from a share of
// the batch (1/len(devices) of it); there is no synchronised BatchNorm.
//
// # Memory
//
// The input of a forward must belong to a Context (the step's). The replicas' parameter
// copies, inputs and activations belong to it and are released when it closes; the
// replicas' gradients are released by backward. After a step each device holds what it
// held before.
//
// # Model parallelism
//
// Place puts a module on a device. A Pipeline runs stages placed on their devices one
// after the other, moving activations with To; gradients flow back across devices.
// With micro-batches it runs GPipe's schedule, one goroutine per stage, and reports
// the bubble, (S-1)/(M+S-1), with the idle fraction it measured per stage.
package parallel
