package cpu

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/internal/testenv"
)

func TestParseBytes(t *testing.T) {
	cases := map[string]int64{
		"1073741824": 1 << 30, "512MiB": 512 << 20, "2GiB": 2 << 30, "1.5G": 3 << 29,
		"64MB": 64 << 20, "10k": 10 << 10, "7B": 7, " 3 GiB ": 3 << 30,
	}
	for in, want := range cases {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "-1G", "1.2.3M"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) succeeded", bad)
		}
	}
}

func TestMemoryLimitFromEnvironment(t *testing.T) {
	t.Setenv("GAMP_CPU_MEMORY_LIMIT", "1MiB")
	b, err := New(40)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Alloc(backend.Float32, 1<<20); !errors.Is(err, backend.ErrOutOfMemory) {
		t.Fatalf("4 MiB under a 1 MiB cap: err = %v, want out of memory", err)
	}
	s, err := b.Alloc(backend.Float32, 1000)
	if err != nil {
		t.Fatal(err)
	}
	b.Free(s)
	st := b.MemoryStats()
	if st.NumOOMs != 1 || st.Limit != 1<<20 {
		t.Fatalf("stats %+v", st)
	}
	t.Setenv("GAMP_CPU_MEMORY_LIMIT", "a lot")
	if _, err := New(41); err == nil || !strings.Contains(err.Error(), "GAMP_CPU_MEMORY_LIMIT") {
		t.Fatalf("bad env value: err = %v", err)
	}
}

// Freed blocks are cached and reused; EmptyCache returns them, and a cap that only the
// cache is in the way of is met by emptying it and retrying once.
func TestCachingAllocatorReuseAndRetry(t *testing.T) {
	b, _ := New(42)
	s1, _ := b.Alloc(backend.Float16, 1000)
	b.Free(s1)
	st := b.MemoryStats()
	if st.Allocated != 0 || st.Reserved == 0 {
		t.Fatalf("after free: %+v", st)
	}
	s2, _ := b.Alloc(backend.Float16, 1000)
	if got := b.MemoryStats().Reserved; got != st.Reserved {
		t.Fatalf("reuse grew reserved from %d to %d", st.Reserved, got)
	}
	b.Free(s2)
	b.SetMemoryLimit(st.Reserved + 3000)      // fits the new block alone, not beside the cached one
	s3, err := b.Alloc(backend.Float32, 1000) // needs more than the cap minus the cached block
	if err != nil {
		t.Fatal(err)
	}
	if b.MemoryStats().NumRetries != 1 {
		t.Fatalf("want one retry after emptying the cache: %+v", b.MemoryStats())
	}
	b.Free(s3)
	b.EmptyCache()
	if r := b.MemoryStats().Reserved; r != 0 {
		t.Fatalf("EmptyCache left %d reserved", r)
	}
	sum := backend.MemorySummary(b)
	for _, want := range []string{"Allocated memory", "Active memory", "Reserved memory", "float16", "float32", "Alloc retries"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}

// Active counts the blocks in use at their size-class capacity: at least Allocated, at
// most a quarter more (plus the 8-word granularity), none of the cache, and its peak is
// what a cap must hold.
func TestActiveBytes(t *testing.T) {
	b, _ := New(43)
	var live []backend.Storage
	for _, n := range []int{1, 7, 65, 1000, 1025, 4097, 100000} {
		s, err := b.Alloc(backend.Float32, n)
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, s)
		st := b.MemoryStats()
		if st.Active < st.Allocated || st.Active > st.Allocated*5/4+64*int64(len(live)) || st.PeakActive != st.Active {
			t.Fatalf("after %d floats: allocated %d, active %d (peak %d)", n, st.Allocated, st.Active, st.PeakActive)
		}
	}
	peak := b.MemoryStats().PeakActive
	for _, s := range live[:4] {
		b.Free(s)
	}
	st := b.MemoryStats()
	if st.Active >= peak || st.PeakActive != peak || st.Reserved != peak {
		t.Fatalf("after freeing four: active %d, peak %d (was %d), reserved %d (the cache keeps the blocks)", st.Active, st.PeakActive, peak, st.Reserved)
	}
	b.ResetPeak()
	if st := b.MemoryStats(); st.PeakActive != st.Active {
		t.Fatalf("ResetPeak: peak active %d, active %d", st.PeakActive, st.Active)
	}
	for _, s := range live[4:] {
		b.Free(s)
	}
	if st := b.MemoryStats(); st.Active != 0 || st.Allocated != 0 {
		t.Fatalf("all freed: active %d, allocated %d", st.Active, st.Allocated)
	}
}

// Without a cap, a request beyond physical memory is an out-of-memory error, not a
// crash of the Go runtime.
func TestHugeAllocationIsAnError(t *testing.T) {
	if systemMemory() == 0 {
		testenv.Skip(t, testenv.ProcFS, "no /proc/meminfo to read the machine's memory from")
	}
	b, _ := New(43)
	// 4 TiB where int has 64 bits; on 32-bit platforms the largest int (8 GiB of
	// float32s), still beyond any 32-bit address space.
	n := int(min(int64(1)<<40, math.MaxInt))
	_, err := b.Alloc(backend.Float32, n)
	if !errors.Is(err, backend.ErrOutOfMemory) {
		t.Fatalf("err = %v, want out of memory", err)
	}
}

// AllocUninit counts like Alloc and reuses cached blocks without clearing them; Alloc
// still hands out reused blocks zeroed, large ones (cleared on the pool) included.
func TestAllocUninit(t *testing.T) {
	b, _ := New(44)
	for _, n := range []int{1000, 3 << 17} {
		s, err := b.AllocUninit(backend.Float32, n)
		if err != nil {
			t.Fatal(err)
		}
		if s.Len() != n || s.DType() != backend.Float32 {
			t.Fatalf("AllocUninit(Float32, %d) gave %d %s elements", n, s.Len(), s.DType())
		}
		for i := range st(s).f32() {
			st(s).f32()[i] = 1
		}
		before := b.MemoryStats()
		b.Free(s)
		u, _ := b.AllocUninit(backend.Float32, n)
		if after := b.MemoryStats(); after.Reserved != before.Reserved || after.NumAllocs != before.NumAllocs+1 {
			t.Fatalf("n=%d: reuse changed reserved %d → %d, allocs %d → %d", n, before.Reserved, after.Reserved, before.NumAllocs, after.NumAllocs)
		}
		if !poisonUninit && st(u).f32()[n-1] != 1 {
			t.Errorf("n=%d: AllocUninit cleared a cached block", n)
		}
		b.Free(u)
		z, _ := b.Alloc(backend.Float32, n)
		for i, v := range st(z).f32() {
			if v != 0 {
				t.Fatalf("n=%d: Alloc of a reused block: [%d] = %v, want 0", n, i, v)
			}
		}
		b.Free(z)
	}
}
