// norm.cu: layer norm and batch norm, forward and backward, with float32 statistics and
// affine parameters (backend.NormArgs). Statistics accumulate in double from the values
// the storage holds and are stored as float; the elementwise parts run in the compute
// type, with the same expressions as backend/cpu/kernels_norm.go.
//
// layer_norm, layer_norm_backward: one block of GAMP_ROW_BLOCK threads per row.
// batch_norm, batch_norm_backward: one block of GAMP_ROW_BLOCK threads per channel.
// Their sums use a fixed tree (deterministic, within rounding of the CPU's order).
// layer_norm_backward_params: grid-stride over columns, summing rows in the CPU's block
// order, so GWeight and GBias are bit-identical to the CPU backend's.
#include "common.cuh"

template <class D>
GAMP_FN void layer_norm_impl(typename D::T* y, float* save_mean, float* save_invstd, const typename D::T* x,
                             const float* w, const float* b, long long rows, long long cols, double eps) {
  typedef typename D::C C;
  __shared__ double sh[GAMP_ROW_BLOCK];
  const unsigned t = threadIdx.x;
  ROW_LOOP(r, rows) {
    const typename D::T* xr = x + r * cols;
    typename D::T* yr = y + r * cols;
    double s = 0;
    for (long long i = t; i < cols; i += GAMP_ROW_BLOCK) s += (double)LD(D, C, xr[i]);
    s = block_sum<double>(s, sh);
    double mean = 0, invstd = 1 / sqrt(eps);
    if (cols > 0) {
      mean = s / (double)cols;
      double q = 0;
      for (long long i = t; i < cols; i += GAMP_ROW_BLOCK) {
        double d = (double)LD(D, C, xr[i]) - mean;
        q += d * d;
      }
      q = block_sum<double>(q, sh);
      invstd = 1 / sqrt(q / (double)cols + eps);
    }
    if (t == 0) {
      if (save_mean) save_mean[r] = (float)mean;
      if (save_invstd) save_invstd[r] = (float)invstd;
    }
    const C m = (C)mean, is = (C)invstd;
    for (long long i = t; i < cols; i += GAMP_ROW_BLOCK) {
      C v = (LD(D, C, xr[i]) - m) * is;
      if (w) v = v * (C)w[i];
      if (b) v = v + (C)b[i];
      yr[i] = store<D>(v);
    }
  }
}

// layer_norm_backward: gx = invstd·(g − mean(g) − x̂·mean(g·x̂)) with g = gy·w.
template <class D>
GAMP_FN void layer_norm_backward_impl(typename D::T* gx, const typename D::T* gy, const typename D::T* x,
                                      const float* w, const float* mean, const float* invstd, long long rows,
                                      long long cols) {
  typedef typename D::C C;
  __shared__ double sh[GAMP_ROW_BLOCK];
  const unsigned t = threadIdx.x;
  ROW_LOOP(r, rows) {
    const typename D::T* xr = x + r * cols;
    const typename D::T* gr = gy + r * cols;
    const double mu = (double)mean[r], is = (double)invstd[r];
    double s1 = 0, s2 = 0;
    for (long long i = t; i < cols; i += GAMP_ROW_BLOCK) {
      C g = LD(D, C, gr[i]);
      if (w) g = g * (C)w[i];
      double xh = ((double)LD(D, C, xr[i]) - mu) * is;
      s1 += (double)g;
      s2 += (double)g * xh;
    }
    s1 = block_sum<double>(s1, sh);
    s2 = block_sum<double>(s2, sh);
    const double nn = (double)cols;
    const C ca = (C)is, cm = (C)mu, cb = (C)(-is * is * s2 / nn), cc = (C)(-is * s1 / nn);
    for (long long i = t; i < cols; i += GAMP_ROW_BLOCK) {
      C g = LD(D, C, gr[i]);
      if (w) g = g * (C)w[i];
      gx[r * cols + i] = store<D>(ca * g + cb * (LD(D, C, xr[i]) - cm) + cc);
    }
  }
}

