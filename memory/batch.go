package memory

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/tensor"
)

// FindExecutableBatchSize finds a batch size that fits in memory, as Accelerate's
// find_executable_batch_size: it calls fn(start), and whenever fn fails with an error
// wrapping tensor.ErrOutOfMemory — returned, or panicked by an op (recovered with
// tensor.CatchOOM) — it runs the GC, empties the allocator cache of the device that ran
// out (every opened device when the error does not say which) and tries again with
// half the batch, down to 1. It returns the batch size that succeeded; when even 1
// does not fit, the last out-of-memory error. Other errors are returned as they are
// and other panics propagate.
//
// fn should do one whole step (forward, backward, optimizer) in its own Context, so a
// failed attempt releases everything it allocated when the Context closes, and leave
// no gradient behind when it fails, so the retry does not add to it. amp.Trainer.Step
// does both (a failed step is undone), so it can be called from fn as it is:
//
//	bs, err := memory.FindExecutableBatchSize(1024, func(batch int) error {
//		ctx := tensor.NewContext()
//		defer ctx.Close()
//		return step(ctx, batch)
//	})
func FindExecutableBatchSize(start int, fn func(batch int) error) (int, error) {
	if start < 1 {
		return 0, fmt.Errorf("memory.FindExecutableBatchSize: start batch size %d, want at least 1", start)
	}
	var last error
	for batch := start; batch >= 1; batch /= 2 {
		var err error
		if oom := tensor.CatchOOM(func() { err = fn(batch) }); oom != nil {
			err = oom
		}
		if err == nil {
			return batch, nil
		}
		if !errors.Is(err, tensor.ErrOutOfMemory) {
			return 0, err
		}
		last = err
		freeAfterOOM(err)
	}
	return 0, fmt.Errorf("memory.FindExecutableBatchSize: no batch size from %d down to 1 fits: %w", start, last)
}

// freeAfterOOM lets the GC run the cleanups of unreachable untracked tensors and
// returns the cached blocks of the device that ran out.
func freeAfterOOM(err error) {
	runtime.GC()
	var oe *backend.OOMError
	if errors.As(err, &oe) {
		if b, gerr := backend.Get(oe.Device); gerr == nil {
			b.EmptyCache()
			return
		}
	}
	for _, b := range backend.Opened() {
		b.EmptyCache()
	}
}
