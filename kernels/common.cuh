// common.cuh: the prelude every gamp kernel source includes (#include "common.cuh").
// NVRTC gets it as an in-memory header (kernels.Header); clang (PTX checks) reads it
// from this directory and g++ (internal/kernelshim) from a copy next to its sources. It needs no CUDA header: half values are stored
// as unsigned short and computed in float; conversions are inline PTX on the device and
// C++ routines under the g++ shim that round exactly like gamp's half package.
//
// Compile with --fmad=false (kernels.CompileOptions): a fused multiply-add rounds once
// where the CPU backend rounds twice, and results would differ from it in the last bit.
#ifndef GAMP_COMMON_CUH
#define GAMP_COMMON_CUH

#if defined(__CUDACC_RTC__) || defined(__CUDA_ARCH__)
#define GAMP_DEVICE 1
#endif

#define GAMP_FN static __device__ __forceinline__
#define GAMP_MAX_DIMS 8
// Threads per block of every per-row kernel (kernels.RowBlock); the block reductions
// below assume exactly this many.
#define GAMP_ROW_BLOCK 256

// Op codes: equal to backend.UnaryOp, backend.BinaryOp and backend.ReduceOp (tested).
enum {
  UOP_NEG = 0, UOP_EXP = 1, UOP_LOG = 2, UOP_SQRT = 3, UOP_RSQRT = 4, UOP_ABS = 5,
  UOP_SIGN = 6, UOP_RELU = 7, UOP_GELU = 8, UOP_GELU_TANH = 9, UOP_TANH = 10,
  UOP_SIGMOID = 11, UOP_SQUARE = 12, UOP_RECIP = 13, UOP_ADD_SCALAR = 14,
  UOP_MUL_SCALAR = 15, UOP_POW_SCALAR = 16, UOP_CLAMP = 17, UOP_RSUB_SCALAR = 18
};
enum {
  BOP_ADD = 0, BOP_SUB = 1, BOP_MUL = 2, BOP_DIV = 3, BOP_POW = 4, BOP_MAXIMUM = 5,
  BOP_MINIMUM = 6, BOP_EQ = 7, BOP_NE = 8, BOP_LT = 9, BOP_LE = 10, BOP_GT = 11, BOP_GE = 12
};
enum { ROP_SUM = 0, ROP_MEAN = 1, ROP_MAX = 2, ROP_MIN = 3, ROP_ARGMAX = 4, ROP_ARGMIN = 5 };
// Pool2d.kind: backend.PoolKind.
enum { POOL_MAX = 0, POOL_AVG = 1 };
// Flags of the fused optimizer steps.
enum { OPT_DECOUPLED = 1, OPT_AMSGRAD = 2, OPT_MAXIMIZE = 4, OPT_NESTEROV = 8, OPT_FIRST = 16 };

// Layout is a strided view: element (i0, …, i_{ndim-1}) of a row-major walk over shape
// lives at offset + Σ i_k·stride[k] elements from the pointer. Mirrored by kernels.Layout.
struct Layout {
  int ndim;
  int pad_;
  long long offset;
  long long shape[GAMP_MAX_DIMS];
  long long stride[GAMP_MAX_DIMS];
};

// Conv2d is backend.ConvArgs (NCHW). Mirrored by kernels.Conv2d.
struct Conv2d {
  long long n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
};

// Pool2d is backend.PoolArgs (NCHW). Mirrored by kernels.Pool2d.
struct Pool2d {
  long long n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow;
  int kind;
  int count_include_pad;
};

// ---- bit casts -------------------------------------------------------------------

#ifdef GAMP_DEVICE
GAMP_FN unsigned int f32_bits(float f) { unsigned int u; asm("mov.b32 %0, %1;" : "=r"(u) : "f"(f)); return u; }
GAMP_FN float bits_f32(unsigned int u) { float f; asm("mov.b32 %0, %1;" : "=f"(f) : "r"(u)); return f; }
GAMP_FN unsigned long long f64_bits(double d) { unsigned long long u; asm("mov.b64 %0, %1;" : "=l"(u) : "d"(d)); return u; }
GAMP_FN double bits_f64(unsigned long long u) { double d; asm("mov.b64 %0, %1;" : "=d"(d) : "l"(u)); return d; }
#else
GAMP_FN unsigned int f32_bits(float f) { unsigned int u; memcpy(&u, &f, 4); return u; }
GAMP_FN float bits_f32(unsigned int u) { float f; memcpy(&f, &u, 4); return f; }
GAMP_FN unsigned long long f64_bits(double d) { unsigned long long u; memcpy(&u, &d, 8); return u; }
GAMP_FN double bits_f64(unsigned long long u) { double d; memcpy(&d, &u, 8); return d; }
#endif