// layer_norm_params_block sets *pw = Σ gy·x̂ and *pb = Σ gy over column j of rows
// [blk·per, min((blk+1)·per, rows)), in row order, in double.
template <class D>
GAMP_FN void layer_norm_params_block(double* pw, double* pb, const typename D::T* gy, const typename D::T* x,
                                     const float* mean, const float* invstd, long long rows, long long cols,
                                     long long per, long long blk, long long j) {
  typedef typename D::C C;
  const long long r1 = (blk + 1) * per < rows ? (blk + 1) * per : rows;
  double w = 0, b = 0;
  for (long long r = blk * per; r < r1; ++r) {
    double g = (double)LD(D, C, gy[r * cols + j]);
    double xh = ((double)LD(D, C, x[r * cols + j]) - (double)mean[r]) * (double)invstd[r];
    w += g * xh;
    b += g;
  }
  *pw = w;
  *pb = b;
}

// layer_norm_backward_params: GWeight = Σ_rows gy·x̂ and GBias = Σ_rows gy (either may be
// null), rows summed in the CPU backend's blocks (at most 64, from the shape alone).
template <class D>
GAMP_FN void layer_norm_backward_params_impl(float* gw, float* gb, const typename D::T* gy, const typename D::T* x,
                                             const float* mean, const float* invstd, long long rows, long long cols) {
  long long nb = (rows * cols + 32767) / 32768;
  if (nb > rows) nb = rows;
  if (nb > 64) nb = 64;
  if (nb < 1) nb = 1;
  const long long per = (rows + nb - 1) / nb;
  if (per > 0) nb = (rows + per - 1) / per;
  GRID_LOOP(j, cols) {
    double sw = 0, sb = 0;
    for (long long blk = 0; blk < nb && rows > 0; ++blk) {
      double pw, pb;
      layer_norm_params_block<D>(&pw, &pb, gy, x, mean, invstd, rows, cols, per, blk, j);
      sw += pw;
      sb += pb;
    }
    if (gw) gw[j] = (float)sw;
    if (gb) gb[j] = (float)sb;
  }
}

// layer_norm_backward_params in two stages, for GPUs: the one-thread-per-column kernel
// above leaves all but a few warps idle (768 columns) while each thread walks every row.
// Stage one gives each (row block, column) a thread that writes the block's partial
// sums pw, pb (double) for blocks b0 … b0+nbw−1, in the order and with the
// expressions above; stage two folds them per column into the running sums sw, sb in
// block order and, on the last wave, rounds GWeight and GBias: the same operations in
// the same order as layer_norm_backward_params, so the same bits.
template <class D>
GAMP_FN void layer_norm_params_partial_impl(double* pw, double* pb, const typename D::T* gy, const typename D::T* x,
                                            const float* mean, const float* invstd, long long rows, long long cols,
                                            long long per, long long b0, long long nbw) {
  GRID_LOOP(e, nbw * cols) {
    const long long blk = b0 + e / cols, j = e - (e / cols) * cols;
    layer_norm_params_block<D>(pw + e, pb + e, gy, x, mean, invstd, rows, cols, per, blk, j);
  }
}

GAMP_FN void layer_norm_params_fold_impl(float* gw, float* gb, double* sw, double* sb, const double* pw,
                                         const double* pb, long long cols, long long nbw, int first, int last) {
  GRID_LOOP(j, cols) {
    double w = first ? 0 : sw[j], b = first ? 0 : sb[j];
    for (long long k = 0; k < nbw; ++k) {
      w += pw[k * cols + j];
      b += pb[k * cols + j];
    }
    if (last) {
      if (gw) gw[j] = (float)w;
      if (gb) gb[j] = (float)b;
    } else {
      sw[j] = w;
      sb[j] = b;
    }
  }
}

