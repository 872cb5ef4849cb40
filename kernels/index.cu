// index.cu: index_select (embedding lookup) and index_add (its backward), with src and
// dst viewed as [outer, n, inner] and the selected side as [outer, m, inner].
// Grid-stride loops without shared memory.
#include "common.cuh"

// index_select: dst [o, j, c] = src [o, idx[j], c], raw. An index outside [0, n) sets
// *bad (when not null) and writes zero bits.
template <class D, class I>
GAMP_FN void index_select_impl(typename D::T* dst, const typename D::T* src, const I* idx, long long outer,
                               long long n, long long inner, long long m, int* bad) {
  GRID_LOOP(k, outer * m * inner) {
    long long c = k % inner, r = k / inner;
    long long j = r % m, o = r / m;
    long long t = (long long)idx[j];
    if (t < 0 || t >= n) {
      if (bad) *bad = 1;
      dst[k] = (typename D::T)0;
    } else {
      dst[k] = src[(o * n + t) * inner + c];
    }
  }
}

GAMP_FN void atomic_add_elem(F32*, float* p, float v) { atomicAdd(p, v); }
GAMP_FN void atomic_add_elem(F64*, double* p, double v) { atomic_add_f64(p, v); }
GAMP_FN void atomic_add_elem(F16*, unsigned short* p, unsigned short v) { atomic_add_half<F16>(p, f16_to_f32(v)); }
GAMP_FN void atomic_add_elem(BF16*, unsigned short* p, unsigned short v) { atomic_add_half<BF16>(p, bf16_to_f32(v)); }

// index_add: dst [o, idx[j], c] += src [o, j, c] with atomics: one thread per source
// element, in no fixed order, each add rounded to D (half: a 32-bit compare-and-swap).
// Use index_add_sorted for results equal to the CPU backend's.
template <class D, class I>
GAMP_FN void index_add_impl(typename D::T* dst, const typename D::T* src, const I* idx, long long outer, long long n,
                            long long inner, long long m, int* bad) {
  GRID_LOOP(k, outer * m * inner) {
    long long c = k % inner, r = k / inner;
    long long j = r % m, o = r / m;
    long long t = (long long)idx[j];
    if (t < 0 || t >= n) {
      if (bad) *bad = 1;
      continue;
    }
    atomic_add_elem((D*)0, dst + (o * n + t) * inner + c, src[k]);
  }
}

// index_add_sorted: the deterministic index_add. order lists the positions j sorted
// stably by idx[j]; group g is order[starts[g]:starts[g+1]] (starts has groups+1 entries,
// kernels.GroupIndex builds both). One thread per (o, g, c) target element adds its
// sources in order to the current value in double and rounds once: bit-identical to
// the CPU backend. Indices must be in range (GroupIndex checks).
template <class D, class I>
GAMP_FN void index_add_sorted_impl(typename D::T* dst, const typename D::T* src, const I* idx,
                                   const long long* order, const long long* starts, long long groups,
                                   long long outer, long long n, long long inner, long long m) {
  GRID_LOOP(k, outer * groups * inner) {
    long long c = k % inner, r = k / inner;
    long long g = r % groups, o = r / groups;
    long long t = (long long)idx[order[starts[g]]];
    typename D::T* d = dst + (o * n + t) * inner + c;
    double a = D::tod(*d);
    for (long long q = starts[g]; q < starts[g + 1]; ++q) a += D::tod(src[(o * m + order[q]) * inner + c]);
    *d = D::fromd(a);
  }
}

#define INDEX_SELECT(N, D, T, IN, I)                                                            \
  extern "C" __global__ void index_select_##N##_##IN(T* dst, const T* src, const I* idx,         \
                                                     long long outer, long long n, long long inner, \
                                                     long long m, int* bad) {                   \
    index_select_impl<D, I>(dst, src, idx, outer, n, inner, m, bad);                            \
  }
#define INDEX_ADD(N, D, T, IN, I)                                                               \
  extern "C" __global__ void index_add_##N##_##IN(T* dst, const T* src, const I* idx,            \
                                                  long long outer, long long n, long long inner, \
                                                  long long m, int* bad) {                      \
    index_add_impl<D, I>(dst, src, idx, outer, n, inner, m, bad);                               \
  }                                                                                             \
  extern "C" __global__ void index_add_sorted_##N##_##IN(                                       \
      T* dst, const T* src, const I* idx, const long long* order, const long long* starts,      \
      long long groups, long long outer, long long n, long long inner, long long m) {           \
    index_add_sorted_impl<D, I>(dst, src, idx, order, starts, groups, outer, n, inner, m);      \
  }
#define INDEX_ALL(IN, I)                             \
  INDEX_SELECT(f32, F32, float, IN, I)               \
  INDEX_SELECT(f16, F16, unsigned short, IN, I)      \
  INDEX_SELECT(bf16, BF16, unsigned short, IN, I)    \
  INDEX_SELECT(f64, F64, double, IN, I)              \
  INDEX_SELECT(i32, I32, int, IN, I)                 \
  INDEX_SELECT(i64, I64, long long, IN, I)           \
  INDEX_SELECT(b8, B8, unsigned char, IN, I)         \
  INDEX_ADD(f32, F32, float, IN, I)                  \
  INDEX_ADD(f16, F16, unsigned short, IN, I)         \
  INDEX_ADD(bf16, BF16, unsigned short, IN, I)       \
  INDEX_ADD(f64, F64, double, IN, I)
INDEX_ALL(i32, int)
INDEX_ALL(i64, long long)