GAMP_FN double inf64() { return bits_f64(0x7ff0000000000000ull); }
// nan64 has the bits of Go's math.NaN(), which the CPU backend writes.
GAMP_FN double nan64() { return bits_f64(0x7ff8000000000001ull); }

// ---- half conversions ------------------------------------------------------------
// Round to nearest even, subnormals kept, overflow to ±Inf; a NaN stays a quiet NaN
// with its sign and top payload bits, exactly as half.Float16FromFloat32 and friends.

// f64_to_f16 rounds once from double (half.Float16FromFloat64, line by line).
GAMP_FN unsigned short f64_to_f16(double f) {
  unsigned long long u = f64_bits(f);
  unsigned short sign = (unsigned short)(u >> 48) & 0x8000;
  u &= 0x7fffffffffffffffull;
  unsigned short o;
  if (u >= 0x40f0000000000000ull) {  // |f| >= 2^16, Inf or NaN
    o = 0x7c00;
    if (u > 0x7ff0000000000000ull) o = (unsigned short)(0x7e00 | ((unsigned short)(u >> 42) & 0x3ff));
  } else if (u < 0x3f10000000000000ull) {  // |f| < 2^-14: 2^28 has an ulp of 2^-24
    o = (unsigned short)(f64_bits(bits_f64(u) + bits_f64(0x41b0000000000000ull)) - 0x41b0000000000000ull);
  } else {
    u -= (unsigned long long)(1023 - 15) << 52;
    u += (1ull << 41) - 1 + ((u >> 42) & 1);
    o = (unsigned short)(u >> 42);
  }
  return (unsigned short)(o | sign);
}

// f64_to_bf16 rounds once from double (half.BFloat16FromFloat64).
GAMP_FN unsigned short f64_to_bf16(double f) {
  unsigned long long u = f64_bits(f);
  unsigned short sign = (unsigned short)(u >> 48) & 0x8000;
  u &= 0x7fffffffffffffffull;
  unsigned short o;
  if (u >= 0x47f0000000000000ull) {  // |f| >= 2^128, Inf or NaN
    o = 0x7f80;
    if (u > 0x7ff0000000000000ull) o = (unsigned short)(0x7fc0 | ((unsigned short)(u >> 45) & 0x7f));
  } else if (u < 0x3810000000000000ull) {  // |f| < 2^-126: 2^-81 has an ulp of 2^-133
    o = (unsigned short)(f64_bits(bits_f64(u) + bits_f64(0x3ae0000000000000ull)) - 0x3ae0000000000000ull);
  } else {
    u -= (unsigned long long)(1023 - 127) << 52;
    u += (1ull << 44) - 1 + ((u >> 45) & 1);
    o = (unsigned short)(u >> 45);
  }
  return (unsigned short)(o | sign);
}

GAMP_FN float bf16_to_f32(unsigned short h) { return bits_f32((unsigned int)h << 16); }

// f32_to_bf16_int is half.BFloat16FromFloat32 in integer arithmetic.
GAMP_FN unsigned short f32_to_bf16_int(float f) {
  unsigned int u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

#ifdef GAMP_DEVICE
GAMP_FN float f16_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  if ((h & 0x7fff) > 0x7c00)  // keep the NaN payload, as half.Float16.Float32
    f = bits_f32(((unsigned int)(h & 0x8000) << 16) | 0x7fc00000u | ((unsigned int)(h & 0x3ff) << 13));
  return f;
}
GAMP_FN unsigned short f32_to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  if (f != f) {
    unsigned int w = f32_bits(f);
    h = (unsigned short)(((w >> 16) & 0x8000) | 0x7e00 | ((w >> 13) & 0x3ff));
  }
  return h;
}
GAMP_FN unsigned short f32_to_bf16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  if (f != f) h = (unsigned short)((f32_bits(f) >> 16) | 0x40);
  return h;
#else
  return f32_to_bf16_int(f);
