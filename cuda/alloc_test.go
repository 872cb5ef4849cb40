package cuda

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
)

// fakeRaw is device memory for tests: addresses come from a counter, a capacity makes
// Malloc fail with an out-of-memory error, and every call is recorded.
type fakeRaw struct {
	mu       sync.Mutex
	next     uint64
	gap      uint64 // bytes left between segments; 0 makes segments contiguous
	capacity int64  // 0: unlimited
	used     int64
	live     map[uint64]int64
	mallocs  []int64  // sizes asked for, including refused ones
	frees    []uint64 // addresses given back
	failNext error    // returned by the next Malloc instead of memory
	failFree error    // returned by Free
}

func newFakeRaw(capacity int64) *fakeRaw {
	return &fakeRaw{next: 0x7f00_0000_0000, gap: 1 << 20, capacity: capacity, live: map[uint64]int64{}}
}

func (r *fakeRaw) Malloc(n uint64) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mallocs = append(r.mallocs, int64(n))
	if err := r.failNext; err != nil {
		r.failNext = nil
		return 0, err
	}
	if r.capacity > 0 && r.used+int64(n) > r.capacity {
		return 0, fmt.Errorf("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: %w", backend.ErrOutOfMemory)
	}
	addr := r.next
	r.next += n + r.gap
	r.live[addr] = int64(n)
	r.used += int64(n)
	return addr, nil
}

func (r *fakeRaw) Free(addr uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failFree != nil {
		return r.failFree
	}
	n, ok := r.live[addr]
	if !ok {
		return fmt.Errorf("cuMemFree(%#x): not allocated", addr)
	}
	delete(r.live, addr)
	r.used -= n
	r.frees = append(r.frees, addr)
	return nil
}

func (r *fakeRaw) numMallocs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.mallocs)
}

func (r *fakeRaw) usedBytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.used
}

// fakeEvents models streams as counters: the n-th event recorded on a stream is done
// once the test has completed the stream past it (or the allocator synchronised it).
type fakeEvents struct {
	mu         sync.Mutex
	next       uintptr
	live       map[uintptr]fakeEvent
	last       map[uintptr]int // stream → sequence number of its last event
	done       map[uintptr]int // stream → sequence number its work has run up to
	failRecord error
	failQuery  error
	failSync   error
}

type fakeEvent struct {
	stream uintptr
	seq    int
}

func newFakeEvents() *fakeEvents {
	return &fakeEvents{live: map[uintptr]fakeEvent{}, last: map[uintptr]int{}, done: map[uintptr]int{}}
}

func (e *fakeEvents) Record(s uintptr) (uintptr, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failRecord != nil {
		return 0, e.failRecord
	}
	e.last[s]++
	e.next++
	e.live[e.next] = fakeEvent{s, e.last[s]}
	return e.next, nil
}

func (e *fakeEvents) get(ev uintptr) fakeEvent {
	f, ok := e.live[ev]
	if !ok {
		panic(fmt.Sprintf("fake events: event %d used after release", ev))
	}
	return f
}

func (e *fakeEvents) Query(ev uintptr) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.get(ev)
	if e.failQuery != nil {
		return false, e.failQuery
	}
	return f.seq <= e.done[f.stream], nil
}

func (e *fakeEvents) Synchronize(ev uintptr) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.get(ev)
	if e.failSync != nil {
		return e.failSync
	}
	e.done[f.stream] = max(e.done[f.stream], f.seq)
	return nil
}

func (e *fakeEvents) Release(ev uintptr) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(ev)
	delete(e.live, ev)
}

// complete lets the work queued on stream s so far run to the end.
func (e *fakeEvents) complete(s uintptr) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.done[s] = e.last[s]
}

func (e *fakeEvents) lastSeq(s uintptr) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last[s]
}

func (e *fakeEvents) passed(s uintptr, seq int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.done[s] >= seq
}

func (e *fakeEvents) numLive() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.live)
}

func newTest(capacity int64) (*cachingAllocator, *fakeRaw, *fakeEvents) {
	raw, ev := newFakeRaw(capacity), newFakeEvents()
	return newCachingAllocator(backend.CUDA(0), raw, ev), raw, ev
}

func mustAlloc(t *testing.T, a *cachingAllocator, bytes int64, stream uintptr) *block {
	t.Helper()
	b, err := a.alloc(bytes, backend.Float32, stream)
	if err != nil {
		t.Fatalf("alloc(%d) on stream %d: %v", bytes, stream, err)
	}
	return b
}

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want one saying %q", want)
		}
		if msg := fmt.Sprint(r); !strings.Contains(msg, want) {
			t.Fatalf("panic %q, want one saying %q", msg, want)
		}
	}()
	f()
}

// blockSizes lists a segment's blocks as sizes, negative for blocks not free.
func blockSizes(s SegmentInfo) []int64 {
	var out []int64
	for _, b := range s.Blocks {
		if b.Allocated || b.Pending {
			out = append(out, -b.Size)
		} else {
			out = append(out, b.Size)
		}
	}
	return out
}

func segmentAt(t *testing.T, a *cachingAllocator, addr uint64) SegmentInfo {
	t.Helper()
	for _, s := range a.segments() {
		if addr >= s.Addr && addr < s.Addr+uint64(s.Size) {
			return s
		}
	}
	t.Fatalf("no segment holds %#x", addr)
	return SegmentInfo{}
}

