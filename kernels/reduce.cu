// reduce.cu: reductions over the middle axis of [outer, n, inner] and softmax.
//
// reduce_rows (inner == 1) and softmax run one block of GAMP_ROW_BLOCK threads per row
// (rows blockIdx.x, blockIdx.x+gridDim.x, …) with shared memory; reduce_cols (inner > 1)
// is a grid-stride loop with one thread per output element.
//
// Sums reproduce the CPU backend's order exactly (backend/cpu/kernels_reduce.go), so the
// results are bit-identical to it: rows in 1024-element chunks summed with four float64
// accumulators (element k to accumulator k mod 4, the tail to the first), chunks added
// in order within 16384-element blocks, blocks added in order; columns summed in blocks
// of max(1, 16384/min(inner, 1024)) rows, blocks added in order. Max, min and the arg
// ops return the first extreme, a NaN counting as the extreme. Softmax sums its
// exponentials in a fixed tree (deterministic, within rounding of the CPU's order).
#include "common.cuh"

#define GAMP_RED_CHUNK 1024
#define GAMP_RED_BLOCK 16384

template <class C> GAMP_FN bool arg_better(C v, long long i, C m, long long j) {
  if (i < 0) return false;
  if (j < 0) return true;
  bool vn = v != v, mn = m != m;
  if (vn != mn) return vn;
  if (vn) return i < j;
  return v > m || (v == m && i < j);
}

template <class D>
GAMP_FN void reduce_rows_impl(typename D::T* dst, long long* idx, const typename D::T* src, long long outer,
                              long long n, int op) {
  typedef typename D::C C;
  __shared__ double shs[GAMP_ROW_BLOCK];
  __shared__ double shc[GAMP_ROW_BLOCK / 4];
  __shared__ C shv[GAMP_ROW_BLOCK];
  __shared__ long long shi[GAMP_ROW_BLOCK];
  const unsigned t = threadIdx.x;
  ROW_LOOP(r, outer) {
    const typename D::T* x = src + r * n;
    if (n == 0) {
      if (t == 0 && op == ROP_SUM) dst[r] = D::fromd(0.0);
      if (t == 0 && op == ROP_MEAN) dst[r] = D::fromd(nan64());
      continue;
    }
    if (op == ROP_SUM || op == ROP_MEAN) {
      const long long nch = (n + GAMP_RED_CHUNK - 1) / GAMP_RED_CHUNK;
      const unsigned q = t >> 2, k = t & 3;
      double total = 0, bacc = 0;  // thread 0's are the result
      for (long long base = 0; base < nch; base += GAMP_ROW_BLOCK / 4) {
        long long ci = base + q;
        double s = 0;
        if (ci < nch) {
          long long c0 = ci * GAMP_RED_CHUNK;
          long long m = n - c0 < GAMP_RED_CHUNK ? n - c0 : GAMP_RED_CHUNK;
          long long full = m & ~3ll;
          const typename D::T* xc = x + c0;
          for (long long i = k; i < full; i += 4) s += (double)LD(D, C, xc[i]);
          if (k == 0)
            for (long long i = full; i < m; ++i) s += (double)LD(D, C, xc[i]);
        }
        shs[t] = s;
        __syncthreads();
        if (k == 0 && ci < nch) shc[q] = (shs[t] + shs[t + 1]) + (shs[t + 2] + shs[t + 3]);
        __syncthreads();
        if (t == 0) {
          long long end = base + GAMP_ROW_BLOCK / 4 < nch ? base + GAMP_ROW_BLOCK / 4 : nch;
          for (long long j = base; j < end; ++j) {
            double c = shc[j - base];
            const long long per = GAMP_RED_BLOCK / GAMP_RED_CHUNK;
            if (j % per == 0) bacc = c; else bacc += c;
            if (j % per == per - 1 || j == nch - 1) {
              if (j < per) total = bacc; else total += bacc;
            }
          }
        }
        __syncthreads();
      }
      if (t == 0) {
        if (op == ROP_MEAN) total /= (double)n;
        dst[r] = D::fromd(total);
      }
      continue;
    }
    const C sgn = (op == ROP_MIN || op == ROP_ARGMIN) ? (C)-1 : (C)1;
    C best = (C)0;
    long long bi = -1;
    for (long long i = t; i < n; i += GAMP_ROW_BLOCK) {
      C v = LD(D, C, x[i]) * sgn;
      if (arg_better<C>(v, i, best, bi)) { best = v; bi = i; }
    }
    shv[t] = best;
    shi[t] = bi;
    __syncthreads();
    for (unsigned s = GAMP_ROW_BLOCK / 2; s > 0; s >>= 1) {
      if (t < s && arg_better<C>(shv[t + s], shi[t + s], shv[t], shi[t])) {
        shv[t] = shv[t + s];
        shi[t] = shi[t + s];
      }
      __syncthreads();
    }
    if (t == 0) {
      if (op == ROP_ARGMAX || op == ROP_ARGMIN) idx[r] = shi[0];
      else dst[r] = D::fromd((double)(shv[0] * sgn));
    }
    __syncthreads();
  }
}

