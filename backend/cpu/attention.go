package cpu

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// Fused scaled dot-product attention (backend.Attention), FlashAttention's algorithm on
// the CPU: each head is one task of the worker pool; within it the queries are taken in
// blocks of attnBlock rows and the keys in blocks of attnBlock columns, the scores of
// one block pair live in a attnBlock×attnBlock scratch tile, and the softmax is taken
// online (running maximum and sum per row, the output rescaled as the maximum grows).
// So the memory a head needs grows with T·D, never T². The backward pass recomputes
// each tile's probabilities from the saved log-sum-exp. This file holds the entry
// points and the float64 kernel (attnForward, attnBackward: float64 storage, the
// gradchecks' reference); float32, float16 and bf16 storage run attention_f32.go's
// kernel (float32 softmax, bf16 products for bf16).

// attnBlock is the query and key block size: a 64×64 float32 tile (16 KB) and the
// blocks of Q, K and V it reads stay in L1/L2 for the head dimensions of small models.
const attnBlock = 64

// Attention implements backend.Attention.
func (b *Backend) Attention(a backend.AttentionArgs) {
	ops, pl := attnOperands("Attention", &a, a.Q, a.K, a.V, a.O)
	lse := attnLSE("Attention", &a)
	switch {
	case computeF64(ops[0].dt):
		attnForward[float64](&a, ops, pl, lse)
	case ops[0].dt == backend.BFloat16:
		attnForwardF32[half.BFloat16](&a, ops, pl, lse)
	default:
		attnForwardF32[float32](&a, ops, pl, lse)
	}
}

// AttentionLayouts implements backend.AttentionLayouts: every AttentionArgs.Layout is
// accepted.
func (b *Backend) AttentionLayouts() bool { return true }

// AttentionBackward implements backend.Attention.
func (b *Backend) AttentionBackward(a backend.AttentionArgs) {
	ops, pl := attnOperands("AttentionBackward", &a, a.Q, a.K, a.V, a.O, a.GO, a.GQ, a.GK, a.GV)
	lse := attnLSE("AttentionBackward", &a)
	switch {
	case computeF64(ops[0].dt):
		attnBackward[float64](&a, ops, pl, lse)
	case ops[0].dt == backend.BFloat16:
		attnBackwardF32[half.BFloat16](&a, ops, pl, lse)
	default:
		attnBackwardF32[float32](&a, ops, pl, lse)
	}
}

// attnOperands checks that the operands (Q, K, V, O, then GO, GQ, GK, GV) share a
// floating dtype and hold every element their places (attnPlaces) name.
func attnOperands(op string, a *backend.AttentionArgs, ss ...backend.Storage) ([]*storage, []attnPlace) {
	if a.BH < 0 || a.T < 0 || a.D < 0 {
		panic(fmt.Sprintf("cpu: %s: negative geometry BH=%d T=%d D=%d", op, a.BH, a.T, a.D))
	}
	pl := attnPlaces(op, a)
	out := make([]*storage, len(ss))
	for i, s := range ss {
		if s == nil {
			panic(fmt.Sprintf("cpu: %s: operand %d is nil", op, i))
		}
		out[i] = st(s)
		if !out[i].dt.IsFloat() || out[i].dt != out[0].dt {
			panic(fmt.Sprintf("cpu: %s: operands must share one floating dtype, got %s and %s", op, out[0].dt, out[i].dt))
		}
		if n := pl[i].need(a.BH, a.T, a.D); out[i].n < n {
			panic(fmt.Sprintf("cpu: %s: operand %d has %d elements, its layout needs %d", op, i, out[i].n, n))
		}
	}
	return out, pl
}

// attnPlace is where one operand's heads lie in its storage: row t of head bh starts at
// element at(bh) + t·row.
type attnPlace struct{ off, batch, head, row, heads int }

// at returns the element where head bh's first row starts.
func (p attnPlace) at(bh int) int { return p.off + bh/p.heads*p.batch + bh%p.heads*p.head }

// span returns how many elements from at(bh) one head's t rows of d cover.
func (p attnPlace) span(t, d int) int {
	if t == 0 || d == 0 {
		return 0
	}
	return (t-1)*p.row + d
}

