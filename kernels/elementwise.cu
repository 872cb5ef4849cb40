// elementwise.cu: copy (cast, strided, broadcast), fill, arange, random draws, binary
// ops, comparisons, where and one_hot. Every kernel is a grid-stride loop over its
// output elements (any grid and block), with no shared memory.
#include "common.cuh"

// ---- copy: dst = src converted, in the compute type of the pair --------------------
// As the CPU backend: float when both dtypes compute in float (float32, half, bool),
// else double; a float64 value rounds once to half.

template <class D, class S>
GAMP_FN void copy_impl(typename D::T* dst, const typename S::T* src, long long n, const Layout& dl, const Layout& sl) {
  typedef typename Wide<typename D::C, typename S::C>::T C;
  GRID_LOOP(i, n) {
    long long od, os;
    lin2(dl, sl, i, od, os);
    dst[od] = store<D>(LD(S, C, src[os]));
  }
}

#define COPY(DN, D, DT, SN, S, ST)                                                           \
  extern "C" __global__ void copy_##DN##_##SN(DT* dst, const ST* src, long long n, Layout dl, \
                                              Layout sl) {                                   \
    copy_impl<D, S>(dst, src, n, dl, sl);                                                    \
  }
#define COPY_FROM(SN, S, ST)                  \
  COPY(f32, F32, float, SN, S, ST)            \
  COPY(f16, F16, unsigned short, SN, S, ST)   \
  COPY(bf16, BF16, unsigned short, SN, S, ST) \
  COPY(f64, F64, double, SN, S, ST)           \
  COPY(i32, I32, int, SN, S, ST)              \
  COPY(i64, I64, long long, SN, S, ST)        \
  COPY(b8, B8, unsigned char, SN, S, ST)
COPY_FROM(f32, F32, float)
COPY_FROM(f16, F16, unsigned short)
COPY_FROM(bf16, BF16, unsigned short)
COPY_FROM(f64, F64, double)
COPY_FROM(i32, I32, int)
COPY_FROM(i64, I64, long long)
COPY_FROM(b8, B8, unsigned char)

// ---- fill, arange ------------------------------------------------------------------

// fill_value rounds v once to D; bool tests float32(v) against zero, as the CPU backend.
template <class D> GAMP_FN typename D::T fill_value(double v, D*) { return D::fromd(v); }
GAMP_FN unsigned char fill_value(double v, B8*) { return (float)v != 0.0f; }

template <class D>
GAMP_FN void fill_impl(typename D::T* dst, long long n, const Layout& dl, double v) {
  typename D::T x = fill_value(v, (D*)0);
  GRID_LOOP(i, n) dst[lin1(dl, i)] = x;
}

template <class D>
GAMP_FN void arange_impl(typename D::T* dst, long long n, double start, double step) {
  GRID_LOOP(i, n) dst[i] = D::fromd(start + (double)i * step);
}

#define FILL(N, D, T)                                                                           \
  extern "C" __global__ void fill_##N(T* dst, long long n, Layout dl, double v) {               \
    fill_impl<D>(dst, n, dl, v);                                                                \
  }                                                                                             \
  extern "C" __global__ void arange_##N(T* dst, long long n, double start, double step) {       \
    arange_impl<D>(dst, n, start, step);                                                        \
  }
FILL(f32, F32, float)
FILL(f16, F16, unsigned short)
FILL(bf16, BF16, unsigned short)
FILL(f64, F64, double)
FILL(i32, I32, int)
FILL(i64, I64, long long)
FILL(b8, B8, unsigned char)

// ---- random draws: the CPU backend's counter-based generator -----------------------
// Element i uses draw (seed, offset+i) (normal: draws 2i and 2i+1), computed in double
// and rounded once, so a draw on the GPU equals the same draw on the CPU.

#define GAMP_TWO_PI 6.283185307179586

