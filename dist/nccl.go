package dist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/ebitengine/purego"
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/cuda"
	"github.com/gamp-ml/gamp/internal/dl"
	"github.com/gamp-ml/gamp/tensor"
)

// The NCCL backend, compiled everywhere and wired into Init (Backend "nccl"). It has run
// on one H100 in a world of one (nccl_gpu_test.go: every collective on each dtype, DDP
// bit for bit as the bare model), not yet across GPUs or machines:
//
//   - libnccl.so.2 is bound at run time with purego (GAMP_NCCL_LIB, the soname, the
//     CUDA directories, pip's nvidia/nccl/lib).
//   - Rendezvous: rank 0 calls ncclGetUniqueId and shares the 128-byte id over TCP at
//     MASTER_ADDR:MASTER_PORT with the ranks holding the job's token (see Rendezvous); every rank then calls
//     ncclCommInitRank(&comm, size, id, rank). The id is a struct passed by value.
//   - The communicator is created, and every collective runs, on the worker thread of
//     the rank's GPU (cuda.Backend.Run; LOCAL_RANK picks the GPU), since NCCL state
//     belongs to the OS thread (see docs/cuda-notes.md).
//   - Collectives work on device memory in place: a tensor's storage implements
//     DeviceBuffer (the CUDA backend's does). They are queued on the device's compute
//     stream, after the kernels that produced the tensor; Wait synchronises the
//     tensor's backend. NCCL reduces half tensors natively.

// DeviceBuffer is what a device backend's storage offers the NCCL backend.
type DeviceBuffer interface {
	backend.Storage
	// DevicePtr is the device address of element 0 (a CUdeviceptr).
	DevicePtr() uint64
	// Stream is the CUstream the backend queues this storage's work on (0: default).
	Stream() uintptr
}

// ErrNoNCCL is wrapped by the errors the NCCL backend returns when it cannot run.
var ErrNoNCCL = errors.New("dist: NCCL backend unavailable")

type ncclUniqueID struct{ Internal [128]byte }

type ncclLib struct {
	path          string
	getVersion    func(v *int32) int32
	getUniqueID   func(id *ncclUniqueID) int32
	commInitRank  func(comm *uintptr, nranks int32, id ncclUniqueID, rank int32) int32
	allReduce     func(send, recv uintptr, count uintptr, dt, op int32, comm, stream uintptr) int32
	broadcast     func(send, recv uintptr, count uintptr, dt, root int32, comm, stream uintptr) int32
	commDestroy   func(comm uintptr) int32
	getErrorStrng func(rc int32) string
}

// NCCL enums (nccl.h).
const (
	ncclInt32, ncclInt64, ncclFloat16, ncclFloat32, ncclFloat64, ncclBFloat16 = 2, 4, 6, 7, 8, 9
	ncclSum, ncclMax, ncclMin, ncclAvg                                        = 0, 2, 3, 4
)

var (
	ncclOnce   sync.Once
	ncclLoaded *ncclLib
	ncclErr    error
)

func ncclCandidates() []string {
	if p := os.Getenv("GAMP_NCCL_LIB"); p != "" {
		return []string{p}
	}
	paths := []string{"libnccl.so.2", "libnccl.so"}
	var dirs []string
	for _, h := range []string{os.Getenv("CUDA_HOME"), "/usr/local/cuda"} {
		if h != "" {
			dirs = append(dirs, filepath.Join(h, "lib64"), filepath.Join(h, "lib"), filepath.Join(h, "targets/x86_64-linux/lib"))
		}
	}
	dirs = append(dirs, "/usr/lib/x86_64-linux-gnu", "/usr/lib64")
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		m, _ := filepath.Glob(filepath.Join(v, "lib/python3*/site-packages/nvidia/nccl/lib"))
		dirs = append(dirs, m...)
	}
	for _, d := range dirs {
		paths = append(paths, filepath.Join(d, "libnccl.so.2"))
	}
	return paths
}