// need returns the elements a storage must hold for bh heads in this place.
func (p attnPlace) need(bh, t, d int) int {
	if bh == 0 || t == 0 || d == 0 {
		return 0
	}
	return p.at(bh-1) + p.span(t, d)
}

// attnPlaces returns the places of Q, K, V, O, GO, GQ, GK and GV: contiguous [BH, T, D]
// without a Layout.
func attnPlaces(op string, a *backend.AttentionArgs) []attnPlace {
	pl := make([]attnPlace, 8)
	l := a.Layout
	if l == nil {
		for i := range pl {
			pl[i] = attnPlace{batch: a.T * a.D, row: a.D, heads: 1}
		}
		return pl
	}
	if l.Heads < 1 || a.BH%l.Heads != 0 {
		panic(fmt.Sprintf("cpu: %s: Layout.Heads = %d does not divide BH = %d", op, l.Heads, a.BH))
	}
	for i, s := range []backend.AttentionStride{l.Q, l.K, l.V, l.O, l.GO, l.GQ, l.GK, l.GV} {
		if s.Off < 0 || s.Batch < 0 || s.Head < 0 || s.Row < 0 {
			panic(fmt.Sprintf("cpu: %s: Layout stride %d is negative: %+v", op, i, s))
		}
		pl[i] = attnPlace{off: s.Off, batch: s.Batch, head: s.Head, row: s.Row, heads: l.Heads}
	}
	return pl
}

// attnLoad loads head bh of s (place p, t rows of d) into the contiguous dst.
func attnLoad[C numeric](dst []C, s *storage, p attnPlace, bh, t, d int) {
	at := p.at(bh)
	if p.row == d {
		load(dst[:t*d], s, at, 1)
		return
	}
	for r := range t {
		load(dst[r*d:(r+1)*d], s, at+r*p.row, 1)
	}
}

// attnStore stores the contiguous src (t rows of d) into head bh of s (place p).
func attnStore[C numeric](s *storage, p attnPlace, bh, t, d int, src []C) {
	at := p.at(bh)
	if p.row == d {
		store(s, at, 1, src[:t*d])
		return
	}
	for r := range t {
		store(s, at+r*p.row, 1, src[r*d:(r+1)*d])
	}
}

// attnLSE returns the [BH, T] log-sum-exp storage: Float32, or Float64 with Float64
// operands.
func attnLSE(op string, a *backend.AttentionArgs) *storage {
	if a.LSE == nil {
		panic(fmt.Sprintf("cpu: %s: LSE is nil; it holds the softmax statistics the backward pass needs", op))
	}
	s := st(a.LSE)
	if !(s.dt == backend.Float32 || s.dt == backend.Float64) || s.n < a.BH*a.T {
		panic(fmt.Sprintf("cpu: %s: LSE must be Float32 (or Float64) with BH·T = %d elements, got %s with %d", op, a.BH*a.T, s.dt, s.n))
	}
	return s
}

// attnVisible is the number of keys of the block starting at j0 (cols wide) that query
// i may see.
func attnVisible(causal bool, i, j0, cols int) int {
	if !causal {
		return cols
	}
	return max(0, min(cols, i-j0+1))
}

// attnKeyEnd is the end of the keys any query of the block [i0, i0+rows) sees.
func attnKeyEnd(causal bool, i0, rows, t int) int {
	if causal {
		return min(t, i0+rows)
	}
	return t
}

// attnRowMax returns the largest element of row (-Inf for an empty row); a NaN makes
// the row's sum NaN later, as in softmax.
func attnRowMax[C numeric](row []C) float64 {
	if rf, ok := any(row).([]float32); ok {
		return float64(vecMaxF32(rf))
	}
	mx := math.Inf(-1)
	for _, x := range row {
		if float64(x) > mx {
			mx = float64(x)
		}
	}
	return mx
}