func TestRoundSize(t *testing.T) {
	for _, c := range []struct{ in, want int64 }{
		{0, 512}, {1, 512}, {511, 512}, {512, 512}, {513, 1024}, {4000, 4096},
		{mib, mib}, {mib + 1, mib + 512},
	} {
		if got := roundSize(c.in); got != c.want {
			t.Errorf("roundSize(%d) = %d, want %d", c.in, got, c.want)
		}
	}
	for _, c := range []struct{ in, want int64 }{
		{512, 2 * mib}, {mib, 2 * mib}, {mib + 512, 20 * mib}, {10*mib - 512, 20 * mib},
		{10 * mib, 10 * mib}, {10*mib + 512, 12 * mib}, {21 * mib, 22 * mib},
	} {
		if got := segmentSize(c.in); got != c.want {
			t.Errorf("segmentSize(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

// Each request lands in the pool and segment size the policy says, and the segment is
// split only when the remainder is worth keeping.
func TestPools(t *testing.T) {
	for _, c := range []struct {
		name   string
		bytes  int64
		seg    int64
		small  bool
		blocks []int64 // negative: allocated
	}{
		{"tiny", 1, 2 * mib, true, []int64{-512, 2*mib - 512}},
		{"small", 1000, 2 * mib, true, []int64{-1024, 2*mib - 1024}},
		{"small max", mib, 2 * mib, true, []int64{-mib, mib}},
		{"empty", 0, 2 * mib, true, []int64{-512, 2*mib - 512}},
		{"large in 20 MiB", mib + 1, 20 * mib, false, []int64{-(mib + 512), 19*mib - 512}},
		{"large under 10 MiB", 9*mib + 512*kib, 20 * mib, false, []int64{-(9*mib + 512*kib), 10*mib + 512*kib}},
		{"own segment", 10 * mib, 10 * mib, false, []int64{-10 * mib}},
		{"own segment split", 10*mib + 1, 12 * mib, false, []int64{-(10*mib + 512), 2*mib - 512}},
		{"own segment, remainder 0.5 MiB", 11*mib + 512*kib, 12 * mib, false, []int64{-12 * mib}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, raw, _ := newTest(0)
			b := mustAlloc(t, a, c.bytes, 1)
			segs := a.segments()
			if len(segs) != 1 || segs[0].Size != c.seg || segs[0].Small != c.small || segs[0].Stream != 1 {
				t.Fatalf("segments %+v, want one of %d bytes, small %v", segs, c.seg, c.small)
			}
			if got := blockSizes(segs[0]); !slices.Equal(got, c.blocks) {
				t.Fatalf("blocks %v, want %v", got, c.blocks)
			}
			if b.addr != segs[0].Addr || segs[0].Blocks[0].Requested != c.bytes {
				t.Fatalf("block %#x (requested %d) in segment %#x", b.addr, segs[0].Blocks[0].Requested, segs[0].Addr)
			}
			st := a.stats()
			if st.Allocated != c.bytes || st.Reserved != c.seg || st.NumAllocs != 1 || st.TotalAllocated != c.bytes {
				t.Fatalf("stats %+v", st)
			}
			if st.Active != -c.blocks[0] || st.PeakActive != st.Active {
				t.Fatalf("active %d (peak %d), want the block's %d bytes", st.Active, st.PeakActive, -c.blocks[0])
			}
			if !slices.Equal(raw.mallocs, []int64{c.seg}) {
				t.Fatalf("mallocs %v", raw.mallocs)
			}
			a.free(b)
			if got := blockSizes(a.segments()[0]); !slices.Equal(got, []int64{c.seg}) {
				t.Fatalf("after free: blocks %v, want one free block", got)
			}
			if st := a.stats(); st.Active != 0 {
				t.Fatalf("after free: active %d", st.Active)
			}
		})
	}
}

func TestSplitAndReuse(t *testing.T) {
	a, raw, _ := newTest(0)
	b1 := mustAlloc(t, a, 1000, 1)
	b2 := mustAlloc(t, a, 3000, 1)
	if b2.addr != b1.addr+1024 {
		t.Fatalf("second block at %#x, want right after the first (%#x)", b2.addr, b1.addr+1024)
	}
	a.free(b1)
	b3 := mustAlloc(t, a, 600, 1) // best fit: the 1 KiB hole, not the tail
	if b3.addr != b1.addr || b3.size != 1024 {
		t.Fatalf("got %#x+%d, want the freed 1 KiB block at %#x", b3.addr, b3.size, b1.addr)
	}
	a.free(b2)
	a.free(b3)
	if raw.numMallocs() != 1 || a.stats().Reserved != 2*mib {
		t.Fatalf("mallocs %v, stats %+v", raw.mallocs, a.stats())
	}
	b4 := mustAlloc(t, a, 2*kib, 1)
	if b4.addr != b1.addr || raw.numMallocs() != 1 {
		t.Fatalf("reuse got %#x after %d mallocs", b4.addr, raw.numMallocs())
	}
}

// A large block is split only when more than 1 MiB would be left over.
func TestLargeSplitThreshold(t *testing.T) {
	a, _, _ := newTest(0)
	x := mustAlloc(t, a, 5*mib, 1) // 20 MiB segment: 5 + 15
	y := mustAlloc(t, a, 9*mib, 1) // 9 + 6
	z := mustAlloc(t, a, 6*mib, 1) // the 6 MiB rest, exactly
	if got := blockSizes(segmentAt(t, a, x.addr)); !slices.Equal(got, []int64{-5 * mib, -9 * mib, -6 * mib}) {
		t.Fatalf("blocks %v", got)
	}
	a.free(x)
	w := mustAlloc(t, a, 4*mib+512*kib, 1) // 0.5 MiB rest: not split
	if w.addr != x.addr || w.size != 5*mib {
		t.Fatalf("got %#x+%d, want the whole 5 MiB block at %#x", w.addr, w.size, x.addr)
	}
	a.free(w)
	v := mustAlloc(t, a, 3*mib, 1) // 2 MiB rest: split
	if got := blockSizes(segmentAt(t, a, x.addr)); !slices.Equal(got, []int64{-3 * mib, 2 * mib, -9 * mib, -6 * mib}) {
		t.Fatalf("blocks %v", got)
	}
	for _, b := range []*block{v, y, z} {
		a.free(b)
	}
	if got := blockSizes(segmentAt(t, a, x.addr)); !slices.Equal(got, []int64{20 * mib}) {
		t.Fatalf("after freeing all: blocks %v", got)
	}
}

// Freeing the blocks of a segment in any order leaves one free block; blocks of two
// segments are not merged even when the segments are contiguous.
func TestCoalesce(t *testing.T) {
	orders := [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}, {0, 2, 1, 3}, {3, 1, 2, 0}}
	for _, order := range orders {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			a, raw, _ := newTest(0)
			raw.gap = 0
			var bs []*block
			for _, n := range []int64{512 * kib, 256 * kib, mib - 768*kib} {
				bs = append(bs, mustAlloc(t, a, n, 1))
			}
			bs = append(bs, mustAlloc(t, a, mib, 1)) // fills the segment exactly
			other := mustAlloc(t, a, 4*kib, 1)       // a second segment, right after
			if other.addr != bs[0].addr+2*uint64(mib) {
				t.Fatalf("second segment at %#x, want it contiguous", other.addr)
			}
			for _, i := range order {
				a.free(bs[i])
			}
			a.free(other)
			segs := a.segments()
			if len(segs) != 2 {
				t.Fatalf("%d segments", len(segs))
			}
			for _, s := range segs {
				if got := blockSizes(s); !slices.Equal(got, []int64{2 * mib}) {
					t.Fatalf("segment %#x: blocks %v, want one free 2 MiB block", s.Addr, got)
				}
			}
			if len(a.small.blocks) != 2 {
				t.Fatalf("small pool has %d blocks, want 2", len(a.small.blocks))
			}
			if largest, total := a.fragmentation(); largest != 2*mib || total != 4*mib {
				t.Fatalf("fragmentation %d of %d", largest, total)
			}
		})
	}
}

