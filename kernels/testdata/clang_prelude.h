// clang_prelude.h: what NVRTC provides without headers and clang does not, for the PTX
// compile check (clang-16 -x cuda -nocudainc -include clang_prelude.h). Tests only.
#ifndef GAMP_CLANG_PRELUDE_H
#define GAMP_CLANG_PRELUDE_H

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __forceinline__ __inline__ __attribute__((always_inline))

struct gamp_uint3 { unsigned x, y, z; };
#define threadIdx (gamp_uint3{(unsigned)__nvvm_read_ptx_sreg_tid_x(), (unsigned)__nvvm_read_ptx_sreg_tid_y(), (unsigned)__nvvm_read_ptx_sreg_tid_z()})
#define blockIdx (gamp_uint3{(unsigned)__nvvm_read_ptx_sreg_ctaid_x(), (unsigned)__nvvm_read_ptx_sreg_ctaid_y(), (unsigned)__nvvm_read_ptx_sreg_ctaid_z()})
#define blockDim (gamp_uint3{(unsigned)__nvvm_read_ptx_sreg_ntid_x(), (unsigned)__nvvm_read_ptx_sreg_ntid_y(), (unsigned)__nvvm_read_ptx_sreg_ntid_z()})
#define gridDim (gamp_uint3{(unsigned)__nvvm_read_ptx_sreg_nctaid_x(), (unsigned)__nvvm_read_ptx_sreg_nctaid_y(), (unsigned)__nvvm_read_ptx_sreg_nctaid_z()})

static __device__ __forceinline__ float atomicAdd(float* p, float v) { return __nvvm_atom_add_gen_f(p, v); }
static __device__ __forceinline__ double atomicAdd(double* p, double v) { return __nvvm_atom_add_gen_d(p, v); }
static __device__ __forceinline__ unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return (unsigned long long)__nvvm_atom_add_gen_ll((long long*)p, (long long)v);
}
static __device__ __forceinline__ unsigned int atomicCAS(unsigned int* p, unsigned int c, unsigned int v) {
  return (unsigned int)__nvvm_atom_cas_gen_i((int*)p, (int)c, (int)v);
}
static __device__ __forceinline__ unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v) {
  return (unsigned long long)__nvvm_atom_cas_gen_ll((long long*)p, (long long)c, (long long)v);
}
static __device__ __forceinline__ unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
  return __nvvm_atom_max_gen_ull(p, v);
}
static __device__ __forceinline__ int atomicExch(int* p, int v) { return __nvvm_atom_xchg_gen_i(p, v); }

// Double-precision math from libdevice (unresolved .extern in the PTX; NVRTC links it).
#define GAMP_LIBDEVICE(name)                                                        \
  extern "C" __device__ double __nv_##name(double);                                 \
  static __device__ __forceinline__ double name(double x) { return __nv_##name(x); }
GAMP_LIBDEVICE(exp)
GAMP_LIBDEVICE(log)
GAMP_LIBDEVICE(sqrt)
GAMP_LIBDEVICE(tanh)
GAMP_LIBDEVICE(erf)
GAMP_LIBDEVICE(erfc)
GAMP_LIBDEVICE(cos)
#undef GAMP_LIBDEVICE
extern "C" __device__ double __nv_pow(double, double);
static __device__ __forceinline__ double pow(double x, double y) { return __nv_pow(x, y); }
// The float32 GELU's fused multiply-add and round-to-nearest-even (single instructions).
extern "C" __device__ float __nv_fmaf(float, float, float);
static __device__ __forceinline__ float fmaf(float x, float y, float z) { return __nv_fmaf(x, y, z); }
extern "C" __device__ float __nv_rintf(float);
static __device__ __forceinline__ float rintf(float x) { return __nv_rintf(x); }

#endif  // GAMP_CLANG_PRELUDE_H
