package cpu

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/gamp-ml/gamp/backend"
)

// allocator hands out 8-byte-aligned blocks with size classes and caches freed blocks
// for reuse, as a GPU caching allocator does: a training step allocates the same sizes
// every step, and reusing them keeps the Go heap (and GC work) flat. It keeps the
// statistics every backend reports.
type allocator struct {
	dev   backend.Device
	mu    sync.Mutex
	cache map[int][][]uint64 // free blocks by capacity in words
	stats backend.MemoryStats
	// cached is the byte total held in cache.
	cached int64
}

func newAllocator(dev backend.Device, limit int64) *allocator {
	a := &allocator{dev: dev, cache: map[int][][]uint64{}}
	a.stats.Limit = limit
	return a
}

// sizeClass rounds a word count up: small blocks to 8 words, larger ones to a quarter
// of their power of two, which bounds waste at 25 %.
func sizeClass(words int) int {
	if words <= 64 {
		return (words + 7) &^ 7
	}
	p := bits.Len(uint(words - 1)) // 2^p ≥ words
	q := 1 << (p - 3)              // eighth steps between 2^(p-1) and 2^p
	return (words + q - 1) / q * q
}

// alloc returns storage for n elements of dt, zeroed unless zero is false (then a block
// from the cache keeps what it held).
func (a *allocator) alloc(b *Backend, dt backend.DType, n int, zero bool) (*storage, error) {
	if n < 0 {
		panic(fmt.Sprintf("cpu: negative allocation of %d %s elements", n, dt))
	}
	nbytes := int64(n) * int64(dt.Size())
	words := sizeClass(int((nbytes + 7) / 8))
	blk, err := a.take(dt, nbytes, words)
	if err != nil {
		return nil, err
	}
	switch {
	case blk.reused && zero:
		// A cached block is zeroed outside the lock, and only as far as n reaches.
		clearWords(blk.words[:(nbytes+7)/8])
	case !zero && poisonUninit:
		for i := range blk.words[:(nbytes+7)/8] {
			blk.words[i] = ^uint64(0) // NaN in every float dtype
		}
	}
	return &storage{owner: b, dt: dt, n: n, bytes: nbytes, words: blk.words}, nil
}

// poisonUninitEnv names the environment variable that, when set, makes AllocUninit fill
// its storage with all-ones bytes (NaN in every float dtype) rather than leave it as the
// cache had it: a test of every caller that claims to overwrite what it allocates.
const poisonUninitEnv = "GAMP_CPU_POISON_UNINIT"

var poisonUninit = os.Getenv(poisonUninitEnv) != ""

// block is a block of words the allocator handed out; reused when it came from the
// cache (and so is not zero).
type block struct {
	words  []uint64
	reused bool
}

// clearWordsGrain is the block size, in words, from which clearWords splits the work.
const clearWordsGrain = 1 << 16

// clearWords zeroes w, on the worker pool when it is large.
func clearWords(w []uint64) {
	if len(w) < 2*clearWordsGrain {
		clear(w)
		return
	}
	ParallelFor(len(w), clearWordsGrain, func(lo, hi int) { clear(w[lo:hi]) })
}

