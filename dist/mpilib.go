package dist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/gamp-ml/gamp/internal/dl"
)

// ErrNoMPI is wrapped by the error Init returns when the MPI backend is needed and
// Open MPI's library cannot be loaded; the message says what to install.
var ErrNoMPI = errors.New("dist: Open MPI is not available")

// mpiInstallHint is what to do when libmpi is missing.
const mpiInstallHint = "install Open MPI (Debian/Ubuntu: apt-get install -y openmpi-bin libopenmpi3; " +
	"libopenmpi-dev works too) or set GAMP_MPI_LIB to the path of libmpi.so.40"

// Open MPI's MPI_THREAD_* enum and limits (mpi.h).
const (
	mpiThreadFunneled  = 1
	mpiMaxErrorString  = 256
	mpiSuccess         = 0
	mpiInPlace         = 1 // MPI_IN_PLACE is ((void *) 1)
	mpiMaxElemsPerCall = 1<<31 - 1
)

// mpiLib is libmpi bound at run time. Open MPI's handles (MPI_Comm, MPI_Datatype,
// MPI_Op, MPI_Errhandler) are the addresses of exported globals, found with Dlsym.
type mpiLib struct {
	path string

	commWorld, errorsReturn                uintptr
	tFloat, tDouble, tInt32, tInt64, tByte uintptr
	opSum, opMax, opMin                    uintptr
	initThread                             func(argc, argv unsafe.Pointer, required int32, provided *int32) int32
	initialized                            func(flag *int32) int32
	finalized                              func(flag *int32) int32
	finalize                               func() int32
	commRank                               func(comm uintptr, rank *int32) int32
	commSize                               func(comm uintptr, size *int32) int32
	setErrh                                func(comm, errh uintptr) int32
	allreduce                              func(send uintptr, recv unsafe.Pointer, count int32, dt, op, comm uintptr) int32
	iallreduce                             func(send uintptr, recv unsafe.Pointer, count int32, dt, op, comm uintptr, req *uintptr) int32
	wait                                   func(req *uintptr, status unsafe.Pointer) int32
	test                                   func(req *uintptr, flag *int32, status unsafe.Pointer) int32
	bcast                                  func(buf unsafe.Pointer, count int32, dt uintptr, root int32, comm uintptr) int32
	barrier                                func(comm uintptr) int32
	errorString                            func(code int32, s *byte, n *int32) int32
}

var (
	mpiOnce   sync.Once
	mpiLoaded *mpiLib
	mpiErr    error
)

// loadMPI opens libmpi once per process.
func loadMPI() (*mpiLib, error) {
	mpiOnce.Do(func() { mpiLoaded, mpiErr = openMPI() })
	return mpiLoaded, mpiErr
}

// mpiCandidates lists where libmpi is looked for, first hit wins: GAMP_MPI_LIB (final
// when set), the sonames through the dynamic loader's search (LD_LIBRARY_PATH, ld.so
// cache), then the directories distributions and source builds use.
func mpiCandidates() (paths []string, final bool) {
	if p := os.Getenv("GAMP_MPI_LIB"); p != "" {
		return []string{p}, true
	}
	paths = []string{"libmpi.so.40", "libmpi.so"}
	var dirs []string
	for _, env := range []string{"MPI_HOME", "OMPI_HOME", "OPAL_PREFIX"} {
		if h := os.Getenv(env); h != "" {
			dirs = append(dirs, filepath.Join(h, "lib"), filepath.Join(h, "lib64"))
		}
	}
	dirs = append(dirs,
		"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
		"/usr/lib/x86_64-linux-gnu/openmpi/lib", "/usr/lib64/openmpi/lib", "/usr/lib/openmpi/lib",
		"/usr/local/lib", "/opt/openmpi/lib", "/usr/lib64", "/usr/lib")
	for _, d := range dirs {
		paths = append(paths, filepath.Join(d, "libmpi.so.40"))
	}
	return paths, false
}

func openMPI() (*mpiLib, error) {
	paths, _ := mpiCandidates()
	var handle uintptr
	var tried []string
	var path string
	for _, p := range paths {
		// RTLD_GLOBAL: Open MPI's components are plugins that resolve libmpi's and
		// libopen-pal's symbols from the global namespace.
		h, err := dl.Open(p)
		if err == nil {
			handle, path = h, p
			break
		}
		tried = append(tried, p)
	}
	if handle == 0 {
		return nil, fmt.Errorf("%w: libmpi.so.40 not found (tried %s): %s", ErrNoMPI, strings.Join(tried, ", "), mpiInstallHint)
	}
	l := &mpiLib{path: path}
	sym := func(name string) (uintptr, error) {
		a, err := dl.Sym(handle, name)
		if err != nil || a == 0 {
			return 0, fmt.Errorf("%w: %s has no symbol %s (gamp binds Open MPI 4 or 5; MPICH and others have another ABI): %s", ErrNoMPI, path, name, mpiInstallHint)
		}
		return a, nil
	}
	globals := []struct {
		dst  *uintptr
		name string
	}{
		{&l.commWorld, "ompi_mpi_comm_world"},
		{&l.errorsReturn, "ompi_mpi_errors_return"},
		{&l.tFloat, "ompi_mpi_float"},
		{&l.tDouble, "ompi_mpi_double"},
		{&l.tInt32, "ompi_mpi_int32_t"},
		{&l.tInt64, "ompi_mpi_int64_t"},
		{&l.tByte, "ompi_mpi_byte"},
		{&l.opSum, "ompi_mpi_op_sum"},
		{&l.opMax, "ompi_mpi_op_max"},
		{&l.opMin, "ompi_mpi_op_min"},
	}
	for _, g := range globals {
		a, err := sym(g.name)
		if err != nil {
			return nil, err
		}
		*g.dst = a
	}
	funcs := []struct {
		fptr any
		name string
	}{
		{&l.initThread, "MPI_Init_thread"},
		{&l.initialized, "MPI_Initialized"},
		{&l.finalized, "MPI_Finalized"},
		{&l.finalize, "MPI_Finalize"},
		{&l.commRank, "MPI_Comm_rank"},
		{&l.commSize, "MPI_Comm_size"},
		{&l.setErrh, "MPI_Comm_set_errhandler"},
		{&l.allreduce, "MPI_Allreduce"},
		{&l.iallreduce, "MPI_Iallreduce"},
		{&l.wait, "MPI_Wait"},
		{&l.test, "MPI_Test"},
		{&l.bcast, "MPI_Bcast"},
		{&l.barrier, "MPI_Barrier"},
		{&l.errorString, "MPI_Error_string"},
	}
	for _, f := range funcs {
		a, err := sym(f.name)
		if err != nil {
			return nil, err
		}
		purego.RegisterFunc(f.fptr, a)
	}
	return l, nil
}

// check turns an MPI return code into an error naming the call.
func (l *mpiLib) check(call string, rc int32) error {
	if rc == mpiSuccess {
		return nil
	}
	buf := make([]byte, mpiMaxErrorString)
	var n int32
	msg := fmt.Sprintf("error %d", rc)
	if l.errorString(rc, &buf[0], &n) == mpiSuccess && n > 0 && int(n) <= len(buf) {
		msg = string(buf[:n])
	}
	return fmt.Errorf("dist: %s failed: %s", call, msg)
}
