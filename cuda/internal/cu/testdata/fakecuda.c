// fakecuda.c: a stand-in libcuda.so.1 for testing package cu on machines without a GPU.
//
// It implements, on host memory, the driver symbols package cu binds: "device"
// allocations are aligned host allocations whose address is the CUdeviceptr, copies
// are memcpy (async = sync), streams and events are tagged structs, events record
// CLOCK_MONOTONIC so cuEventElapsedTime measures real time. Like the real driver it
// needs cuInit before anything else (CUDA_ERROR_NOT_INITIALIZED) and a current
// context, per thread, for memory, streams and launches (CUDA_ERROR_INVALID_CONTEXT),
// and it checks that device pointers fall inside an allocation.
//
// Modules: an image starting "\x7fELFFAKECUBIN" or "// fake PTX" (what fakenvrtc.c
// produces) loads; it has two kernels, run on the host at launch:
//   fake_fill(unsigned* dst, unsigned value, unsigned n): dst[0..n) = value
//   fake_record(unsigned* out): out[0..8) = grid x,y,z, block x,y,z, shared mem,
//                               stream id (0 for the default stream)
// Any other image or function: CUDA_ERROR_NOT_SUPPORTED (801).
//
// Real kernels: when GAMP_FAKE_KERNELS names the g++ shim library of gamp's kernels
// (package internal/kernelshim), cuModuleLoadData accepts any image and the module is
// that library (dlopened once); cuModuleGetFunction returns the address of the shim's
// call_<name> (CUDA_ERROR_NOT_FOUND without one), cuFuncGetParamInfo asks its
// info_<name> (parameter offsets and sizes the C++ compiler derived from the kernel's
// declaration; CUDA_ERROR_NOT_SUPPORTED if it has none), and cuLaunchKernel runs the
// whole grid on the calling thread before it returns: call_<name>(kernelParams, grid
// x, block x). Launches with dynamic shared memory or y/z dimensions other than 1 are
// CUDA_ERROR_INVALID_VALUE (the shim runs 1-D grids without dynamic shared memory, as
// gamp launches them); a shim error (a barrier in a grid-stride kernel, divergent
// barriers) is CUDA_ERROR_LAUNCH_FAILED (719).
//
// Environment: FAKECUDA_INIT_RESULT=n makes cuInit return n (100: no device, 34:
// stub); FAKECUDA_MEM_LIMIT=bytes is the device size (default 1 GiB), past which
// cuMemAlloc fails with CUDA_ERROR_OUT_OF_MEMORY.
//
// Build: gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o libcuda.so.1 fakecuda.c
// (glibc 2.34 or newer has dlopen in libc; older ones need -ldl).
// -DFAKE_OLD_DRIVER leaves out cuEventElapsedTime_v2 and cuFuncGetParamInfo, like a
// CUDA 12.2 driver.

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef struct fake_ctx *CUcontext;
typedef struct fake_stream *CUstream;
typedef struct fake_event *CUevent;
typedef struct fake_module *CUmodule;
typedef void *CUfunction;

enum {
    OK = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    NOT_INITIALIZED = 3,
    INVALID_DEVICE = 101,
    INVALID_IMAGE = 200,
    INVALID_CONTEXT = 201,
    INVALID_HANDLE = 400,
    NOT_FOUND = 500,
    ILLEGAL_ADDRESS = 700,
    PEER_ALREADY_ENABLED = 704,
    LAUNCH_FAILED = 719,
    NOT_SUPPORTED = 801,
};

static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

struct fake_ctx {
    int retained;
    int peer_enabled;
};
struct fake_stream {
    uint32_t magic;
    unsigned id;
};
struct fake_event {
    uint32_t magic;
    unsigned flags;
    int recorded;
    struct timespec t;
};
struct fake_module {
    uint32_t magic;
    void *shim; // the kernel shim library (GAMP_FAKE_KERNELS), or NULL for the built-ins
};
struct alloc {
    uint64_t addr, size;
    struct alloc *next;
};

#define STREAM_MAGIC 0x5354524du
#define EVENT_MAGIC 0x4556454eu
#define MODULE_MAGIC 0x4d4f4455u
#define FN_FILL ((CUfunction)(uintptr_t)0xf00d)
#define FN_RECORD ((CUfunction)(uintptr_t)0xf00e)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static struct fake_ctx primary;
static __thread CUcontext current;
static struct alloc *allocs;
static uint64_t used;
static unsigned next_stream_id = 1;

