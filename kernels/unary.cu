// unary.cu: every backend.UnaryOp forward and backward over n contiguous elements.
// Grid-stride loops, no shared memory. Arithmetic runs in the compute type (float for
// float32 and half data, double for float64) with the scalars rounded to it first;
// exp, log, sqrt, tanh, erf and pow run in double and round once to the compute type,
// as the CPU backend does (backend/cpu/kernels_elem.go).
#include "common.cuh"

#define GAMP_SQRT2 1.4142135623730951          // math.Sqrt2 as a float64
#define GAMP_GELU_K 0.7978845608028654         // √(2/π)
#define GAMP_INV_SQRT_2PI 0.3989422804014327   // 1/√(2π)

template <class C> GAMP_FN C unary_op(int op, C v, double p0, double p1) {
  switch (op) {
    case UOP_NEG: return -v;
    case UOP_EXP: return (C)exp((double)v);
    case UOP_LOG: return (C)log((double)v);
    case UOP_SQRT: return (C)sqrt((double)v);
    case UOP_RSQRT: return (C)(1.0 / sqrt((double)v));
    case UOP_ABS:
      if (v <= (C)0) v = (C)0 - v;  // also turns -0 into +0
      return v;
    case UOP_SIGN:
      if (v > (C)0) return (C)1;
      if (v < (C)0) return (C)-1;
      if (v == (C)0) return (C)0;
      return v;  // NaN stays NaN
    case UOP_RELU:
      if (v <= (C)0) v = (C)0;
      return v;
    case UOP_GELU: {
      double x = (double)v;
      return (C)(0.5 * x * (1 + erf(x / GAMP_SQRT2)));
    }
    case UOP_GELU_TANH: {
      double x = (double)v;
      return (C)(0.5 * x * (1 + tanh(GAMP_GELU_K * (x + 0.044715 * x * x * x))));
    }
    case UOP_TANH: return (C)tanh((double)v);
    case UOP_SIGMOID: return (C)(1 / (1 + exp(-(double)v)));
    case UOP_SQUARE: return v * v;
    case UOP_RECIP: return (C)1 / v;
    case UOP_ADD_SCALAR: return v + (C)p0;
    case UOP_MUL_SCALAR: return v * (C)p0;
    case UOP_POW_SCALAR:
      if (p0 == 2) return v * v;  // equals the correctly rounded power
      return (C)pow((double)v, p0);
    case UOP_CLAMP: {
      C lo = (C)p0, hi = (C)p1;
      if (v < lo) v = lo;
      if (v > hi) v = hi;
      return v;
    }
    case UOP_RSUB_SCALAR: return (C)p0 - v;
  }
  return v;
}

// unary_grad is gy·op'(·) from a, the input x or output y as kernels.UnaryGradUses says.
template <class C> GAMP_FN C unary_grad(int op, C g, C a, double p0, double p1) {
  switch (op) {
    case UOP_NEG:
    case UOP_RSUB_SCALAR: return -g;
    case UOP_ADD_SCALAR: return g;
    case UOP_MUL_SCALAR: return g * (C)p0;
    case UOP_SIGN: return (C)0;
    case UOP_EXP: return g * a;
    case UOP_LOG: return g / a;
    case UOP_SQRT: return g / ((C)2 * a);
    case UOP_RSQRT: return (C)-0.5 * g * (a * a * a);
    case UOP_TANH: return g * (((C)1 - a) * ((C)1 + a));
    case UOP_SIGMOID: return g * (a * ((C)1 - a));
    case UOP_RECIP: return -g * (a * a);
    case UOP_SQUARE: return g * ((C)2 * a);
    case UOP_ABS:
      if (a > (C)0) return g;
      if (a < (C)0) return -g;
      if (a == (C)0) return (C)0;
      return a;  // NaN
    case UOP_RELU: return a > (C)0 ? g : (C)0;
    case UOP_CLAMP: {
      C lo = (C)p0, hi = (C)p1;
      return (a >= lo && a <= hi) ? g : (C)0;
    }
    case UOP_GELU: {
      double x = (double)a;
      double cdf = 0.5 * (1 + erf(x / GAMP_SQRT2));
      double pdf = GAMP_INV_SQRT_2PI * exp(-0.5 * x * x);
      return (C)((double)g * (cdf + x * pdf));
    }
    case UOP_GELU_TANH: {
      double x = (double)a;
      double t = tanh(GAMP_GELU_K * (x + 0.044715 * x * x * x));
      // 0.134145 is 3·0.044715, folded exactly as Go folds the constant expression.
      double d = 0.5 * (1 + t) + 0.5 * x * (1 - t) * (1 + t) * GAMP_GELU_K * (1 + 0.134145 * x * x);
      return (C)((double)g * d);
    }
    case UOP_POW_SCALAR:
      if (p0 == 0) return (C)0;
      return (C)((double)g * p0 * pow((double)a, p0 - 1));
  }
  return (C)0;
}

template <class D>
GAMP_FN void unary_impl(typename D::T* y, const typename D::T* x, long long n, int op, double p0, double p1) {
  typedef typename D::C C;
  GRID_LOOP(i, n) y[i] = store<D>(unary_op<C>(op, LD(D, C, x[i]), p0, p1));
}

// a is null for ops that read neither x nor y; recompute != 0 means a holds x and the op
// differentiates through y, which is recomputed in the compute type first.
template <class D>
GAMP_FN void unary_backward_impl(typename D::T* gx, const typename D::T* gy, const typename D::T* a, long long n, int op,
                                 double p0, double p1, int recompute) {
  typedef typename D::C C;
  GRID_LOOP(i, n) {
    C av = a ? LD(D, C, a[i]) : (C)0;
    if (recompute) av = unary_op<C>(op, av, p0, p1);
    gx[i] = store<D>(unary_grad<C>(op, LD(D, C, gy[i]), av, p0, p1));
  }
}

#define UNARY(N, D, T)                                                                           \
  extern "C" __global__ void unary_##N(T* y, const T* x, long long n, int op, double p0,          \
                                       double p1) {                                              \
    unary_impl<D>(y, x, n, op, p0, p1);                                                          \
  }                                                                                              \
  extern "C" __global__ void unary_backward_##N(T* gx, const T* gy, const T* a, long long n,      \
                                                int op, double p0, double p1, int recompute) {   \
    unary_backward_impl<D>(gx, gy, a, n, op, p0, p1, recompute);                                 \
  }
UNARY(f32, F32, float)
UNARY(f16, F16, unsigned short)
UNARY(bf16, BF16, unsigned short)
UNARY(f64, F64, double)
