// attention.cu: fused scaled dot-product attention (backend.AttentionArgs) that never
// forms the T×T score matrix. Q, K, V, O and the gradients are [bh, t, d]; lse is
// [bh, t] (float, double for f64) and holds log Σ_j exp(s_ij) of each query row.
//
// One thread per row, grid-stride, no shared memory, so the same source runs under the
// g++ shim for the CPU comparison:
//   attention_forward:   per query row i, an online pass over the visible keys for the
//                        maximum and the sum (the log-sum-exp), then the output
//                        Σ_j exp(s_ij − lse_i)·v_j accumulated ATTN_CHUNK columns at a time.
//   attention_backward_dq:  per query row, delta_i = dO_i·O_i (saved for the next
//                        kernel) and dQ_i = scale·Σ_j P_ij(dO_i·v_j − delta_i)·k_j.
//   attention_backward_dkv: per key row j, dV_j = Σ_i P_ij·dO_i and
//                        dK_j = scale·Σ_i P_ij(dO_i·v_j − delta_i)·q_i over the queries
//                        that see key j.
// With causal, query i sees keys j ≤ i: a masked probability is never computed, so it
// is exactly 0. Half data is computed in float (double for f64); exponentials in double.
// This is the simple form of FlashAttention's schedule (no tiling through shared
// memory): correct on any grid, not tuned.
#include "common.cuh"

#define ATTN_CHUNK 32

template <class D>
GAMP_FN typename D::C attn_dot(const typename D::T* a, const typename D::T* b, long long d) {
  typedef typename D::C C;
  C s = 0;
  for (long long c = 0; c < d; ++c) s += LD(D, C, a[c]) * LD(D, C, b[c]);
  return s;
}

template <class D, class L>
GAMP_FN void attention_forward_impl(typename D::T* o, L* lse, const typename D::T* q, const typename D::T* k,
                                    const typename D::T* v, long long bh, long long t, long long d, double scale,
                                    int causal) {
  typedef typename D::C C;
  GRID_LOOP(row, bh * t) {
    const long long h = row / t, i = row - h * t;
    const typename D::T* qi = q + row * d;
    const typename D::T* kh = k + h * t * d;
    const typename D::T* vh = v + h * t * d;
    const long long end = causal ? i + 1 : t;
    double m = -inf64(), l = 0;
    for (long long j = 0; j < end; ++j) {
      double s = (double)(attn_dot<D>(qi, kh + j * d, d) * (C)scale);
      if (s == -inf64()) continue;  // adds exp(-inf) = 0; skipping avoids -inf − -inf
      if (s > m) {
        l = l * exp(m - s) + 1;
        m = s;
      } else {
        l += exp(s - m);
      }
    }
    const double ls = l > 0 ? m + log(l) : -inf64();
    lse[row] = (L)ls;
    for (long long c0 = 0; c0 < d; c0 += ATTN_CHUNK) {
      const long long w = d - c0 < ATTN_CHUNK ? d - c0 : ATTN_CHUNK;
      C acc[ATTN_CHUNK];
      for (long long c = 0; c < w; ++c) acc[c] = 0;
      if (l > 0) {
        for (long long j = 0; j < end; ++j) {
          const C p = (C)exp((double)(attn_dot<D>(qi, kh + j * d, d) * (C)scale) - ls);
          for (long long c = 0; c < w; ++c) acc[c] += p * LD(D, C, vh[j * d + c0 + c]);
        }
      }
      for (long long c = 0; c < w; ++c) o[row * d + c0 + c] = store<D>(acc[c]);
    }
  }
}