extern "C" __global__ void layer_norm_params_fold(float* gw, float* gb, double* sw, double* sb, const double* pw,
                                                  const double* pb, long long cols, long long nbw, int first,
                                                  int last) {
  layer_norm_params_fold_impl(gw, gb, sw, sb, pw, pb, cols, nbw, first, last);
}

// batch_norm: X and Y are [N, C, S] (Y may be X). Training normalises with the batch
// mean and biased variance, saves mean and 1/√(var+eps) when the pointers are not null,
// and updates the running statistics (unbiased variance) when those are not null;
// training needs N·S > 1 (the launcher checks). Eval uses the running statistics.
template <class D>
GAMP_FN void batch_norm_impl(typename D::T* y, float* running_mean, float* running_var, float* save_mean,
                             float* save_invstd, const typename D::T* x, const float* w, const float* b, long long N,
                             long long Ch, long long S, double momentum, double eps, int training) {
  typedef typename D::C C;
  __shared__ double sh[GAMP_ROW_BLOCK];
  const unsigned t = threadIdx.x;
  const long long cnt = N * S;
  ROW_LOOP(c, Ch) {
    double mean, invstd;
    if (training) {
      double s = 0;
      for (long long k = t; k < cnt; k += GAMP_ROW_BLOCK) {
        long long n = k / S, p = k - n * S;
        s += (double)LD(D, C, x[(n * Ch + c) * S + p]);
      }
      s = block_sum<double>(s, sh);
      mean = s / (double)cnt;
      double q = 0;
      for (long long k = t; k < cnt; k += GAMP_ROW_BLOCK) {
        long long n = k / S, p = k - n * S;
        double d = (double)LD(D, C, x[(n * Ch + c) * S + p]) - mean;
        q += d * d;
      }
      q = block_sum<double>(q, sh);
      double v = q / (double)cnt;
      invstd = 1 / sqrt(v + eps);
      if (t == 0) {
        if (running_mean) running_mean[c] = (float)((1 - momentum) * (double)running_mean[c] + momentum * mean);
        if (running_var) {
          double unbiased = v * (double)cnt / (double)(cnt - 1);
          running_var[c] = (float)((1 - momentum) * (double)running_var[c] + momentum * unbiased);
        }
      }
    } else {
      mean = (double)running_mean[c];
      invstd = 1 / sqrt((double)running_var[c] + eps);
    }
    if (t == 0) {
      if (save_mean) save_mean[c] = (float)mean;
      if (save_invstd) save_invstd[c] = (float)invstd;
    }
    const C cm = (C)mean, scale = (C)(invstd * (w ? (double)w[c] : 1.0)), shift = (C)(b ? (double)b[c] : 0.0);
    for (long long k = t; k < cnt; k += GAMP_ROW_BLOCK) {
      long long n = k / S, p = k - n * S, off = (n * Ch + c) * S + p;
      y[off] = store<D>((LD(D, C, x[off]) - cm) * scale + shift);
    }
    __syncthreads();  // running statistics are read by thread 0 of the next row only
  }
}

