package cpu

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// poolCover runs ParallelFor(n, grain) and checks that every index is
// visited exactly once, in chunks of at least grain (or one inline chunk).
func poolCover(t *testing.T, n, grain int) {
	t.Helper()
	hits := make([]atomic.Int32, max(n, 0))
	var mu sync.Mutex
	var chunks [][2]int
	ParallelFor(n, grain, func(lo, hi int) {
		mu.Lock()
		chunks = append(chunks, [2]int{lo, hi})
		mu.Unlock()
		for i := lo; i < hi; i++ {
			hits[i].Add(1)
		}
	})
	for i := range hits {
		if h := hits[i].Load(); h != 1 {
			t.Fatalf("n=%d grain=%d: index %d visited %d times", n, grain, i, h)
		}
	}
	if n <= 0 {
		if len(chunks) != 0 {
			t.Fatalf("n=%d: fn called %d times, want 0", n, len(chunks))
		}
		return
	}
	for _, c := range chunks {
		if c[1] <= c[0] || (c[1]-c[0] < grain && len(chunks) > 1) {
			t.Fatalf("n=%d grain=%d: bad chunk [%d,%d) among %d", n, grain, c[0], c[1], len(chunks))
		}
	}
}

func TestPoolCoverage(t *testing.T) {
	for _, n := range []int{-3, 0, 1, 2, 3, 7, 64, 1000, 4097, 100003} {
		for _, grain := range []int{-1, 0, 1, 2, 5, 64, 1000, 200000} {
			t.Run(fmt.Sprintf("n=%d/grain=%d", n, grain), func(t *testing.T) {
				poolCover(t, n, grain)
			})
		}
	}
}

func TestPoolWorkers(t *testing.T) {
	if w := Workers(); w < 1 {
		t.Fatalf("Workers() = %d", w)
	}
	for _, tc := range []struct {
		env  string
		def  int
		want int
	}{
		{"", 8, 8},
		{"3", 8, 3},
		{"1", 8, 1},
		{"0", 8, 8},
		{"-2", 8, 8},
		{"many", 8, 8},
		{"", 0, 1},
	} {
		if got := poolWorkerCount(tc.env, tc.def); got != tc.want {
			t.Errorf("poolWorkerCount(%q, %d) = %d, want %d", tc.env, tc.def, got, tc.want)
		}
	}
}

// TestPoolThreadsEnv runs this test binary again with GAMP_CPU_THREADS set
// and checks that the pool picks it up.
func TestPoolThreadsEnv(t *testing.T) {
	if want := os.Getenv("GAMP_TEST_WANT_WORKERS"); want != "" {
		if got := strconv.Itoa(Workers()); got != want {
			t.Fatalf("Workers() = %s, want %s", got, want)
		}
		poolCover(t, 1000, 1)
		return
	}
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	for _, n := range []string{"1", "3"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPoolThreadsEnv$", "-test.count=1")
		cmd.Env = append(os.Environ(), poolThreadsEnv+"="+n, "GAMP_TEST_WANT_WORKERS="+n)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s=%s: %v\n%s", poolThreadsEnv, n, err, out)
		}
	}
}

// TestPoolInline checks that small ranges run on the caller's goroutine.
func TestPoolInline(t *testing.T) {
	calls := 0 // not atomic: the race detector flags it unless run inline
	ParallelFor(10, 10, func(lo, hi int) {
		calls++
		if lo != 0 || hi != 10 {
			t.Errorf("chunk [%d,%d), want [0,10)", lo, hi)
		}
	})
	if calls != 1 {
		t.Fatalf("fn called %d times, want 1", calls)
	}
}

func TestPoolConcurrentCallers(t *testing.T) {
	// More callers than the job queue holds, so that offers also fail.
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for r := range 20 {
				n := 1 + (g*131+r*17)%5000
				var sum atomic.Int64
				ParallelFor(n, 7, func(lo, hi int) {
					s := int64(0)
					for i := lo; i < hi; i++ {
						s += int64(i)
					}
					sum.Add(s)
				})
				if want := int64(n) * int64(n-1) / 2; sum.Load() != want {
					t.Errorf("goroutine %d round %d: sum %d, want %d", g, r, sum.Load(), want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestPoolNested checks that fn may call ParallelFor (three levels deep,
// from several goroutines at once) without deadlock.
func TestPoolNested(t *testing.T) {
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			var count atomic.Int64
			ParallelFor(16, 1, func(lo, hi int) {
				for range hi - lo {
					ParallelFor(16, 1, func(lo, hi int) {
						for range hi - lo {
							ParallelFor(16, 1, func(lo, hi int) {
								count.Add(int64(hi - lo))
							})
						}
					})
				}
			})
			if count.Load() != 16*16*16 {
				t.Errorf("count %d, want %d", count.Load(), 16*16*16)
			}
		})
	}
	wg.Wait()
}

// TestPoolPanic checks that a panic in fn reaches the caller with its value
// and leaves the pool working.
func TestPoolPanic(t *testing.T) {
	type boom struct{ at int }
	for round := range 20 {
		func() {
			defer func() {
				r := recover()
				if b, ok := r.(boom); !ok || b.at != 500 {
					t.Fatalf("round %d: recovered %#v, want boom{500}", round, r)
				}
			}()
			ParallelFor(1000, 1, func(lo, hi int) {
				if lo <= 500 && 500 < hi {
					panic(boom{500})
				}
			})
			t.Fatalf("round %d: ParallelFor returned normally", round)
		}()
		// A nested panic travels through both levels.
		func() {
			defer func() {
				if _, ok := recover().(boom); !ok {
					t.Fatalf("round %d: nested panic lost", round)
				}
			}()
			ParallelFor(8, 1, func(lo, hi int) {
				ParallelFor(8, 1, func(lo, hi int) {
					if lo == 0 {
						panic(boom{500})
					}
				})
			})
		}()
		poolCover(t, 10000, 3)
	}
}

// TestPoolGoexit checks that fn calling runtime.Goexit (as t.FailNow does)
// ends only the goroutine it runs on and leaves the pool working.
func TestPoolGoexit(t *testing.T) {
	for range 20 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			ParallelFor(4, 1, func(lo, hi int) {
				if lo == 3 {
					runtime.Goexit()
				}
			})
		}()
		<-done
	}
	poolCover(t, 10000, 3)
}

// BenchmarkParallelFor measures the cost of one parallel call with trivial
// work: the overhead a kernel pays for using the pool.
func BenchmarkParallelFor(b *testing.B) {
	for _, n := range []int{2, 64} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			var sink atomic.Int64
			fn := func(lo, hi int) { sink.Add(int64(hi - lo)) }
			for b.Loop() {
				ParallelFor(n, 1, fn)
			}
		})
	}
	b.Run("goroutines", func(b *testing.B) {
		// For comparison: a goroutine per worker and a WaitGroup.
		var sink atomic.Int64
		for b.Loop() {
			var wg sync.WaitGroup
			for range runtime.GOMAXPROCS(0) {
				wg.Go(func() { sink.Add(1) })
			}
			wg.Wait()
		}
	})
}
