package dist

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gamp-ml/gamp/tensor"
)

// mpiGroup is the MPI backend. Every MPI call runs on one goroutine locked to one OS
// thread (the thread that called MPI_Init_thread with MPI_THREAD_FUNNELED): goroutines
// move between threads, MPI's thread support does not follow them. That thread also
// drives the progress of non-blocking all-reduces (Open MPI progresses them only inside
// MPI calls): between commands it polls the oldest request with MPI_Test, backing off
// to sleeps while nothing completes, and when a caller waits it blocks in MPI_Wait.
// So an all-reduce started during backward advances while backward computes.
type mpiGroup struct {
	lib        *mpiLib
	rank, size int
	ownsInit   bool // we called MPI_Init_thread, so we call MPI_Finalize
	// blocking runs async all-reduces as MPI_Allreduce calls on the MPI thread, one
	// after the other, instead of MPI_Iallreduce (GAMP_MPI_BLOCKING=1): lower latency
	// for mid-sized buffers where Open MPI's blocking algorithms beat its non-blocking
	// ones, at the price of a thread spinning in MPI while it waits for slower ranks.
	blocking bool

	cmds   chan mpiCmd
	exited chan struct{}
	closed atomic.Bool
	once   sync.Once
	cerr   error
}

// mpiCmd is one request to the MPI thread: run a blocking call, start an async
// all-reduce, or finish one a caller is waiting for.
type mpiCmd struct {
	run    func()
	start  *mpiOp
	urgent *mpiOp
	stop   bool
}

func newMPI(env Env) (ProcessGroup, error) {
	lib, err := loadMPI()
	if err != nil {
		return nil, err
	}
	g := &mpiGroup{lib: lib, cmds: make(chan mpiCmd, 64), exited: make(chan struct{}), blocking: os.Getenv("GAMP_MPI_BLOCKING") == "1"}
	ready := make(chan error, 1)
	go g.loop(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	if env.MPI && env.Size != g.size {
		g.Close()
		return nil, fmt.Errorf("dist: MPI reports a world of %d processes but OMPI_COMM_WORLD_SIZE=%d", g.size, env.Size)
	}
	return g, nil
}

// loop is the MPI thread.
func (g *mpiGroup) loop(ready chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	defer close(g.exited)
	if err := g.init(); err != nil {
		ready <- err
		return
	}
	ready <- nil

	var pending []*mpiOp
	urgent := 0
	idle := 0
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	finish := func(op *mpiOp) {
		pending = pending[1:]
		if op.urgent {
			urgent--
		}
		op.complete()
		idle = 0
	}
	for {
		var c mpiCmd
		got := false
		switch {
		case len(pending) == 0:
			c, got = <-g.cmds, true
		default:
			select {
			case c = <-g.cmds:
				got = true
			default:
			}
		}
		if !got {
			op := pending[0]
			if urgent > 0 {
				op.waitAll()
				finish(op)
				continue
			}
			if op.testAll() {
				finish(op)
				continue
			}
			// Nothing completed: poll again soon, but give the computation the CPU.
			idle++
			if idle < 32 {
				runtime.Gosched()
				continue
			}
			d := time.Duration(min(idle-31, 50)) * 20 * time.Microsecond
			timer.Reset(d)
			select {
			case c = <-g.cmds:
				got = true
				if !timer.Stop() {
					<-timer.C
				}
			case <-timer.C:
			}
			if !got {
				continue
			}
		}
		switch {
		case c.run != nil:
			c.run()
		case c.start != nil && g.blocking:
			c.start.run()
			c.start.complete()
		case c.start != nil:
			c.start.launch()
			if c.start.err != nil || len(c.start.reqs) == 0 {
				c.start.complete()
			} else {
				pending = append(pending, c.start)
			}
		case c.urgent != nil:
			for _, op := range pending {
				if op == c.urgent && !op.urgent {
					op.urgent = true
					urgent++
				}
			}
		case c.stop:
			for len(pending) > 0 {
				op := pending[0]
				op.waitAll()
				finish(op)
			}
			if g.ownsInit {
				var fin int32
				g.lib.finalized(&fin)
				if fin == 0 {
					g.cerr = g.lib.check("MPI_Finalize", g.lib.finalize())
				}
			}
			return
		}
	}
}

func (g *mpiGroup) init() error {
	l := g.lib
	var flag int32
	if err := l.check("MPI_Finalized", l.finalized(&flag)); err != nil {
		return err
	}
	if flag != 0 {
		return fmt.Errorf("dist: MPI was finalized (a process group was closed); MPI cannot be initialised twice in one process")
	}
	if err := l.check("MPI_Initialized", l.initialized(&flag)); err != nil {
		return err
	}
	if flag == 0 {
		var provided int32
		if rc := l.initThread(nil, nil, mpiThreadFunneled, &provided); rc != mpiSuccess {
			return fmt.Errorf("dist: MPI_Init_thread (%s) failed with code %d", l.path, rc)
		}
		g.ownsInit = true
	}
	// Errors come back as codes (with messages) instead of aborting the job.
	if err := l.check("MPI_Comm_set_errhandler", l.setErrh(l.commWorld, l.errorsReturn)); err != nil {
		return err
	}
	var r, s int32
	if err := l.check("MPI_Comm_rank", l.commRank(l.commWorld, &r)); err != nil {
		return err
	}
	if err := l.check("MPI_Comm_size", l.commSize(l.commWorld, &s)); err != nil {
		return err
	}
	g.rank, g.size = int(r), int(s)
	return nil
}

// call runs f on the MPI thread and returns its error.
func (g *mpiGroup) call(f func() error) error {
	if g.closed.Load() {
		return ErrClosed
	}
	errc := make(chan error, 1)
	if err := g.send(mpiCmd{run: func() { errc <- f() }}); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	case <-g.exited:
		select {
		case err := <-errc:
			return err
		default:
			return ErrClosed
		}
	}
}