// The kernel shim (GAMP_FAKE_KERNELS): the library, and the functions handed out, each
// a call_<name> address with its info_<name> (or NULL).
typedef int (*shim_call)(void **params, int grid, int block);
typedef int (*shim_info)(unsigned long long i, unsigned long long *off, unsigned long long *size);
struct shim_fn {
    shim_call call;
    shim_info info;
    struct shim_fn *next;
};
static void *shim_lib;
static struct shim_fn *shim_fns;

// shim_open returns the shim library GAMP_FAKE_KERNELS names, loading it once; NULL
// when the variable is unset or empty. *rc is set to INVALID_IMAGE when it will not load.
static void *shim_open(CUresult *rc) {
    const char *path = getenv("GAMP_FAKE_KERNELS");
    *rc = OK;
    if (!path || !*path) return NULL;
    pthread_mutex_lock(&mu);
    if (!shim_lib) {
        shim_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!shim_lib) {
            fprintf(stderr, "fakecuda: GAMP_FAKE_KERNELS=%s: %s\n", path, dlerror());
            *rc = INVALID_IMAGE;
        }
    }
    void *h = shim_lib;
    pthread_mutex_unlock(&mu);
    return h;
}

// shim_find returns the shim function f, or NULL for any other handle.
static struct shim_fn *shim_find(CUfunction f) {
    pthread_mutex_lock(&mu);
    struct shim_fn *p = shim_fns;
    while (p && (void *)p->call != f) p = p->next;
    pthread_mutex_unlock(&mu);
    return p;
}

#define NEED_INIT                                                                                  \
    do {                                                                                           \
        if (!initialized) return NOT_INITIALIZED;                                                  \
    } while (0)
#define NEED_CTX                                                                                   \
    do {                                                                                           \
        NEED_INIT;                                                                                 \
        if (current != &primary) return INVALID_CONTEXT;                                           \
    } while (0)

static uint64_t mem_limit(void) {
    const char *s = getenv("FAKECUDA_MEM_LIMIT");
    return s ? strtoull(s, NULL, 10) : (1ull << 30);
}

// valid reports whether [p, p+n) lies inside one allocation.
static int valid(CUdeviceptr p, size_t n) {
    int ok = 0;
    pthread_mutex_lock(&mu);
    for (struct alloc *a = allocs; a; a = a->next) {
        if (p >= a->addr && p + n <= a->addr + a->size) {
            ok = 1;
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    return ok;
}

static int valid_stream(CUstream s) { return s == NULL || s->magic == STREAM_MAGIC; }
static int valid_event(CUevent e) { return e != NULL && e->magic == EVENT_MAGIC; }

CUresult cuInit(unsigned flags) {
    const char *r = getenv("FAKECUDA_INIT_RESULT");
    if (r && atoi(r) != 0) return atoi(r);
    if (flags != 0) return INVALID_VALUE;
    initialized = 1;
    return OK;
}

CUresult cuDriverGetVersion(int *v) {
    if (!v) return INVALID_VALUE;
#ifdef FAKE_OLD_DRIVER
    *v = 12020;
#else
    *v = 13000;
#endif
    return OK;
}

CUresult cuGetErrorName(CUresult code, const char **s) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        if (errors[i].code == code) {
            *s = errors[i].name;
            return OK;
        }
    }
    *s = NULL;
    return INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult code, const char **s) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        if (errors[i].code == code) {
            *s = errors[i].text;
            return OK;
        }
    }
    *s = NULL;
    return INVALID_VALUE;
}

CUresult cuDeviceGetCount(int *n) {
    NEED_INIT;
    *n = 1;
    return OK;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    NEED_INIT;
    if (ordinal != 0) return INVALID_DEVICE;
    *d = 0;
    return OK;
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
    NEED_INIT;
    if (d != 0) return INVALID_DEVICE;
    switch (attr) {
    case 1: *v = 1024; return OK;   // max threads per block
    case 8: *v = 49152; return OK;  // shared memory per block
    case 10: *v = 32; return OK;    // warp size
    case 16: *v = 132; return OK;   // multiprocessors
    case 75: *v = 9; return OK;     // compute capability major
    case 76: *v = 0; return OK;     // compute capability minor
    case 97: *v = 232448; return OK; // shared memory per block, opt-in
    }
    return INVALID_VALUE;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    NEED_INIT;
    if (d != 0) return INVALID_DEVICE;
    if (!name || len <= 0) return INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", "Fake CUDA Device");
    return OK;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    NEED_INIT;
    if (d != 0) return INVALID_DEVICE;
    *bytes = mem_limit();
    return OK;
}

CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice d) {
    NEED_INIT;
    if (d != 0) return INVALID_DEVICE;
    if (!id || len < 13) return INVALID_VALUE;
    snprintf(id, (size_t)len, "%s", "0000:01:00.0");
    return OK;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    NEED_INIT;
    if (d != 0) return INVALID_DEVICE;
    pthread_mutex_lock(&mu);
    primary.retained++;
    pthread_mutex_unlock(&mu);
    *c = &primary;
    return OK;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    NEED_INIT;
    if (d != 0) return INVALID_DEVICE;
    CUresult rc = OK;
    pthread_mutex_lock(&mu);
    if (primary.retained == 0) rc = INVALID_CONTEXT;
    else primary.retained--;
    pthread_mutex_unlock(&mu);
    return rc;
}

CUresult cuCtxSetCurrent(CUcontext c) {
    NEED_INIT;
    if (c != NULL && c != &primary) return INVALID_CONTEXT;
    current = c;
    return OK;
}

CUresult cuCtxGetCurrent(CUcontext *c) {
    NEED_INIT;
    *c = current;
    return OK;
}

CUresult cuCtxSynchronize(void) {
    NEED_CTX;
    return OK;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
    NEED_CTX;
    if (bytes == 0) return INVALID_VALUE;
    uint64_t size = (bytes + 255) & ~(uint64_t)255;
    pthread_mutex_lock(&mu);
    if (used + size > mem_limit()) {
        pthread_mutex_unlock(&mu);
        return OUT_OF_MEMORY;
    }
    void *m = aligned_alloc(256, size);
    struct alloc *a = malloc(sizeof *a);
    if (!m || !a) {
        free(m);
        free(a);
        pthread_mutex_unlock(&mu);
        return OUT_OF_MEMORY;
    }
    memset(m, 0xAB, size); // device memory is not zeroed: make that visible
    a->addr = (uint64_t)(uintptr_t)m;
    a->size = size;
    a->next = allocs;
    allocs = a;
    used += size;
    pthread_mutex_unlock(&mu);
    *p = a->addr;
    return OK;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
    NEED_CTX;
    pthread_mutex_lock(&mu);
    for (struct alloc **pp = &allocs; *pp; pp = &(*pp)->next) {
        struct alloc *a = *pp;
        if (a->addr == p) {
            *pp = a->next;
            used -= a->size;
            pthread_mutex_unlock(&mu);
            free((void *)(uintptr_t)a->addr);
            free(a);
            return OK;
        }
    }
    pthread_mutex_unlock(&mu);
    return INVALID_VALUE;
}

CUresult cuMemGetInfo_v2(size_t *freeb, size_t *total) {
    NEED_CTX;
    pthread_mutex_lock(&mu);
    *total = mem_limit();
    *freeb = mem_limit() - used;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
    NEED_CTX;
    if (bytes == 0 || flags > 7) return INVALID_VALUE;
    *p = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
    return *p ? OK : OUT_OF_MEMORY;
}