// attnExpRow sets row[c] = exp(row[c] - shift) for c < visible and 0 beyond (masked
// keys give exact zeros), and returns the sum of the exponentials.
func attnExpRow64[C numeric](row []C, visible int, shift float64, e []float64) float64 {
	var sum float64
	if rf, ok := any(row).([]float32); ok {
		sum = vecExpF64(e[:visible], rf[:visible], shift)
		for c := 0; c < visible; c++ {
			rf[c] = float32(e[c])
		}
	} else {
		for c := 0; c < visible; c++ {
			v := expF64(float64(row[c]) - shift)
			row[c] = C(v)
			sum += v
		}
	}
	clear(row[visible:])
	return sum
}

// attnScratch is one task's buffers: the head's operands in the compute type and the
// score tile.
type attnScratch[C numeric] struct {
	q, k, v, o, g    []C
	gq, gk, gv, tile []C
	dp               []C
	m, l, delta      []float64
	e                []float64
}

func newAttnScratch[C numeric](t, d int, backward bool) *attnScratch[C] {
	n := t * d
	s := &attnScratch[C]{
		q: make([]C, n), k: make([]C, n), v: make([]C, n), o: make([]C, n),
		tile: make([]C, attnBlock*attnBlock), m: make([]float64, attnBlock), l: make([]float64, attnBlock),
		e: make([]float64, attnBlock),
	}
	if backward {
		s.g, s.gq, s.gk, s.gv = make([]C, n), make([]C, n), make([]C, n), make([]C, n)
		s.dp = make([]C, attnBlock*attnBlock)
		s.delta = make([]float64, t)
	}
	return s
}

func attnForward[C numeric](a *backend.AttentionArgs, ops []*storage, pl []attnPlace, lseS *storage) {
	q, k, v, o := ops[0], ops[1], ops[2], ops[3]
	t, d := a.T, a.D
	kern := gemmKernelFor[C]()
	scale := C(a.Scale)
	ParallelFor(a.BH, 1, func(lo, hi int) {
		s := newAttnScratch[C](t, d, false)
		lse := make([]float64, t)
		for h := lo; h < hi; h++ {
			attnLoad(s.q, q, pl[0], h, t, d)
			attnLoad(s.k, k, pl[1], h, t, d)
			attnLoad(s.v, v, pl[2], h, t, d)
			for i0 := 0; i0 < t; i0 += attnBlock {
				rows := min(attnBlock, t-i0)
				acc := s.o[i0*d : (i0+rows)*d]
				clear(acc)
				for r := range rows {
					s.m[r], s.l[r] = math.Inf(-1), 0
				}
				end := attnKeyEnd(a.Causal, i0, rows, t)
				for j0 := 0; j0 < end; j0 += attnBlock {
					cols := min(attnBlock, end-j0)
					gemmWith(kern, 1, false, true, rows, cols, d, scale, s.q[i0*d:], d, s.k[j0*d:], d, 0, s.tile, attnBlock)
					for r := range rows {
						row := s.tile[r*attnBlock : r*attnBlock+cols]
						vis := attnVisible(a.Causal, i0+r, j0, cols)
						if vis == 0 {
							clear(row)
							continue
						}
						mNew := max(s.m[r], attnRowMax(row[:vis]))
						if math.IsInf(mNew, -1) {
							// Every visible score is -Inf: nothing to add (no NaN from -Inf - -Inf).
							clear(row)
							continue
						}
						sum := attnExpRow64(row, vis, mNew, s.e)
						if s.l[r] != 0 {
							alpha := math.Exp(s.m[r] - mNew)
							if alpha != 1 {
								ar := acc[r*d : (r+1)*d]
								for c := range ar {
									ar[c] = C(float64(ar[c]) * alpha)
								}
							}
							s.l[r] = s.l[r]*alpha + sum
						} else {
							s.l[r] = sum
						}
						s.m[r] = mNew
					}
					gemmWith(kern, 1, false, false, rows, d, cols, 1, s.tile, attnBlock, s.v[j0*d:], d, 1, acc, d)
				}
				for r := range rows {
					ar := acc[r*d : (r+1)*d]
					i := i0 + r
					if s.l[r] == 0 {
						// A row with no visible key (possible only with -Inf scores):
						// output 0, and an LSE of -Inf makes its probabilities 0 in backward.
						clear(ar)
						lse[i] = math.Inf(-1)
						continue
					}
					inv := 1 / s.l[r]
					for c := range ar {
						ar[c] = C(float64(ar[c]) * inv)
					}
					lse[i] = s.m[r] + math.Log(s.l[r])
				}
			}
			attnStore(o, pl[3], h, t, d, s.o)
			store(lseS, h*t, 1, lse)
		}
	})
}