func TestBestFit(t *testing.T) {
	a, _, _ := newTest(0)
	var bs []*block
	for _, n := range []int64{4 * kib, kib, 8 * kib, kib, 2 * kib, kib} {
		bs = append(bs, mustAlloc(t, a, n, 1))
	}
	a.free(bs[0]) // 4 KiB hole
	a.free(bs[2]) // 8 KiB hole
	a.free(bs[4]) // 2 KiB hole; then the big tail
	for _, c := range []struct {
		bytes int64
		at    uint64
		size  int64
	}{
		{2 * kib, bs[4].addr, 2 * kib},
		{3 * kib, bs[0].addr, 3 * kib},
		{5 * kib, bs[2].addr, 5 * kib},
		{3 * kib, bs[2].addr + uint64(5*kib), 3 * kib},
		{kib, bs[0].addr + uint64(3*kib), kib},
		{kib, bs[5].addr + uint64(kib), kib}, // no hole left: the tail
	} {
		b := mustAlloc(t, a, c.bytes, 1)
		if b.addr != c.at || b.size != c.size {
			t.Fatalf("alloc(%d) = %#x+%d, want %#x+%d", c.bytes, b.addr, b.size, c.at, c.size)
		}
	}
}

// With a max-split size, blocks that big are handed out whole, never to small
// requests, and not to a big request they exceed by a large segment or more.
func TestOversizeNotSplit(t *testing.T) {
	for _, c := range []struct {
		name     string
		maxSplit int64
		cached   int64 // a free block of this size is in the cache
		request  int64
		reuse    bool
		blocks   []int64 // the cached block's segment afterwards
	}{
		{"no max split: split", 0, 40 * mib, 36 * mib, true, []int64{-36 * mib, 4 * mib}},
		{"oversize: whole", 32 * mib, 40 * mib, 36 * mib, true, []int64{-40 * mib}},
		{"oversize for a small request", 32 * mib, 40 * mib, 12 * mib, false, []int64{40 * mib}},
		{"oversize by a large segment", 32 * mib, 60 * mib, 34 * mib, false, []int64{60 * mib}},
		{"oversize by less", 32 * mib, 60 * mib, 42 * mib, true, []int64{-60 * mib}},
		{"under max split", 32 * mib, 30 * mib, 12 * mib, true, []int64{-12 * mib, 18 * mib}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, raw, _ := newTest(0)
			a.setMaxSplitSize(c.maxSplit)
			old := mustAlloc(t, a, c.cached, 1)
			a.free(old)
			b := mustAlloc(t, a, c.request, 1)
			if got := b.addr == old.addr; got != c.reuse {
				t.Fatalf("reused the cached block: %v, want %v (mallocs %v)", got, c.reuse, raw.mallocs)
			}
			if got := blockSizes(segmentAt(t, a, old.addr)); !slices.Equal(got, c.blocks) {
				t.Fatalf("blocks %v, want %v", got, c.blocks)
			}
			if st := a.stats(); st.Allocated != c.request {
				t.Fatalf("allocated %d, want the requested %d", st.Allocated, c.request)
			}
		})
	}
}

func TestStreamsDoNotShareBlocks(t *testing.T) {
	a, raw, _ := newTest(0)
	b1 := mustAlloc(t, a, 4*kib, 1)
	a.free(b1)
	b2 := mustAlloc(t, a, 4*kib, 2)
	if seg := segmentAt(t, a, b2.addr); seg.Addr == b1.addr || seg.Stream != 2 {
		t.Fatalf("stream 2 got %#x in segment %+v, want a segment of its own", b2.addr, seg)
	}
	b3 := mustAlloc(t, a, 4*kib, 1)
	if b3.addr != b1.addr || raw.numMallocs() != 2 {
		t.Fatalf("stream 1 got %#x after %d mallocs, want its cached %#x", b3.addr, raw.numMallocs(), b1.addr)
	}
}

func TestRecordStreamDefersReuse(t *testing.T) {
	a, _, ev := newTest(0)
	b := mustAlloc(t, a, kib, 1)
	live := mustAlloc(t, a, kib, 1)
	a.recordStream(b, 1) // its own stream: nothing to wait for
	a.recordStream(b, 2)
	a.recordStream(b, 3)
	a.recordStream(b, 2)
	a.free(b)
	if n := ev.numLive(); n != 2 {
		t.Fatalf("%d events recorded, want one each on streams 2 and 3", n)
	}
	if st := a.stats(); st.Allocated != kib || st.NumFrees != 1 {
		t.Fatalf("a pending free still counts as freed: %+v", st)
	}
	seg := segmentAt(t, a, b.addr)
	if !seg.Blocks[0].Pending || seg.Blocks[0].Allocated {
		t.Fatalf("freed block: %+v, want pending", seg.Blocks[0])
	}
	c := mustAlloc(t, a, kib, 1)
	if c.addr == b.addr {
		t.Fatal("block reused before stream 2 and 3 passed its free")
	}
	ev.complete(2)
	a.free(mustAlloc(t, a, kib, 1))
	if !segmentAt(t, a, b.addr).Blocks[0].Pending {
		t.Fatal("block released before stream 3 passed its free")
	}
	ev.complete(3)
	d := mustAlloc(t, a, kib, 1) // processes the events, then best fit finds b's block
	if d.addr != b.addr {
		t.Fatalf("got %#x, want the released block %#x", d.addr, b.addr)
	}
	if n := ev.numLive(); n != 0 {
		t.Fatalf("%d events not released", n)
	}
	for _, x := range []*block{live, c, d} {
		a.free(x)
	}
	if got := blockSizes(segmentAt(t, a, b.addr)); !slices.Equal(got, []int64{2 * mib}) {
		t.Fatalf("blocks %v", got)
	}
}