template <class D>
GAMP_FN void rand_uniform_impl(typename D::T* dst, long long n, unsigned long long seed, unsigned long long offset,
                               double lo, double hi) {
  GRID_LOOP(i, n) dst[i] = D::fromd(lo + (hi - lo) * uniform_at(seed, offset, (unsigned long long)i));
}

template <class D>
GAMP_FN void rand_normal_impl(typename D::T* dst, long long n, unsigned long long seed, unsigned long long offset,
                              double mean, double std) {
  GRID_LOOP(i, n) {
    double u1 = uniform_at(seed, offset, 2 * (unsigned long long)i);
    double u2 = uniform_at(seed, offset, 2 * (unsigned long long)i + 1);
    double z = sqrt(-2.0 * log(1.0 - u1)) * cos(GAMP_TWO_PI * u2);
    dst[i] = D::fromd(mean + std * z);
  }
}

template <class D>
GAMP_FN void bernoulli_impl(typename D::T* dst, long long n, unsigned long long seed, unsigned long long offset,
                            double p, double scale) {
  GRID_LOOP(i, n) dst[i] = D::fromd(uniform_at(seed, offset, (unsigned long long)i) >= p ? scale : 0.0);
}

#define RAND(N, D, T)                                                                              \
  extern "C" __global__ void rand_uniform_##N(T* dst, long long n, unsigned long long seed,         \
                                              unsigned long long offset, double lo, double hi) {   \
    rand_uniform_impl<D>(dst, n, seed, offset, lo, hi);                                            \
  }                                                                                                \
  extern "C" __global__ void rand_normal_##N(T* dst, long long n, unsigned long long seed,          \
                                             unsigned long long offset, double mean, double std) { \
    rand_normal_impl<D>(dst, n, seed, offset, mean, std);                                          \
  }                                                                                                \
  extern "C" __global__ void bernoulli_##N(T* dst, long long n, unsigned long long seed,            \
                                           unsigned long long offset, double p, double scale) {    \
    bernoulli_impl<D>(dst, n, seed, offset, p, scale);                                             \
  }
RAND(f32, F32, float)
RAND(f16, F16, unsigned short)
RAND(bf16, BF16, unsigned short)
RAND(f64, F64, double)

// ---- binary ops, comparisons, where ------------------------------------------------

// binop is backend/cpu's binaryApply for one element in compute type C.
template <class C> GAMP_FN C binop(int op, C a, C b) {
  switch (op) {
    case BOP_ADD: return a + b;
    case BOP_SUB: return a - b;
    case BOP_MUL: return a * b;
    case BOP_DIV: return a / b;
    case BOP_POW: return (C)pow((double)a, (double)b);
    case BOP_MAXIMUM: return (a != a || a > b) ? a : b;  // NaN propagates, as torch.maximum
    case BOP_MINIMUM: return (a != a || a < b) ? a : b;
    case BOP_EQ: return a == b ? (C)1 : (C)0;
    case BOP_NE: return a != b ? (C)1 : (C)0;
    case BOP_LT: return a < b ? (C)1 : (C)0;
    case BOP_LE: return a <= b ? (C)1 : (C)0;
    case BOP_GT: return a > b ? (C)1 : (C)0;
    case BOP_GE: return a >= b ? (C)1 : (C)0;
  }
  return (C)0;
}

// binary: dst, a and b share dtype D; comparisons write 1 or 0 in D.
template <class D>
GAMP_FN void binary_impl(typename D::T* dst, const typename D::T* a, const typename D::T* b, long long n,
                         const Layout& dl, const Layout& al, const Layout& bl, int op) {
  typedef typename D::C C;
  GRID_LOOP(i, n) {
    long long od, oa, ob;
    lin3(dl, al, bl, i, od, oa, ob);
    dst[od] = store<D>(binop<C>(op, LD(D, C, a[oa]), LD(D, C, b[ob])));
  }
}

