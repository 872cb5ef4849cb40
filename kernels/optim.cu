// optim.cu: the scaler's multi-tensor unscale-and-check, count_nonfinite, and the fused
// SGD and Adam/AdamW steps. Grid-stride loops without shared memory; the counters and
// flags they write live in device memory, so no step needs a host synchronisation.
#include "common.cuh"

// unscale_check: for each of count tensors (ptrs[k], lens[k] elements, in device
// memory), g *= inv in g's compute type (float for float32 and half, double for float64)
// and *found = 1 when any stored result is Inf or NaN (a value that was Inf or NaN
// before scaling still is). *found is only ever set: zero it before the first launch.
template <class D>
GAMP_FN void unscale_check_impl(const unsigned long long* ptrs, const long long* lens, int count, float inv,
                                int* found) {
  typedef typename D::C C;
  bool bad = false;
  for (int k = 0; k < count; ++k) {
    typename D::T* g = (typename D::T*)ptrs[k];
    GRID_LOOP(i, lens[k]) {
      typename D::T s = store<D>(LD(D, C, g[i]) * (C)inv);
      g[i] = s;
      C v = LD(D, C, s);
      if (v - v != (C)0) bad = true;
    }
  }
  if (bad) *found = 1;
}

// count_nonfinite: out[0] += number of ±Inf, out[1] += number of NaN, out[2] = max of
// itself and the float64 bits of the largest finite |x| (bits of non-negative doubles
// order like the values). Zero out[0..2] before the first launch.
template <class D>
GAMP_FN void count_nonfinite_impl(const typename D::T* src, long long n, unsigned long long* out) {
  typedef typename D::C C;
  unsigned long long ni = 0, nn = 0;
  C mx = (C)0;
  GRID_LOOP(i, n) {
    C v = LD(D, C, src[i]);
    if (v - v == (C)0) {
      if (v < (C)0) v = -v;
      if (v > mx) mx = v;
    } else if (v == v) {
      ni++;
    } else {
      nn++;
    }
  }
  if (ni) atomicAdd(out, ni);
  if (nn) atomicAdd(out + 1, nn);
  if (mx > (C)0) atomicMax(out + 2, f64_bits((double)mx));
}

// SGD, exactly as optim.SGD composes tensor ops (each scalar rounded to the compute
// type, each op rounded): d = ±g (+ w·wd); with momentum, buf = d on the first step
// (flags & OPT_FIRST) else buf·momentum + d·(1−dampening) (d alone when dampening is 0),
// d = buf·momentum + d (Nesterov) or buf; w −= d·lr. p, when not null, receives w
// rounded to half. Nothing changes when found_inf is not null and *found_inf != 0.
// sgd_elem is one element of the SGD step: the new weight from weight wv and gradient
// d, with buf[i] updated when momentum ≠ 0.
template <class C, class T>
GAMP_FN C sgd_elem(C wv, C d, T* buf, long long i, double lr, double momentum, double dampening,
                   double weight_decay, int flags) {
  if (flags & OPT_MAXIMIZE) d = -d;
  if (weight_decay != 0) d = wv * (C)weight_decay + d;
  if (momentum != 0) {
    C b;
    if (flags & OPT_FIRST) {
      b = d;
    } else {
      b = (C)buf[i] * (C)momentum;
      b = dampening == 0 ? b + d : b + d * (C)(1 - dampening);
    }
    buf[i] = b;
    d = (flags & OPT_NESTEROV) ? b * (C)momentum + d : b;
  }
  return wv - d * (C)lr;
}

template <class M, class P>
GAMP_FN void sgd_impl(typename M::T* w, const typename M::T* g, typename M::T* buf, typename P::T* p, long long n,
                      double lr, double momentum, double dampening, double weight_decay, int flags,
                      const int* found_inf) {
  typedef typename M::C C;
  if (found_inf && *found_inf) return;
  GRID_LOOP(i, n) {
    C wv = sgd_elem<C>((C)w[i], (C)g[i], buf, i, lr, momentum, dampening, weight_decay, flags);
    w[i] = wv;
    if (p) p[i] = store<P>(wv);
  }
}

