package cuda

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/gamp-ml/gamp/backend"
)

// The caching allocator's size policy, PyTorch's CUDACachingAllocator constants.
const (
	minBlockSize  = 512      // every block size is a multiple of this
	smallSize     = 1 << 20  // requests up to this come from the small pool
	smallBuffer   = 2 << 20  // segment size of the small pool
	largeBuffer   = 20 << 20 // segment size for large requests under minLargeAlloc
	minLargeAlloc = 10 << 20 // requests from here on get a segment of their own
	roundLarge    = 2 << 20  // granularity of those segments
	maxRequest    = 1 << 62  // larger requests fail at once
)

// rawMemory is where the allocator gets segments from: cuMemAlloc and cuMemFree on the
// device. Malloc's error for an exhausted device must satisfy isRawOOM.
type rawMemory interface {
	Malloc(bytes uint64) (uint64, error)
	Free(addr uint64) error
}

// isRawOOM reports whether a rawMemory.Malloc error means the device is out of memory
// (CUDA_ERROR_OUT_OF_MEMORY), the one error the allocator answers by emptying its cache
// and retrying. The driver layer wraps backend.ErrOutOfMemory for that code.
func isRawOOM(err error) bool { return errors.Is(err, backend.ErrOutOfMemory) }

// events are the CUDA events that tell the allocator when work queued on a stream has
// passed a point: cuEventRecord, cuEventQuery, cuEventSynchronize, and giving the event
// back (to a pool or cuEventDestroy). Events are opaque handles.
type events interface {
	Record(stream uintptr) (uintptr, error)
	Query(ev uintptr) (done bool, err error)
	Synchronize(ev uintptr) error
	Release(ev uintptr)
}

// blockState is where a block is in its life.
type blockState uint8

const (
	blockFree      blockState = iota // in its pool, ready for reuse
	blockAllocated                   // handed out by alloc
	blockPending                     // freed, waiting for the events of other streams
	blockGone                        // merged into a neighbour or handed out anew; a dead handle
)

// block is a range of device memory inside a segment. An allocation is always a fresh
// block value, and freeing replaces it in its segment by another: a handle the program
// holds never changes address or size, and one it freed never comes back to life, so
// freeing it again is caught however the memory was reused since.
type block struct {
	owner     *cachingAllocator
	seg       *segment
	prev      *block // neighbours in the segment, by address
	next      *block
	addr      uint64
	size      int64 // bytes the block spans, a multiple of minBlockSize
	requested int64 // bytes asked for (allocated and pending blocks)
	dtype     backend.DType
	stream    uintptr // the stream it was allocated on (its segment's stream)
	state     blockState
	uses      []uintptr // other streams it was used on (recordStream)
	events    []uintptr // pending: events on those streams not yet passed
	stuck     bool      // pending forever: an event could not be recorded
}

// segment is one raw device allocation, tiled by its blocks.
type segment struct {
	addr   uint64
	size   int64
	stream uintptr
	small  bool
	head   *block // the block at addr
}

// pool holds free blocks ordered by (stream, size, address), so the first block at or
// after (stream, size, 0) is the best fit on that stream.
type pool struct{ blocks []*block }

func blockLess(a, b *block) int {
	if c := cmp.Compare(a.stream, b.stream); c != 0 {
		return c
	}
	if c := cmp.Compare(a.size, b.size); c != 0 {
		return c
	}
	return cmp.Compare(a.addr, b.addr)
}

func (p *pool) insert(b *block) {
	i, _ := slices.BinarySearchFunc(p.blocks, b, blockLess)
	p.blocks = slices.Insert(p.blocks, i, b)
}

func (p *pool) remove(b *block) {
	i, ok := slices.BinarySearchFunc(p.blocks, b, blockLess)
	if !ok || p.blocks[i] != b {
		panic(fmt.Sprintf("cuda: allocator: free block %#x of %d bytes missing from its pool", b.addr, b.size))
	}
	p.blocks = slices.Delete(p.blocks, i, i+1)
}

// bestFit returns the smallest free block of at least size bytes on stream, or nil.
func (p *pool) bestFit(stream uintptr, size int64) *block {
	i, _ := slices.BinarySearchFunc(p.blocks, &block{stream: stream, size: size}, blockLess)
	if i < len(p.blocks) && p.blocks[i].stream == stream {
		return p.blocks[i]
	}
	return nil
}

