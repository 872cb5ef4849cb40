// Package checkpoint trades compute for memory, as torch.utils.checkpoint does: a
// checkpointed function keeps only its inputs and its output through the forward
// pass, and runs again in the backward pass to rebuild the intermediates its gradients
// need. The cost is one more forward of the checkpointed part.
//
//	ctx := tensor.NewContext()
//	defer ctx.Close()
//	h := checkpoint.Checkpoint(func(xs []*tensor.Tensor) *tensor.Tensor { return block.Forward(xs[0]) }, ctx.Bind(x))
//	out := checkpoint.Sequential(layers, 0, h) // √n segments, as checkpoint_sequential
//	out.Square().Mean().Backward()             // each segment is recomputed once, then released
//
// The recomputation replays the forward's state: the autocast policy (whatever the
// Context backward is called from) and the random generator, so dropout masks repeat
// and gradients are bit-identical to those of the same step without checkpointing, in
// FP32 and under autocast alike. The caller's generator is left where the caller left
// it. A recomputation that does not reproduce the forward's output shape, dtype and
// device panics with a *RecomputeError. Checkpoints nest, and parameters used inside a
// checkpoint get their gradients even when no input requires grad.
//
// BatchNorm's running statistics are updated by the forward and again by the
// recomputation in PyTorch (pytorch#96136); Checkpoint does the same unless the
// buffers are listed in Options.Buffers, and Sequential lists its modules' buffers,
// so its statistics are those of a run without checkpointing.
//
// Memory: a 16-block MLP (Linear 1024→1024 + ReLU, batch 256) on the CPU backend peaks
// at 19 MiB of activations with √n segments against 39 MiB without (14 against 34
// MiB when backward creates the gradients rather than adding into them), for about a
// quarter more step time (BenchmarkCheckpointMLP16).
//
// Checkpoint is built on tensor.Custom, the engine's user-defined autograd op.
package checkpoint
