package cpu

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The pool is a fixed set of long-lived worker goroutines fed through one
// channel. A ParallelFor call publishes a job, offers it to idle workers
// without blocking, and then works on the job itself: chunks are claimed
// through an atomic counter, so whatever no worker picked up is run by the
// caller. The caller therefore only ever waits for chunks that are already
// running, which is what makes nested calls (fn calling ParallelFor from a
// worker) and concurrent callers deadlock-free: when every worker is busy, a
// nested call simply runs all of its chunks inline.
//
// Waking a parked goroutine takes tens of microseconds (70–100 µs measured
// under KVM), as long as a whole 256³ product, so idle workers and waiting
// callers spin for poolSpin before they block: the gaps between the kernels
// of a training step are shorter than that.

// poolThreadsEnv names the environment variable that overrides the worker count.
const poolThreadsEnv = "GAMP_CPU_THREADS"

// poolMaxChunks bounds how finely ParallelFor splits a range: enough
// chunks for dynamic load balancing, few enough that claiming them is cheap.
const poolMaxChunks = 16

// poolSpin is how long an idle worker polls for a job, and a caller for the
// end of its job, before blocking.
const poolSpin = 200 * time.Microsecond

var workerPool struct {
	once    sync.Once
	workers int
	jobs    chan *poolJob
}

// poolFree holds finished jobs for reuse. A job is often released last by a
// worker, whose P a sync.Pool would keep it on out of the caller's reach.
var poolFree struct {
	sync.Mutex
	jobs []*poolJob
}

func poolGetJob() *poolJob {
	poolFree.Lock()
	defer poolFree.Unlock()
	if n := len(poolFree.jobs); n > 0 {
		j := poolFree.jobs[n-1]
		poolFree.jobs = poolFree.jobs[:n-1]
		return j
	}
	return &poolJob{done: make(chan struct{}, 1)}
}

// poolJob is one ParallelFor call. It is recycled through poolFree once the
// caller and every worker that was handed it have let go (refs reaches zero).
type poolJob struct {
	fn      func(lo, hi int)
	n       int
	nChunks int
	next    atomic.Int64  // next chunk to claim
	pending atomic.Int64  // chunks not finished
	done    chan struct{} // receives once, from whoever finishes the last chunk
	refs    atomic.Int32  // holders: the caller plus workers handed the job
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
	// fn calling runtime.Goexit (t.FailNow in a test) ends this goroutine;
	// replace it so the pool keeps its size.
	defer func() { go poolWorker() }()
	for {
		j := poolNextJob()
		j.run()
		j.release()
	}
}

// poolNextJob returns the next job offered to the workers, polling for
// poolSpin before it blocks.
func poolNextJob() *poolJob {
	start := time.Now()
	for i := 1; ; i++ {
		select {
		case j := <-workerPool.jobs:
			return j
		default:
		}
		if i%64 == 0 && time.Since(start) > poolSpin {
			return <-workerPool.jobs
		}
	}
}

// ParallelFor splits [0,n) into contiguous chunks of at least grain items and runs
// fn(lo, hi) on the pool, returning when all chunks are done. Small n (n <= grain, or
// one worker) runs inline on the caller's goroutine. Safe for concurrent use by several
// goroutines (two models training at once) and re-entrant (fn may itself call
// ParallelFor: nested calls must not deadlock — run nested work inline).
//
// Nested calls never wait for a busy worker: each runs inline on its own
// goroutine, except for the chunks an idle worker picks up.
//
// A panic in fn is re-raised on the calling goroutine, with the same value
// (the stack of the original panic is lost), after every chunk already
// started has finished; chunks not yet started are skipped. The pool
// survives it.
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

	j := poolGetJob()
	j.fn, j.n, j.nChunks = fn, n, nChunks
	j.next.Store(0)
	j.pending.Store(int64(nChunks))
	j.failed.Store(false)
	j.panicV = nil
	helpers := min(nChunks-1, w-1)
	j.refs.Store(int32(1 + helpers))
offer:
	for i := range helpers {
		select {
		case workerPool.jobs <- j:
		default:
			// The queue is full (every worker busy): the caller runs the
			// chunks itself. Drop the references of the offers not made.
			j.refs.Add(int32(i - helpers))
			break offer
		}
	}
	j.run()
	j.wait()
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

// wait returns once every chunk has finished, polling for poolSpin before
// it blocks.
func (j *poolJob) wait() {
	start := time.Now()
	for i := 1; j.pending.Load() > 0; i++ {
		if i%64 == 0 && time.Since(start) > poolSpin {
			break
		}
	}
	<-j.done
}

func (j *poolJob) runChunk(c int) {
	defer func() {
		if j.pending.Add(-1) == 0 {
			j.done <- struct{}{}
		}
	}()
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
		poolFree.Lock()
		if len(poolFree.jobs) < 64 {
			poolFree.jobs = append(poolFree.jobs, j)
		}
		poolFree.Unlock()
	}
}