// Adam and AdamW (flags & OPT_DECOUPLED), exactly as optim.Adam composes tensor ops:
//   g = ±g; AdamW: w·(1 − lr·wd); Adam: g = w·wd + g  (when wd ≠ 0)
//   m = m + (g − m)·(1−β1)   (when |1−β1| < 0.5, else m = g − (g − m)·β1', β1' = 1−(1−β1))
//   v = v·β2 + (g·(1−β2))·g; AMSGrad: vmax = maximum(vmax, v), used for v
//   w = w − (m / (√v / bc2_sqrt + eps))·step_size
// with step_size = lr/(1−β1^t) and bc2_sqrt = √(1−β2^t) from the host
// (kernels.AdamScalars). p, found_inf: as for SGD.
// adam_elem is one element of the Adam step: the new weight from weight wv and gradient
// gv, with m[i], v[i] (and vmax[i]) updated.
template <class C, class T>
GAMP_FN C adam_elem(C wv, C gv, T* m, T* v, T* vmax, long long i, double lr, double beta1, double beta2,
                    double eps, double weight_decay, double step_size, double bc2_sqrt, int flags) {
  const double wt = 1 - beta1;
  if (flags & OPT_MAXIMIZE) gv = -gv;
  if (weight_decay != 0) {
    if (flags & OPT_DECOUPLED) wv = wv * (C)(1 - lr * weight_decay);
    else gv = wv * (C)weight_decay + gv;
  }
  C mv = (C)m[i];
  if ((wt < 0 ? -wt : wt) < 0.5) {
    mv = mv + (gv - mv) * (C)wt;
  } else {
    C diff = (gv - mv) * (C)(1 - wt);
    mv = gv - diff;
  }
  C vv = (C)v[i] * (C)beta2;
  vv = vv + (gv * (C)(1 - beta2)) * gv;
  m[i] = mv;
  v[i] = vv;
  C vd = vv;
  if (flags & OPT_AMSGRAD) {
    C mx = (C)vmax[i];
    mx = (mx != mx || mx > vv) ? mx : vv;
    vmax[i] = mx;
    vd = mx;
  }
  C denom = (C)sqrt((double)vd);
  denom = denom / (C)bc2_sqrt;
  denom = denom + (C)eps;
  C upd = mv / denom;
  upd = upd * (C)step_size;
  return wv - upd;
}

template <class M, class P>
GAMP_FN void adam_impl(typename M::T* w, const typename M::T* g, typename M::T* m, typename M::T* v,
                       typename M::T* vmax, typename P::T* p, long long n, double lr, double beta1, double beta2,
                       double eps, double weight_decay, double step_size, double bc2_sqrt, int flags,
                       const int* found_inf) {
  typedef typename M::C C;
  if (found_inf && *found_inf) return;
  GRID_LOOP(i, n) {
    C wv = adam_elem<C>((C)w[i], (C)g[i], m, v, vmax, i, lr, beta1, beta2, eps, weight_decay, step_size,
                        bc2_sqrt, flags);
    w[i] = wv;
    if (p) p[i] = store<P>(wv);
  }
}

// Half weights without an FP32 master (backend.HalfWeights; rounding is its
// HalfRounding: 1 nearest, 2 stochastic, 3 the 16+16 split), as backend/cpu's
// optim_half.go: the weight is widened to float32 (split: decoded from p and lo), updated
// by sgd_elem/adam_elem, and written back rounded to nearest, stochastically with the top
// 16 bits of the counter generator's draw (seed, offset+i), or split into the nearest
// bfloat16 (the lower neighbour in magnitude at a tie) and the difference of the bits.
enum { HW_NEAREST = 1, HW_STOCHASTIC = 2, HW_SPLIT = 3 };

template <class P>
GAMP_FN float hw_load(const unsigned short* p, const unsigned short* lo, long long i, int rounding) {
  if (rounding == HW_SPLIT) {
    unsigned int d = lo[i];
    if (d > 0x8000u) d -= 0x10000u;
    return bits_f32(((unsigned int)p[i] << 16) + d);
  }
  return P::tof(p[i]);
}