// EmptyCache waits for pending frees and gives back exactly the segments with nothing
// allocated in them.
func TestEmptyCache(t *testing.T) {
	a, raw, ev := newTest(0)
	free1 := mustAlloc(t, a, kib, 1)          // small segment A, fully freed
	part := mustAlloc(t, a, 12*mib, 1)        // 12 MiB segment B, fully freed
	large := mustAlloc(t, a, 3*mib, 2)        // 20 MiB segment C, fully freed
	pend := mustAlloc(t, a, 3*mib, 3)         // 20 MiB segment D, pending on stream 4
	keep := mustAlloc(t, a, 2*mib+512*kib, 1) // 20 MiB segment E, in use
	a.free(free1)
	a.free(part)
	a.free(large)
	a.recordStream(pend, 4)
	a.free(pend)
	want := []uint64{free1.addr, part.addr, large.addr, pend.addr}
	a.emptyCache()
	got := slices.Clone(raw.frees)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("freed segments %#x, want %#x", got, want)
	}
	segs := a.segments()
	if len(segs) != 1 || segs[0].Addr != keep.addr {
		t.Fatalf("left %+v, want the segment in use", segs)
	}
	if st := a.stats(); st.Reserved != 20*mib || raw.usedBytes() != 20*mib {
		t.Fatalf("reserved %d, device %d", st.Reserved, raw.usedBytes())
	}
	if ev.numLive() != 0 || !ev.passed(4, 1) {
		t.Fatal("pending event not synchronised and released")
	}
	a.free(keep)
	a.emptyCache()
	if st := a.stats(); st.Reserved != 0 || raw.usedBytes() != 0 || len(a.segments()) != 0 {
		t.Fatalf("after freeing everything: %+v", st)
	}
}

func TestOOMRetrySucceeds(t *testing.T) {
	a, raw, _ := newTest(20 * mib)
	b := mustAlloc(t, a, 12*mib, 1) // 12 MiB segment
	a.free(b)
	c := mustAlloc(t, a, 16*mib, 1) // 12 + 16 > 20: empty the cache and retry
	st := a.stats()
	if st.NumRetries != 1 || st.NumOOMs != 0 || st.Reserved != 16*mib || st.PeakReserved != 16*mib {
		t.Fatalf("stats %+v", st)
	}
	if !slices.Equal(raw.frees, []uint64{b.addr}) || !slices.Equal(raw.mallocs, []int64{12 * mib, 16 * mib, 16 * mib}) {
		t.Fatalf("mallocs %v, frees %#x", raw.mallocs, raw.frees)
	}
	a.free(c)
}

func TestOOMFails(t *testing.T) {
	a, raw, _ := newTest(20 * mib)
	small := mustAlloc(t, a, kib, 1)  // 2 MiB segment, almost all cached
	big := mustAlloc(t, a, 12*mib, 1) // 12 MiB segment
	_, err := a.alloc(8*mib, backend.Float16, 1)
	var oom *backend.OOMError
	if !errors.As(err, &oom) || !errors.Is(err, backend.ErrOutOfMemory) {
		t.Fatalf("err = %v, want *backend.OOMError", err)
	}
	want := backend.OOMError{Device: backend.CUDA(0), Requested: 8 * mib, Allocated: 12*mib + kib,
		Reserved: 14 * mib, FreeCache: 2*mib - kib}
	if *oom != want {
		t.Fatalf("error %+v, want %+v", *oom, want)
	}
	if !strings.Contains(err.Error(), "tried to allocate 8.00 MiB") {
		t.Fatalf("message %q", err)
	}
	st := a.stats()
	if st.NumOOMs != 1 || st.NumRetries != 0 || st.NumAllocs != 2 || st.ByDType[backend.Float16].NumAllocs != 0 {
		t.Fatalf("stats %+v", st)
	}
	if len(raw.frees) != 0 {
		t.Fatalf("segments in use were freed: %#x", raw.frees)
	}
	a.free(small)
	a.free(big)
}