#endif
}
#else
GAMP_FN float f16_to_f32(unsigned short h) {
  unsigned int sign = (unsigned int)(h & 0x8000) << 16;
  unsigned int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return bits_f32(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
  if (e == 0) return bits_f32(sign | f32_bits((float)m * 5.9604644775390625e-08f));  // m·2^-24
  return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}
// A float converts to double exactly, so rounding that once is the same as rounding f.
GAMP_FN unsigned short f32_to_f16(float f) { return f64_to_f16((double)f); }
GAMP_FN unsigned short f32_to_bf16(float f) { return f32_to_bf16_int(f); }
#endif

// ---- storage types ---------------------------------------------------------------
// A storage trait says how a dtype is stored (T), which type it computes in when alone
// (C: float for float32, half and bool; double for float64 and integers, as the CPU
// backend's computeF64), and how it converts to and from float and double.

struct F32 {
  typedef float T; typedef float C;
  GAMP_FN float tof(float v) { return v; }
  GAMP_FN double tod(float v) { return (double)v; }
  GAMP_FN float fromf(float v) { return v; }
  GAMP_FN float fromd(double v) { return (float)v; }
};
struct F64 {
  typedef double T; typedef double C;
  GAMP_FN float tof(double v) { return (float)v; }
  GAMP_FN double tod(double v) { return v; }
  GAMP_FN double fromf(float v) { return (double)v; }
  GAMP_FN double fromd(double v) { return v; }
};
struct F16 {
  typedef unsigned short T; typedef float C;
  GAMP_FN float tof(unsigned short v) { return f16_to_f32(v); }
  GAMP_FN double tod(unsigned short v) { return (double)f16_to_f32(v); }
  GAMP_FN unsigned short fromf(float v) { return f32_to_f16(v); }
  GAMP_FN unsigned short fromd(double v) { return f64_to_f16(v); }
};
struct BF16 {
  typedef unsigned short T; typedef float C;
  GAMP_FN float tof(unsigned short v) { return bf16_to_f32(v); }
  GAMP_FN double tod(unsigned short v) { return (double)bf16_to_f32(v); }
  GAMP_FN unsigned short fromf(float v) { return f32_to_bf16(v); }
  GAMP_FN unsigned short fromd(double v) { return f64_to_bf16(v); }
};
// Float-to-integer conversions truncate; NaN and out-of-range values are unspecified
// (the CPU backend follows Go, the GPU saturates).
struct I32 {
  typedef int T; typedef double C;
  GAMP_FN float tof(int v) { return (float)v; }
  GAMP_FN double tod(int v) { return (double)v; }
  GAMP_FN int fromf(float v) { return (int)v; }
  GAMP_FN int fromd(double v) { return (int)v; }
};
struct I64 {
  typedef long long T; typedef double C;
  GAMP_FN float tof(long long v) { return (float)v; }
  GAMP_FN double tod(long long v) { return (double)v; }
  GAMP_FN long long fromf(float v) { return (long long)v; }
  GAMP_FN long long fromd(double v) { return (long long)v; }
};
struct B8 {
  typedef unsigned char T; typedef float C;
  GAMP_FN float tof(unsigned char v) { return v ? 1.0f : 0.0f; }
  GAMP_FN double tod(unsigned char v) { return v ? 1.0 : 0.0; }
  GAMP_FN unsigned char fromf(float v) { return v != 0.0f; }
  GAMP_FN unsigned char fromd(double v) { return v != 0.0; }
};

// load<D>(v, (C*)0) converts stored v to compute type C; store<D>(c) converts back.
template <class D> GAMP_FN float load(typename D::T v, float*) { return D::tof(v); }
template <class D> GAMP_FN double load(typename D::T v, double*) { return D::tod(v); }
template <class D> GAMP_FN typename D::T store(float v) { return D::fromf(v); }
template <class D> GAMP_FN typename D::T store(double v) { return D::fromd(v); }
#define LD(D, C, v) load<D>((v), (C*)0)

// Wide<A, B>::T is double when either compute type is double, else float.
template <class A, class B> struct Wide { typedef double T; };
template <> struct Wide<float, float> { typedef float T; };

// ---- strided walks ---------------------------------------------------------------

// lin1 is the element offset in a of linear index i of a's shape.
GAMP_FN long long lin1(const Layout& a, long long i) {
  if (a.ndim == 1) return a.offset + i * a.stride[0];
  long long o = a.offset;
  for (int d = a.ndim - 1; d >= 0; --d) {
    long long s = a.shape[d], q = i / s;
    o += (i - q * s) * a.stride[d];
    i = q;
  }
  return o;
}

// linN walks the shape of the first layout and applies every layout's strides.
GAMP_FN void lin2(const Layout& a, const Layout& b, long long i, long long& oa, long long& ob) {
  if (a.ndim == 1) { oa = a.offset + i * a.stride[0]; ob = b.offset + i * b.stride[0]; return; }
  oa = a.offset; ob = b.offset;
  for (int d = a.ndim - 1; d >= 0; --d) {
    long long s = a.shape[d], q = i / s, r = i - q * s;
    oa += r * a.stride[d]; ob += r * b.stride[d];
    i = q;
  }
}

GAMP_FN void lin3(const Layout& a, const Layout& b, const Layout& c, long long i,
                  long long& oa, long long& ob, long long& oc) {
  if (a.ndim == 1) {
    oa = a.offset + i * a.stride[0]; ob = b.offset + i * b.stride[0]; oc = c.offset + i * c.stride[0];
    return;
  }
  oa = a.offset; ob = b.offset; oc = c.offset;
  for (int d = a.ndim - 1; d >= 0; --d) {
    long long s = a.shape[d], q = i / s, r = i - q * s;
    oa += r * a.stride[d]; ob += r * b.stride[d]; oc += r * c.stride[d];
    i = q;
  }
}

GAMP_FN void lin4(const Layout& a, const Layout& b, const Layout& c, const Layout& e, long long i,
                  long long& oa, long long& ob, long long& oc, long long& oe) {
  if (a.ndim == 1) {
    oa = a.offset + i * a.stride[0]; ob = b.offset + i * b.stride[0];
    oc = c.offset + i * c.stride[0]; oe = e.offset + i * e.stride[0];
    return;
  }
  oa = a.offset; ob = b.offset; oc = c.offset; oe = e.offset;
  for (int d = a.ndim - 1; d >= 0; --d) {
    long long s = a.shape[d], q = i / s, r = i - q * s;
    oa += r * a.stride[d]; ob += r * b.stride[d]; oc += r * c.stride[d]; oe += r * e.stride[d];
    i = q;
  }
}

// GRID_LOOP(i, n) is the grid-stride loop of the 1-D kernels: any grid and block work.
#define GRID_LOOP(i, n)                                                              \
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x,               \
                 i##_step = (long long)blockDim.x * gridDim.x;                       \
       i < (n); i += i##_step)

// ROW_LOOP(r, rows) gives each block rows blockIdx.x, blockIdx.x + gridDim.x, …; every
// thread of the block runs every iteration, so barriers inside are uniform.
#define ROW_LOOP(r, rows) for (long long r = blockIdx.x; r < (rows); r += gridDim.x)

// ---- counter-based RNG (backend/cpu: mix64, uniformAt) ----------------------------

GAMP_FN unsigned long long mix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// uniform_at is draw i of the stream (seed, offset): 53 random bits in [0, 1).
GAMP_FN double uniform_at(unsigned long long seed, unsigned long long offset, unsigned long long i) {
  unsigned long long z = mix64((seed * 0x9e3779b97f4a7c15ull) ^ mix64(offset + i));
  return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

// ---- block reductions (per-row kernels, blockDim.x == GAMP_ROW_BLOCK) --------------
// A fixed tree over the block's threads: deterministic for a given shape.

template <class T> GAMP_FN T block_sum(T v, T* sh) {
  unsigned t = threadIdx.x;
  sh[t] = v;
  __syncthreads();
  for (unsigned s = GAMP_ROW_BLOCK / 2; s > 0; s >>= 1) {
    if (t < s) sh[t] = sh[t] + sh[t + s];
    __syncthreads();
  }
  T r = sh[0];
  __syncthreads();
  return r;
}

// block_max returns the largest value (NaN-blind: a NaN never wins a > comparison);
// callers only use it where a NaN in the row makes the result NaN anyway.
template <class T> GAMP_FN T block_max(T v, T* sh) {
  unsigned t = threadIdx.x;
  sh[t] = v;
  __syncthreads();
  for (unsigned s = GAMP_ROW_BLOCK / 2; s > 0; s >>= 1) {
    if (t < s && sh[t + s] > sh[t]) sh[t] = sh[t + s];
    __syncthreads();
  }
  T r = sh[0];
  __syncthreads();
  return r;
}

// ---- atomics ----------------------------------------------------------------------

GAMP_FN void atomic_add_f64(double* p, double v) {
#if !defined(GAMP_DEVICE) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 600)
  atomicAdd(p, v);
#else
  unsigned long long* w = (unsigned long long*)p;
  unsigned long long old = *w, assumed;
  do {
    assumed = old;
    old = atomicCAS(w, assumed, f64_bits(bits_f64(assumed) + v));
  } while (old != assumed);
#endif
}

// atomic_add_half adds v to the 16-bit float at p (rounding after each add) with a
// compare-and-swap on the aligned 32-bit word that holds it.
template <class D> GAMP_FN void atomic_add_half(unsigned short* p, float v) {
  unsigned int* w = (unsigned int*)((unsigned long long)p & ~3ull);
  bool hi = ((unsigned long long)p & 2ull) != 0;
  unsigned int old = *w, assumed;
  do {
    assumed = old;
    unsigned short h = (unsigned short)(hi ? assumed >> 16 : assumed & 0xffffu);
    unsigned short nh = D::fromf(D::tof(h) + v);
    unsigned int nw = hi ? ((assumed & 0xffffu) | ((unsigned int)nh << 16)) : ((assumed & 0xffff0000u) | nh);
    old = atomicCAS(w, assumed, nw);
  } while (old != assumed);
}

#endif  // GAMP_COMMON_CUH
