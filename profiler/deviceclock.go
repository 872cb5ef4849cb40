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
	live   int                                   // events not yet released
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
	c.live++
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
	if ev == nil { // released
		return base
	}
	el, err := ev.Since(org)
	if err != nil {
		return base
	}
	return base + el
}

// Release destroys the event behind s, which the caller will not resolve again (the
// profiler releases the stamps of records it drops); a device's first event, every
// other stamp's reference, lives until Close.
func (c *DeviceClock) Release(s Stamp) {
	if s >= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i := int(-s) - 1
	if i >= len(c.events) || c.events[i] == nil || c.origin[c.devs[i]] == c.events[i] {
		return
	}
	_ = c.events[i].Close()
	c.events[i] = nil
	c.live--
}

// Live returns the number of device events the clock holds.
func (c *DeviceClock) Live() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live
}

// Close destroys the clock's events.
func (c *DeviceClock) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.events {
		if e != nil {
			_ = e.Close()
		}
	}
	c.events, c.devs, c.live = nil, nil, 0
	c.origin = map[tensor.Device]backend.TimingEvent{}
}