CUresult cuMemFreeHost(void *p) {
    NEED_CTX;
    free(p);
    return OK;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    NEED_CTX;
    if (!valid(dst, n) || !src) return INVALID_VALUE;
    memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    NEED_CTX;
    if (!valid(src, n) || !dst) return INVALID_VALUE;
    memcpy(dst, (void *)(uintptr_t)src, n);
    return OK;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    NEED_CTX;
    if (!valid(dst, n) || !valid(src, n)) return INVALID_VALUE;
    memmove((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
    return OK;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
    if (!valid_stream(s)) return INVALID_HANDLE;
    return cuMemcpyHtoD_v2(dst, src, n);
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) {
    if (!valid_stream(s)) return INVALID_HANDLE;
    return cuMemcpyDtoH_v2(dst, src, n);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    if (!valid_stream(s)) return INVALID_HANDLE;
    return cuMemcpyDtoD_v2(dst, src, n);
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n,
                           CUstream s) {
    if (dctx != &primary || sctx != &primary) return INVALID_CONTEXT;
    if (!valid_stream(s)) return INVALID_HANDLE;
    return cuMemcpyDtoD_v2(dst, src, n);
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
    NEED_CTX;
    if (!valid_stream(s)) return INVALID_HANDLE;
    if (!valid(dst, n)) return INVALID_VALUE;
    memset((void *)(uintptr_t)dst, v, n);
    return OK;
}

CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, CUstream s) {
    NEED_CTX;
    if (!valid_stream(s)) return INVALID_HANDLE;
    if (dst % 4 != 0 || !valid(dst, n * 4)) return INVALID_VALUE;
    uint32_t *p = (uint32_t *)(uintptr_t)dst;
    for (size_t i = 0; i < n; i++) p[i] = v;
    return OK;
}

CUresult cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer) {
    NEED_INIT;
    if (d != 0 || peer != 0) return INVALID_DEVICE;
    *can = 0;
    return OK;
}

CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned flags) {
    NEED_CTX;
    if (peer != &primary || flags != 0) return INVALID_VALUE;
    if (primary.peer_enabled) return PEER_ALREADY_ENABLED;
    primary.peer_enabled = 1;
    return OK;
}

CUresult cuModuleLoadData(CUmodule *m, const void *image) {
    NEED_CTX;
    if (!image) return INVALID_VALUE;
    CUresult rc;
    void *shim = shim_open(&rc);
    if (rc != OK) return rc;
    const char *s = image;
    if (!shim && strncmp(s, "\x7f" "ELFFAKECUBIN", 13) != 0 && strncmp(s, "// fake PTX", 11) != 0) return NOT_SUPPORTED;
    struct fake_module *fm = malloc(sizeof *fm);
    fm->magic = MODULE_MAGIC;
    fm->shim = shim;
    *m = fm;
    return OK;
}

CUresult cuModuleUnload(CUmodule m) {
    NEED_CTX;
    if (!m || m->magic != MODULE_MAGIC) return INVALID_HANDLE;
    m->magic = 0;
    free(m);
    return OK;
}

CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    NEED_CTX;
    if (!m || m->magic != MODULE_MAGIC || !f || !name) return INVALID_HANDLE;
    if (m->shim) {
        char sym[512];
        if (snprintf(sym, sizeof sym, "call_%s", name) >= (int)sizeof sym) return NOT_FOUND;
        shim_call call = (shim_call)dlsym(m->shim, sym);
        if (!call) return NOT_FOUND;
        snprintf(sym, sizeof sym, "info_%s", name);
        shim_info info = (shim_info)dlsym(m->shim, sym);
        if (!shim_find((CUfunction)call)) {
            struct shim_fn *fn = malloc(sizeof *fn);
            fn->call = call;
            fn->info = info;
            pthread_mutex_lock(&mu);
            fn->next = shim_fns;
            shim_fns = fn;
            pthread_mutex_unlock(&mu);
        }
        *f = (CUfunction)call;
        return OK;
    }
    if (strcmp(name, "fake_fill") == 0) *f = FN_FILL;
    else if (strcmp(name, "fake_record") == 0) *f = FN_RECORD;
    else return NOT_FOUND;
    return OK;
}