// SegmentInfo describes one segment in a Segments snapshot, in the spirit of
// torch.cuda.memory_snapshot.
type SegmentInfo struct {
	Addr   uint64  // device address
	Size   int64   // bytes, counted in Reserved
	Stream uintptr // the stream its blocks are allocated for
	Small  bool    // from the small pool (2 MiB segments for requests ≤ 1 MiB)
	Blocks []BlockInfo
}

// BlockInfo describes one block of a segment; the blocks tile the segment by address.
type BlockInfo struct {
	Addr      uint64
	Size      int64 // bytes the block spans (rounded)
	Requested int64 // bytes asked for; 0 for a free block
	Allocated bool  // in use by the program
	Pending   bool  // freed, but waiting for work on other streams (RecordStream)
}

// cachingAllocator is the CUDA backend's device memory allocator, after PyTorch's
// CUDACachingAllocator: segments from the driver are split into blocks, freed blocks
// are cached per stream and reused by best fit, and neighbours are coalesced.
//
// Statistics mean what the CPU backend's mean: Allocated, PeakAllocated,
// TotalAllocated and ByDType count requested bytes (not rounded up); Active counts the
// blocks in use at their size; Reserved and PeakReserved count segment bytes, so
// Reserved - Allocated is rounding, splitting remainders and cache. A block freed while other streams may use it counts as freed
// at once (NumFrees, Allocated) but stays out of the cache until they pass the free.
// It is safe for concurrent use.
type cachingAllocator struct {
	dev backend.Device
	raw rawMemory
	ev  events

	mu       sync.Mutex
	small    pool
	large    pool
	segs     map[uint64]*segment
	pending  []*block
	st       backend.MemoryStats
	maxSplit int64 // blocks of this size or more are not split; 0: no such limit
	fault    error // a failed event or cuMemFree call: the device cannot go on safely
}

func newCachingAllocator(dev backend.Device, raw rawMemory, ev events) *cachingAllocator {
	return &cachingAllocator{dev: dev, raw: raw, ev: ev, segs: map[uint64]*segment{}}
}

// roundSize is the block size for a request of n bytes.
func roundSize(n int64) int64 {
	if n < minBlockSize {
		return minBlockSize
	}
	return (n + minBlockSize - 1) / minBlockSize * minBlockSize
}

// segmentSize is the size of a new segment for a block of size bytes.
func segmentSize(size int64) int64 {
	switch {
	case size <= smallSize:
		return smallBuffer
	case size < minLargeAlloc:
		return largeBuffer
	}
	return (size + roundLarge - 1) / roundLarge * roundLarge
}