// A limit caps Reserved: a segment that would pass it first empties the cache, then
// fails with the same error as the device would.
func TestLimit(t *testing.T) {
	for _, c := range []struct {
		name     string
		limit    int64
		live     []int64 // allocated and kept
		cached   []int64 // allocated and freed
		request  int64
		ok       bool
		retries  int64
		reserved int64 // afterwards
		free     int64 // FreeCache of the error
	}{
		{"fits", 16 * mib, []int64{kib}, nil, 12 * mib, true, 0, 14 * mib, 0},
		{"retry after emptying", 16 * mib, nil, []int64{kib, 12 * mib}, 15 * mib, true, 1, 16 * mib, 0},
		{"emptied, still too much", 16 * mib, []int64{12 * mib}, []int64{kib}, 12 * mib, false, 0, 12 * mib, 0},
		{"fragmented", 16 * mib, []int64{kib, 12 * mib}, nil, 2 * mib, false, 0, 14 * mib, 2*mib - kib},
		{"no limit", 0, []int64{kib, 12 * mib}, nil, 30 * mib, true, 0, 44 * mib, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, raw, _ := newTest(0)
			a.setLimit(c.limit)
			for _, n := range c.live {
				mustAlloc(t, a, n, 1)
			}
			var cached []*block
			for _, n := range c.cached {
				cached = append(cached, mustAlloc(t, a, n, 1))
			}
			for _, b := range cached {
				a.free(b)
			}
			mallocs := raw.numMallocs()
			_, err := a.alloc(c.request, backend.Float32, 1)
			st := a.stats()
			if c.ok != (err == nil) || st.NumRetries != c.retries || st.Reserved != c.reserved || st.Limit != c.limit {
				t.Fatalf("err %v, stats %+v", err, st)
			}
			if c.limit > 0 && st.PeakReserved > c.limit {
				t.Fatalf("peak reserved %d over the limit %d", st.PeakReserved, c.limit)
			}
			if err == nil {
				if raw.numMallocs() != mallocs+1 {
					t.Fatalf("mallocs %v: the limit should refuse before the device is asked", raw.mallocs)
				}
				return
			}
			var oom *backend.OOMError
			if !errors.As(err, &oom) || oom.Limit != c.limit || oom.FreeCache != c.free || oom.Reserved != c.reserved || st.NumOOMs != 1 {
				t.Fatalf("err %#v, stats %+v", err, st)
			}
			if raw.numMallocs() != mallocs {
				t.Fatalf("the device was asked past the limit: mallocs %v", raw.mallocs)
			}
		})
	}
}

// A request no device could hold fails as out of memory without asking the device (and
// without overflowing the rounding).
func TestHugeRequest(t *testing.T) {
	a, raw, _ := newTest(0)
	for _, n := range []int64{1<<62 + 1, math.MaxInt64} {
		_, err := a.alloc(n, backend.Float32, 1)
		var oom *backend.OOMError
		if !errors.As(err, &oom) || oom.Requested != n {
			t.Fatalf("alloc(%d): %v", n, err)
		}
	}
	if raw.numMallocs() != 0 || a.stats().NumOOMs != 2 {
		t.Fatalf("mallocs %v, stats %+v", raw.mallocs, a.stats())
	}
}

// A device error that is not out-of-memory is returned as it is, not counted as an OOM,
// and the cache is kept.
func TestMallocError(t *testing.T) {
	a, raw, _ := newTest(0)
	a.free(mustAlloc(t, a, kib, 1))
	bad := errors.New("CUDA_ERROR_INVALID_VALUE")
	raw.failNext = bad
	_, err := a.alloc(4*mib, backend.Float32, 1)
	if !errors.Is(err, bad) || errors.Is(err, backend.ErrOutOfMemory) {
		t.Fatalf("err = %v", err)
	}
	if st := a.stats(); st.NumOOMs != 0 || st.Reserved != 2*mib || len(raw.frees) != 0 {
		t.Fatalf("stats %+v, frees %#x", st, raw.frees)
	}
	mustAlloc(t, a, 4*mib, 1)
}

// A failed event or cuMemFree call is a device fault: memory a stream may still use is
// never reused or given back, and every later allocation reports the fault.
func TestDeviceFault(t *testing.T) {
	broken := errors.New("CUDA_ERROR_LAUNCH_FAILED")
	for _, c := range []struct {
		name  string
		setup func(a *cachingAllocator, raw *fakeRaw, ev *fakeEvents, b *block)
	}{
		{"record", func(a *cachingAllocator, _ *fakeRaw, ev *fakeEvents, b *block) {
			a.recordStream(b, 2)
			ev.failRecord = broken
			a.free(b)
			a.emptyCache()
		}},
		{"query", func(a *cachingAllocator, _ *fakeRaw, ev *fakeEvents, b *block) {
			a.recordStream(b, 2)
			a.free(b)
			ev.complete(2)
			ev.failQuery = broken
			_, _ = a.alloc(kib, backend.Float32, 1)
		}},
		{"synchronize", func(a *cachingAllocator, _ *fakeRaw, ev *fakeEvents, b *block) {
			a.recordStream(b, 2)
			a.free(b)
			ev.failSync = broken
			a.emptyCache()
		}},
		{"cuMemFree", func(a *cachingAllocator, raw *fakeRaw, _ *fakeEvents, b *block) {
			a.free(b)
			raw.failFree = broken
			a.emptyCache()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, raw, ev := newTest(0)
			b := mustAlloc(t, a, kib, 1)
			addr := b.addr
			c.setup(a, raw, ev, b)
			for range 2 {
				if _, err := a.alloc(kib, backend.Float32, 1); !errors.Is(err, broken) || !strings.Contains(err.Error(), "restart") {
					t.Fatalf("err = %v, want the device fault", err)
				}
			}
			if len(raw.frees) != 0 || len(a.segments()) != 1 || a.stats().Reserved != 2*mib {
				t.Fatalf("segment given back after the fault: frees %#x", raw.frees)
			}
			if blk := segmentAt(t, a, addr).Blocks[0]; c.name != "cuMemFree" && !blk.Pending {
				t.Fatalf("block %+v, want it still pending", blk)
			}
		})
	}
}

// Splitting depends on the pool: a small block keeps a remainder of 512 bytes or more,
// a large one only a remainder over 1 MiB.
func TestSplitThresholds(t *testing.T) {
	for _, c := range []struct {
		name    string
		hole    int64 // a free block of this size, before a block in use
		request int64
		size    int64 // of the block handed out
	}{
		{"small, 512 B left", 3 * kib / 2, kib, kib},
		{"small, exact", 3 * kib / 2, 1100, 3 * kib / 2},
		{"large, 2 MiB left", 5 * mib, 3 * mib, 3 * mib},
		{"large, 1 MiB left", 5 * mib, 4 * mib, 5 * mib},
		{"large, 0.5 MiB left", 5 * mib, 4*mib + 512*kib, 5 * mib},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, _, _ := newTest(0)
			h := mustAlloc(t, a, c.hole, 1)
			addr := h.addr
			mustAlloc(t, a, c.hole, 1)
			a.free(h)
			b := mustAlloc(t, a, c.request, 1)
			if b.addr != addr || b.size != c.size {
				t.Fatalf("got %#x+%d, want %#x+%d", b.addr, b.size, addr, c.size)
			}
			want := []int64{-c.size}
			if c.size < c.hole {
				want = append(want, c.hole-c.size)
			}
			if got := blockSizes(segmentAt(t, a, addr)); !slices.Equal(got[:len(want)], want) {
				t.Fatalf("blocks %v, want them to start %v", got, want)
			}
		})
	}
}

