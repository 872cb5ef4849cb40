package cpu

import (
	"math"
	"sync"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// The float32 and bf16 fused attention: FlashAttention-2's forward and backward over
// attnBlock×attnBlock tiles of one (batch, head) at a time, the tile and the head's
// accumulators (O, or dQ, dK, dV: T·D float32 each) in a per-worker scratch reused from
// head to head, nothing allocated per block.
//
// The scores S = Q·Kᵀ are kept unscaled in a float32 tile; the softmax takes
// p = exp(fma(s, scale, -shift)) with the float32 exponential of attention_exp.go,
// shift = scale·(running row maximum) in the forward pass and the saved log-sum-exp in
// the backward one; masked keys are exact zeros. Row maxima, sums, the rescaling of O
// and the log-sum-exp are float32. dQ and dK are accumulated unscaled and multiplied by
// scale once.
//
// Products, by storage type L:
//   - float32 (and float16, widened once per head): the float32 GEMM micro-kernels on
//     one worker (gemmWith), Q, K, V, O, dO read in place;
//   - bf16: bf16 products with float32 accumulation, the BF16 GEMM micro-kernels
//     (AMX where the process may use it, else VDPBF16PS, else their pure-Go twin),
//     Q, K, V, O, dO read in place and packed per product. As FlashAttention does on
//     GPUs, the probabilities P (for P·V and Pᵀ·dO) and the score gradients
//     dS = P∘(dP - δ) (for dS·K and dSᵀ·Q) are rounded to bf16 before their products;
//     the softmax statistics, δ = rowsum(dO∘O) and every accumulator stay float32.
//     That costs a relative error of about 2^-9 per probability, averaged over the
//     keys (TestAttentionBF16Numerics bounds it against the float32 kernel).

// attnLow is the element type of the operands a product reads.
type attnLow interface{ float32 | half.BFloat16 }

// attnWork is one worker's scratch for one call: views of the head's operands, its
// float32 accumulators, the score tiles and the packing buffers.
type attnWork[L attnLow] struct {
	t, d int
	// Buffers for operands whose storage is not L (float16 widened to float32).
	qb, kb, vb, ob, gb []L
	acc, gk, gv        []float32 // O (forward) or dQ; dK, dV
	tile, dp           []float32 // scores/probabilities, dP/dS: attnBlock² each
	pLow, dsLow        []L       // P and dS rounded to L (bf16 only)
	m, l               []float32
	lse, delta         []float32 // per row of the head
	// bf16 products.
	kern         *gemmBF16Kernel
	aPack, bPack []uint32
	edge         []float32
}

var attnWorks32, attnWorksBF16 sync.Pool

// attnBF16Kernel is the bf16 micro-kernel of the products (tests swap in its twin).
var attnBF16Kernel = gemmBF16KernelBest

func getAttnWork[L attnLow](t, d int, backward bool) *attnWork[L] {
	var zero L
	pool := &attnWorks32
	if _, ok := any(zero).(half.BFloat16); ok {
		pool = &attnWorksBF16
	}
	w, _ := pool.Get().(*attnWork[L])
	if w == nil {
		w = new(attnWork[L])
	}
	w.t, w.d = t, d
	n := t * d
	w.acc = grow(w.acc, n)
	if backward {
		w.gk, w.gv = grow(w.gk, n), grow(w.gv, n)
		w.dp = grow(w.dp, attnBlock*attnBlock)
		w.delta = grow(w.delta, t)
	}
	w.tile = grow(w.tile, attnBlock*attnBlock)
	w.m, w.l = grow(w.m, attnBlock), grow(w.l, attnBlock)
	w.lse = grow(w.lse, t)
	w.kern = attnBF16Kernel
	return w
}

func putAttnWork[L attnLow](w *attnWork[L]) {
	var zero L
	if _, ok := any(zero).(half.BFloat16); ok {
		attnWorksBF16.Put(w)
	} else {
		attnWorks32.Put(w)
	}
}

// view returns elements [off, off+n) of s as L: the storage itself when its dtype is
// L, else a copy widened into *buf.
func (w *attnWork[L]) view(s *storage, off, n int, buf *[]L) []L {
	var zero L
	switch any(zero).(type) {
	case float32:
		if s.dt == backend.Float32 {
			return any(s.f32()[off : off+n]).([]L)
		}
		*buf = grow(*buf, n)
		load(any(*buf).([]float32), s, off, 1)
		return *buf
	default:
		if s.dt != backend.BFloat16 {
			panic("cpu: attention: bf16 path with " + s.dt.String() + " storage")
		}
		return any(s.bf16()[off : off+n]).([]L)
	}
}

// low returns the rows×cols corner of the float32 tile t (row stride attnBlock) as L:
// t itself for float32, else rounded into dst (same layout).
func (w *attnWork[L]) low(t []float32, dst *[]L, rows, cols int) []L {
	if lt, ok := any(t).([]L); ok {
		return lt
	}
	*dst = grow(*dst, attnBlock*attnBlock)
	d := any(*dst).([]half.BFloat16)
	if cols == attnBlock {
		half.Float32ToBFloat16(d[:rows*attnBlock], t[:rows*attnBlock])
	} else {
		for r := range rows {
			half.Float32ToBFloat16(d[r*attnBlock:][:cols], t[r*attnBlock:][:cols])
		}
	}
	return *dst
}

// mul sets C = op(A)·op(B) (or adds it to C, add) for float32 C, m×n, depth k, A and B
// row-major as Gemm takes them.
func (w *attnWork[L]) mul(transA, transB bool, m, n, k int, a []L, lda int, b []L, ldb int, add bool, c []float32, ldc int) {
	var beta float32
	if add {
		beta = 1
	}
	if af, ok := any(a).([]float32); ok {
		gemmWith(gemmKernel32, 1, transA, transB, m, n, k, 1, af, lda, any(b).([]float32), ldb, beta, c, ldc)
		return
	}
	w.mulBF16(transA, transB, m, n, k, any(a).([]half.BFloat16), lda, any(b).([]half.BFloat16), ldb, add, c, ldc)
}

// mulBF16 is mul for bf16 operands with w.kern: both operands packed as the kernel
// reads them (odd k padded with a zero), every tile from zero pair steps in ascending k
// (one k slice: k ≤ 2·attnBlock here), stored or added (float32 addition; the AMX
// kernel accumulates onto C) to C.
func (w *attnWork[L]) mulBF16(transA, transB bool, m, n, k int, a []half.BFloat16, lda int, b []half.BFloat16, ldb int, add bool, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	kern := w.kern
	mr, nr := kern.mr, kern.nr
	if k == 0 {
		if !add {
			for i := range m {
				clear(c[i*ldc:][:n])
			}
		}
		return
	}
	t := max(kern.tileK, 1)
	kc2 := gemmCeilDiv(gemmCeilDiv(k, 2), t) * t
	np := gemmCeilDiv(n, nr)
	w.bPack = grow(w.bPack, np*kc2*nr)
	for q := range np {
		j0 := q * nr
		cols := min(nr, n-j0)
		dst := w.bPack[q*kc2*nr:][:kc2*nr]
		if !transB {
			packPairs(dst, b[j0:], ldb, k, cols, nr, false)
		} else {
			packPairs(dst, b[j0*ldb:], ldb, k, cols, nr, true)
		}
		clear(dst[(k+1)/2*nr:])
	}
	w.aPack = grow(w.aPack, kc2*mr)
	w.edge = grow(w.edge, mr*nr)
	ap := w.aPack
	for i0 := 0; i0 < m; i0 += mr {
		rows := min(mr, m-i0)
		switch {
		case kern.rowsA && !transA:
			packAMXA(ap, a[i0*lda:], lda, k, kc2, rows, true)
		case kern.rowsA:
			packAMXA(ap, a[i0:], lda, k, kc2, rows, false)
		case !transA:
			packPairs(ap, a[i0*lda:], lda, k, rows, mr, true)
			clear(ap[(k+1)/2*mr:])
		default:
			packPairs(ap, a[i0:], lda, k, rows, mr, false)
			clear(ap[(k+1)/2*mr:])
		}
		for q := range np {
			j0 := q * nr
			cols := min(nr, n-j0)
			bp := w.bPack[q*kc2*nr:][:kc2*nr]
			if rows == mr && cols == nr {
				kern.fn(kc2, ap, bp, c[i0*ldc+j0:], ldc, add)
				continue
			}
			kern.fn(kc2, ap, bp, w.edge, nr, false)
			for r := range rows {
				src := w.edge[r*nr:][:cols]
				dst := c[(i0+r)*ldc+j0:][:cols]
				if add {
					for j, v := range src {
						dst[j] += v
					}
				} else {
					copy(dst, src)
				}
			}
		}
	}
}

// attnForwardF32 is the forward pass for float32, float16 (L float32) and bf16 (L bf16)
// storage.
func attnForwardF32[L attnLow](a *backend.AttentionArgs, ops []*storage, lseS *storage) {
	q, k, v, o := ops[0], ops[1], ops[2], ops[3]
	t, d := a.T, a.D
	scale := float32(a.Scale)
	ParallelFor(a.BH, 1, func(lo, hi int) {
		w := getAttnWork[L](t, d, false)
		defer putAttnWork(w)
		for h := lo; h < hi; h++ {
			off := h * t * d
			qh, kh, vh := w.view(q, off, t*d, &w.qb), w.view(k, off, t*d, &w.kb), w.view(v, off, t*d, &w.vb)
			w.forwardHead(a.Causal, scale, qh, kh, vh)
			store(o, off, 1, w.acc[:t*d])
			store(lseS, h*t, 1, w.lse[:t])
		}
	})
}

// forwardHead computes one head's output into w.acc and its log-sum-exp into w.lse.
func (w *attnWork[L]) forwardHead(causal bool, scale float32, q, k, v []L) {
	t, d := w.t, w.d
	ninf := float32(math.Inf(-1))
	for i0 := 0; i0 < t; i0 += attnBlock {
		rows := min(attnBlock, t-i0)
		acc := w.acc[i0*d : (i0+rows)*d]
		clear(acc)
		for r := range rows {
			w.m[r], w.l[r] = ninf, 0
		}
		end := attnKeyEnd(causal, i0, rows, t)
		for j0 := 0; j0 < end; j0 += attnBlock {
			cols := min(attnBlock, end-j0)
			w.mul(false, true, rows, cols, d, q[i0*d:], d, k[j0*d:], d, false, w.tile, attnBlock)
			for r := range rows {
				row := w.tile[r*attnBlock : r*attnBlock+cols]
				vis := attnVisible(causal, i0+r, j0, cols)
				if vis == 0 {
					clear(row)
					continue
				}
				mNew := max(w.m[r], scale*vecMaxF32(row[:vis]))
				if math.IsInf(float64(mNew), -1) {
					// Every visible score is -Inf: nothing to add (no NaN from -Inf - -Inf).
					clear(row)
					continue
				}
				sum := attnExpRow(row[:vis], scale, mNew)
				clear(row[vis:])
				if w.l[r] != 0 {
					alpha := float32(math.Exp(float64(w.m[r] - mNew)))
					if alpha != 1 {
						ar := acc[r*d : (r+1)*d]
						for c := range ar {
							ar[c] *= alpha
						}
					}
					w.l[r] = w.l[r]*alpha + sum
				} else {
					w.l[r] = sum
				}
				w.m[r] = mNew
			}
			p := w.low(w.tile, &w.pLow, rows, cols)
			w.mul(false, false, rows, d, cols, p, attnBlock, v[j0*d:], d, true, acc, d)
		}
		for r := range rows {
			ar := acc[r*d : (r+1)*d]
			i := i0 + r
			if w.l[r] == 0 {
				// A row with no visible key (possible only with -Inf scores):
				// output 0, and an LSE of -Inf makes its probabilities 0 in backward.
				clear(ar)
				w.lse[i] = ninf
				continue
			}
			inv := 1 / w.l[r]
			for c := range ar {
				ar[c] *= inv
			}
			w.lse[i] = w.m[r] + float32(math.Log(float64(w.l[r])))
		}
	}
}

// attnBackwardF32 is the backward pass for float32, float16 and bf16 storage.
func attnBackwardF32[L attnLow](a *backend.AttentionArgs, ops []*storage, lseS *storage) {
	q, k, v, o, gO, gQ, gK, gV := ops[0], ops[1], ops[2], ops[3], ops[4], ops[5], ops[6], ops[7]
	t, d := a.T, a.D
	scale := float32(a.Scale)
	ParallelFor(a.BH, 1, func(lo, hi int) {
		w := getAttnWork[L](t, d, true)
		defer putAttnWork(w)
		for h := lo; h < hi; h++ {
			off := h * t * d
			load(w.lse[:t], lseS, h*t, 1)
			qh, kh, vh := w.view(q, off, t*d, &w.qb), w.view(k, off, t*d, &w.kb), w.view(v, off, t*d, &w.vb)
			oh, gh := w.view(o, off, t*d, &w.ob), w.view(gO, off, t*d, &w.gb)
			w.backwardHead(a.Causal, scale, qh, kh, vh, oh, gh)
			store(gQ, off, 1, w.acc[:t*d])
			store(gK, off, 1, w.gk[:t*d])
			store(gV, off, 1, w.gv[:t*d])
		}
	})
}

// attnF32 returns element i of x as float32.
func attnF32[L attnLow](x L) float32 {
	if b, ok := any(x).(half.BFloat16); ok {
		return b.Float32()
	}
	return any(x).(float32)
}

// backwardHead computes one head's dQ into w.acc, dK into w.gk and dV into w.gv.
func (w *attnWork[L]) backwardHead(causal bool, scale float32, q, k, v, o, g []L) {
	t, d := w.t, w.d
	gq, gk, gv := w.acc[:t*d], w.gk[:t*d], w.gv[:t*d]
	clear(gq)
	clear(gk)
	clear(gv)
	// delta_i = Σ_c dO_ic·O_ic: the softmax backward's row term.
	for i := range t {
		var dot float64
		gr, or := g[i*d:(i+1)*d], o[i*d:(i+1)*d]
		for c := range gr {
			dot += float64(attnF32(gr[c])) * float64(attnF32(or[c]))
		}
		w.delta[i] = float32(dot)
	}
	for i0 := 0; i0 < t; i0 += attnBlock {
		rows := min(attnBlock, t-i0)
		end := attnKeyEnd(causal, i0, rows, t)
		for j0 := 0; j0 < end; j0 += attnBlock {
			cols := min(attnBlock, end-j0)
			// P = exp(scale·Q_i·K_jᵀ - lse_i), masked entries 0.
			w.mul(false, true, rows, cols, d, q[i0*d:], d, k[j0*d:], d, false, w.tile, attnBlock)
			for r := range rows {
				row := w.tile[r*attnBlock : r*attnBlock+cols]
				vis := attnVisible(causal, i0+r, j0, cols)
				l := w.lse[i0+r]
				if vis == 0 || math.IsInf(float64(l), -1) {
					clear(row)
					continue
				}
				attnExpRow(row[:vis], scale, l)
				clear(row[vis:])
			}
			p := w.low(w.tile, &w.pLow, rows, cols)
			// dV_j += Pᵀ·dO_i
			w.mul(true, false, cols, d, rows, p, attnBlock, g[i0*d:], d, true, gv[j0*d:], d)
			// dP = dO_i·V_jᵀ, then dS = P∘(dP - delta_i) in place of dP.
			w.mul(false, true, rows, cols, d, g[i0*d:], d, v[j0*d:], d, false, w.dp, attnBlock)
			for r := range rows {
				pr := w.tile[r*attnBlock : r*attnBlock+cols]
				dp := w.dp[r*attnBlock : r*attnBlock+cols]
				del := w.delta[i0+r]
				for c := range dp {
					dp[c] = pr[c] * (dp[c] - del)
				}
			}
			ds := w.low(w.dp, &w.dsLow, rows, cols)
			// dQ_i += dS·K_j; dK_j += dSᵀ·Q_i (scaled at the end)
			w.mul(false, false, rows, d, cols, ds, attnBlock, k[j0*d:], d, true, gq[i0*d:], d)
			w.mul(true, false, cols, d, rows, ds, attnBlock, q[i0*d:], d, true, gk[j0*d:], d)
		}
	}
	for i := range gq {
		gq[i] *= scale
	}
	for i := range gk {
		gk[i] *= scale
	}
}
