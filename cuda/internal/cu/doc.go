// Package cu binds the CUDA driver API, NVRTC, cuBLAS, cuBLASLt and NVML at run time,
// without cgo: the libraries are opened with purego when first needed, so gamp builds
// with CGO_ENABLED=0 everywhere and a machine without a GPU gets an error wrapping
// ErrUnavailable that says what was tried, not a link failure. It is the thin layer
// under package cuda (device workers, caching allocator, streams) and mirrors the C
// APIs closely; package cuda is what the rest of gamp uses.
//
// The happy path:
//
//	if err := cu.Init(); err != nil { return err } // wraps ErrUnavailable without a GPU
//	runtime.LockOSThread()                          // the current context is per thread
//	dev, _ := cu.DeviceGet(0)
//	ctx, _ := cu.PrimaryCtxRetain(dev)
//	_ = cu.CtxSetCurrent(ctx)
//	p, err := cu.MemAlloc(1 << 20)                  // errors.Is(err, cu.ErrOutOfMemory) when full
//
// # Where the libraries come from
//
// Each library is looked for once per process (sync.Once), independently of the
// others: a missing NVRTC does not hide the driver. The first candidate that loads wins:
//
//  1. A per-library override, GAMP_LIBCUDA, GAMP_LIBNVRTC, GAMP_LIBCUBLAS,
//     GAMP_LIBCUBLASLT, GAMP_LIBNVML: a file, a soname or a directory. A set override is
//     final: nothing else is tried.
//  2. The directories of GAMP_CUDA_LIBDIR (colon-separated), in order.
//  3. The plain sonames (libcuda.so.1; libnvrtc.so.13 and .12; libcublas.so.13 and .12;
//     libcublasLt.so.13 and .12; libnvidia-ml.so.1), found by the dynamic loader
//     (LD_LIBRARY_PATH, the ld.so cache).
//  4. For the driver libraries (libcuda, NVML): /usr/local/nvidia/lib64 and lib,
//     /usr/lib/<arch>-linux-gnu, /usr/lib64, /usr/lib/wsl/lib. For the toolkit libraries:
//     $CUDA_HOME, $CUDA_PATH and /usr/local/cuda, each × lib64, lib,
//     targets/<arch>-linux/lib; then python wheels: site-packages of $VIRTUAL_ENV,
//     $CONDA_PREFIX, ~/.venv, ~/venv, ~/.local, /opt/conda, /usr/local and /usr, each ×
//     nvidia/cu13/lib and nvidia/cublas/lib or nvidia/cuda_nvrtc/lib.
//
// A stubs/ directory is never searched (its libcuda makes cuInit fail with 34). Next to
// libnvrtc, libnvrtc-builtins is preloaded with RTLD_GLOBAL so that NVRTC finds it even
// in a directory on no search path; libcublasLt is loaded before libcublas for the same
// reason. Libraries reports what was loaded from where, with versions, or why not.
// Init also calls cuInit(0): CUDA_ERROR_NO_DEVICE (100) and CUDA_ERROR_STUB_LIBRARY
// (34) mean "no GPU" as much as a missing library does, and wrap ErrUnavailable too.
//
// # Binding rules
//
//   - Symbols are found with internal/dl (dlsym through purego; GetProcAddress on
//     Windows) and bound with purego.RegisterFunc into typed
//     Go funcs, every lookup checked; never RegisterLibFunc, which panics on a missing
//     symbol. Symbols of newer versions (cuFuncGetParamInfo, 12.4; cuEventElapsedTime_v2,
//     12.8) are optional: without them FuncGetParamInfo returns ErrNotSupported and
//     EventElapsedTime uses cuEventElapsedTime.
//   - The hot path — kernel launches, async copies and memsets, event records and
//     queries, stream synchronization, the cuBLAS GEMMs (19 and 23 arguments) — and
//     cuBLASLt, whose calls pass untyped attribute buffers, keep raw symbol addresses
//     and call purego.SyscallN, about 0.1 µs against 0.3–0.8 µs through RegisterFunc.
//     C int results are taken from the low 32 bits of the register; sizes passed as C
//     int are range-checked.
//   - purego passes mixed integer and float arguments by value unreliably, so no float
//     crosses by value: cuBLAS alpha and beta are host pointers (the default pointer
//     mode), kernel arguments go through cuLaunchKernel's parameter array.
//   - Device addresses are DevicePtr (uint64), never unsafe.Pointer: the garbage
//     collector must not look at them. Handles are integer types for the same reason.
//   - Every status code is checked and returned as an *Error carrying the library's own
//     name and text for it (cuGetErrorName/cuGetErrorString, nvrtcGetErrorString,
//     cublasGetStatusName/String, nvmlErrorString). Out-of-memory codes satisfy
//     errors.Is(err, ErrOutOfMemory), which is backend.ErrOutOfMemory.
//
// # Threads, contexts, memory
//
// The current context belongs to the OS thread, and goroutines move between threads:
// a goroutine that drives a device calls runtime.LockOSThread once, makes the primary
// context current and does all that device's work (a test's subtests are other
// goroutines, hence other threads). cuBLAS and cuBLASLt handles bind to the context
// current when they are created. Memory is freed explicitly; a finalizer must never
// call MemFree (it runs on an arbitrary thread). Async copies from pageable Go memory
// are staged by the driver and do not overlap; MemHostAlloc memory does, and must stay
// untouched until its stream has synchronized.
//
// # Kernel arguments
//
// cuLaunchKernel reads kernelParams[i], a pointer to the i-th argument's value, until
// it returns, and takes each argument's size from the image: an int32 passed where the
// kernel takes an int64 reads garbage (FuncGetParamInfo checks a signature table on
// CUDA 12.4+). LaunchKernel pins the pointer array and every value for the call;
// LaunchKernelArgs launches from a KernelArgs block pinned once for its lifetime, the
// cheap path for a device worker.
//
// # Tests
//
// testdata/fake*.c are stand-ins for the five libraries that run everything on host
// memory; the tests build them with gcc (skipping without it, failing with
// GAMP_REQUIRE_GCC=1) and run the bindings against them in child processes
// (TestStandIn), so that no process mixes a stand-in with a real driver.
// GAMP_CU_BENCH=1 adds the call-overhead benchmarks. gpu_test.go runs on a real GPU
// and skips without one (fails with GAMP_REQUIRE_GPU=1).
package cu