// batch_norm_backward: gx from gy and x; GWeight = Σ gy·x̂ and GBias = Σ gy when not null.
// Training uses save_mean/save_invstd; eval running_mean and 1/√(running_var+eps).
template <class D>
GAMP_FN void batch_norm_backward_impl(typename D::T* gx, float* gw, float* gb, const typename D::T* gy,
                                      const typename D::T* x, const float* w, const float* save_mean,
                                      const float* save_invstd, const float* running_mean, const float* running_var,
                                      long long N, long long Ch, long long S, double eps, int training) {
  typedef typename D::C C;
  __shared__ double sh[GAMP_ROW_BLOCK];
  const unsigned t = threadIdx.x;
  const long long cnt = N * S;
  ROW_LOOP(c, Ch) {
    double mean, invstd;
    if (training) {
      mean = (double)save_mean[c];
      invstd = (double)save_invstd[c];
    } else {
      mean = (double)running_mean[c];
      invstd = 1 / sqrt((double)running_var[c] + eps);
    }
    double sg = 0, sgx = 0;
    if (training || gw || gb) {
      for (long long k = t; k < cnt; k += GAMP_ROW_BLOCK) {
        long long n = k / S, p = k - n * S, off = (n * Ch + c) * S + p;
        double g = (double)LD(D, C, gy[off]);
        sg += g;
        sgx += g * ((double)LD(D, C, x[off]) - mean);
      }
      sg = block_sum<double>(sg, sh);
      sgx = block_sum<double>(sgx, sh);
    }
    if (t == 0) {
      if (gw) gw[c] = (float)(sgx * invstd);
      if (gb) gb[c] = (float)sg;
    }
    const double f = (w ? (double)w[c] : 1.0) * invstd, cntd = (double)cnt;
    const C ca = (C)f, cm = (C)mean;
    C cb = (C)0, cc = (C)0;
    if (training) {
      cb = (C)(-f * invstd * invstd * sgx / cntd);
      cc = (C)(-f * sg / cntd);
    }
    for (long long k = t; k < cnt; k += GAMP_ROW_BLOCK) {
      long long n = k / S, p = k - n * S, off = (n * Ch + c) * S + p;
      gx[off] = store<D>(ca * LD(D, C, gy[off]) + cb * (LD(D, C, x[off]) - cm) + cc);
    }
  }
}

#define NORM(N, D, T)                                                                               \
  extern "C" __global__ void layer_norm_##N(T* y, float* save_mean, float* save_invstd, const T* x, \
                                            const float* w, const float* b, long long rows,         \
                                            long long cols, double eps) {                           \
    layer_norm_impl<D>(y, save_mean, save_invstd, x, w, b, rows, cols, eps);                        \
  }                                                                                                 \
  extern "C" __global__ void layer_norm_backward_##N(T* gx, const T* gy, const T* x, const float* w, \
                                                     const float* mean, const float* invstd,        \
                                                     long long rows, long long cols) {              \
    layer_norm_backward_impl<D>(gx, gy, x, w, mean, invstd, rows, cols);                            \
  }                                                                                                 \
  extern "C" __global__ void layer_norm_backward_params_##N(float* gw, float* gb, const T* gy,      \
                                                            const T* x, const float* mean,          \
                                                            const float* invstd, long long rows,    \
                                                            long long cols) {                       \
    layer_norm_backward_params_impl<D>(gw, gb, gy, x, mean, invstd, rows, cols);                    \
  }                                                                                                 \
  extern "C" __global__ void layer_norm_params_partial_##N(                                         \
      double* pw, double* pb, const T* gy, const T* x, const float* mean, const float* invstd,      \
      long long rows, long long cols, long long per, long long b0, long long nbw) {                 \
    layer_norm_params_partial_impl<D>(pw, pb, gy, x, mean, invstd, rows, cols, per, b0, nbw);       \
  }                                                                                                 \
  extern "C" __global__ void batch_norm_##N(T* y, float* running_mean, float* running_var,          \
                                            float* save_mean, float* save_invstd, const T* x,       \
                                            const float* w, const float* b, long long n,            \
                                            long long c, long long s, double momentum, double eps,  \
                                            int training) {                                         \
    batch_norm_impl<D>(y, running_mean, running_var, save_mean, save_invstd, x, w, b, n, c, s,      \
                       momentum, eps, training);                                                    \
  }                                                                                                 \
  extern "C" __global__ void batch_norm_backward_##N(                                               \
      T* gx, float* gw, float* gb, const T* gy, const T* x, const float* w, const float* save_mean,  \
      const float* save_invstd, const float* running_mean, const float* running_var, long long n,   \
      long long c, long long s, double eps, int training) {                                         \
    batch_norm_backward_impl<D>(gx, gw, gb, gy, x, w, save_mean, save_invstd, running_mean,         \
                                running_var, n, c, s, eps, training);                               \
  }
NORM(f32, F32, float)
NORM(f16, F16, unsigned short)
NORM(bf16, BF16, unsigned short)
NORM(f64, F64, double)