// compare: a and b are D, dst is bool.
template <class D>
GAMP_FN void compare_impl(unsigned char* dst, const typename D::T* a, const typename D::T* b, long long n,
                          const Layout& dl, const Layout& al, const Layout& bl, int op) {
  typedef typename D::C C;
  GRID_LOOP(i, n) {
    long long od, oa, ob;
    lin3(dl, al, bl, i, od, oa, ob);
    dst[od] = binop<C>(op, LD(D, C, a[oa]), LD(D, C, b[ob])) != (C)0;
  }
}

// where: dst = cond ? a : b, through the compute type as the CPU backend.
template <class D>
GAMP_FN void where_impl(typename D::T* dst, const unsigned char* cond, const typename D::T* a, const typename D::T* b,
                        long long n, const Layout& dl, const Layout& cl, const Layout& al, const Layout& bl) {
  typedef typename D::C C;
  GRID_LOOP(i, n) {
    long long od, oc, oa, ob;
    lin4(dl, cl, al, bl, i, od, oc, oa, ob);
    dst[od] = store<D>(cond[oc] ? LD(D, C, a[oa]) : LD(D, C, b[ob]));
  }
}

#define BINARY(N, D, T)                                                                          \
  extern "C" __global__ void binary_##N(T* dst, const T* a, const T* b, long long n, Layout dl,  \
                                        Layout al, Layout bl, int op) {                          \
    binary_impl<D>(dst, a, b, n, dl, al, bl, op);                                                \
  }                                                                                              \
  extern "C" __global__ void compare_##N(unsigned char* dst, const T* a, const T* b, long long n, \
                                         Layout dl, Layout al, Layout bl, int op) {              \
    compare_impl<D>(dst, a, b, n, dl, al, bl, op);                                               \
  }                                                                                              \
  extern "C" __global__ void where_##N(T* dst, const unsigned char* cond, const T* a, const T* b, \
                                       long long n, Layout dl, Layout cl, Layout al, Layout bl) { \
    where_impl<D>(dst, cond, a, b, n, dl, cl, al, bl);                                           \
  }
BINARY(f32, F32, float)
BINARY(f16, F16, unsigned short)
BINARY(bf16, BF16, unsigned short)
BINARY(f64, F64, double)
BINARY(i32, I32, int)
BINARY(i64, I64, long long)
BINARY(b8, B8, unsigned char)

// ---- one_hot -------------------------------------------------------------------------
// dst [n, classes] = on at labels[r], off elsewhere (rounded once to D). A label outside
// [0, classes) sets *bad (when bad is not null) and leaves its row all off.

template <class D, class I>
GAMP_FN void one_hot_impl(typename D::T* dst, const I* labels, long long n, long long classes, double on, double off,
                          int* bad) {
  typename D::T von = D::fromd(on), voff = D::fromd(off);
  GRID_LOOP(i, n * classes) {
    long long r = i / classes, c = i - r * classes;
    long long l = (long long)labels[r];
    if ((l < 0 || l >= classes) && bad) *bad = 1;
    dst[i] = c == l ? von : voff;
  }
}

#define ONE_HOT(N, D, T, IN, I)                                                                   \
  extern "C" __global__ void one_hot_##N##_##IN(T* dst, const I* labels, long long n,               \
                                                long long classes, double on, double off, int* bad) { \
    one_hot_impl<D, I>(dst, labels, n, classes, on, off, bad);                                      \
  }
#define ONE_HOT_ALL(IN, I)                       \
  ONE_HOT(f32, F32, float, IN, I)                \
  ONE_HOT(f16, F16, unsigned short, IN, I)       \
  ONE_HOT(bf16, BF16, unsigned short, IN, I)     \
  ONE_HOT(f64, F64, double, IN, I)               \
  ONE_HOT(i32, I32, int, IN, I)                  \
  ONE_HOT(i64, I64, long long, IN, I)            \
  ONE_HOT(b8, B8, unsigned char, IN, I)
ONE_HOT_ALL(i32, int)
ONE_HOT_ALL(i64, long long)
