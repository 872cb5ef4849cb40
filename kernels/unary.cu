// unary.cu: every backend.UnaryOp forward and backward over n contiguous elements.
// Grid-stride loops, no shared memory. Arithmetic runs in the compute type (float for
// float32 and half data, double for float64) with the scalars rounded to it first;
// exp, log, sqrt, tanh, erf and pow run in double and round once to the compute type,
// as the CPU backend does (backend/cpu/kernels_elem.go) — except GELU, which the CPU
// computes in float32 arithmetic for float and half data and this file copies.
#include "common.cuh"

#define GAMP_SQRT2 1.4142135623730951          // math.Sqrt2 as a float64
#define GAMP_GELU_K 0.7978845608028654         // √(2/π)
#define GAMP_INV_SQRT_2PI 0.3989422804014327   // 1/√(2π)

// ---- GELU in float32 arithmetic ---------------------------------------------------
// The float32 (and half) GELU, forward and backward, is the CPU backend's
// (backend/cpu/vec_gelu.go, geluParts and geluGo) operation for operation, so the two
// backends agree bit for bit: Φ(x) = ½(1 + erf(x/√2)) from FreeBSD's erf pieces with
// float32 coefficients and FMA Horner steps, x/√2 carried as a rounded part plus its
// error, erfc (not 1 + erf) on the negative side, and one float32 exp whose argument
// sees x² split exactly by an FMA. Within 4.5 ulp (forward) of the float64 formula over
// [-10, 10]; see vec_gelu.go for the bounds and the reasoning. The coefficients are the
// Go float32 values (bit patterns in the comments).
static __device__ const float gelu_pp[5] = {-2.37630175e-05f /*0xb7c756b1*/, -5.77027025e-03f /*0xbbbd1489*/, -2.84817498e-02f /*0xbce9528f*/, -3.25042099e-01f /*0xbea66beb*/, 1.28379166e-01f /*0x3e0375d4*/};
static __device__ const float gelu_qq[6] = {-3.96022824e-06f /*0xb684e21a*/, 1.32494737e-04f /*0x390aee49*/, 5.08130621e-03f /*0x3ba68116*/, 6.50222525e-02f /*0x3d852a63*/, 3.97917211e-01f /*0x3ecbbbce*/, 1.00000000e+00f /*0x3f800000*/};
static __device__ const float gelu_pa[7] = {-2.16637552e-03f /*0xbb0df9c0*/, 3.54783051e-02f /*0x3d1151b3*/, -1.10894695e-01f /*0xbde31cc2*/, 3.18346620e-01f /*0x3ea2fe54*/, -3.72207880e-01f /*0xbebe9208*/, 4.14856106e-01f /*0x3ed46805*/, -2.36211857e-03f /*0xbb1acdc6*/};
static __device__ const float gelu_qa[7] = {1.19845001e-02f /*0x3c445aa3*/, 1.36370836e-02f /*0x3c5f6e13*/, 1.26171216e-01f /*0x3e013307*/, 7.18286559e-02f /*0x3d931ae7*/, 5.40397942e-01f /*0x3f0a5785*/, 1.06420882e-01f /*0x3dd9f331*/, 1.00000000e+00f /*0x3f800000*/};
static __device__ const float gelu_ra[8] = {-9.81432915e+00f /*0xc11d077e*/, -8.12874374e+01f /*0xc2a2932b*/, -1.84605087e+02f /*0xc3389ae7*/, -1.62396667e+02f /*0xc322658c*/, -6.23753319e+01f /*0xc2798057*/, -1.05586262e+01f /*0xc128f022*/, -6.93858564e-01f /*0xbf31a0b7*/, -9.86494403e-03f /*0xbc21a093*/};
static __device__ const float gelu_sa[9] = {-6.04244135e-02f /*0xbd777f97*/, 6.57024956e+00f /*0x40d23f7c*/, 1.08635002e+02f /*0x42d9451f*/, 4.29008148e+02f /*0x43d6810b*/, 6.45387268e+02f /*0x442158c9*/, 4.34565887e+02f /*0x43d9486f*/, 1.37657761e+02f /*0x4309a863*/, 1.96512718e+01f /*0x419d35ce*/, 1.00000000e+00f /*0x3f800000*/};
static __device__ const float gelu_rb[7] = {-4.83519196e+02f /*0xc3f1c275*/, -1.02509509e+03f /*0xc480230b*/, -6.37566467e+02f /*0xc41f6441*/, -1.60636383e+02f /*0xc320a2ea*/, -1.77579556e+01f /*0xc18e104b*/, -7.99283266e-01f /*0xbf4c9dd4*/, -9.86494310e-03f /*0xbc21a092*/};
static __device__ const float gelu_sb[8] = {-2.24409523e+01f /*0xc1b38712*/, 4.74528534e+02f /*0x43ed43a7*/, 2.55305029e+03f /*0x451f90ce*/, 3.19985815e+03f /*0x4547fdbb*/, 1.53672961e+03f /*0x44c01759*/, 3.25792511e+02f /*0x43a2e571*/, 3.03380604e+01f /*0x41f2b459*/, 1.00000000e+00f /*0x3f800000*/};
static __device__ const float gelu_dm[5] = {4.70157973e-02f /*0x3d4093a3*/, -1.88063189e-01f /*0xbe4093a3*/, 5.64189613e-01f /*0x3f106ebb*/, -1.12837923e+00f /*0xbf906ebb*/, 1.12837923e+00f /*0x3f906ebb*/};
static __device__ const float gelu_expc[8] = {1.98412701e-04f /*0x39500d01*/, 1.38888892e-03f /*0x3ab60b61*/, 8.33333377e-03f /*0x3c088889*/, 4.16666679e-02f /*0x3d2aaaab*/, 1.66666672e-01f /*0x3e2aaaab*/, 5.00000000e-01f /*0x3f000000*/, 1.00000000e+00f /*0x3f800000*/, 1.00000000e+00f /*0x3f800000*/};
#define GELU_ERF_A 8.43750000e-01f          /*0x3f580000*/
#define GELU_ERF_B 1.25000000e+00f          /*0x3fa00000*/
#define GELU_ERF_C 2.85714293e+00f          /*0x4036db6e*/
#define GELU_CHP 9.22531486e-01f            /*0x3f6c2b06 ½(1 + erf(1))*/
#define GELU_CHM 7.74685442e-02f            /*0x3d9ea7d4 ½(1 - erf(1))*/
#define GELU_INV_SQRT2 7.07106769e-01f      /*0x3f3504f3*/
#define GELU_INV_SQRT2_LO 1.21016175e-08f   /*0x324fe77a 1/√2 - GELU_INV_SQRT2*/
#define GELU_SQRT2F 1.41421354e+00f         /*0x3fb504f3*/
#define GELU_INV_SQRT_2PI_F 3.98942292e-01f /*0x3ecc422a*/
#define GELU_LOG2E 1.44269502e+00f          /*0x3fb8aa3b*/
#define GELU_LN2_HI 6.93147182e-01f         /*0x3f317218*/
#define GELU_LN2_LO -1.90465421e-09f        /*0xb102e308*/
#define GELU_EXP_CUT -8.60000000e+01f       /*0xc2ac0000*/