// HwStochastic<P>::round is the stochastic rounding of a finite w (bits b) with 16
// random bits r: bfloat16 adds r below the kept bits and truncates; float16 (backend/cpu's
// stochasticF16) rounds away from zero when r·2⁻¹⁶ < (|w|−t)/ulp, t the neighbour toward
// zero, every step exact in float32, and past 65504 rounds to nearest.
template <class P>
struct HwStochastic {
  GAMP_FN unsigned short round(float w, unsigned int b, unsigned int r) {
    if (w != w) return (unsigned short)((b >> 16) | 0x40u);
    return (unsigned short)((b + r) >> 16);
  }
};
template <>
struct HwStochastic<F16> {
  GAMP_FN unsigned short round(float w, unsigned int b, unsigned int r) {
    if (w != w) return f32_to_f16(w);
    unsigned short sign = (unsigned short)((b >> 16) & 0x8000u);
    unsigned int ab = b & 0x7fffffffu;
    float a = bits_f32(ab);
    unsigned short t;
    float tv, inv;
    if (a >= 65504.0f) {
      t = 0x7bff; tv = 65504.0f; inv = 1.0f / 32.0f;
    } else if (a < 0x1p-14f) {
      unsigned int k = (unsigned int)(a * 0x1p24f);
      t = (unsigned short)k; tv = (float)k * 0x1p-24f; inv = 0x1p24f;
    } else {
      unsigned int e = (ab >> 23) - 127u + 15u;
      t = (unsigned short)((e << 10) | ((ab >> 13) & 0x3ffu));
      tv = bits_f32(ab & ~0x1fffu);
      inv = bits_f32((264u - (ab >> 23)) << 23);
    }
    if ((float)r * 0x1p-16f >= (a - tv) * inv) return (unsigned short)(sign | t);
    if (t == 0x7bff) return f32_to_f16(w);
    return (unsigned short)(sign | (t + 1));
  }
};

template <class P>
GAMP_FN void hw_store(unsigned short* p, unsigned short* lo, long long i, float w, int rounding,
                      unsigned long long seed, unsigned long long offset) {
  if (rounding == HW_NEAREST) {
    p[i] = P::fromf(w);
    return;
  }
  unsigned int b = f32_bits(w);
  if (rounding == HW_SPLIT) {
    if (w != w) {
      p[i] = (unsigned short)((b >> 16) | 0x40u);
      lo[i] = (unsigned short)b;
      return;
    }
    unsigned int h = (b + 0x7fffu) >> 16;
    p[i] = (unsigned short)h;
    lo[i] = (unsigned short)(b - (h << 16));
    return;
  }
  unsigned long long z = mix64((seed * 0x9e3779b97f4a7c15ull) ^ mix64(offset + (unsigned long long)i));
  p[i] = HwStochastic<P>::round(w, b, (unsigned int)(z >> 48));
}

template <class P>
GAMP_FN void sgd_hw_impl(unsigned short* p, unsigned short* lo, const float* g, float* buf, long long n, double lr,
                         double momentum, double dampening, double weight_decay, int flags, int rounding,
                         unsigned long long seed, unsigned long long offset, const int* found_inf) {
  if (found_inf && *found_inf) return;
  GRID_LOOP(i, n) {
    float wv = sgd_elem<float>(hw_load<P>(p, lo, i, rounding), g[i], buf, i, lr, momentum, dampening,
                               weight_decay, flags);
    hw_store<P>(p, lo, i, wv, rounding, seed, offset);
  }
}

template <class P>
GAMP_FN void adam_hw_impl(unsigned short* p, unsigned short* lo, const float* g, float* m, float* v, float* vmax,
                          long long n, double lr, double beta1, double beta2, double eps, double weight_decay,
                          double step_size, double bc2_sqrt, int flags, int rounding, unsigned long long seed,
                          unsigned long long offset, const int* found_inf) {
  if (found_inf && *found_inf) return;
  GRID_LOOP(i, n) {
    float wv = adam_elem<float>(hw_load<P>(p, lo, i, rounding), g[i], m, v, vmax, i, lr, beta1, beta2, eps,
                                weight_decay, step_size, bc2_sqrt, flags);
    hw_store<P>(p, lo, i, wv, rounding, seed, offset);
  }
}

#define SCALER(N, D, T)                                                                            \
  extern "C" __global__ void unscale_check_##N(const unsigned long long* ptrs, const long long* lens, \
                                               int count, float inv, int* found) {                 \
    unscale_check_impl<D>(ptrs, lens, count, inv, found);                                          \
  }                                                                                                \
  extern "C" __global__ void count_nonfinite_##N(const T* src, long long n, unsigned long long* out) { \
    count_nonfinite_impl<D>(src, n, out);                                                          \
  }
