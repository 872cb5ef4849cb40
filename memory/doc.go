// Package memory is one memory API for every device — PyTorch's torch.cuda memory
// functions (memory_allocated, max_memory_allocated, memory_reserved,
// reset_peak_memory_stats, empty_cache, memory_summary) for the CPU's logical devices
// and, through the same backend.Backend statistics, for GPUs — and the diagnostics
// built on it:
//
//	memory.ResetPeak(dev)
//	step(ctx)                                   // one training step in its Context
//	peak, _ := memory.MaxAllocated(dev)         // the step's peak, in bytes
//	table, _ := memory.Summary(dev)             // the torch.cuda.memory_summary table
//	memory.ShowUtilization(os.Stdout)           // load and memory per device, as GPUtil
//
// Hunting a leak: tensor.SetDebugTracking(true) records the user's source line that creates
// each tensor, and WriteLiveTensors lists what is still alive by that line. The
// HistoryDetector catches the `total = total + loss` bug (a kept tensor that drags
// every step's autograd graph along). FindExecutableBatchSize retries a step with half
// the batch while it runs out of memory, as Accelerate's find_executable_batch_size.
//
// Every function that takes a device opens it on first use and returns an error
// wrapping backend.ErrNoDevice when it is absent (no CUDA backend linked in, a CPU
// index out of range); nothing here panics on a missing device.
//
// Out-of-memory errors (*backend.OOMError, matching tensor.ErrOutOfMemory) report the
// bytes the allocator had cached but could not use for the request, the figure
// fragmentation questions need (pytorch#29554). The allocators already return their
// cache and retry once before failing, so that figure says what EmptyCache would give
// back, not that it would have made the request fit.
package memory