template <class D>
GAMP_FN void reduce_cols_impl(typename D::T* dst, long long* idx, const typename D::T* src, long long outer,
                              long long n, long long inner, int op) {
  typedef typename D::C C;
  GRID_LOOP(e, outer * inner) {
    long long o = e / inner, c = e - o * inner;
    const typename D::T* x = src + o * n * inner + c;
    if (n == 0) {
      if (op == ROP_SUM) dst[e] = D::fromd(0.0);
      if (op == ROP_MEAN) dst[e] = D::fromd(nan64());
      continue;
    }
    if (op == ROP_SUM || op == ROP_MEAN) {
      long long w = inner < GAMP_RED_CHUNK ? inner : GAMP_RED_CHUNK;
      long long rows = GAMP_RED_BLOCK / w;
      if (rows < 1) rows = 1;
      double total = 0;
      for (long long j0 = 0; j0 < n; j0 += rows) {
        long long j1 = j0 + rows < n ? j0 + rows : n;
        double a = 0;
        for (long long j = j0; j < j1; ++j) a += (double)LD(D, C, x[j * inner]);
        if (j0 == 0) total = a; else total += a;
      }
      if (op == ROP_MEAN) total /= (double)n;
      dst[e] = D::fromd(total);
      continue;
    }
    const C sgn = (op == ROP_MIN || op == ROP_ARGMIN) ? (C)-1 : (C)1;
    C m = LD(D, C, x[0]) * sgn;
    long long mi = 0;
    for (long long j = 1; j < n; ++j) {
      C v = LD(D, C, x[j * inner]) * sgn;
      if (v > m || (v != v && m == m)) { m = v; mi = j; }
    }
    if (op == ROP_ARGMAX || op == ROP_ARGMIN) idx[e] = mi;
    else dst[e] = D::fromd((double)(m * sgn));
  }
}

// reduce_cols' sum and mean in two stages, for GPUs, where outer·inner threads leave
// most of the device idle: stage one gives each (row block, output element) a thread
// that writes the block's double sum (blocks b0 … b0+nbw−1, rows per block as above),
// stage two folds them per element into the running total in block order (the first
// block assigned, the rest added, as reduce_cols does) and, on the last wave, divides
// for the mean and rounds once: the same bits as reduce_cols.
template <class D>
GAMP_FN void reduce_cols_partial_impl(double* part, const typename D::T* src, long long outer, long long n,
                                      long long inner, long long rows, long long b0, long long nbw) {
  typedef typename D::C C;
  const long long oi = outer * inner;
  GRID_LOOP(e, nbw * oi) {
    const long long k = e / oi, oc = e - k * oi, o = oc / inner, c = oc - o * inner;
    const typename D::T* x = src + o * n * inner + c;
    const long long j0 = (b0 + k) * rows, j1 = j0 + rows < n ? j0 + rows : n;
    double a = 0;
    for (long long j = j0; j < j1; ++j) a += (double)LD(D, C, x[j * inner]);
    part[e] = a;
  }
}

template <class D>
GAMP_FN void reduce_cols_fold_impl(typename D::T* dst, double* total, const double* part, long long oi, long long n,
                                   long long nbw, int first, int last, int mean) {
  GRID_LOOP(e, oi) {
    double t = first ? 0 : total[e];
    for (long long k = 0; k < nbw; ++k) {
      if (first && k == 0) t = part[e];
      else t += part[k * oi + e];
    }
    if (last) {
      if (mean) t /= (double)n;
      dst[e] = D::fromd(t);
    } else {
      total[e] = t;
    }
  }
}

