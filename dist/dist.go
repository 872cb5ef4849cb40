package dist

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/gamp-ml/gamp/tensor"
)

// ReduceOp combines the values the processes contribute to an all-reduce.
type ReduceOp int

// The reductions.
const (
	Sum ReduceOp = iota
	Avg          // the sum divided by the world size (floating-point tensors only)
	Max
	Min
)

func (op ReduceOp) String() string {
	switch op {
	case Sum:
		return "sum"
	case Avg:
		return "avg"
	case Max:
		return "max"
	case Min:
		return "min"
	}
	return fmt.Sprintf("ReduceOp(%d)", int(op))
}

// ProcessGroup is the set of processes training together, one per rank, and the
// collectives they run. Every process must call the same collectives in the same order
// (with tensors of the same shape and dtype); a collective returns once this process's
// part is done. A ProcessGroup is safe for use by several goroutines, but collectives
// are matched across processes by their order, so a program issues them from one
// goroutine (or orders them itself).
type ProcessGroup interface {
	// Rank is this process's index in [0, Size()).
	Rank() int
	// Size is the number of processes (the world size).
	Size() int
	// Backend names the implementation: "local" (one process), "mpi", "nccl".
	Backend() string
	// AllReduce replaces t, on every process, with the reduction of every process's t.
	// t must be contiguous; half tensors are reduced in float32.
	AllReduce(t *tensor.Tensor, op ReduceOp) error
	// AllReduceAsync starts AllReduce and returns at once; t is updated, and must not
	// be used by anyone, until the Handle's Wait returns.
	AllReduceAsync(t *tensor.Tensor, op ReduceOp) Handle
	// Broadcast copies root's t into t on every other process.
	Broadcast(t *tensor.Tensor, root int) error
	// Barrier returns once every process has called it.
	Barrier() error
	// Close ends this process's membership (MPI_Finalize). Collectives after Close fail.
	Close() error
}

// Handle is an asynchronous collective in flight.
type Handle interface {
	// Wait blocks until the collective completed and its result is in the tensor, and
	// returns its error. Calling it again returns the same error.
	Wait() error
}

// ErrClosed is returned by collectives on a closed ProcessGroup.
var ErrClosed = errors.New("dist: process group is closed")

// Options configures InitWith.
type Options struct {
	// Backend is "mpi", "nccl", "local" or "" (auto: GAMP_DIST_BACKEND if set; else
	// MPI when an MPI launcher started the process, a single-process group when the
	// world size is 1).
	Backend string
}

// Env is what a launcher tells a process about the world, from the environment:
// Open MPI's OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK when mpirun started it, else
// torchrun's RANK, WORLD_SIZE, LOCAL_RANK (which gamprun sets), MASTER_ADDR and
// MASTER_PORT; and the job's token, GAMP_JOB_TOKEN.
type Env struct {
	Rank, Size, LocalRank int
	MasterAddr            string
	MasterPort            int
	// JobToken is the job's shared secret (GAMP_JOB_TOKEN, which gamprun generates):
	// Rendezvous lets in only ranks that hold it. Keep it out of logs.
	JobToken string
	// MPI is set when an MPI launcher (mpirun) started the process.
	MPI bool
}

// String describes the world without the job token (only whether one is set), so that
// logging an Env leaks no secret.
func (e Env) String() string {
	tok := "unset"
	if e.JobToken != "" {
		tok = "set"
	}
	return fmt.Sprintf("rank %d of %d (local rank %d), master %s, mpi %v, job token %s",
		e.Rank, e.Size, e.LocalRank, net.JoinHostPort(e.MasterAddr, strconv.Itoa(e.MasterPort)), e.MPI, tok)
}

