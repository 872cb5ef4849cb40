package profiler

import (
	"sync"
	"time"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/cuda"
	"github.com/gamp-ml/gamp/tensor"
)

// DeviceClock times ops on CUDA devices with device events (like torch.cuda.Event
// with enable_timing): Mark records an event on the device's compute stream without
// waiting, and Resolve reads the device time between the device's first event and the
// stamp's, waiting for the device if needed. A CUDA op's duration is then the time it
// ran on the GPU, not the time it took to queue. On other devices it reads the host's
// monotonic clock. New picks it when a CUDA device is present.
type DeviceClock struct {
	cpu *CPUClock

	mu     sync.Mutex
	events []*cuda.Event         // stamp −(i+1) is events[i]
	devs   []int                 // the CUDA device of events[i]
	origin map[int]*cuda.Event   // the first event on each device
	host   map[int]time.Duration // host time of each device's first event
}

// NewDeviceClock returns a DeviceClock whose origin is now.
func NewDeviceClock() *DeviceClock {
	return &DeviceClock{cpu: NewCPUClock(), origin: map[int]*cuda.Event{}, host: map[int]time.Duration{}}
}

// Mark implements Clock.
func (c *DeviceClock) Mark(dev tensor.Device) Stamp {
	if dev.Kind != backend.KindCUDA {
		return c.cpu.Mark(dev)
	}
	b, err := cuda.Open(dev.Index)
	if err != nil {
		return c.cpu.Mark(dev)
	}
	ev, err := b.NewEvent(true)
	if err != nil || ev.Record(nil) != nil {
		return c.cpu.Mark(dev)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.origin[dev.Index]; !ok {
		c.origin[dev.Index] = ev
		c.host[dev.Index] = time.Duration(c.cpu.Mark(dev))
	}
	c.events = append(c.events, ev)
	c.devs = append(c.devs, dev.Index)
	return Stamp(-len(c.events))
}

// Resolve implements Clock. Device stamps are placed on the host timeline at the host
// time of the device's first event, so CPU and GPU records share one axis.
func (c *DeviceClock) Resolve(s Stamp) time.Duration {
	if s >= 0 {
		return c.cpu.Resolve(s)
	}
	c.mu.Lock()
	i := int(-s) - 1
	ev, d := c.events[i], c.devs[i]
	org, base := c.origin[d], c.host[d]
	c.mu.Unlock()
	el, err := cuda.Elapsed(org, ev)
	if err != nil {
		return base
	}
	return base + el
}

// Close destroys the clock's events.
func (c *DeviceClock) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.events {
		_ = e.Close()
	}
	c.events, c.devs = nil, nil
	c.origin = map[int]*cuda.Event{}
}