#ifndef FAKE_OLD_DRIVER
CUresult cuFuncGetParamInfo(CUfunction f, size_t i, size_t *off, size_t *size) {
    NEED_INIT;
    static const size_t fill[][2] = {{0, 8}, {8, 4}, {12, 4}};
    if (f == FN_FILL && i < 3) {
        *off = fill[i][0];
        *size = fill[i][1];
        return OK;
    }
    if (f == FN_RECORD && i == 0) {
        *off = 0;
        *size = 8;
        return OK;
    }
    if (f == FN_FILL || f == FN_RECORD) return INVALID_VALUE;
    struct shim_fn *fn = shim_find(f);
    if (!fn) return INVALID_HANDLE;
    if (!fn->info) return NOT_SUPPORTED;
    unsigned long long o, n;
    if (fn->info((unsigned long long)i, &o, &n) != 0) return INVALID_VALUE;
    *off = (size_t)o;
    *size = (size_t)n;
    return OK;
}
#endif

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shmem, CUstream s, void **params, void **extra) {
    NEED_CTX;
    if (!valid_stream(s)) return INVALID_HANDLE;
    if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || extra != NULL) return INVALID_VALUE;
    struct shim_fn *fn = shim_find(f);
    if (fn) {
        if (shmem != 0 || gy != 1 || gz != 1 || by != 1 || bz != 1 || bx > 1024 || gx > 0x7fffffffu || !params)
            return INVALID_VALUE;
        return fn->call(params, (int)gx, (int)bx) == 0 ? OK : LAUNCH_FAILED;
    }
    if (f == FN_FILL) {
        if (!params) return INVALID_VALUE;
        CUdeviceptr dst = *(CUdeviceptr *)params[0];
        unsigned v = *(unsigned *)params[1], n = *(unsigned *)params[2];
        if (!valid(dst, (size_t)n * 4)) return ILLEGAL_ADDRESS;
        for (unsigned i = 0; i < n; i++) ((unsigned *)(uintptr_t)dst)[i] = v;
        return OK;
    }
    if (f == FN_RECORD) {
        if (!params) return INVALID_VALUE;
        CUdeviceptr out = *(CUdeviceptr *)params[0];
        if (!valid(out, 8 * 4)) return ILLEGAL_ADDRESS;
        unsigned rec[8] = {gx, gy, gz, bx, by, bz, shmem, s ? s->id : 0};
        memcpy((void *)(uintptr_t)out, rec, sizeof rec);
        return OK;
    }
    return NOT_SUPPORTED;
}

CUresult cuStreamCreate(CUstream *s, unsigned flags) {
    NEED_CTX;
    if (flags > 1) return INVALID_VALUE;
    struct fake_stream *fs = malloc(sizeof *fs);
    fs->magic = STREAM_MAGIC;
    pthread_mutex_lock(&mu);
    fs->id = next_stream_id++;
    pthread_mutex_unlock(&mu);
    *s = fs;
    return OK;
}

CUresult cuStreamDestroy_v2(CUstream s) {
    NEED_CTX;
    if (!s || s->magic != STREAM_MAGIC) return INVALID_HANDLE;
    s->magic = 0;
    free(s);
    return OK;
}

CUresult cuStreamSynchronize(CUstream s) {
    NEED_CTX;
    return valid_stream(s) ? OK : INVALID_HANDLE;
}

CUresult cuStreamQuery(CUstream s) {
    NEED_CTX;
    return valid_stream(s) ? OK : INVALID_HANDLE;
}

CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
    NEED_CTX;
    if (!valid_stream(s) || !valid_event(e)) return INVALID_HANDLE;
    return flags == 0 ? OK : INVALID_VALUE;
}

CUresult cuEventCreate(CUevent *e, unsigned flags) {
    NEED_CTX;
    if (flags > 7) return INVALID_VALUE;
    struct fake_event *fe = calloc(1, sizeof *fe);
    fe->magic = EVENT_MAGIC;
    fe->flags = flags;
    *e = fe;
    return OK;
}

CUresult cuEventRecord(CUevent e, CUstream s) {
    NEED_CTX;
    if (!valid_event(e) || !valid_stream(s)) return INVALID_HANDLE;
    clock_gettime(CLOCK_MONOTONIC, &e->t);
    e->recorded = 1;
    return OK;
}

CUresult cuEventSynchronize(CUevent e) {
    NEED_CTX;
    return valid_event(e) ? OK : INVALID_HANDLE;
}

CUresult cuEventQuery(CUevent e) {
    NEED_CTX;
    return valid_event(e) ? OK : INVALID_HANDLE;
}

CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
    NEED_CTX;
    if (!valid_event(start) || !valid_event(end)) return INVALID_HANDLE;
    if (!start->recorded || !end->recorded || (start->flags & 2) || (end->flags & 2)) return INVALID_HANDLE;
    *ms = (float)((double)(end->t.tv_sec - start->t.tv_sec) * 1e3 + (double)(end->t.tv_nsec - start->t.tv_nsec) / 1e6);
    return OK;
}

#ifndef FAKE_OLD_DRIVER
CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end) { return cuEventElapsedTime(ms, start, end); }
#endif

CUresult cuEventDestroy_v2(CUevent e) {
    NEED_CTX;
    if (!valid_event(e)) return INVALID_HANDLE;
    e->magic = 0;
    free(e);
    return OK;
}
