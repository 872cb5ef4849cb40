// conv.cu: im2col/col2im (backend.ConvArgs) and 2-D pooling (backend.PoolArgs), NCHW.
// Grid-stride loops, one thread per output element, no shared memory and no atomics:
// col2im and the pooling backward gather, adding each pixel's contributions in the
// order the CPU backend adds them, so every result is bit-identical to it.
#include "common.cuh"

// im2col: col [N, C·KH·KW, OH·OW] from img [N, C, H, W]; padding reads as 0. Raw copy.
template <class D>
GAMP_FN void im2col_impl(typename D::T* col, const typename D::T* img, const Conv2d& g) {
  const long long total = g.n * g.c * g.kh * g.kw * g.oh * g.ow;
  GRID_LOOP(k, total) {
    long long r = k;
    long long ow = r % g.ow; r /= g.ow;
    long long oh = r % g.oh; r /= g.oh;
    long long kj = r % g.kw; r /= g.kw;
    long long ki = r % g.kh;
    long long p = r / g.kh;
    long long ih = oh * g.sh - g.ph + ki * g.dh, iw = ow * g.sw - g.pw + kj * g.dw;
    col[k] = (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w) ? img[(p * g.h + ih) * g.w + iw] : (typename D::T)0;
  }
}

// col2im: img [N, C, H, W] = Σ of the column entries im2col copies from each pixel, in
// kernel-position order, computed in the compute type and rounded once.
template <class D>
GAMP_FN void col2im_impl(typename D::T* img, const typename D::T* col, const Conv2d& g) {
  typedef typename D::C C;
  const long long total = g.n * g.c * g.h * g.w, ohw = g.oh * g.ow, kk = g.kh * g.kw;
  GRID_LOOP(k, total) {
    long long x = k % g.w, r = k / g.w;
    long long y = r % g.h, p = r / g.h;
    C acc = (C)0;
    for (long long ki = 0; ki < g.kh; ++ki) {
      long long hn = y + g.ph - ki * g.dh;
      if (hn < 0 || hn % g.sh != 0) continue;
      long long oh = hn / g.sh;
      if (oh >= g.oh) continue;
      for (long long kj = 0; kj < g.kw; ++kj) {
        long long wn = x + g.pw - kj * g.dw;
        if (wn < 0 || wn % g.sw != 0) continue;
        long long ow = wn / g.sw;
        if (ow >= g.ow) continue;
        acc = acc + LD(D, C, col[(p * kk + ki * g.kw + kj) * ohw + oh * g.ow + ow]);
      }
    }
    img[k] = store<D>(acc);
  }
}

// pool_window: the input range [lo, hi) of output position o along one axis and the
// window's length clipped to the padded input (count_include_pad's factor).
GAMP_FN void pool_window(long long o, long long stride, long long pad, long long k, long long in, long long& lo,
                         long long& hi, long long& padded) {
  long long start = o * stride - pad;
  long long end = start + k < in + pad ? start + k : in + pad;
  lo = start > 0 ? start : 0;
  hi = end < in ? end : in;
  padded = end - start;
}

GAMP_FN long long pool_divisor(const Pool2d& g, long long h0, long long h1, long long w0, long long w1, long long ph,
                               long long pw) {
  return g.count_include_pad ? ph * pw : (h1 - h0) * (w1 - w0);
}