template <class D, class L>
GAMP_FN void attention_backward_dq_impl(typename D::T* gq, L* delta, const typename D::T* go,
                                        const typename D::T* q, const typename D::T* k, const typename D::T* v,
                                        const typename D::T* o, const L* lse, long long bh, long long t, long long d,
                                        double scale, int causal) {
  typedef typename D::C C;
  GRID_LOOP(row, bh * t) {
    const long long h = row / t, i = row - h * t;
    const typename D::T* qi = q + row * d;
    const typename D::T* gi = go + row * d;
    const typename D::T* kh = k + h * t * d;
    const typename D::T* vh = v + h * t * d;
    const long long end = causal ? i + 1 : t;
    double dl = 0;
    for (long long c = 0; c < d; ++c) dl += (double)LD(D, C, gi[c]) * (double)LD(D, C, o[row * d + c]);
    delta[row] = (L)dl;
    const double ls = (double)lse[row];
    for (long long c0 = 0; c0 < d; c0 += ATTN_CHUNK) {
      const long long w = d - c0 < ATTN_CHUNK ? d - c0 : ATTN_CHUNK;
      C acc[ATTN_CHUNK];
      for (long long c = 0; c < w; ++c) acc[c] = 0;
      if (ls != -inf64()) {
        for (long long j = 0; j < end; ++j) {
          const C p = (C)exp((double)(attn_dot<D>(qi, kh + j * d, d) * (C)scale) - ls);
          const C ds = p * (attn_dot<D>(gi, vh + j * d, d) - (C)dl) * (C)scale;
          for (long long c = 0; c < w; ++c) acc[c] += ds * LD(D, C, kh[j * d + c0 + c]);
        }
      }
      for (long long c = 0; c < w; ++c) gq[row * d + c0 + c] = store<D>(acc[c]);
    }
  }
}

template <class D, class L>
GAMP_FN void attention_backward_dkv_impl(typename D::T* gk, typename D::T* gv, const typename D::T* go,
                                         const typename D::T* q, const typename D::T* k, const typename D::T* v,
                                         const L* lse, const L* delta, long long bh, long long t, long long d,
                                         double scale, int causal) {
  typedef typename D::C C;
  GRID_LOOP(row, bh * t) {
    const long long h = row / t, j = row - h * t;
    const typename D::T* kj = k + row * d;
    const typename D::T* vj = v + row * d;
    const long long base = h * t;
    for (long long c0 = 0; c0 < d; c0 += ATTN_CHUNK) {
      const long long w = d - c0 < ATTN_CHUNK ? d - c0 : ATTN_CHUNK;
      C ak[ATTN_CHUNK], av[ATTN_CHUNK];
      for (long long c = 0; c < w; ++c) ak[c] = av[c] = 0;
      for (long long i = causal ? j : 0; i < t; ++i) {
        const double ls = (double)lse[base + i];
        if (ls == -inf64()) continue;
        const typename D::T* qi = q + (base + i) * d;
        const typename D::T* gi = go + (base + i) * d;
        const C p = (C)exp((double)(attn_dot<D>(qi, kj, d) * (C)scale) - ls);
        const C ds = p * (attn_dot<D>(gi, vj, d) - (C)delta[base + i]) * (C)scale;
        for (long long c = 0; c < w; ++c) {
          av[c] += p * LD(D, C, gi[c0 + c]);
          ak[c] += ds * LD(D, C, qi[c0 + c]);
        }
      }
      for (long long c = 0; c < w; ++c) {
        gk[row * d + c0 + c] = store<D>(ak[c]);
        gv[row * d + c0 + c] = store<D>(av[c]);
      }
    }
  }
}

#define ATTENTION(N, D, T, L)                                                                          \
  extern "C" __global__ void attention_forward_##N(T* o, L* lse, const T* q, const T* k, const T* v,   \
                                                   long long bh, long long t, long long d,             \
                                                   double scale, int causal) {                         \
    attention_forward_impl<D, L>(o, lse, q, k, v, bh, t, d, scale, causal);                            \
  }                                                                                                    \
  extern "C" __global__ void attention_backward_dq_##N(T* gq, L* delta, const T* go, const T* q,       \
                                                       const T* k, const T* v, const T* o,             \
                                                       const L* lse, long long bh, long long t,        \
                                                       long long d, double scale, int causal) {        \
    attention_backward_dq_impl<D, L>(gq, delta, go, q, k, v, o, lse, bh, t, d, scale, causal);         \
  }                                                                                                    \
  extern "C" __global__ void attention_backward_dkv_##N(T* gk, T* gv, const T* go, const T* q,         \
                                                        const T* k, const T* v, const L* lse,          \
                                                        const L* delta, long long bh, long long t,     \
                                                        long long d, double scale, int causal) {       \
    attention_backward_dkv_impl<D, L>(gk, gv, go, q, k, v, lse, delta, bh, t, d, scale, causal);       \
  }
ATTENTION(f32, F32, float, float)
ATTENTION(f16, F16, unsigned short, float)
ATTENTION(bf16, BF16, unsigned short, float)
ATTENTION(f64, F64, double, double)