func loadNCCL() (*ncclLib, error) {
	ncclOnce.Do(func() { ncclLoaded, ncclErr = openNCCL() })
	return ncclLoaded, ncclErr
}

func openNCCL() (*ncclLib, error) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		return nil, fmt.Errorf("%w on %s", ErrNoNCCL, runtime.GOARCH)
	}
	var h uintptr
	l := &ncclLib{}
	var tried []string
	for _, p := range ncclCandidates() {
		if x, err := dl.Open(p); err == nil {
			h, l.path = x, p
			break
		}
		tried = append(tried, p)
	}
	if h == 0 {
		return nil, fmt.Errorf("%w: libnccl.so.2 not found (tried %s): install NCCL (pip install nvidia-nccl-cu12, or NVIDIA's libnccl2 package) or set GAMP_NCCL_LIB", ErrNoNCCL, strings.Join(tried, ", "))
	}
	return l, l.bind(func(name string) (uintptr, error) { return dl.Sym(h, name) })
}

// bind registers the NCCL functions found by sym.
func (l *ncclLib) bind(sym func(string) (uintptr, error)) error {
	for _, f := range []struct {
		fptr any
		name string
	}{
		{&l.getVersion, "ncclGetVersion"},
		{&l.getUniqueID, "ncclGetUniqueId"},
		{&l.commInitRank, "ncclCommInitRank"},
		{&l.allReduce, "ncclAllReduce"},
		{&l.broadcast, "ncclBroadcast"},
		{&l.commDestroy, "ncclCommDestroy"},
		{&l.getErrorStrng, "ncclGetErrorString"},
	} {
		a, err := sym(f.name)
		if err != nil || a == 0 {
			return fmt.Errorf("%w: %s has no symbol %s", ErrNoNCCL, l.path, f.name)
		}
		purego.RegisterFunc(f.fptr, a)
	}
	return nil
}

func (l *ncclLib) check(call string, rc int32) error {
	if rc == 0 {
		return nil
	}
	return fmt.Errorf("dist: %s failed: %s (ncclResult %d)", call, l.getErrorStrng(rc), rc)
}

// ncclGroup is the NCCL backend (see above).
type ncclGroup struct {
	lib        *ncclLib
	rank, size int
	comm       uintptr
	mu         sync.Mutex
	dev        *cuda.Backend // this rank's GPU, whose worker thread makes every NCCL call
}

