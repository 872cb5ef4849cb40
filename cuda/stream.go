package cuda

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/cuda/internal/cu"
)

// Stream is a CUDA stream of one device: work queued on it runs in order, and runs
// concurrently with other streams. Every backend kernel goes to the device's compute
// stream (ComputeStream); side streams (NewStream) carry copies that overlap with it.
// Order work across streams with events (Event.Record, Stream.WaitEvent), as in
// PyTorch.
type Stream struct {
	d     *device
	s     cu.Stream
	owned bool
}

// ComputeStream returns the stream every kernel of the backend is queued on.
func (b *Backend) ComputeStream() *Stream { return &Stream{d: b.d, s: b.d.compute} }

// NewStream creates a side stream on the device (non-blocking with respect to the
// legacy default stream). Close it when done.
func (b *Backend) NewStream() (*Stream, error) {
	st := &Stream{d: b.d, owned: true}
	err := b.d.doErr(func() (err error) {
		st.s, err = cu.StreamCreate(streamNonBlocking)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda:%d: creating a stream: %w", b.d.index, err)
	}
	return st, nil
}

// Handle is the raw CUstream, for code that calls other CUDA libraries.
func (s *Stream) Handle() uintptr { return uintptr(s.s) }

// Synchronize waits until all work queued on s is done.
func (s *Stream) Synchronize() error {
	return s.d.doErr(func() error { return cu.StreamSynchronize(s.s) })
}

// Query reports whether all work queued on s is done, without waiting.
func (s *Stream) Query() (bool, error) {
	var done bool
	err := s.d.doErr(func() (err error) {
		done, err = cu.StreamQuery(s.s)
		return err
	})
	return done, err
}

// WaitEvent makes later work on s wait until e has happened (no host wait).
func (s *Stream) WaitEvent(e *Event) error {
	return s.d.doErr(func() error { return cu.StreamWaitEvent(s.s, e.e) })
}

// WaitStream makes later work on s wait for the work queued on o so far.
func (s *Stream) WaitStream(o *Stream) error {
	e, err := (&Backend{d: o.d}).NewEvent(false)
	if err != nil {
		return err
	}
	defer e.Close()
	if err := e.Record(o); err != nil {
		return err
	}
	return s.WaitEvent(e)
}

// Close destroys a side stream (the compute stream is never destroyed).
func (s *Stream) Close() error {
	if !s.owned || s.s == 0 {
		return nil
	}
	h := s.s
	s.s = 0
	return s.d.doErr(func() error { return cu.StreamDestroy(h) })
}

// Event marks a point in a stream: for timing (Elapsed, like torch.cuda.Event's
// elapsed_time) and for ordering streams (Stream.WaitEvent).
type Event struct {
	d *device
	e cu.Event
}

// Event flags (CUevent_flags).
const (
	eventDefault       = 0
	eventDisableTiming = 2
)

// NewEvent creates an event; timing events can be used with Elapsed.
func (b *Backend) NewEvent(timing bool) (*Event, error) {
	flags := uint32(eventDisableTiming)
	if timing {
		flags = eventDefault
	}
	ev := &Event{d: b.d}
	err := b.d.doErr(func() (err error) {
		ev.e, err = cu.EventCreate(flags)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda:%d: creating an event: %w", b.d.index, err)
	}
	return ev, nil
}

// Record marks the current end of s's queue (nil: the compute stream).
func (e *Event) Record(s *Stream) error {
	h := e.d.compute
	if s != nil {
		h = s.s
	}
	return e.d.doErr(func() error { return cu.EventRecord(e.e, h) })
}

// Synchronize waits on the host until the event has happened.
func (e *Event) Synchronize() error {
	return e.d.doErr(func() error { return cu.EventSynchronize(e.e) })
}

// Query reports whether the event has happened, without waiting.
func (e *Event) Query() (bool, error) {
	var done bool
	err := e.d.doErr(func() (err error) {
		done, err = cu.EventQuery(e.e)
		return err
	})
	return done, err
}

// Close destroys the event.
func (e *Event) Close() error {
	if e.e == 0 {
		return nil
	}
	h := e.e
	e.e = 0
	return e.d.doErr(func() error { return cu.EventDestroy(h) })
}

// TimingEvent implements backend.EventTimer: a timing event recorded now on the
// compute stream, without waiting.
func (b *Backend) TimingEvent() (backend.TimingEvent, error) {
	ev, err := b.NewEvent(true)
	if err != nil {
		return nil, err
	}
	if err := ev.Record(nil); err != nil {
		_ = ev.Close()
		return nil, err
	}
	return ev, nil
}

// Since implements backend.TimingEvent: the device time from start (an *Event of the
// same device) to e.
func (e *Event) Since(start backend.TimingEvent) (time.Duration, error) {
	s, ok := start.(*Event)
	if !ok || s.d != e.d {
		return 0, fmt.Errorf("cuda: Event.Since: start is not an event of cuda:%d", e.d.index)
	}
	return Elapsed(s, e)
}

// Elapsed returns the device time between two recorded timing events, waiting for end
// to happen (torch.cuda.Event.elapsed_time, in a time.Duration; resolution about 0.5 µs).
func Elapsed(start, end *Event) (time.Duration, error) {
	if err := end.Synchronize(); err != nil {
		return 0, err
	}
	var ms float32
	err := end.d.doErr(func() (err error) {
		ms, err = cu.EventElapsedTime(start.e, end.e)
		return err
	})
	if err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// PinnedBuffer is page-locked host memory (cuMemHostAlloc, portable to every device):
// copies between it and a device run asynchronously and overlap with kernels, which
// copies from ordinary Go memory cannot. Keep it alive, and unmodified, until the
// stream that copies it has synchronised; Free it explicitly (the GC does not).
type PinnedBuffer struct {
	d     *device
	p     unsafe.Pointer
	bytes int
}

// memHostAllocPortable is CU_MEMHOSTALLOC_PORTABLE.
const memHostAllocPortable = 1

// NewPinned allocates bytes of pinned host memory (torch.Tensor.pin_memory's storage).
func (b *Backend) NewPinned(bytes int) (*PinnedBuffer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("cuda: pinned buffer of %d bytes", bytes)
	}
	pb := &PinnedBuffer{d: b.d, bytes: bytes}
	err := b.d.doErr(func() (err error) {
		pb.p, err = cu.MemHostAlloc(uint64(bytes), memHostAllocPortable)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda:%d: allocating %s of pinned host memory: %w", b.d.index, backend.FormatBytes(int64(bytes)), err)
	}
	return pb, nil
}

// Len is the buffer's size in bytes.
func (p *PinnedBuffer) Len() int { return p.bytes }

// Bytes returns the buffer as a byte slice (nil after Free).
func (p *PinnedBuffer) Bytes() []byte {
	if p.p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(p.p), p.bytes)
}

// Float32s returns the buffer as float32 values.
func (p *PinnedBuffer) Float32s() []float32 {
	if p.p == nil {
		return nil
	}
	return unsafe.Slice((*float32)(p.p), p.bytes/4)
}

// Uint16s returns the buffer as raw 16-bit values (float16/bfloat16 bits).
func (p *PinnedBuffer) Uint16s() []uint16 {
	if p.p == nil {
		return nil
	}
	return unsafe.Slice((*uint16)(p.p), p.bytes/2)
}

// Int64s returns the buffer as int64 values (labels, indices).
func (p *PinnedBuffer) Int64s() []int64 {
	if p.p == nil {
		return nil
	}
	return unsafe.Slice((*int64)(p.p), p.bytes/8)
}

// Free releases the buffer. The caller makes sure no queued copy still reads it.
func (p *PinnedBuffer) Free() error {
	if p.p == nil {
		return nil
	}
	h := p.p
	p.p = nil
	return p.d.doErr(func() error { return cu.MemFreeHost(h) })
}

func (b *Backend) streamOr(s *Stream) cu.Stream {
	if s == nil {
		return b.d.compute
	}
	if s.d != b.d {
		panic(fmt.Sprintf("cuda:%d: stream of cuda:%d used", b.d.index, s.d.index))
	}
	return s.s
}

func (b *Backend) checkPinned(op string, s *Storage, off, n int, p *PinnedBuffer, poff int) {
	if p.p == nil {
		panic(fmt.Sprintf("cuda:%d: %s: pinned buffer already freed", b.d.index, op))
	}
	bytes := n * s.dt.Size()
	if off < 0 || n < 0 || off+n > s.n || poff < 0 || poff+bytes > p.bytes {
		panic(fmt.Sprintf("cuda:%d: %s: %d elements at %d of a %d-element storage, from byte %d of a %d-byte pinned buffer", b.d.index, op, n, off, s.n, poff, p.bytes))
	}
}

// CopyToDeviceAsync queues a copy of n elements from src (starting at byte srcByte)
// into dst at element off, on stream s (nil: the compute stream), and returns at once.
// Before the compute stream uses dst, make it wait for s (Stream.WaitEvent); if dst is
// freed while s may still write it, call RecordStream first.
func (b *Backend) CopyToDeviceAsync(dst backend.Storage, off int, src *PinnedBuffer, srcByte, n int, s *Stream) error {
	d := b.st(dst)
	b.checkPinned("CopyToDeviceAsync", d, off, n, src, srcByte)
	h := b.streamOr(s)
	p := unsafe.Add(src.p, srcByte)
	return b.d.doErr(func() error {
		return cu.MemcpyHtoDAsync(d.at(off), p, uint64(n*d.dt.Size()), h)
	})
}

// CopyToHostAsync queues a copy of n elements of src at element off into dst at byte
// dstByte, on stream s (nil: the compute stream). Synchronise s before reading dst.
func (b *Backend) CopyToHostAsync(dst *PinnedBuffer, dstByte int, src backend.Storage, off, n int, s *Stream) error {
	c := b.st(src)
	b.checkPinned("CopyToHostAsync", c, off, n, dst, dstByte)
	h := b.streamOr(s)
	p := unsafe.Add(dst.p, dstByte)
	return b.d.doErr(func() error {
		return cu.MemcpyDtoHAsync(p, c.at(off), uint64(n*c.dt.Size()), h)
	})
}

// RecordStream tells the allocator that storage s is used on stream st, so its memory
// is not reused after Free until the work queued on st so far is done
// (torch.Tensor.record_stream).
func (b *Backend) RecordStream(s backend.Storage, st *Stream) {
	c := b.st(s)
	h := b.streamOr(st)
	b.d.do(func() { b.d.alloc.recordStream(c.blk, uintptr(h)) })
}

// CopyFromDevice implements backend.DeviceCopier: n elements of src (a storage of
// another CUDA device, or of this one) at srcOff go to dst at dstOff without a trip
// through host memory (peer-to-peer when the devices allow it, else staged by the
// driver). The copy is ordered after the work queued on both devices' compute streams.
func (b *Backend) CopyFromDevice(dst backend.Storage, dstOff int, src backend.Storage, srcOff, n int) error {
	d := b.st(dst)
	s, ok := src.(*Storage)
	if !ok {
		return fmt.Errorf("cuda:%d: CopyFromDevice from a %s storage", b.d.index, src.Device())
	}
	if s.dt != d.dt {
		return fmt.Errorf("cuda:%d: CopyFromDevice %s into %s", b.d.index, s.dt, d.dt)
	}
	if n < 0 || dstOff < 0 || srcOff < 0 || dstOff+n > d.n || srcOff+n > s.n {
		return fmt.Errorf("cuda:%d: CopyFromDevice of %d elements out of range", b.d.index, n)
	}
	bytes := uint64(n * d.dt.Size())
	if s.d == b.d {
		return b.d.doErr(func() error { return cu.MemcpyDtoDAsync(d.at(dstOff), s.at(srcOff), bytes, b.d.compute) })
	}
	// Order after the source device's queued work, then copy on the destination's stream.
	sb := &Backend{d: s.d}
	ev, err := sb.NewEvent(false)
	if err != nil {
		return err
	}
	defer ev.Close()
	if err := ev.Record(nil); err != nil {
		return err
	}
	if err := b.ComputeStream().WaitEvent(ev); err != nil {
		return err
	}
	b.d.do(func() { enablePeer(b.d, s.d) })
	err = b.d.doErr(func() error {
		return cu.MemcpyPeerAsync(d.at(dstOff), b.d.ctx, s.at(srcOff), s.d.ctx, bytes, b.d.compute)
	})
	if err != nil {
		return err
	}
	// The source may be freed and reused by its device once the copy is done: make the
	// source's compute stream wait for the copy.
	ev2, err := b.NewEvent(false)
	if err != nil {
		return err
	}
	defer ev2.Close()
	if err := ev2.Record(nil); err != nil {
		return err
	}
	return sb.ComputeStream().WaitEvent(ev2)
}

// enablePeer turns on peer access from d to p once, when the hardware allows it; the
// driver stages the copy otherwise. Runs on d's worker.
func enablePeer(d, p *device) {
	d.modMu.Lock()
	defer d.modMu.Unlock()
	if d.peers == nil {
		d.peers = map[int]bool{}
	}
	if _, done := d.peers[p.index]; done {
		return
	}
	ok, err := cu.DeviceCanAccessPeer(d.cud, p.cud)
	if err == nil && ok {
		ok = cu.CtxEnablePeerAccess(p.ctx) == nil
	}
	d.peers[p.index] = ok
}