func (g *mpiGroup) send(c mpiCmd) error {
	select {
	case g.cmds <- c:
		return nil
	case <-g.exited:
		return ErrClosed
	}
}

// Rank implements ProcessGroup.
func (g *mpiGroup) Rank() int { return g.rank }

// Size implements ProcessGroup.
func (g *mpiGroup) Size() int { return g.size }

// Backend implements ProcessGroup.
func (g *mpiGroup) Backend() string { return "mpi" }

// AllReduce implements ProcessGroup.
func (g *mpiGroup) AllReduce(t *tensor.Tensor, op ReduceOp) error {
	return g.AllReduceAsync(t, op).Wait()
}

// AllReduceAsync implements ProcessGroup: the tensor is copied to the host now, the
// MPI thread starts MPI_Iallreduce on the copy, and Wait writes the result back.
func (g *mpiGroup) AllReduceAsync(t *tensor.Tensor, op ReduceOp) Handle {
	if err := checkReduce(t, op); err != nil {
		return doneHandle{err}
	}
	if g.closed.Load() {
		return doneHandle{ErrClosed}
	}
	a := &mpiOp{g: g, t: t, op: op, buf: readReduce(t), done: make(chan struct{})}
	if err := g.send(mpiCmd{start: a}); err != nil {
		return doneHandle{err}
	}
	return a
}

