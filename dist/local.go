package dist

import (
	"sync/atomic"

	"github.com/gamp-ml/gamp/tensor"
)

// Local is the process group of a world of one process: every collective leaves its
// tensor as it is (an average over one process is the value itself). It needs no
// library, so a program written for several processes runs unchanged as one.
type Local struct{ closed atomic.Bool }

// NewLocal returns a group of one process.
func NewLocal() *Local { return &Local{} }

// Rank implements ProcessGroup.
func (l *Local) Rank() int { return 0 }

// Size implements ProcessGroup.
func (l *Local) Size() int { return 1 }

// Backend implements ProcessGroup.
func (l *Local) Backend() string { return "local" }

// AllReduce implements ProcessGroup.
func (l *Local) AllReduce(t *tensor.Tensor, op ReduceOp) error {
	if l.closed.Load() {
		return ErrClosed
	}
	return checkReduce(t, op)
}

// AllReduceAsync implements ProcessGroup.
func (l *Local) AllReduceAsync(t *tensor.Tensor, op ReduceOp) Handle {
	return doneHandle{l.AllReduce(t, op)}
}

// Broadcast implements ProcessGroup.
func (l *Local) Broadcast(t *tensor.Tensor, root int) error {
	if l.closed.Load() {
		return ErrClosed
	}
	return checkRoot(l, root)
}

// Barrier implements ProcessGroup.
func (l *Local) Barrier() error {
	if l.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Close implements ProcessGroup.
func (l *Local) Close() error {
	l.closed.Store(true)
	forget(l)
	return nil
}
