package profiler

import (
	"time"

	"github.com/gamp-ml/gamp/tensor"
)

// Stamp is a point on a Clock's timeline, opaque to the profiler.
type Stamp int64

// Clock is the profiler's source of time. Forward ops are timed from a Mark in Begin
// to a Mark in Forward. The CPU clock reads the monotonic clock; a CUDA clock (a later
// backend) records a device event on dev's stream in Mark and reads the elapsed time
// between events in Resolve, which may then wait for the device. The profiler calls
// Mark while ops run and Resolve only when it reports (Records, Table, traces).
type Clock interface {
	// Mark returns a stamp for "now" on dev's timeline; it must not block.
	Mark(dev tensor.Device) Stamp
	// Resolve returns the time of s since the clock's origin.
	Resolve(s Stamp) time.Duration
}

// A StampReleaser is a Clock that holds resources per stamp (device events): the
// profiler calls Release for every stamp it drops unresolved — records removed by
// Reset, Begins that never got their Forward, marks taken while stopped — so a
// long-running profiler holds events only for the records it keeps.
type StampReleaser interface {
	Release(s Stamp)
}

// CPUClock reads Go's monotonic clock: a Stamp is the time since the clock was made.
type CPUClock struct{ origin time.Time }

// NewCPUClock returns a CPUClock whose origin is now.
func NewCPUClock() *CPUClock { return &CPUClock{origin: time.Now()} }

// Mark implements Clock.
func (c *CPUClock) Mark(tensor.Device) Stamp { return Stamp(time.Since(c.origin)) }

// Resolve implements Clock.
func (c *CPUClock) Resolve(s Stamp) time.Duration { return time.Duration(s) }