func newNCCL(env Env) (ProcessGroup, error) {
	lib, err := loadNCCL()
	if err != nil {
		return nil, err
	}
	var id ncclUniqueID
	if env.Rank == 0 {
		if err := lib.check("ncclGetUniqueId", lib.getUniqueID(&id)); err != nil {
			return nil, err
		}
	}
	blob, err := Rendezvous(env, id.Internal[:], 5*time.Minute)
	if err != nil {
		return nil, err
	}
	if len(blob) != len(id.Internal) {
		return nil, fmt.Errorf("dist: rendezvous delivered %d bytes, an ncclUniqueId has %d", len(blob), len(id.Internal))
	}
	copy(id.Internal[:], blob)
	g := &ncclGroup{lib: lib, rank: env.Rank, size: env.Size}
	// NCCL binds the communicator to the device current on the calling thread: create it
	// on the worker thread of this rank's GPU (LOCAL_RANK), where collectives run too.
	dev, err := cuda.Open(env.LocalRank)
	if err != nil {
		return nil, fmt.Errorf("%w: rank %d (LOCAL_RANK %d) has no GPU: %w", ErrNoNCCL, env.Rank, env.LocalRank, err)
	}
	g.dev = dev
	err = dev.Run(func() error {
		return lib.check("ncclCommInitRank", lib.commInitRank(&g.comm, int32(env.Size), id, int32(env.Rank)))
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (g *ncclGroup) Rank() int       { return g.rank }
func (g *ncclGroup) Size() int       { return g.size }
func (g *ncclGroup) Backend() string { return "nccl" }

// device returns t's device buffer, its address at t's offset, and NCCL's dtype.
func (g *ncclGroup) device(t *tensor.Tensor) (DeviceBuffer, uintptr, int32, error) {
	if t == nil || t.Released() || !t.IsContiguous() {
		return nil, 0, 0, fmt.Errorf("dist: NCCL collectives need a live, contiguous tensor")
	}
	s, off := t.Storage()
	db, ok := s.(DeviceBuffer)
	if !ok {
		return nil, 0, 0, fmt.Errorf("%w: NCCL needs tensors in GPU memory, got one on %s", ErrNoNCCL, t.Device())
	}
	dt := map[tensor.DType]int32{tensor.Int32: ncclInt32, tensor.Int64: ncclInt64, tensor.Float16: ncclFloat16,
		tensor.Float32: ncclFloat32, tensor.Float64: ncclFloat64, tensor.BFloat16: ncclBFloat16}
	d, ok := dt[t.DType()]
	if !ok {
		return nil, 0, 0, fmt.Errorf("dist: NCCL cannot reduce %s tensors", t.DType())
	}
	return db, uintptr(db.DevicePtr()) + uintptr(off*t.DType().Size()), d, nil
}

type ncclHandle struct {
	t   *tensor.Tensor
	err error
}

func (h ncclHandle) Wait() error {
	if h.err != nil {
		return h.err
	}
	return h.t.Backend().Synchronize()
}

func (g *ncclGroup) AllReduceAsync(t *tensor.Tensor, op ReduceOp) Handle {
	if err := checkReduce(t, op); err != nil {
		return doneHandle{err}
	}
	db, p, dt, err := g.device(t)
	if err != nil {
		return doneHandle{err}
	}
	nop := map[ReduceOp]int32{Sum: ncclSum, Avg: ncclAvg, Max: ncclMax, Min: ncclMin}[op]
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.comm == 0 {
		return doneHandle{ErrClosed}
	}
	err = onDevice(t, func() error {
		return g.lib.check("ncclAllReduce", g.lib.allReduce(p, p, uintptr(t.Numel()), dt, nop, g.comm, db.Stream()))
	})
	return ncclHandle{t, err}
}

func (g *ncclGroup) AllReduce(t *tensor.Tensor, op ReduceOp) error {
	return g.AllReduceAsync(t, op).Wait()
}

func (g *ncclGroup) Broadcast(t *tensor.Tensor, root int) error {
	if err := checkRoot(g, root); err != nil {
		return err
	}
	db, p, dt, err := g.device(t)
	if err != nil {
		return err
	}
	g.mu.Lock()
	if g.comm == 0 {
		g.mu.Unlock()
		return ErrClosed
	}
	err = onDevice(t, func() error {
		return g.lib.check("ncclBroadcast", g.lib.broadcast(p, p, uintptr(t.Numel()), dt, int32(root), g.comm, db.Stream()))
	})
	g.mu.Unlock()
	if err != nil {
		return err
	}
	return t.Backend().Synchronize()
}

// onDevice runs f on the worker thread of t's CUDA device (NCCL state belongs to the
// thread), or directly for a backend without one.
func onDevice(t *tensor.Tensor, f func() error) error {
	if r, ok := t.Backend().(interface{ Run(func() error) error }); ok {
		return r.Run(f)
	}
	return f()
}

// Barrier all-reduces one element on this rank's GPU, as torch.distributed does for
// NCCL.
func (g *ncclGroup) Barrier() error {
	if g.dev == nil {
		return fmt.Errorf("%w: Barrier needs this rank's GPU", ErrNoNCCL)
	}
	ctx := tensor.NewContext()
	defer ctx.Close()
	one := tensor.Zeros(tensor.Shape{1}, tensor.WithDevice(g.dev.Device()), tensor.WithContext(ctx))
	return g.AllReduce(one, Sum)
}

func (g *ncclGroup) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.comm == 0 {
		return nil
	}
	err := g.lib.check("ncclCommDestroy", g.lib.commDestroy(g.comm))
	g.comm = 0
	forget(g)
	return err
}