func TestStatsByDTypeAndResetPeak(t *testing.T) {
	a, _, _ := newTest(0)
	h, _ := a.alloc(1000, backend.Float16, 1)
	f, _ := a.alloc(3000, backend.Float32, 1)
	a.free(h)
	st := a.stats()
	if st.Allocated != 3000 || st.PeakAllocated != 4000 || st.TotalAllocated != 4000 ||
		st.NumAllocs != 2 || st.NumFrees != 1 || st.Reserved != 2*mib {
		t.Fatalf("stats %+v", st)
	}
	if d := st.ByDType[backend.Float16]; d != (backend.DTypeStats{Allocated: 0, PeakAllocated: 1000, NumAllocs: 1}) {
		t.Fatalf("float16 %+v", d)
	}
	a.resetPeak()
	st = a.stats()
	if st.PeakAllocated != 3000 || st.PeakReserved != 2*mib || st.ByDType[backend.Float16].PeakAllocated != 0 ||
		st.ByDType[backend.Float32].PeakAllocated != 3000 {
		t.Fatalf("after resetPeak %+v", st)
	}
	a.free(f)
}

func TestFragmentation(t *testing.T) {
	a, _, _ := newTest(0)
	var bs []*block
	for range 4 {
		bs = append(bs, mustAlloc(t, a, 256*kib, 1), mustAlloc(t, a, 256*kib, 1))
	}
	for i := 0; i < len(bs); i += 2 {
		a.free(bs[i])
	}
	// Four 256 KiB holes, and the segment is full: no more than 256 KiB fits at once.
	if largest, total := a.fragmentation(); largest != 256*kib || total != mib {
		t.Fatalf("largest %d, total %d", largest, total)
	}
	_, err := a.alloc(300*kib, backend.Float32, 1)
	if err != nil {
		t.Fatal(err)
	}
	if largest, total := a.fragmentation(); largest != 2*mib-300*kib || total != 3*mib-300*kib {
		t.Fatalf("largest %d, total %d", largest, total)
	}
}

func TestMisusePanics(t *testing.T) {
	for _, c := range []struct {
		name string
		want string
		f    func(a, other *cachingAllocator)
	}{
		{"double free", "freed twice", func(a, _ *cachingAllocator) {
			b, _ := a.alloc(kib, backend.Float32, 1)
			a.free(b)
			a.free(b)
		}},
		{"free after coalescing", "freed twice", func(a, _ *cachingAllocator) {
			b, _ := a.alloc(kib, backend.Float32, 1)
			c, _ := a.alloc(kib, backend.Float32, 1)
			a.free(c)
			a.free(b)
			a.free(c)
		}},
		{"free after reuse", "freed twice", func(a, _ *cachingAllocator) {
			b, _ := a.alloc(kib, backend.Float32, 1)
			a.free(b)
			c, _ := a.alloc(kib, backend.Float32, 1) // the same memory, a new handle
			_ = c
			a.free(b)
		}},
		{"double free while pending", "freed twice", func(a, _ *cachingAllocator) {
			b, _ := a.alloc(kib, backend.Float32, 1)
			a.recordStream(b, 2)
			a.free(b)
			a.free(b)
		}},
		{"another allocator", "another allocator", func(a, other *cachingAllocator) {
			b, _ := other.alloc(kib, backend.Float32, 1)
			a.free(b)
		}},
		{"nil", "nil block", func(a, _ *cachingAllocator) { a.free(nil) }},
		{"recordStream after free", "already freed", func(a, _ *cachingAllocator) {
			b, _ := a.alloc(kib, backend.Float32, 1)
			a.free(b)
			a.recordStream(b, 2)
		}},
		{"recordStream of another allocator", "another allocator", func(a, other *cachingAllocator) {
			b, _ := other.alloc(kib, backend.Float32, 1)
			a.recordStream(b, 2)
		}},
		{"invalid dtype", "invalid dtype", func(a, _ *cachingAllocator) { _, _ = a.alloc(8, backend.DType(200), 1) }},
		{"negative size", "allocation of -1 bytes", func(a, _ *cachingAllocator) { _, _ = a.alloc(-1, backend.Float32, 1) }},
		{"negative limit", "negative memory limit", func(a, _ *cachingAllocator) { a.setLimit(-1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, _, _ := newTest(0)
			other, _, _ := newTest(0)
			mustPanic(t, c.want, func() { c.f(a, other) })
			// The allocator is still usable after the panic: the lock was released.
			mustAlloc(t, a, kib, 1)
		})
	}
}

// guard is memory freed after recordStream: no allocation may overlap it until every
// recorded stream has passed the free.
type guard struct {
	addr  uint64
	size  int64
	waits []fakeEvent
}

// checkInvariants checks the allocator's structures against the blocks the test holds.
func checkInvariants(t *testing.T, a *cachingAllocator, raw *fakeRaw, live map[*block]bool) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	segs := make([]*segment, 0, len(a.segs))
	for _, s := range a.segs {
		segs = append(segs, s)
	}
	slices.SortFunc(segs, func(x, y *segment) int { return cmp.Compare(x.addr, y.addr) })
	var reserved, allocated int64
	var byDType [backend.NumDTypes]int64
	nFree, nAllocated, nPending := 0, 0, 0
	for i, s := range segs {
		if i > 0 && segs[i-1].addr+uint64(segs[i-1].size) > s.addr {
			t.Fatalf("segments %#x and %#x overlap", segs[i-1].addr, s.addr)
		}
		reserved += s.size
		addr := s.addr
		var prev *block
		for b := s.head; b != nil; b = b.next {
			if b.addr != addr || b.prev != prev || b.seg != s || b.stream != s.stream || b.owner != a {
				t.Fatalf("segment %#x: block %#x (want %#x) badly linked", s.addr, b.addr, addr)
			}
			if b.size <= 0 || b.size%minBlockSize != 0 {
				t.Fatalf("block %#x of %d bytes", b.addr, b.size)
			}
			switch b.state {
			case blockFree:
				nFree++
				if prev != nil && prev.state == blockFree {
					t.Fatalf("free blocks %#x and %#x not coalesced", prev.addr, b.addr)
				}
			case blockAllocated:
				nAllocated++
				if !live[b] {
					t.Fatalf("allocated block %#x is not held by the test", b.addr)
				}
				if b.requested > b.size {
					t.Fatalf("block %#x of %d bytes holds %d", b.addr, b.size, b.requested)
				}
				allocated += b.requested
				byDType[b.dtype] += b.requested
			case blockPending:
				nPending++
			default:
				t.Fatalf("dead block %#x in segment %#x", b.addr, s.addr)
			}
			addr += uint64(b.size)
			prev = b
		}
		if addr != s.addr+uint64(s.size) {
			t.Fatalf("segment %#x of %d bytes: blocks end at %#x", s.addr, s.size, addr)
		}
	}
	if nAllocated != len(live) {
		t.Fatalf("%d allocated blocks in segments, the test holds %d", nAllocated, len(live))
	}
	if nPending != len(a.pending) {
		t.Fatalf("%d pending blocks in segments, %d in the pending list", nPending, len(a.pending))
	}
	for _, p := range []*pool{&a.small, &a.large} {
		if !slices.IsSortedFunc(p.blocks, blockLess) {
			t.Fatal("pool out of order")
		}
		for _, b := range p.blocks {
			if b.state != blockFree || b.seg.small != (p == &a.small) || a.segs[b.seg.addr] != b.seg {
				t.Fatalf("pool holds block %#x in state %d", b.addr, b.state)
			}
		}
	}
	if n := len(a.small.blocks) + len(a.large.blocks); n != nFree {
		t.Fatalf("%d free blocks in segments, %d in the pools", nFree, n)
	}
	st := a.st
	if st.Reserved != reserved || reserved != raw.usedBytes() {
		t.Fatalf("Reserved %d, segments %d, device %d", st.Reserved, reserved, raw.usedBytes())
	}
	if st.Allocated != allocated || st.NumAllocs-st.NumFrees != int64(len(live)) {
		t.Fatalf("Allocated %d, live blocks %d; %d allocs, %d frees, %d live", st.Allocated, allocated, st.NumAllocs, st.NumFrees, len(live))
	}
	for i := range byDType {
		if st.ByDType[i].Allocated != byDType[i] || st.ByDType[i].PeakAllocated < byDType[i] {
			t.Fatalf("%s: %+v, live blocks %d", backend.DType(i), st.ByDType[i], byDType[i])
		}
	}
	if st.PeakAllocated < st.Allocated || st.PeakReserved < st.Reserved || (st.Limit > 0 && st.Reserved > st.Limit) {
		t.Fatalf("stats %+v", st)
	}
}