// pool_forward: max (first maximum; a NaN always wins, the last NaN of the window) with
// its flat h·W+w index, or average. idx is used by max pooling only.
template <class D>
GAMP_FN void pool_forward_impl(typename D::T* y, long long* idx, const typename D::T* x, const Pool2d& g) {
  typedef typename D::C C;
  const long long total = g.n * g.c * g.oh * g.ow;
  GRID_LOOP(k, total) {
    long long ow = k % g.ow, r = k / g.ow;
    long long oh = r % g.oh, p = r / g.oh;
    long long h0, h1, phh, w0, w1, pww;
    pool_window(oh, g.sh, g.ph, g.kh, g.h, h0, h1, phh);
    pool_window(ow, g.sw, g.pw, g.kw, g.w, w0, w1, pww);
    const typename D::T* plane = x + p * g.h * g.w;
    if (g.kind == POOL_MAX) {
      C best = (C)-inf64();
      long long at = h0 * g.w + w0;
      for (long long h = h0; h < h1; ++h)
        for (long long w = w0; w < w1; ++w) {
          C v = LD(D, C, plane[h * g.w + w]);
          if (v > best || v != v) { best = v; at = h * g.w + w; }
        }
      y[k] = store<D>(best);
      if (idx) idx[k] = at;
    } else {
      C out = (C)0;
      if (h0 < h1 && w0 < w1) {
        C sum = (C)0;
        for (long long h = h0; h < h1; ++h)
          for (long long w = w0; w < w1; ++w) sum = sum + LD(D, C, plane[h * g.w + w]);
        out = sum / (C)pool_divisor(g, h0, h1, w0, w1, phh, pww);
      }
      y[k] = store<D>(out);
    }
  }
}

// pool_backward: gx [N, C, H, W] (overwritten): each pixel adds, in output order, gy of
// every output whose max index names it (max) or gy/divisor of every window holding it.
template <class D>
GAMP_FN void pool_backward_impl(typename D::T* gx, const typename D::T* gy, const long long* idx, const Pool2d& g) {
  typedef typename D::C C;
  const long long total = g.n * g.c * g.h * g.w, ohw = g.oh * g.ow;
  GRID_LOOP(k, total) {
    long long x = k % g.w, r = k / g.w;
    long long y = r % g.h, p = r / g.h;
    long long num = y + g.ph - g.kh + 1;
    long long oh0 = num <= 0 ? 0 : (num + g.sh - 1) / g.sh, oh1 = (y + g.ph) / g.sh;
    if (oh1 > g.oh - 1) oh1 = g.oh - 1;
    num = x + g.pw - g.kw + 1;
    long long ow0 = num <= 0 ? 0 : (num + g.sw - 1) / g.sw, ow1 = (x + g.pw) / g.sw;
    if (ow1 > g.ow - 1) ow1 = g.ow - 1;
    const long long here = y * g.w + x;
    C acc = (C)0;
    for (long long oh = oh0; oh <= oh1; ++oh)
      for (long long ow = ow0; ow <= ow1; ++ow) {
        long long o = p * ohw + oh * g.ow + ow;
        if (g.kind == POOL_MAX) {
          if (idx[o] == here) acc = acc + LD(D, C, gy[o]);
        } else {
          long long h0, h1, phh, w0, w1, pww;
          pool_window(oh, g.sh, g.ph, g.kh, g.h, h0, h1, phh);
          pool_window(ow, g.sw, g.pw, g.kw, g.w, w0, w1, pww);
          acc = acc + LD(D, C, gy[o]) / (C)pool_divisor(g, h0, h1, w0, w1, phh, pww);
        }
      }
    gx[k] = store<D>(acc);
  }
}

#define CONV(N, D, T)                                                                              \
  extern "C" __global__ void im2col_##N(T* col, const T* img, Conv2d g) { im2col_impl<D>(col, img, g); } \
  extern "C" __global__ void col2im_##N(T* img, const T* col, Conv2d g) { col2im_impl<D>(img, col, g); } \
  extern "C" __global__ void pool_forward_##N(T* y, long long* idx, const T* x, Pool2d g) {         \
    pool_forward_impl<D>(y, idx, x, g);                                                            \
  }                                                                                                \
  extern "C" __global__ void pool_backward_##N(T* gx, const T* gy, const long long* idx, Pool2d g) { \
    pool_backward_impl<D>(gx, gy, idx, g);                                                         \
  }
CONV(f32, F32, float)
CONV(f16, F16, unsigned short)
CONV(bf16, BF16, unsigned short)
CONV(f64, F64, double)