SCALER(f32, F32, float)
SCALER(f16, F16, unsigned short)
SCALER(bf16, BF16, unsigned short)
SCALER(f64, F64, double)

// sgd_f32/adam_f32 and sgd_f64/adam_f64 update parameters of that dtype in place;
// sgd_f16/adam_f16 and the bf16 ones update float32 master weights, gradients and state
// and write the half parameter p in the same pass.
#define OPTIM(N, M, T)                                                                               \
  extern "C" __global__ void sgd_##N(T* w, const T* g, T* buf, long long n, double lr,               \
                                     double momentum, double dampening, double weight_decay,        \
                                     int flags, const int* found_inf) {                             \
    sgd_impl<M, M>(w, g, buf, (T*)0, n, lr, momentum, dampening, weight_decay, flags, found_inf);   \
  }                                                                                                 \
  extern "C" __global__ void adam_##N(T* w, const T* g, T* m, T* v, T* vmax, long long n, double lr, \
                                      double beta1, double beta2, double eps, double weight_decay,  \
                                      double step_size, double bc2_sqrt, int flags,                 \
                                      const int* found_inf) {                                       \
    adam_impl<M, M>(w, g, m, v, vmax, (T*)0, n, lr, beta1, beta2, eps, weight_decay, step_size,     \
                    bc2_sqrt, flags, found_inf);                                                    \
  }
#define OPTIM_HALF(N, P)                                                                            \
  extern "C" __global__ void sgd_##N(float* w, const float* g, float* buf, unsigned short* p,        \
                                     long long n, double lr, double momentum, double dampening,     \
                                     double weight_decay, int flags, const int* found_inf) {        \
    sgd_impl<F32, P>(w, g, buf, p, n, lr, momentum, dampening, weight_decay, flags, found_inf);     \
  }                                                                                                 \
  extern "C" __global__ void adam_##N(float* w, const float* g, float* m, float* v, float* vmax,     \
                                      unsigned short* p, long long n, double lr, double beta1,      \
                                      double beta2, double eps, double weight_decay,                \
                                      double step_size, double bc2_sqrt, int flags,                 \
                                      const int* found_inf) {                                       \
    adam_impl<F32, P>(w, g, m, v, vmax, p, n, lr, beta1, beta2, eps, weight_decay, step_size,       \
                      bc2_sqrt, flags, found_inf);                                                  \
  }
OPTIM(f32, F32, float)
OPTIM(f64, F64, double)
OPTIM_HALF(f16, F16)
OPTIM_HALF(bf16, BF16)

// sgd_hw_bf16/adam_hw_bf16 (every rounding) and sgd_hw_f16/adam_hw_f16 (nearest only)
// update half weights p in place from float32 gradients and state; lo is the 16+16
// split's low halves (null otherwise).
#define OPTIM_HW(N, P)                                                                              \
  extern "C" __global__ void sgd_hw_##N(unsigned short* p, unsigned short* lo, const float* g,       \
                                        float* buf, long long n, double lr, double momentum,        \
                                        double dampening, double weight_decay, int flags,           \
                                        int rounding, unsigned long long seed,                      \
                                        unsigned long long offset, const int* found_inf) {          \
    sgd_hw_impl<P>(p, lo, g, buf, n, lr, momentum, dampening, weight_decay, flags, rounding, seed,  \
                   offset, found_inf);                                                              \
  }                                                                                                 \
  extern "C" __global__ void adam_hw_##N(unsigned short* p, unsigned short* lo, const float* g,      \
                                         float* m, float* v, float* vmax, long long n, double lr,    \
                                         double beta1, double beta2, double eps,                    \
                                         double weight_decay, double step_size, double bc2_sqrt,    \
                                         int flags, int rounding, unsigned long long seed,          \
                                         unsigned long long offset, const int* found_inf) {         \
    adam_hw_impl<P>(p, lo, g, m, v, vmax, n, lr, beta1, beta2, eps, weight_decay, step_size,        \
                    bc2_sqrt, flags, rounding, seed, offset, found_inf);                            \
  }
OPTIM_HW(f16, F16)
OPTIM_HW(bf16, BF16)
