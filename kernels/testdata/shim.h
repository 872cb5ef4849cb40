// shim.h: runs gamp's CUDA kernels on the CPU under g++ (tests only). The CUDA keywords
// become plain C++, threadIdx/blockIdx/blockDim/gridDim are thread_local globals, atomics
// are plain read-modify-writes, and a launch runs every (block, thread) in turn:
// directly for grid-stride kernels, and as coroutines (ucontext) for kernels with
// __syncthreads, which switches to the next thread of the block until all have arrived.
#ifndef GAMP_SHIM_H
#define GAMP_SHIM_H

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <type_traits>
#include <cstddef>
#include <ucontext.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static thread_local

struct dim3 { unsigned x, y, z; };
inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

inline float atomicAdd(float* p, float v) { float o = *p; *p = o + v; return o; }
inline double atomicAdd(double* p, double v) { double o = *p; *p = o + v; return o; }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { unsigned long long o = *p; *p = o + v; return o; }
inline unsigned int atomicCAS(unsigned int* p, unsigned int c, unsigned int v) { unsigned int o = *p; if (o == c) *p = v; return o; }
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v) { unsigned long long o = *p; if (o == c) *p = v; return o; }
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) { unsigned long long o = *p; if (v > o) *p = v; return o; }
inline int atomicExch(int* p, int v) { int o = *p; *p = v; return o; }

namespace shim {
struct Thread { ucontext_t ctx; bool done; };
inline thread_local ucontext_t main_ctx;
inline thread_local Thread* cur = nullptr;
inline thread_local bool coop = false;
inline thread_local int error = 0;
inline thread_local const std::function<void()>* body = nullptr;
inline void trampoline() { (*body)(); cur->done = true; }

// Errors a launch returns.
enum { OK = 0, BARRIER_IN_GRID_STRIDE = 2, DIVERGENT_BARRIER = 3, NO_MEMORY = 4 };

// launch runs fn as every thread of a grid×block launch; coop kernels may call
// __syncthreads. It returns one of the errors above.
inline int launch(int grid, int block, bool coop_, const std::function<void()>& fn) {
  gridDim = dim3{(unsigned)grid, 1, 1};
  blockDim = dim3{(unsigned)block, 1, 1};
  error = OK;
  if (!coop_) {
    for (int b = 0; b < grid; ++b)
      for (int t = 0; t < block; ++t) {
        blockIdx = dim3{(unsigned)b, 0, 0};
        threadIdx = dim3{(unsigned)t, 0, 0};
        fn();
      }
    return error;
  }
  const size_t stack = 128 << 10;
  Thread* ts = (Thread*)calloc((size_t)block, sizeof(Thread));
  char* stacks = (char*)malloc((size_t)block * stack);
  if (!ts || !stacks) { free(ts); free(stacks); return NO_MEMORY; }
  coop = true;
  body = &fn;
  for (int b = 0; b < grid && error == OK; ++b) {
    blockIdx = dim3{(unsigned)b, 0, 0};
    for (int t = 0; t < block; ++t) {
      getcontext(&ts[t].ctx);
      ts[t].ctx.uc_stack.ss_sp = stacks + (size_t)t * stack;
      ts[t].ctx.uc_stack.ss_size = stack;
      ts[t].ctx.uc_link = &main_ctx;
      ts[t].done = false;
      makecontext(&ts[t].ctx, trampoline, 0);
    }
    for (;;) {
      int done = 0;
      for (int t = 0; t < block; ++t) {
        if (!ts[t].done) {
          threadIdx = dim3{(unsigned)t, 0, 0};
          cur = &ts[t];
          swapcontext(&main_ctx, &ts[t].ctx);
        }
        if (ts[t].done) done++;
      }
      if (done == block) break;
      if (done != 0) { error = DIVERGENT_BARRIER; break; }
    }
  }
  coop = false;
  cur = nullptr;
  free(stacks);
  free(ts);
  return error;
}
}  // namespace shim

inline void __syncthreads() {
  if (!shim::coop) { shim::error = shim::BARRIER_IN_GRID_STRIDE; return; }
  swapcontext(&shim::cur->ctx, &shim::main_ctx);
}

#endif  // GAMP_SHIM_H