GAMP_FN float gelu_horner(const float* c, int n, float x) {
  float p = c[0];
  for (int i = 1; i < n; i++) p = fmaf(p, x, c[i]);
  return p;
}

// gelu_exp32 is vec_gelu.go's exp32: exp(hi + lo) for hi ≤ 0, |lo| < 1; 0 below -86.
GAMP_FN float gelu_exp32(float hi, float lo) {
  float k = rintf((hi + lo) * GELU_LOG2E);
  float r = fmaf(-k, GELU_LN2_HI, hi);
  r = fmaf(-k, GELU_LN2_LO, r);
  r = r + lo;
  float p = gelu_horner(gelu_expc, 8, r);
  if (hi < GELU_EXP_CUT) return 0.0f;
  return p * bits_f32((unsigned int)((int)k + 127) << 23);
}

// gelu_cdf is vec_gelu.go's geluParts: Φ(x), and exp(-x²/2) in *e when e is not null.
GAMP_FN float gelu_cdf(float x, float* e) {
  float uh = x * GELU_INV_SQRT2;
  float ul = fmaf(x, GELU_INV_SQRT2, -uh);
  ul = fmaf(x, GELU_INV_SQRT2_LO, ul);
  float a = bits_f32(f32_bits(uh) & 0x7fffffffu);
  float s = x * x;
  float sl = fmaf(x, x, -s);
  if (e) *e = gelu_exp32(-0.5f * s, -0.5f * sl);
  if (a < GELU_ERF_A) {
    float z = uh * uh;
    float q = gelu_horner(gelu_pp, 5, z) / gelu_horner(gelu_qq, 6, z);
    float t = fmaf(uh, q, ul * gelu_horner(gelu_dm, 5, z));
    return fmaf(t, 0.5f, fmaf(uh, 0.5f, 0.5f));
  }
  if (a < GELU_ERF_B) {
    if (x < 0) ul = -ul;
    float sb = (a - 1.0f) + ul;
    float q = gelu_horner(gelu_pa, 7, sb) / gelu_horner(gelu_qa, 7, sb);
    return x < 0 ? fmaf(q, -0.5f, GELU_CHM) : fmaf(q, 0.5f, GELU_CHP);
  }
  if (a >= GELU_ERF_B) {
    float ia = GELU_SQRT2F / bits_f32(f32_bits(x) & 0x7fffffffu);
    float qq = ia * ia;
    float q = a < GELU_ERF_C ? gelu_horner(gelu_ra, 8, qq) / gelu_horner(gelu_sa, 9, qq)
                             : gelu_horner(gelu_rb, 7, qq) / gelu_horner(gelu_sb, 8, qq);
    float ec = gelu_exp32(-0.5f * s, fmaf(sl, -0.5f, q - 0.5625f)) * ia;
    return x < 0 ? ec * 0.5f : fmaf(ec, -0.5f, 1.0f);
  }
  return x;  // NaN
}

// GELU forward and gy·GELU'(x): float32 arithmetic as above for float and half data,
// the float64 formula (Φ(x) = ½·erfc(−x/√2) in double: 1 + erf cancels for x < 0) for
// double, as the CPU backend computes each.
GAMP_FN float gelu_fwd(float x) { return x * gelu_cdf(x, 0); }
GAMP_FN double gelu_fwd(double x) { return 0.5 * x * erfc(-x / GAMP_SQRT2); }
GAMP_FN float gelu_grad(float g, float x) {
  float e;
  float cdf = gelu_cdf(x, &e);
  return g * fmaf(x, e * GELU_INV_SQRT_2PI_F, cdf);
}
GAMP_FN double gelu_grad(double g, double x) {
  double cdf = 0.5 * erfc(-x / GAMP_SQRT2);
  double pdf = GAMP_INV_SQRT_2PI * exp(-0.5 * x * x);
  return g * (cdf + x * pdf);
}

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
    case UOP_GELU: return gelu_fwd(v);
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
    case UOP_GELU: return gelu_grad(g, a);
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