// Broadcast implements ProcessGroup.
func (g *mpiGroup) Broadcast(t *tensor.Tensor, root int) error {
	if err := checkRoot(g, root); err != nil {
		return err
	}
	if t == nil || t.Released() {
		return fmt.Errorf("dist: broadcast of a nil or released tensor")
	}
	buf := readExact(t)
	err := g.call(func() error {
		w := wireOf(g.lib, buf)
		var pin runtime.Pinner
		defer pin.Unpin()
		if w.ptr != nil {
			pin.Pin(w.ptr)
		}
		for off := 0; off < w.n; off += mpiMaxElemsPerCall {
			n := min(w.n-off, mpiMaxElemsPerCall)
			if err := g.lib.check("MPI_Bcast", g.lib.bcast(w.at(off), int32(n), w.dt, int32(root), g.lib.commWorld)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if g.rank != root {
		writeHost(t, buf)
	}
	return nil
}

// Barrier implements ProcessGroup.
func (g *mpiGroup) Barrier() error {
	return g.call(func() error { return g.lib.check("MPI_Barrier", g.lib.barrier(g.lib.commWorld)) })
}

// Close implements ProcessGroup: it completes the collectives in flight and calls
// MPI_Finalize. MPI cannot be initialised again afterwards in this process.
func (g *mpiGroup) Close() error {
	g.once.Do(func() {
		g.closed.Store(true)
		if g.send(mpiCmd{stop: true}) == nil {
			<-g.exited
		}
	})
	return g.cerr
}

// wire is a host slice as MPI sees it: address, element count and datatype.
type wire struct {
	ptr  unsafe.Pointer
	n    int
	dt   uintptr
	size int // bytes per element
}

func (w wire) at(off int) unsafe.Pointer {
	if w.ptr == nil {
		return nil
	}
	return unsafe.Add(w.ptr, off*w.size)
}

func wireOf(l *mpiLib, buf any) wire {
	first := func(n int, p unsafe.Pointer) unsafe.Pointer {
		if n == 0 {
			return nil
		}
		return p
	}
	switch b := buf.(type) {
	case []float32:
		return wire{first(len(b), unsafe.Pointer(unsafe.SliceData(b))), len(b), l.tFloat, 4}
	case []float64:
		return wire{first(len(b), unsafe.Pointer(unsafe.SliceData(b))), len(b), l.tDouble, 8}
	case []int32:
		return wire{first(len(b), unsafe.Pointer(unsafe.SliceData(b))), len(b), l.tInt32, 4}
	case []int64:
		return wire{first(len(b), unsafe.Pointer(unsafe.SliceData(b))), len(b), l.tInt64, 8}
	case []uint16:
		return wire{first(len(b), unsafe.Pointer(unsafe.SliceData(b))), 2 * len(b), l.tByte, 1}
	case []bool:
		return wire{first(len(b), unsafe.Pointer(unsafe.SliceData(b))), len(b), l.tByte, 1}
	}
	panic(fmt.Sprintf("dist: internal error: no MPI datatype for %T", buf))
}

func (l *mpiLib) op(op ReduceOp) uintptr {
	switch op {
	case Max:
		return l.opMax
	case Min:
		return l.opMin
	}
	return l.opSum
}

// mpiOp is an asynchronous all-reduce: one MPI_Iallreduce per 2^31-1 elements.
type mpiOp struct {
	g      *mpiGroup
	t      *tensor.Tensor
	op     ReduceOp
	buf    any
	pin    runtime.Pinner
	reqs   []uintptr // MPI_Request handles; MPI sets each to MPI_REQUEST_NULL when done
	next   int       // first request not known to be complete
	urgent bool      // a caller waits for it (MPI thread only)
	err    error     // set by the MPI thread before done is closed

	done chan struct{}
	once sync.Once
	werr error
}

// launch starts the all-reduce (MPI thread).
func (a *mpiOp) launch() {
	l := a.g.lib
	w := wireOf(l, a.buf)
	if w.n == 0 {
		return
	}
	a.pin.Pin(w.ptr)
	for off := 0; off < w.n; off += mpiMaxElemsPerCall {
		n := min(w.n-off, mpiMaxElemsPerCall)
		var req uintptr
		if err := l.check("MPI_Iallreduce", l.iallreduce(mpiInPlace, w.at(off), int32(n), w.dt, l.op(a.op), l.commWorld, &req)); err != nil {
			a.err = err
			a.waitAll() // requests already started must still complete
			return
		}
		a.reqs = append(a.reqs, req)
	}
}

// run does the all-reduce with blocking MPI_Allreduce calls (MPI thread).
func (a *mpiOp) run() {
	l := a.g.lib
	w := wireOf(l, a.buf)
	for off := 0; off < w.n && a.err == nil; off += mpiMaxElemsPerCall {
		n := min(w.n-off, mpiMaxElemsPerCall)
		a.err = l.check("MPI_Allreduce", l.allreduce(mpiInPlace, w.at(off), int32(n), w.dt, l.op(a.op), l.commWorld))
	}
	runtime.KeepAlive(a.buf)
}

// testAll reports whether every request completed (MPI thread).
func (a *mpiOp) testAll() bool {
	for a.next < len(a.reqs) {
		var flag int32
		if err := a.g.lib.check("MPI_Test", a.g.lib.test(&a.reqs[a.next], &flag, nil)); err != nil {
			a.err = err
			a.next++
			continue
		}
		if flag == 0 {
			return false
		}
		a.next++
	}
	return true
}

// waitAll blocks until every request completed (MPI thread).
func (a *mpiOp) waitAll() {
	for ; a.next < len(a.reqs); a.next++ {
		if err := a.g.lib.check("MPI_Wait", a.g.lib.wait(&a.reqs[a.next], nil)); err != nil && a.err == nil {
			a.err = err
		}
	}
}

// complete releases the buffer to the waiter (MPI thread).
func (a *mpiOp) complete() {
	a.pin.Unpin()
	close(a.done)
}

// Wait implements Handle.
func (a *mpiOp) Wait() error {
	a.once.Do(func() {
		select {
		case <-a.done:
		default:
			if err := a.g.send(mpiCmd{urgent: a}); err != nil {
				a.werr = err
				return
			}
			select {
			case <-a.done:
			case <-a.g.exited:
				// Close completes every started all-reduce before the thread exits.
				select {
				case <-a.done:
				default:
					a.werr = ErrClosed
					return
				}
			}
		}
		if a.err != nil {
			a.werr = a.err
			return
		}
		if a.op == Avg {
			divide(a.buf, a.g.size)
		}
		writeHost(a.t, a.buf)
	})
	return a.werr
}