func attnBackward[C numeric](a *backend.AttentionArgs, ops []*storage, pl []attnPlace, lseS *storage) {
	q, k, v, o, gO, gQ, gK, gV := ops[0], ops[1], ops[2], ops[3], ops[4], ops[5], ops[6], ops[7]
	t, d := a.T, a.D
	kern := gemmKernelFor[C]()
	scale := C(a.Scale)
	ParallelFor(a.BH, 1, func(lo, hi int) {
		s := newAttnScratch[C](t, d, true)
		lse := make([]float64, t)
		for h := lo; h < hi; h++ {
			load(lse, lseS, h*t, 1)
			attnLoad(s.q, q, pl[0], h, t, d)
			attnLoad(s.k, k, pl[1], h, t, d)
			attnLoad(s.v, v, pl[2], h, t, d)
			attnLoad(s.o, o, pl[3], h, t, d)
			attnLoad(s.g, gO, pl[4], h, t, d)
			clear(s.gq)
			clear(s.gk)
			clear(s.gv)
			// delta_i = Σ_c dO_ic·O_ic: the softmax backward's row term.
			for i := range t {
				var dot float64
				gr, or := s.g[i*d:(i+1)*d], s.o[i*d:(i+1)*d]
				for c := range gr {
					dot += float64(gr[c]) * float64(or[c])
				}
				s.delta[i] = dot
			}
			for i0 := 0; i0 < t; i0 += attnBlock {
				rows := min(attnBlock, t-i0)
				end := attnKeyEnd(a.Causal, i0, rows, t)
				for j0 := 0; j0 < end; j0 += attnBlock {
					cols := min(attnBlock, end-j0)
					// P = exp(scale·Q_i·K_jᵀ - lse_i), masked entries 0.
					gemmWith(kern, 1, false, true, rows, cols, d, scale, s.q[i0*d:], d, s.k[j0*d:], d, 0, s.tile, attnBlock)
					for r := range rows {
						row := s.tile[r*attnBlock : r*attnBlock+cols]
						vis := attnVisible(a.Causal, i0+r, j0, cols)
						l := lse[i0+r]
						if vis == 0 || math.IsInf(l, -1) {
							clear(row)
							continue
						}
						attnExpRow64(row, vis, l, s.e)
					}
					// dV_j += Pᵀ·dO_i
					gemmWith(kern, 1, true, false, cols, d, rows, 1, s.tile, attnBlock, s.g[i0*d:], d, 1, s.gv[j0*d:], d)
					// dP = dO_i·V_jᵀ, then dS = P∘(dP - delta_i) in place of dP.
					gemmWith(kern, 1, false, true, rows, cols, d, 1, s.g[i0*d:], d, s.v[j0*d:], d, 0, s.dp, attnBlock)
					for r := range rows {
						p := s.tile[r*attnBlock : r*attnBlock+cols]
						dp := s.dp[r*attnBlock : r*attnBlock+cols]
						del := s.delta[i0+r]
						for c := range dp {
							dp[c] = C(float64(p[c]) * (float64(dp[c]) - del))
						}
					}
					// dQ_i += scale·dS·K_j; dK_j += scale·dSᵀ·Q_i
					gemmWith(kern, 1, false, false, rows, d, cols, scale, s.dp, attnBlock, s.k[j0*d:], d, 1, s.gq[i0*d:], d)
					gemmWith(kern, 1, true, false, cols, d, rows, scale, s.dp, attnBlock, s.q[i0*d:], d, 1, s.gk[j0*d:], d)
				}
			}
			attnStore(gQ, pl[5], h, t, d, s.gq)
			attnStore(gK, pl[6], h, t, d, s.gk)
			attnStore(gV, pl[7], h, t, d, s.gv)
		}
	})
}