// ReadEnv reads the launcher's variables. With none set it describes a world of one
// process.
func ReadEnv() (Env, error) {
	e := Env{Size: 1, MasterAddr: "127.0.0.1", MasterPort: 29500}
	num := func(name string, dst *int) error {
		v := os.Getenv(name)
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("dist: %s=%q is not an integer", name, v)
		}
		*dst = n
		return nil
	}
	if os.Getenv("OMPI_COMM_WORLD_SIZE") != "" {
		e.MPI = true
		for _, v := range []struct {
			name string
			dst  *int
		}{{"OMPI_COMM_WORLD_RANK", &e.Rank}, {"OMPI_COMM_WORLD_SIZE", &e.Size}, {"OMPI_COMM_WORLD_LOCAL_RANK", &e.LocalRank}} {
			if err := num(v.name, v.dst); err != nil {
				return e, err
			}
		}
	} else {
		for _, v := range []struct {
			name string
			dst  *int
		}{{"RANK", &e.Rank}, {"WORLD_SIZE", &e.Size}, {"LOCAL_RANK", &e.LocalRank}} {
			if err := num(v.name, v.dst); err != nil {
				return e, err
			}
		}
	}
	if a := os.Getenv("MASTER_ADDR"); a != "" {
		e.MasterAddr = a
	}
	e.JobToken = os.Getenv(JobTokenEnv)
	if err := num("MASTER_PORT", &e.MasterPort); err != nil {
		return e, err
	}
	if e.Size < 1 || e.Rank < 0 || e.Rank >= e.Size {
		return e, fmt.Errorf("dist: rank %d is outside a world of size %d (check RANK and WORLD_SIZE)", e.Rank, e.Size)
	}
	if e.LocalRank < 0 || e.LocalRank >= e.Size {
		return e, fmt.Errorf("dist: local rank %d is outside a world of size %d (check LOCAL_RANK)", e.LocalRank, e.Size)
	}
	if e.MasterPort < 1 || e.MasterPort > 65535 {
		return e, fmt.Errorf("dist: MASTER_PORT %d is not a TCP port (want 1 … 65535)", e.MasterPort)
	}
	return e, nil
}

var (
	initMu   sync.Mutex
	initDone ProcessGroup
)

// Init joins the process group the launcher set up (see Options for the choice of
// backend). Under mpirun (or gamprun with mpirun present) it initialises MPI and takes
// the rank and size from MPI; with no launcher, or WORLD_SIZE=1, it returns a group of
// one process that needs no library. Calling Init again returns the same group.
func Init() (ProcessGroup, error) { return InitWith(Options{}) }

// InitWith is Init with options.
func InitWith(o Options) (ProcessGroup, error) {
	initMu.Lock()
	defer initMu.Unlock()
	if initDone != nil {
		return initDone, nil
	}
	env, err := ReadEnv()
	if err != nil {
		return nil, err
	}
	backend := strings.ToLower(o.Backend)
	if backend == "" {
		backend = strings.ToLower(os.Getenv("GAMP_DIST_BACKEND"))
	}
	if backend == "" {
		switch {
		case env.MPI:
			backend = "mpi"
		case env.Size == 1:
			backend = "local"
		default:
			return nil, fmt.Errorf("dist: WORLD_SIZE=%d but no MPI launcher started this process: the MPI backend connects processes through mpirun. "+
				"Start the job with `gamprun -n %d -- PROGRAM …` on a machine with mpirun (%s), or with `mpirun -n %d PROGRAM …`",
				env.Size, env.Size, mpiInstallHint, env.Size)
		}
	}
	var pg ProcessGroup
	switch backend {
	case "local":
		if env.Size != 1 {
			return nil, fmt.Errorf("dist: the local backend is a world of one process, but WORLD_SIZE=%d", env.Size)
		}
		pg = NewLocal()
	case "mpi":
		pg, err = newMPI(env)
	case "nccl":
		pg, err = newNCCL(env)
	default:
		return nil, fmt.Errorf("dist: unknown backend %q (want mpi, nccl or local)", backend)
	}
	if err != nil {
		return nil, err
	}
	initDone = pg
	return pg, nil
}

// checkRoot validates a broadcast root.
func checkRoot(pg ProcessGroup, root int) error {
	if root < 0 || root >= pg.Size() {
		return fmt.Errorf("dist: broadcast root %d is outside a world of size %d", root, pg.Size())
	}
	return nil
}

// doneHandle is a Handle that has already completed.
type doneHandle struct{ err error }

func (h doneHandle) Wait() error { return h.err }

// forget lets Init start a new group after pg was closed.
func forget(pg ProcessGroup) {
	initMu.Lock()
	defer initMu.Unlock()
	if initDone == pg {
		initDone = nil
	}
}
