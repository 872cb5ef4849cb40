package profiler

import (
	"sync"
	"time"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/tensor"
)

// DeviceClock times ops on devices whose backend runs them asynchronously (CUDA) with
// device timing events (like torch.cuda.Event with enable_timing): Mark records an
// event on the device's compute stream without waiting, and Resolve reads the device
// time between the device's first event and the stamp's, waiting for the device if
// needed. A GPU op's duration is then the time it ran on the GPU, not the time it took
// to queue. On other devices (the CPU) it reads the host's monotonic clock. New uses it
// by default; it finds the device's events through backend.EventTimer, so the profiler
// links no device backend itself.
type DeviceClock struct {
	cpu *CPUClock

	mu     sync.Mutex
	events []backend.TimingEvent                 // stamp −(i+1) is events[i]
	devs   []tensor.Device                       // the device of events[i]
	origin map[tensor.Device]backend.TimingEvent // the first event on each device
	host   map[tensor.Device]time.Duration       // host time of each device's first event
}

// NewDeviceClock returns a DeviceClock whose origin is now.
func NewDeviceClock() *DeviceClock {
	return &DeviceClock{cpu: NewCPUClock(), origin: map[tensor.Device]backend.TimingEvent{}, host: map[tensor.Device]time.Duration{}}
}

// Mark implements Clock.
func (c *DeviceClock) Mark(dev tensor.Device) Stamp {
	if dev.Kind == backend.KindCPU {
		return c.cpu.Mark(dev)
	}
	b, err := backend.Get(dev)
	if err != nil {
		return c.cpu.Mark(dev)
	}
	t, ok := b.(backend.EventTimer)
	if !ok {
		return c.cpu.Mark(dev)
	}
	ev, err := t.TimingEvent()
	if err != nil {
		return c.cpu.Mark(dev)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.origin[dev]; !ok {
		c.origin[dev] = ev
		c.host[dev] = time.Duration(c.cpu.Mark(dev))
	}
	c.events = append(c.events, ev)
	c.devs = append(c.devs, dev)
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
	el, err := ev.Since(org)
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
	c.origin = map[tensor.Device]backend.TimingEvent{}
}
