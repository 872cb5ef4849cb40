// shim.h: runs gamp's CUDA kernels on the CPU under g++ (tests only; package
// internal/kernelshim writes it next to the sources and builds the library). The CUDA keywords
// become plain C++, threadIdx/blockIdx/blockDim/gridDim are thread_local globals, atomics
// are plain read-modify-writes, and a launch runs every (block, thread) in turn:
// directly for grid-stride kernels, and as coroutines for kernels with __syncthreads,
// which switches to the next thread of the block until all have arrived.
#ifndef GAMP_SHIM_H
#define GAMP_SHIM_H

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <type_traits>
#include <cstddef>
#include <csetjmp>
#include <setjmp.h>
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
// A coroutine per thread of a block, created once per launch, runs the kernel body for
// one block after another. On x86-64 a switch is a few instructions (switch_stack);
// elsewhere coroutines start with makecontext/swapcontext and switch with
// _setjmp/_longjmp, which (unlike swapcontext) make no system call.
#if defined(__x86_64__)
struct Thread { void* sp; bool done; };
inline thread_local void* main_sp;

// switch_stack saves the callee-saved registers on the running stack, stores the stack
// pointer in *from and continues where the stack pointer to left off (a switch_stack
// call, or the frame launch prepares for a new coroutine).
__attribute__((naked, noinline, noipa)) static void switch_stack(void** from, void* to) {
  asm("pushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n\t"
      "movq %rsp, (%rdi)\n\tmovq %rsi, %rsp\n\t"
      "popq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n\tret\n\t");
}
#else
struct Thread { ucontext_t ctx; jmp_buf jb; bool done; };
inline thread_local ucontext_t main_ctx;
inline thread_local jmp_buf main_jb;
#endif
inline thread_local Thread* cur = nullptr;
inline thread_local bool coop = false;
inline thread_local int error = 0;
inline thread_local const std::function<void()>* body = nullptr;

// park saves the running thread and goes back to the scheduler in launch.
inline void park() {
#if defined(__x86_64__)
  switch_stack(&cur->sp, main_sp);
#else
  if (!_setjmp(cur->jb)) _longjmp(main_jb, 1);
#endif
}

// trampoline is a coroutine's entry: it parks at once (started), then runs the body
// each time the scheduler resumes it for a new block.
inline void trampoline() {
  Thread* self = cur;
  park();
  for (;;) {
    (*body)();
    self->done = true;
    park();
  }
}

// resume switches from the scheduler to thread t until it parks.
inline void resume(Thread* t) {
  cur = t;
#if defined(__x86_64__)
  switch_stack(&main_sp, t->sp);
#else
  if (!_setjmp(main_jb)) _longjmp(t->jb, 1);
#endif
}

// start creates thread t's coroutine on the stack [lo, lo+size) (16-aligned) and runs
// it until it parks.
inline void start(Thread* t, char* lo, size_t size) {
#if defined(__x86_64__)
  void** top = (void**)(lo + size);
  top[-1] = nullptr;                       // trampoline's return address: it never returns
  top[-2] = (void*)&trampoline;            // where switch_stack's ret goes
  for (int i = 3; i <= 8; ++i) top[-i] = nullptr;  // rbp, rbx, r12–r15
  t->sp = top - 8;
  resume(t);
#else
  getcontext(&t->ctx);
  t->ctx.uc_stack.ss_sp = lo;
  t->ctx.uc_stack.ss_size = size;
  t->ctx.uc_link = nullptr;  // a coroutine never returns
  makecontext(&t->ctx, trampoline, 0);
  cur = t;
  if (!_setjmp(main_jb)) swapcontext(&main_ctx, &t->ctx);
#endif
}

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
  char* stacks = (char*)aligned_alloc(64, (size_t)block * stack);
  if (!ts || !stacks) { free(ts); free(stacks); return NO_MEMORY; }
  coop = true;
  body = &fn;
  for (int t = 0; t < block; ++t) start(&ts[t], stacks + (size_t)t * stack, stack);
  for (int b = 0; b < grid && error == OK; ++b) {
    blockIdx = dim3{(unsigned)b, 0, 0};
    for (int t = 0; t < block; ++t) ts[t].done = false;
    for (;;) {
      int done = 0;
      for (int t = 0; t < block; ++t) {
        if (!ts[t].done) {
          threadIdx = dim3{(unsigned)t, 0, 0};
          resume(&ts[t]);
        }
        if (ts[t].done) done++;
      }
      if (done == block) break;
      if (done != 0) { error = DIVERGENT_BARRIER; break; }
    }
  }
  // Every coroutine is parked (between blocks, or at a barrier after an error): their
  // stacks hold nothing that needs unwinding.
  coop = false;
  cur = nullptr;
  free(stacks);
  free(ts);
  return error;
}

// params<decltype(&kernel)>::info reports where the kernel's i-th parameter lives in a
// CUDA parameter buffer (every value at its natural alignment, in order), from the C++
// types of the declaration itself: what cuFuncGetParamInfo reads from a real image.
template <typename F> struct params;
template <typename... A> struct params<void (*)(A...)> {
  static int info(unsigned long long i, unsigned long long* off, unsigned long long* size) {
    const unsigned long long sizes[] = {sizeof(A)..., 0}, aligns[] = {alignof(A)..., 1};
    unsigned long long o = 0;
    for (unsigned long long k = 0; k < sizeof...(A); ++k) {
      o = (o + aligns[k] - 1) / aligns[k] * aligns[k];
      if (k == i) { *off = o; *size = sizes[k]; return 0; }
      o += sizes[k];
    }
    return 1;  // no such parameter
  }
};
}  // namespace shim

inline void __syncthreads() {
  if (!shim::coop) { shim::error = shim::BARRIER_IN_GRID_STRIDE; return; }
  shim::park();
}

#endif  // GAMP_SHIM_H
