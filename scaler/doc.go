// Package scaler holds GradScaler, the dynamic loss scaler of mixed-precision training:
// it multiplies the loss so small float16 gradients do not flush to zero, unscales the
// FP32 master gradients before the optimizer uses them, skips the step when any of
// them is Inf or NaN, and adapts the scale — PyTorch's torch.amp.GradScaler, with
// DeepSpeed/Megatron hysteresis, minimum and maximum scales and an alarm for runs that
// keep skipping.
//
// The happy path (each iteration):
//
//	sc, err := scaler.New(scaler.Config{}) // PyTorch's defaults: dynamic, 2^16, ×2, ×0.5, 2000
//	sc.Scale(loss).Backward()
//	sc.Unscale(opt); optim.ClipGradNorm(opt.MasterGrads(), 1, 2) // optional clipping
//	stepped := sc.Step(opt)                                      // false: skipped, nothing changed
//	err = sc.Update(); opt.ZeroGrad()
//
// Several losses: scale each and run one backward each. Several optimizers: Step each
// (each one is skipped only if its own gradients overflowed, as in PyTorch), then one
// Update. Gradient accumulation: keep the scale constant through the window (Scale
// every micro-batch loss, divided by the number of micro-batches) and call Unscale,
// Step and Update once, at the end.
//
// Each optimizer goes through READY → UNSCALED → STEPPED between two Updates; calling
// Unscale twice, Unscale after Step, or Step twice panics with a *MisuseError that says
// what to do.
//
// The zero Config is PyTorch's defaults; Config{Disabled: true} turns the scaler off,
// so Scale returns the loss itself, Unscale does nothing and Step always steps.
// With bfloat16 (same exponent range as float32) no scaling is needed: Needed(low) is
// true only for float16, and NewFor(low, cfg) disables the scaler when it is false. To
// scale bfloat16 training anyway, call New(cfg).
//
// The scale is a host value (reading it never waits for the device), held as a
// float32 as in PyTorch; unscaling multiplies by float32(1/float64(scale)).
package scaler
