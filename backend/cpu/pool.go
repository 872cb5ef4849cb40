package cpu

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

// The pool is a fixed set of long-lived worker goroutines fed through one
// channel. A ParallelFor call publishes a job, offers it to idle workers
// without blocking, and then works on the job itself: chunks are claimed
// through an atomic counter, so whatever no worker picked up is run by the
// caller. The caller therefore only ever waits for chunks that are already
// running, which is what makes nested calls (fn calling ParallelFor from a
// worker) and concurrent callers deadlock-free: when every worker is busy, a
// nested call simply runs all of its chunks inline.

// poolThreadsEnv names the environment variable that overrides the worker count.
const poolThreadsEnv = "GAMP_CPU_THREADS"

// poolMaxChunks bounds how finely ParallelFor splits a range: enough
// chunks for dynamic load balancing, few enough that claiming them is cheap.
const poolMaxChunks = 16

var workerPool struct {
	once    sync.Once
	workers int
	jobs    chan *poolJob
}

var poolJobs = sync.Pool{New: func() any { return new(poolJob) }}

// poolJob is one ParallelFor call. It is recycled through poolJobs once the
// caller and every worker that was handed it have let go (refs reaches zero).
type poolJob struct {
	fn      func(lo, hi int)
	n       int
	nChunks int
	next    atomic.Int64 // next chunk to claim
	refs    atomic.Int32 // holders: the caller plus workers handed the job
	wg      sync.WaitGroup
	failed  atomic.Bool
	panicMu sync.Mutex
	panicV  any
}

// Workers reports the number of workers.
func Workers() int {
	poolStart()
	return workerPool.workers
}

func poolStart() {
	workerPool.once.Do(func() {
		workerPool.workers = poolWorkerCount(os.Getenv(poolThreadsEnv), runtime.GOMAXPROCS(0))
		if workerPool.workers <= 1 {
			return
		}
		// The caller takes part in every job, so workers-1 helpers keep
		// `workers` goroutines busy.
		workerPool.jobs = make(chan *poolJob, 4*workerPool.workers)
		for range workerPool.workers - 1 {
			go poolWorker()
		}
	})
}

// poolWorkerCount parses the GAMP_CPU_THREADS value env, falling back to def
// when it is unset or not a positive integer.
func poolWorkerCount(env string, def int) int {
	if v, err := strconv.Atoi(env); err == nil && v > 0 {
		return v
	}
	return max(def, 1)
}

func poolWorker() {
	for j := range workerPool.jobs {
		j.run()
		j.release()
	}
}

// ParallelFor splits [0,n) into contiguous chunks of at least grain items and runs
// fn(lo, hi) on the pool, returning when all chunks are done. Small n (n <= grain, or
// one worker) runs inline on the caller's goroutine. Safe for concurrent use by several
// goroutines (two models training at once) and re-entrant (fn may itself call
// ParallelFor: nested calls must not deadlock — run nested work inline).
//
// A panic in fn is re-raised on the calling goroutine, with the same value,
// after every chunk already started has finished; chunks not yet started are
// skipped. The pool survives it.
func ParallelFor(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	poolStart()
	w := workerPool.workers
	if n <= grain || w <= 1 {
		fn(0, n)
		return
	}
	nChunks := min(n/grain, poolMaxChunks*w)
	if nChunks <= 1 {
		fn(0, n)
		return
	}

	j := poolJobs.Get().(*poolJob)
	j.fn, j.n, j.nChunks = fn, n, nChunks
	j.next.Store(0)
	j.failed.Store(false)
	j.panicV = nil
	j.wg.Add(nChunks)
	helpers := min(nChunks-1, w-1)
	j.refs.Store(int32(1 + helpers))
	for i := range helpers {
		select {
		case workerPool.jobs <- j:
		default:
			// Every worker is busy (or the queue is full): the caller runs
			// the chunks itself.
			j.refs.Add(int32(i - helpers))
			helpers = i
		}
	}
	j.run()
	j.wg.Wait()
	failed, v := j.failed.Load(), j.panicV
	j.release()
	if failed {
		panic(v)
	}
}

// run claims and executes chunks until none are left.
func (j *poolJob) run() {
	for {
		c := int(j.next.Add(1) - 1)
		if c >= j.nChunks {
			return
		}
		j.runChunk(c)
	}
}

func (j *poolJob) runChunk(c int) {
	defer j.wg.Done()
	if j.failed.Load() {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			j.panicMu.Lock()
			if !j.failed.Load() {
				j.panicV = r
				j.failed.Store(true)
			}
			j.panicMu.Unlock()
		}
	}()
	// Chunk c covers [c*n/nChunks, (c+1)*n/nChunks): sizes differ by at most
	// one and are at least n/nChunks >= grain.
	lo := c * j.n / j.nChunks
	hi := (c + 1) * j.n / j.nChunks
	j.fn(lo, hi)
}

func (j *poolJob) release() {
	if j.refs.Add(-1) == 0 {
		j.fn = nil
		j.panicV = nil
		poolJobs.Put(j)
	}
}