// A long random sequence of allocations, frees, recordStreams and stream progress,
// against a device that runs out of memory, keeps every invariant.
func TestRandomOperations(t *testing.T) {
	for _, c := range []struct {
		name     string
		seed     uint64
		capacity int64
		limit    int64
		maxSplit int64
	}{
		{"device capacity", 1, 256 * mib, 0, 0},
		{"limit", 2, 0, 200 * mib, 0},
		{"max split", 3, 256 * mib, 0, 12 * mib},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(c.seed, 42))
			a, raw, ev := newTest(c.capacity)
			a.setLimit(c.limit)
			a.setMaxSplitSize(c.maxSplit)
			live := map[*block]bool{}
			var order []*block // live blocks, for picking one at random
			uses := map[*block][]uintptr{}
			var guards []guard
			dtypes := []backend.DType{backend.Float32, backend.Float16, backend.BFloat16, backend.Int64}
			ooms := 0
			for op := range 5000 {
				switch r := rng.IntN(100); {
				case r < 46:
					var n int64
					switch k := rng.IntN(100); {
					case k < 70:
						n = rng.Int64N(mib + 1)
					case k < 95:
						n = rng.Int64N(10 * mib)
					default:
						n = rng.Int64N(40 * mib)
					}
					s := uintptr(1 + rng.IntN(3))
					b, err := a.alloc(n, dtypes[rng.IntN(len(dtypes))], s)
					if err != nil {
						var oom *backend.OOMError
						if !errors.As(err, &oom) || oom.Requested != n {
							t.Fatalf("op %d: alloc(%d): %v", op, n, err)
						}
						_, cached := a.fragmentation()
						if st := a.stats(); oom.Reserved != st.Reserved || oom.Allocated != st.Allocated || oom.FreeCache != cached {
							t.Fatalf("op %d: %+v, stats %+v, cached %d", op, oom, st, cached)
						}
						ooms++
						break
					}
					if b.size < n || b.stream != s {
						t.Fatalf("op %d: alloc(%d) on %d gave %d bytes on %d", op, n, s, b.size, b.stream)
					}
					live[b] = true
					order = append(order, b)
				case r < 86:
					if len(order) == 0 {
						break
					}
					i := rng.IntN(len(order))
					b := order[i]
					order[i] = order[len(order)-1]
					order = order[:len(order)-1]
					delete(live, b)
					a.free(b)
					if us := uses[b]; len(us) > 0 {
						g := guard{addr: b.addr, size: b.size}
						for _, s := range us {
							g.waits = append(g.waits, fakeEvent{s, ev.lastSeq(s)})
						}
						guards = append(guards, g)
						delete(uses, b)
					}
				case r < 93:
					if len(order) == 0 {
						break
					}
					b := order[rng.IntN(len(order))]
					s := uintptr(1 + rng.IntN(4))
					a.recordStream(b, s)
					if s != b.stream && !slices.Contains(uses[b], s) {
						uses[b] = append(uses[b], s)
					}
				case r < 98:
					ev.complete(uintptr(1 + rng.IntN(4)))
				case r < 99:
					a.emptyCache()
				default:
					a.resetPeak()
				}
				checkInvariants(t, a, raw, live)
				guards = slices.DeleteFunc(guards, func(g guard) bool {
					for _, w := range g.waits {
						if !ev.passed(w.stream, w.seq) {
							return false
						}
					}
					return true
				})
				for _, g := range guards {
					for b := range live {
						if b.addr < g.addr+uint64(g.size) && g.addr < b.addr+uint64(b.size) {
							t.Fatalf("op %d: block %#x reuses memory at %#x before its streams passed the free", op, b.addr, g.addr)
						}
					}
				}
			}
			if ooms == 0 || a.stats().NumOOMs != int64(ooms) {
				t.Fatalf("%d OOMs seen, %d counted: the test should reach the memory cap", ooms, a.stats().NumOOMs)
			}
			for _, b := range order {
				delete(live, b)
				a.free(b)
			}
			a.emptyCache()
			checkInvariants(t, a, raw, live)
			if st := a.stats(); st.Reserved != 0 || st.Allocated != 0 || raw.usedBytes() != 0 || ev.numLive() != 0 {
				t.Fatalf("after freeing everything: %+v, device %d, events %d", st, raw.usedBytes(), ev.numLive())
			}
			t.Logf("%d allocs, %d OOMs, %d retries, peak reserved %s", a.stats().NumAllocs, ooms, a.stats().NumRetries, backend.FormatBytes(a.stats().PeakReserved))
		})
	}
}