// take finds or makes a block of words words for nbytes bytes of dt and updates the
// statistics.
func (a *allocator) take(dt backend.DType, nbytes int64, words int) (block, error) {
	capBytes := int64(words) * 8
	a.mu.Lock()
	defer a.mu.Unlock()
	var blk block
	if l := a.cache[words]; len(l) > 0 {
		blk = block{l[len(l)-1], true}
		a.cache[words] = l[:len(l)-1]
		a.cached -= capBytes
	} else {
		s := &a.stats
		if total := systemMemory(); s.Limit == 0 && total > 0 && s.Reserved+capBytes > total {
			// Without a cap, a request beyond physical memory would kill the process
			// inside the Go runtime; report it as the out-of-memory error it is.
			s.NumOOMs++
			return blk, &backend.OOMError{
				Device: a.dev, Requested: nbytes, Allocated: s.Allocated,
				Reserved: s.Reserved, Limit: total, FreeCache: a.cached,
			}
		}
		if s.Limit > 0 && s.Reserved+capBytes > s.Limit {
			// Free the cache and retry once, as PyTorch's allocator does.
			if a.cached > 0 && s.Reserved-a.cached+capBytes <= s.Limit {
				a.emptyLocked()
				s.NumRetries++
			} else {
				s.NumOOMs++
				return blk, &backend.OOMError{
					Device: a.dev, Requested: nbytes, Allocated: s.Allocated,
					Reserved: s.Reserved, Limit: s.Limit, FreeCache: a.cached,
				}
			}
		}
		blk.words = make([]uint64, words)
		s.Reserved += capBytes
		s.PeakReserved = max(s.PeakReserved, s.Reserved)
	}
	s := &a.stats
	s.Active += capBytes
	s.PeakActive = max(s.PeakActive, s.Active)
	s.Allocated += nbytes
	s.PeakAllocated = max(s.PeakAllocated, s.Allocated)
	s.TotalAllocated += nbytes
	s.NumAllocs++
	d := &s.ByDType[dt]
	d.Allocated += nbytes
	d.PeakAllocated = max(d.PeakAllocated, d.Allocated)
	d.NumAllocs++
	return blk, nil
}

func (a *allocator) free(s *storage) {
	if s.freed.Swap(true) {
		panic(fmt.Sprintf("cpu: %s storage of %d elements freed twice", s.dt, s.n))
	}
	words := len(s.words)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cache[words] = append(a.cache[words], s.words)
	a.cached += int64(words) * 8
	s.words = nil
	st := &a.stats
	st.Active -= int64(words) * 8
	st.Allocated -= s.bytes
	st.NumFrees++
	st.ByDType[s.dt].Allocated -= s.bytes
}

func (a *allocator) emptyLocked() {
	a.stats.Reserved -= a.cached
	a.cached = 0
	clear(a.cache)
}

func (a *allocator) snapshot() backend.MemoryStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

func (a *allocator) resetPeak() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats.ResetPeak()
}

func (a *allocator) setLimit(n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats.Limit = n
}

func (a *allocator) empty() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.emptyLocked()
}

// ParseBytes parses a memory size: "1073741824", "512MiB", "2GiB", "1.5G", "64MB".
// Binary and decimal suffixes are both read as powers of 1024, as memory limits are.
func ParseBytes(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"TIB", 1 << 40}, {"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10},
		{"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10},
		{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	// NaN, Inf and sizes past int64 would convert to nonsense, so they are refused too.
	if err != nil || !(v >= 0) || v*float64(mult) >= math.MaxInt64 {
		return 0, fmt.Errorf("cpu: bad memory size %q (want e.g. 512MiB or 2GiB)", s)
	}
	return int64(v * float64(mult)), nil
}

// limitFromEnv reads GAMP_CPU_MEMORY_LIMIT.
func limitFromEnv() (int64, error) {
	v := os.Getenv("GAMP_CPU_MEMORY_LIMIT")
	if v == "" {
		return 0, nil
	}
	n, err := ParseBytes(v)
	if err != nil {
		return 0, fmt.Errorf("GAMP_CPU_MEMORY_LIMIT: %w", err)
	}
	return n, nil
}

var (
	sysMemOnce sync.Once
	sysMem     int64
)

// systemMemory returns the machine's physical memory from /proc/meminfo (0 if unknown).
func systemMemory() int64 {
	sysMemOnce.Do(func() {
		b, err := os.ReadFile("/proc/meminfo")
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				f := strings.Fields(rest)
				if len(f) >= 1 {
					if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
						sysMem = kb << 10
					}
				}
			}
		}
	})
	return sysMem
}