// softmax: per row, y = exp(x - max)/Σ exp(x - max), or log-softmax x - max - log Σ, in
// double, rounded once. A NaN or +Inf in the row makes the row NaN, as in PyTorch.
template <class D>
GAMP_FN void softmax_impl(typename D::T* y, const typename D::T* x, long long outer, long long n, int lg) {
  typedef typename D::C C;
  __shared__ double sh[GAMP_ROW_BLOCK];
  const unsigned t = threadIdx.x;
  ROW_LOOP(r, outer) {
    const typename D::T* xr = x + r * n;
    typename D::T* yr = y + r * n;
    double mx = -inf64();
    for (long long i = t; i < n; i += GAMP_ROW_BLOCK) {
      double v = (double)LD(D, C, xr[i]);
      if (v > mx) mx = v;
    }
    mx = block_max<double>(mx, sh);
    double s = 0;
    for (long long i = t; i < n; i += GAMP_ROW_BLOCK) s += exp((double)LD(D, C, xr[i]) - mx);
    s = block_sum<double>(s, sh);
    double ls = log(s);
    for (long long i = t; i < n; i += GAMP_ROW_BLOCK) {
      double v = (double)LD(D, C, xr[i]);
      yr[i] = D::fromd(lg ? (v - mx) - ls : exp(v - mx) / s);
    }
  }
}

// softmax_backward: gx = y·(gy − Σ gy·y), or gy − exp(y)·Σ gy for log-softmax.
template <class D>
GAMP_FN void softmax_backward_impl(typename D::T* gx, const typename D::T* gy, const typename D::T* y, long long outer,
                                   long long n, int lg) {
  typedef typename D::C C;
  __shared__ double sh[GAMP_ROW_BLOCK];
  const unsigned t = threadIdx.x;
  ROW_LOOP(r, outer) {
    const typename D::T* gr = gy + r * n;
    const typename D::T* yr = y + r * n;
    double dot = 0;
    for (long long i = t; i < n; i += GAMP_ROW_BLOCK) {
      double g = (double)LD(D, C, gr[i]);
      dot += lg ? g : g * (double)LD(D, C, yr[i]);
    }
    dot = block_sum<double>(dot, sh);
    for (long long i = t; i < n; i += GAMP_ROW_BLOCK) {
      double g = (double)LD(D, C, gr[i]), v = (double)LD(D, C, yr[i]);
      gx[r * n + i] = D::fromd(lg ? g - exp(v) * dot : v * (g - dot));
    }
  }
}

#define REDUCE(N, D, T)                                                                            \
  extern "C" __global__ void reduce_rows_##N(T* dst, long long* idx, const T* src, long long outer, \
                                             long long n, int op) {                                \
    reduce_rows_impl<D>(dst, idx, src, outer, n, op);                                              \
  }                                                                                                \
  extern "C" __global__ void reduce_cols_##N(T* dst, long long* idx, const T* src, long long outer, \
                                             long long n, long long inner, int op) {               \
    reduce_cols_impl<D>(dst, idx, src, outer, n, inner, op);                                       \
  }
#define REDUCE_SUM(N, D, T)                                                                        \
  extern "C" __global__ void reduce_cols_partial_##N(double* part, const T* src, long long outer,  \
                                                     long long n, long long inner, long long rows, \
                                                     long long b0, long long nbw) {                \
    reduce_cols_partial_impl<D>(part, src, outer, n, inner, rows, b0, nbw);                        \
  }                                                                                                \
  extern "C" __global__ void reduce_cols_fold_##N(T* dst, double* total, const double* part,       \
                                                  long long oi, long long n, long long nbw,        \
                                                  int first, int last, int mean) {                 \
    reduce_cols_fold_impl<D>(dst, total, part, oi, n, nbw, first, last, mean);                     \
  }
REDUCE_SUM(f32, F32, float)
REDUCE_SUM(f16, F16, unsigned short)
REDUCE_SUM(bf16, BF16, unsigned short)
REDUCE_SUM(f64, F64, double)
REDUCE(f32, F32, float)
REDUCE(f16, F16, unsigned short)
REDUCE(bf16, BF16, unsigned short)
REDUCE(f64, F64, double)
REDUCE(i32, I32, int)
REDUCE(i64, I64, long long)
REDUCE(b8, B8, unsigned char)

#define SOFTMAX(N, D, T)                                                                            \
  extern "C" __global__ void softmax_##N(T* y, const T* x, long long outer, long long n, int lg) {  \
    softmax_impl<D>(y, x, outer, n, lg);                                                            \
  }                                                                                                 \
  extern "C" __global__ void softmax_backward_##N(T* gx, const T* gy, const T* y, long long outer,  \
                                                  long long n, int lg) {                            \
    softmax_backward_impl<D>(gx, gy, y, outer, n, lg);                                              \
  }
SOFTMAX(f32, F32, float)
SOFTMAX(f16, F16, unsigned short)
SOFTMAX(bf16, BF16, unsigned short)
SOFTMAX(f64, F64, double)
