// Package profiler times every op of a training step, forward and backward, and
// reports where the time went — a table like torch.profiler's
// key_averages().table() and a Chrome trace for chrome://tracing or ui.perfetto.dev:
//
//	p := profiler.New()
//	ctx := p.Context()                  // a root Context whose ops p records
//	loss := model.Forward(ctx.Bind(x)); loss.Backward()
//	ctx.Close()
//	fmt.Print(p.Summary()); p.SaveChromeTrace("step.json")
//	p.Close()                           // frees the device events of GPU timings
//
// An amp.Trainer's steps are profiled by passing the Profiler as amp.Config.Observer
// (cmd/ampbench -ops does, printing each configuration's ops per step).
//
// A Profiler is a tensor.Observer: it flows with the Context like the autocast policy,
// so two models profiled by two Profilers in two goroutines never mix. Each record has
// the op, the pass, the dtypes and shapes it ran with, its device, its start and
// duration (with and without nested ops), the bytes it allocated and, for the product
// ops, the floating-point operations of its products (Record.FLOPs; Row.GFLOPS and
// Table's WithFLOPs set them against the time); see Profiler for how Begin and Forward
// calls are matched and what the figures mean. Rows add the records up by op and pass,
// and on request by dtype (ByDType) and by input shapes (ByShape, RowsGrouped: one row
// per layer, a backward under its forward's shapes).
//
// Times come from a Clock: New's default DeviceClock times GPU ops with device events
// (host time does not see asynchronous kernels) and the rest with Go's monotonic
// clock. It holds one event per stamp the profiler keeps: Reset and Close free them,
// and stamps the profiler drops are freed at once (StampReleaser).
package profiler