// alloc returns a block of at least bytes bytes for use on stream. It fails with a
// *backend.OOMError when neither the cache nor the device (within the limit) can serve
// the request, after emptying the cache and trying once more.
func (a *cachingAllocator) alloc(bytes int64, dt backend.DType, stream uintptr) (*block, error) {
	if bytes < 0 {
		panic(fmt.Sprintf("%s: allocation of %d bytes", a.dev, bytes))
	}
	if int(dt) >= backend.NumDTypes {
		panic(fmt.Sprintf("%s: allocation with invalid dtype %s", a.dev, dt))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.processEvents()
	if a.fault != nil {
		return nil, a.fault
	}
	if bytes > maxRequest {
		// No device has this much; rounding it up would overflow.
		a.st.NumOOMs++
		_, cached := a.freeLocked()
		return nil, &backend.OOMError{Device: a.dev, Requested: bytes, Allocated: a.st.Allocated,
			Reserved: a.st.Reserved, Limit: a.st.Limit, FreeCache: cached}
	}
	size := roundSize(bytes)
	p := a.poolFor(size)
	f := a.findFree(p, stream, size)
	if f == nil {
		var err error
		if f, err = a.newSegment(bytes, size, stream); err != nil {
			return nil, err
		}
	} else {
		p.remove(f)
	}
	return a.account(a.take(f, p, size), bytes, dt), nil
}

// account records a new allocation of bytes (requested) in block b.
func (a *cachingAllocator) account(b *block, bytes int64, dt backend.DType) *block {
	b.requested = bytes
	b.dtype = dt
	s := &a.st
	s.Active += b.size
	s.PeakActive = max(s.PeakActive, s.Active)
	s.Allocated += bytes
	s.PeakAllocated = max(s.PeakAllocated, s.Allocated)
	s.TotalAllocated += bytes
	s.NumAllocs++
	d := &s.ByDType[dt]
	d.Allocated += bytes
	d.PeakAllocated = max(d.PeakAllocated, d.Allocated)
	d.NumAllocs++
	return b
}

// allocCached is alloc when it needs no call into the driver: a cached block fits and
// no free waits on an event. It returns nil otherwise (the caller then runs alloc on
// the device's thread). The backend calls it on the caller's goroutine, so the steady
// state of a training loop allocates without a hand-off to the device worker.
func (a *cachingAllocator) allocCached(bytes int64, dt backend.DType, stream uintptr) *block {
	if bytes < 0 || bytes > maxRequest || int(dt) >= backend.NumDTypes {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fault != nil || len(a.pending) > 0 {
		return nil
	}
	size := roundSize(bytes)
	p := a.poolFor(size)
	f := a.findFree(p, stream, size)
	if f == nil {
		return nil
	}
	p.remove(f)
	return a.account(a.take(f, p, size), bytes, dt)
}

func (a *cachingAllocator) poolFor(size int64) *pool {
	if size <= smallSize {
		return &a.small
	}
	return &a.large
}

// findFree is the best-fit search. With a max-split size, an oversize cached block is
// not given to a request below that size (it could not be split, and would waste most
// of itself), nor to an oversize request it exceeds by a whole large segment.
func (a *cachingAllocator) findFree(p *pool, stream uintptr, size int64) *block {
	f := p.bestFit(stream, size)
	if f == nil || a.maxSplit == 0 {
		return f
	}
	if size < a.maxSplit && f.size >= a.maxSplit {
		return nil
	}
	if size >= a.maxSplit && f.size >= size+largeBuffer {
		return nil
	}
	return f
}

// shouldSplit reports whether the rest of free block f past size is worth keeping as a
// block of its own.
func (a *cachingAllocator) shouldSplit(f *block, size int64) bool {
	rest := f.size - size
	if f.seg.small {
		return rest >= minBlockSize
	}
	return (a.maxSplit == 0 || size < a.maxSplit) && rest > smallSize
}

// take carves a fresh allocated block of size bytes from the front of free block f,
// which is in no pool; a remainder worth keeping goes back to p.
func (a *cachingAllocator) take(f *block, p *pool, size int64) *block {
	b := &block{owner: a, seg: f.seg, addr: f.addr, stream: f.stream, state: blockAllocated, prev: f.prev}
	if b.prev != nil {
		b.prev.next = b
	} else {
		f.seg.head = b
	}
	if a.shouldSplit(f, size) {
		b.size = size
		b.next = f
		f.prev = b
		f.addr += uint64(size)
		f.size -= size
		p.insert(f)
		return b
	}
	b.size = f.size
	b.next = f.next
	if b.next != nil {
		b.next.prev = b
	}
	f.state, f.prev, f.next = blockGone, nil, nil
	return b
}

// newSegment gets a segment for a block of size bytes (bytes requested) from the
// device, emptying the cache and retrying once when the device or the limit refuses.
// The segment comes back as one free block, in no pool.
func (a *cachingAllocator) newSegment(bytes, size int64, stream uintptr) (*block, error) {
	n := segmentSize(size)
	addr, err := a.rawAlloc(n)
	if isRawOOM(err) && a.releasable() {
		a.emptyLocked()
		if addr, err = a.rawAlloc(n); err == nil {
			a.st.NumRetries++
		}
	}
	if err != nil {
		if isRawOOM(err) {
			a.st.NumOOMs++
			_, cached := a.freeLocked()
			return nil, &backend.OOMError{
				Device: a.dev, Requested: bytes, Allocated: a.st.Allocated,
				Reserved: a.st.Reserved, Limit: a.st.Limit, FreeCache: cached,
			}
		}
		if a.fault != nil {
			return nil, a.fault
		}
		return nil, fmt.Errorf("%s: allocating a segment of %s: %w", a.dev, backend.FormatBytes(n), err)
	}
	seg := &segment{addr: addr, size: n, stream: stream, small: size <= smallSize}
	f := &block{owner: a, seg: seg, addr: addr, size: n, stream: stream, state: blockFree}
	seg.head = f
	a.segs[addr] = seg
	a.st.Reserved += n
	a.st.PeakReserved = max(a.st.PeakReserved, a.st.Reserved)
	return f, nil
}

// errLimit is the raw OOM of a segment that would take Reserved past the limit.
var errLimit = fmt.Errorf("memory limit reached: %w", backend.ErrOutOfMemory)

func (a *cachingAllocator) rawAlloc(n int64) (uint64, error) {
	if a.fault != nil {
		return 0, a.fault
	}
	if l := a.st.Limit; l > 0 && a.st.Reserved+n > l {
		return 0, errLimit
	}
	return a.raw.Malloc(uint64(n))
}

// releasable reports whether emptying the cache could give memory back.
func (a *cachingAllocator) releasable() bool {
	if len(a.pending) > 0 {
		return true
	}
	for _, p := range []*pool{&a.small, &a.large} {
		for _, b := range p.blocks {
			if b.prev == nil && b.next == nil {
				return true
			}
		}
	}
	return false
}

// free returns b to the allocator. A block used on other streams (recordStream) is
// cached again only once those streams have passed this point. Freeing a block twice,
// or a block of another allocator, panics.
func (a *cachingAllocator) free(b *block) {
	if b == nil {
		panic(fmt.Sprintf("%s: free of a nil block", a.dev))
	}
	if b.owner != a {
		panic(fmt.Sprintf("%s: free of a block at %#x that belongs to another allocator", a.dev, b.addr))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.freeLocked1(b)
}

// freeUnrecorded is free for a block no other stream used (no recordStream): it needs
// no call into the driver, so the backend runs it on the caller's goroutine. It
// reports false, doing nothing, for a block that needs events (free it on the device's
// thread).
func (a *cachingAllocator) freeUnrecorded(b *block) bool {
	if b == nil || b.owner != a {
		a.free(b) // panics with the message
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if b.state == blockAllocated && len(b.uses) > 0 {
		return false
	}
	a.freeLocked1(b)
	return true
}

// freeLocked1 frees b with a.mu held.
func (a *cachingAllocator) freeLocked1(b *block) {
	if b.state != blockAllocated {
		panic(fmt.Sprintf("%s: block at %#x of %d bytes freed twice", a.dev, b.addr, b.requested))
	}
	s := &a.st
	s.Active -= b.size
	s.Allocated -= b.requested
	s.NumFrees++
	s.ByDType[b.dtype].Allocated -= b.requested
	if len(b.uses) == 0 {
		a.release(b)
		return
	}
	b.state = blockPending
	for _, st := range b.uses {
		ev, err := a.ev.Record(st)
		if err != nil {
			// The stream may still be using the memory: never hand it out again.
			b.stuck = true
			a.setFault(fmt.Errorf("recording an event on stream %#x: %w", st, err))
			break
		}
		b.events = append(b.events, ev)
	}
	b.uses = nil
	a.pending = append(a.pending, b)
}

// setFault makes every later allocation fail: a failed event call means the allocator
// cannot tell when memory is safe to reuse (and CUDA errors are sticky).
func (a *cachingAllocator) setFault(err error) {
	if a.fault == nil {
		a.fault = fmt.Errorf("%s: caching allocator: %w; the device cannot be used safely any more, restart the program", a.dev, err)
	}
}

// release replaces an allocated or pending block with a free block, merged with free
// neighbours, in its pool. The old block is dead from then on: a handle the program
// freed never changes or comes back to life.
func (a *cachingAllocator) release(b *block) {
	f := &block{owner: a, seg: b.seg, prev: b.prev, next: b.next, addr: b.addr, size: b.size, stream: b.stream, state: blockFree}
	a.relink(b, f)
	b.state, b.prev, b.next, b.uses, b.events = blockGone, nil, nil, nil, nil
	p := &a.large
	if f.seg.small {
		p = &a.small
	}
	if n := f.next; n != nil && n.state == blockFree {
		p.remove(n)
		f.size += n.size
		f.next = n.next
		if f.next != nil {
			f.next.prev = f
		}
		n.state, n.prev, n.next = blockGone, nil, nil
	}
	if pr := f.prev; pr != nil && pr.state == blockFree {
		p.remove(pr)
		f.addr = pr.addr
		f.size += pr.size
		f.prev = pr.prev
		if f.prev != nil {
			f.prev.next = f
		} else {
			f.seg.head = f
		}
		pr.state, pr.prev, pr.next = blockGone, nil, nil
	}
	p.insert(f)
}

// relink points the neighbours of old (and its segment, if old is first) at nb, which
// takes old's place.
func (a *cachingAllocator) relink(old, nb *block) {
	if old.prev != nil {
		old.prev.next = nb
	} else {
		old.seg.head = nb
	}
	if old.next != nil {
		old.next.prev = nb
	}
}

// processEvents caches again the pending blocks whose streams have passed their free.
func (a *cachingAllocator) processEvents() {
	a.settle(func(ev uintptr) (bool, error) { return a.ev.Query(ev) })
}

// syncEvents waits for every pending block's events and caches the blocks again.
func (a *cachingAllocator) syncEvents() {
	a.settle(func(ev uintptr) (bool, error) { return true, a.ev.Synchronize(ev) })
}

func (a *cachingAllocator) settle(done func(uintptr) (bool, error)) {
	kept := a.pending[:0]
	for _, b := range a.pending {
		evs := b.events[:0]
		for _, ev := range b.events {
			ok, err := done(ev)
			if err != nil {
				a.setFault(fmt.Errorf("waiting for an event: %w", err))
			}
			if ok && err == nil {
				a.ev.Release(ev)
			} else {
				evs = append(evs, ev)
			}
		}
		b.events = evs
		if len(evs) == 0 && !b.stuck {
			a.release(b)
		} else {
			kept = append(kept, b)
		}
	}
	clear(a.pending[len(kept):])
	a.pending = kept
}

// recordStream marks b as used on stream s as well as its own: when b is freed, its
// memory is reused only after the work queued on s by then has run.
func (a *cachingAllocator) recordStream(b *block, s uintptr) {
	if b == nil || b.owner != a {
		panic(fmt.Sprintf("%s: recordStream on a block of another allocator", a.dev))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if b.state != blockAllocated {
		panic(fmt.Sprintf("%s: recordStream on block at %#x, which is already freed", a.dev, b.addr))
	}
	if s == b.stream || slices.Contains(b.uses, s) {
		return
	}
	b.uses = append(b.uses, s)
}

// emptyCache waits for pending frees and gives every segment with no block in use back
// to the device.
func (a *cachingAllocator) emptyCache() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.emptyLocked()
}

func (a *cachingAllocator) emptyLocked() {
	a.syncEvents()
	for _, p := range []*pool{&a.small, &a.large} {
		kept := p.blocks[:0]
		for _, b := range p.blocks {
			if b.prev != nil || b.next != nil {
				kept = append(kept, b)
				continue
			}
			if err := a.raw.Free(b.addr); err != nil {
				a.setFault(fmt.Errorf("freeing a segment of %s: %w", backend.FormatBytes(b.size), err))
				kept = append(kept, b)
				continue
			}
			delete(a.segs, b.seg.addr)
			a.st.Reserved -= b.size
			b.state = blockGone
		}
		clear(p.blocks[len(kept):])
		p.blocks = kept
	}
}

// stats returns the allocator's statistics.
func (a *cachingAllocator) stats() backend.MemoryStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st
}

// resetPeak sets the peaks to the current figures.
func (a *cachingAllocator) resetPeak() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.st.ResetPeak()
}

// setLimit caps Reserved at n bytes (0: no cap). Segments already held are kept.
func (a *cachingAllocator) setLimit(n int64) {
	if n < 0 {
		panic(fmt.Sprintf("%s: negative memory limit %d", a.dev, n))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.st.Limit = n
}

// setMaxSplitSize stops blocks of n bytes or more from being split (0: split any
// block), PyTorch's max_split_size_mb: big blocks then serve only big requests, which
// keeps large free blocks whole when a workload mixes sizes.
func (a *cachingAllocator) setMaxSplitSize(n int64) {
	if n < 0 {
		panic(fmt.Sprintf("%s: negative max split size %d", a.dev, n))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.maxSplit = n
}

// fragmentation returns the largest cached free block and the total of cached free
// bytes. A request larger than largest needs a new segment however large total is;
// 1 - largest/total is the fragmentation figure.
func (a *cachingAllocator) fragmentation() (largest, total int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.freeLocked()
}

func (a *cachingAllocator) freeLocked() (largest, total int64) {
	for _, p := range []*pool{&a.small, &a.large} {
		for _, b := range p.blocks {
			largest = max(largest, b.size)
			total += b.size
		}
	}
	return largest, total
}

// segments returns a snapshot of every segment and its blocks, by address.
func (a *cachingAllocator) segments() []SegmentInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]SegmentInfo, 0, len(a.segs))
	for _, s := range a.segs {
		si := SegmentInfo{Addr: s.addr, Size: s.size, Stream: s.stream, Small: s.small}
		for b := s.head; b != nil; b = b.next {
			si.Blocks = append(si.Blocks, BlockInfo{
				Addr: b.addr, Size: b.size, Requested: b.requested,
				Allocated: b.state == blockAllocated, Pending: b.state == blockPending,
			})
		}
		out = append(out, si)
	}
	slices.SortFunc(out, func(x, y SegmentInfo) int { return cmp.Compare(x.Addr, y.Addr) })
	return out
}