// Goroutines allocating, freeing and recording streams at once, with readers of the
// statistics beside them (run with -race).
func TestConcurrentUse(t *testing.T) {
	a, raw, ev := newTest(0)
	const workers, ops = 4, 400
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			ev.complete(99)
			_ = a.stats()
			_ = a.segments()
			a.fragmentation()
		}
	})
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			stream := uintptr(w + 1)
			var mine []*block
			for i := range ops {
				if len(mine) > 0 && rng.IntN(2) == 0 {
					j := rng.IntN(len(mine))
					if rng.IntN(4) == 0 {
						a.recordStream(mine[j], 99)
					}
					a.free(mine[j])
					mine = slices.Delete(mine, j, j+1)
				} else {
					b, err := a.alloc(rng.Int64N(3*mib), backend.Float32, stream)
					if err != nil {
						t.Errorf("worker %d op %d: %v", w, i, err)
						return
					}
					mine = append(mine, b)
				}
				if i%100 == 0 {
					a.emptyCache()
				}
			}
			for _, b := range mine {
				a.free(b)
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	a.emptyCache()
	st := a.stats()
	if st.Allocated != 0 || st.Reserved != 0 || raw.usedBytes() != 0 || ev.numLive() != 0 || st.NumAllocs != st.NumFrees {
		t.Fatalf("after all workers: %+v, device %d, events %d", st, raw.usedBytes(), ev.numLive())
	}
}

// TestAllocCached checks the caller-side fast path: it serves a cached block exactly as
// alloc would (same block, same statistics), and declines when alloc would need the
// device (an empty cache, a free waiting on another stream, a fault).
func TestAllocCached(t *testing.T) {
	a, raw, ev := newTest(1 << 30)
	if b := a.allocCached(4096, backend.Float32, 1); b != nil {
		t.Fatal("allocCached served a request from an empty cache")
	}
	b := mustAlloc(t, a, 4096, 1)
	addr := b.addr
	a.free(b)
	mallocs := raw.numMallocs()
	before := a.stats()
	c := a.allocCached(4000, backend.Float16, 1)
	if c == nil || c.addr != addr {
		t.Fatalf("allocCached = %+v, want the cached block at %#x", c, addr)
	}
	if raw.numMallocs() != mallocs {
		t.Fatal("allocCached called the device")
	}
	after := a.stats()
	if after.Allocated-before.Allocated != 4000 || after.NumAllocs-before.NumAllocs != 1 ||
		after.ByDType[backend.Float16].Allocated-before.ByDType[backend.Float16].Allocated != 4000 || after.Reserved != before.Reserved {
		t.Fatalf("statistics after allocCached: %+v (before %+v)", after, before)
	}
	if d := a.allocCached(4000, backend.Float32, 2); d != nil {
		t.Fatal("allocCached served a block of stream 1 to stream 2")
	}
	// A free that waits for another stream sends every request to the slow path.
	a.recordStream(c, 2)
	a.free(c)
	if d := a.allocCached(64, backend.Float32, 1); d != nil {
		t.Fatal("allocCached served a request while a free waits on an event")
	}
	ev.complete(2)
	d := mustAlloc(t, a, 64, 1) // the slow path settles the event
	a.free(d)
	if e := a.allocCached(64, backend.Float32, 1); e == nil {
		t.Fatal("allocCached declined after the pending free settled")
	} else {
		a.free(e)
	}
	checkInvariants(t, a, raw, map[*block]bool{})
}

// TestFreeUnrecorded checks the caller-side free: a block no other stream used is freed
// at once, exactly as free does; one with recorded streams is left for free (events).
func TestFreeUnrecorded(t *testing.T) {
	a, raw, _ := newTest(1 << 30)
	b := mustAlloc(t, a, 1000, 1)
	before := a.stats()
	if !a.freeUnrecorded(b) {
		t.Fatal("freeUnrecorded declined a block no other stream used")
	}
	after := a.stats()
	if before.Allocated-after.Allocated != 1000 || after.NumFrees-before.NumFrees != 1 {
		t.Fatalf("statistics after freeUnrecorded: %+v (before %+v)", after, before)
	}
	c := mustAlloc(t, a, 1000, 1)
	a.recordStream(c, 2)
	if a.freeUnrecorded(c) {
		t.Fatal("freeUnrecorded freed a block used on another stream")
	}
	if got := a.stats().Allocated; got != after.Allocated+1000 {
		t.Fatalf("a declined freeUnrecorded changed Allocated to %d", got)
	}
	a.free(c)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("freeUnrecorded of a freed block did not panic")
			}
		}()
		a.freeUnrecorded(b)
	}()
	checkInvariants(t, a, raw, map[*block]bool{})
}
