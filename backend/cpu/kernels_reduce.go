package cpu

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/backend"
)

// redBlock is how many elements of the reduced axis (rows of the inner slab, when inner
// > 1) one task folds before the partial results are combined in order. It depends only
// on the shape, never on the worker count, so results are bit-for-bit reproducible.
const redBlock = 1 << 14

var reduceNames = [...]string{
	backend.Sum: "Sum", backend.Mean: "Mean", backend.Max: "Max", backend.Min: "Min",
	backend.ArgMax: "ArgMax", backend.ArgMin: "ArgMin",
}

// Reduce implements backend.Backend. Sum and Mean accumulate in float64 for every dtype
// and round once on store; Max and Min propagate NaN; ArgMax and ArgMin write the first
// index of the extreme (a NaN is the extreme) into Int64 dst. Over an empty axis
// (n = 0) Sum writes 0, Mean NaN, and the others panic. src may be any dtype (a Sum of
// Bool counts); dst any dtype for Sum/Mean/Max/Min.
func (b *Backend) Reduce(op backend.ReduceOp, dst, src backend.Storage, outer, n, inner int) {
	if int(op) >= len(reduceNames) {
		panic(fmt.Sprintf("cpu: Reduce: unknown op %d", op))
	}
	name := reduceNames[op]
	d, s := st(dst), st(src)
	if outer < 0 || n < 0 || inner < 0 {
		panic(fmt.Sprintf("cpu: Reduce: negative shape [%d, %d, %d]", outer, n, inner))
	}
	elemCheckLen("Reduce", "src", s, outer*n*inner)
	elemCheckLen("Reduce", "dst", d, outer*inner)
	arg := op == backend.ArgMax || op == backend.ArgMin
	if arg && d.dt != backend.Int64 {
		panic(fmt.Sprintf("cpu: Reduce: %s writes Int64, got a %s dst", name, d.dt))
	}
	if n == 0 {
		switch op {
		case backend.Sum:
			b.Fill(backend.Dense(d, 0, outer*inner), 0)
		case backend.Mean:
			b.Fill(backend.Dense(d, 0, outer*inner), math.NaN())
		default:
			panic(fmt.Sprintf("cpu: Reduce: %s over an empty axis (n = 0) has no identity", name))
		}
		return
	}
	if outer*inner == 0 {
		return
	}
	f64 := computeF64(s.dt)
	switch {
	case inner == 1 && f64:
		reduceRows[float64](op, d, s, outer, n)
	case inner == 1:
		reduceRows[float32](op, d, s, outer, n)
	case f64:
		reduceCols[float64](op, d, s, outer, n, inner)
	case (op == backend.Sum || op == backend.Mean) && vecAVX512OK() &&
		(s.dt == backend.Float32 || s.dt == backend.BFloat16):
		reduceColsSum(op, d, s, outer, n, inner)
	default:
		reduceCols[float32](op, d, s, outer, n, inner)
	}
}

// reduceColsSum is reduceCols for Sum and Mean of Float32 and BFloat16 data, bit for
// bit: the same fixed blocks of rows, each summed per column in float64 from +0 in row
// order, and the block sums added in block order, but each task owns a strip of columns
// and walks all its blocks, keeping the running total in place of the per-block partial
// buffers, and the column sums read the rows straight from the storage (colSumF32,
// colSumBF16: bfloat16 widened in the loop). Strips are narrowed, down to 64 columns,
// until there are a few per worker.
func reduceColsSum(op backend.ReduceOp, d, s *storage, outer, n, inner int) {
	rows := max(1, redBlock/min(inner, chunk)) // as reduceCols: the shape picks the blocks
	w := min(inner, chunk)
	if want := (2*Workers() + outer - 1) / outer; want > 1 && (inner+w-1)/w < want {
		w = min(w, max(64, ((inner+want-1)/want+63)&^63))
	}
	nstrip := (inner + w - 1) / w
	ParallelFor(outer*nstrip, max(1, grainElems/(n*w)), func(lo, hi int) {
		var vals [chunk]float64
		for it := lo; it < hi; it++ {
			sp, o := it%nstrip, it/nstrip
			c0 := sp * w
			a := vals[:min(w, inner-c0)]
			base := o*n*inner + c0
			for j0 := 0; j0 < n; j0 += rows {
				k := min(rows, n-j0)
				off := base + j0*inner
				end := off + (k-1)*inner + len(a)
				if s.dt == backend.BFloat16 {
					colSumBF16(a, s.u16()[off:end], inner, k, j0 > 0)
				} else {
					colSumF32(a, s.f32()[off:end], inner, k, j0 > 0)
				}
			}
			reduceFinish(op, d, o*inner+c0, a, nil, n)
		}
	})
}

// reduceSign is +1 for the ops that look for a largest value and -1 for those that look
// for a smallest one: the minimum of x is minus the maximum of -x, exactly.
func reduceSign[C numeric](op backend.ReduceOp) C {
	if op == backend.Min || op == backend.ArgMin {
		return -1
	}
	return 1
}

// reduceBetter reports whether candidate v beats the running extreme m (both already
// multiplied by the sign): larger, or the first NaN.
func reduceBetter[C numeric](v, m C) bool { return v > m || (v != v && m == m) }

// argExtreme returns the largest sgn·x[i] (a NaN wins at once) and its first index.
func argExtreme[C numeric](x []C, sgn C) (C, int) {
	m, mi := x[0]*sgn, 0
	if m != m {
		return m, 0
	}
	for i := 1; i < len(x); i++ {
		v := x[i] * sgn
		if v > m {
			m, mi = v, i
		} else if v != v {
			return v, i
		}
	}
	return m, mi
}

// foldRow reduces x: its sum for Sum/Mean, else its extreme and the extreme's first
// index.
func foldRow[C numeric](op backend.ReduceOp, x []C) (float64, int64) {
	if op == backend.Sum || op == backend.Mean {
		if xf, ok := any(x).([]float32); ok {
			return vecSumF64(xf), 0
		}
		// Four float64 accumulators hide the add latency; their order is fixed.
		var s0, s1, s2, s3 float64
		i := 0
		for ; i+4 <= len(x); i += 4 {
			s0 += float64(x[i])
			s1 += float64(x[i+1])
			s2 += float64(x[i+2])
			s3 += float64(x[i+3])
		}
		for ; i < len(x); i++ {
			s0 += float64(x[i])
		}
		return (s0 + s1) + (s2 + s3), 0
	}
	sgn := reduceSign[C](op)
	m, i := argExtreme(x, sgn)
	return float64(m * sgn), int64(i)
}

// foldSegment reduces the contiguous elements [off, off+n) of src a chunk at a time,
// combining the chunks' results in order.
func foldSegment[C numeric](op backend.ReduceOp, src elemRun[C], buf []C, off, n int) (float64, int64) {
	v, i := foldRow(op, src.read(buf[:min(len(buf), n)], off))
	for c := len(buf); c < n; c += len(buf) {
		cv, ci := foldRow(op, src.read(buf[:min(len(buf), n-c)], off+c))
		reduceCombine(op, &v, &i, cv, ci+int64(c))
	}
	return v, i
}

// reduceCombine folds partial result (v, i) of a later block into (acc, ai).
func reduceCombine(op backend.ReduceOp, acc *float64, ai *int64, v float64, i int64) {
	if op == backend.Sum || op == backend.Mean {
		*acc += v
		return
	}
	sgn := reduceSign[float64](op)
	if reduceBetter(v*sgn, *acc*sgn) {
		*acc, *ai = v, i
	}
}

// reduceFinish writes results for dst elements [off, off+len(vals)).
func reduceFinish(op backend.ReduceOp, d *storage, off int, vals []float64, idx []int64, n int) {
	switch op {
	case backend.ArgMax, backend.ArgMin:
		copy(d.i64()[off:off+len(idx)], idx)
		return
	case backend.Mean:
		for i := range vals {
			vals[i] /= float64(n)
		}
	}
	d.storeF64(off, vals)
}

// reduceRows reduces contiguous rows (inner == 1). Rows longer than redBlock are split
// into fixed blocks whose results are combined in order.
func reduceRows[C numeric](op backend.ReduceOp, d, s *storage, outer, n int) {
	src := elemRunOf[C](s)
	nblk := (n + redBlock - 1) / redBlock
	if nblk == 1 {
		ParallelFor(outer, max(1, grainElems/n), func(lo, hi int) {
			var buf [chunk]C
			var vals [chunk]float64
			var idx [chunk]int64
			for r0 := lo; r0 < hi; r0 += chunk {
				k := min(chunk, hi-r0)
				if n > chunk {
					for r := range k {
						vals[r], idx[r] = foldSegment(op, src, buf[:], (r0+r)*n, n)
					}
				} else {
					// Short rows: convert as many whole rows as fit at once.
					per := chunk / n
					for r := 0; r < k; r += per {
						q := min(per, k-r)
						x := src.read(buf[:q*n], (r0+r)*n)
						for i := range q {
							vals[r+i], idx[r+i] = foldRow(op, x[i*n:(i+1)*n])
						}
					}
				}
				reduceFinish(op, d, r0, vals[:k], idx[:k], n)
			}
		})
		return
	}
	pv := make([]float64, outer*nblk)
	pi := make([]int64, outer*nblk)
	ParallelFor(outer*nblk, max(1, grainElems/redBlock), func(lo, hi int) {
		var buf [chunk]C
		for it := lo; it < hi; it++ {
			r, blk := it/nblk, it%nblk
			j0 := blk * redBlock
			v, i := foldSegment(op, src, buf[:], r*n+j0, min(n, j0+redBlock)-j0)
			pv[it], pi[it] = v, i+int64(j0)
		}
	})
	ParallelFor(outer, max(1, grainElems/nblk), func(lo, hi int) {
		var vals [chunk]float64
		var idx [chunk]int64
		for r0 := lo; r0 < hi; r0 += chunk {
			k := min(chunk, hi-r0)
			for r := range k {
				p := (r0 + r) * nblk
				vals[r], idx[r] = pv[p], pi[p]
				for blk := 1; blk < nblk; blk++ {
					reduceCombine(op, &vals[r], &idx[r], pv[p+blk], pi[p+blk])
				}
			}
			reduceFinish(op, d, r0, vals[:k], idx[:k], n)
		}
	})
}

// reduceCols reduces over the middle axis when inner > 1: each task folds whole rows of
// up to chunk columns into per-column accumulators, so the inner loop reads contiguous
// memory. Tasks split outer, column chunks and fixed blocks of rows; block results are
// combined in order.
func reduceCols[C numeric](op backend.ReduceOp, d, s *storage, outer, n, inner int) {
	src := elemRunOf[C](s)
	ncol := (inner + chunk - 1) / chunk
	rows := max(1, redBlock/min(inner, chunk))
	nblk := (n + rows - 1) / rows
	var pv []float64
	var pi []int64
	if nblk > 1 {
		pv = make([]float64, outer*nblk*inner)
		pi = make([]int64, outer*nblk*inner)
	}
	work := min(rows, n) * min(inner, chunk)
	ParallelFor(outer*nblk*ncol, max(1, grainElems/work), func(lo, hi int) {
		var buf, ext [chunk]C
		var vals [chunk]float64
		var idx [chunk]int64
		for it := lo; it < hi; it++ {
			col, rest := it%ncol, it/ncol
			blk, o := rest%nblk, rest/nblk
			c0 := col * chunk
			w := min(chunk, inner-c0)
			j0, j1 := blk*rows, min(n, (blk+1)*rows)
			base := o*n*inner + c0
			a, ix := vals[:w], idx[:w]
			if op == backend.Sum || op == backend.Mean {
				clear(a)
				for j := j0; j < j1; j++ {
					x := src.read(buf[:w], base+j*inner)
					if xf, ok := any(x).([]float32); ok {
						vecAccF64(a, xf)
						continue
					}
					for c, v := range x {
						a[c] += float64(v)
					}
				}
			} else {
				sgn := reduceSign[C](op)
				m := ext[:w]
				x := src.read(buf[:w], base+j0*inner)
				for c, v := range x {
					m[c], ix[c] = v*sgn, int64(j0)
				}
				for j := j0 + 1; j < j1; j++ {
					x := src.read(buf[:w], base+j*inner)
					for c, v := range x {
						v *= sgn
						if reduceBetter(v, m[c]) {
							m[c], ix[c] = v, int64(j)
						}
					}
				}
				for c, v := range m {
					a[c] = float64(v * sgn)
				}
			}
			if nblk == 1 {
				reduceFinish(op, d, o*inner+c0, a, ix, n)
			} else {
				p := (o*nblk+blk)*inner + c0
				copy(pv[p:p+w], a)
				copy(pi[p:p+w], ix)
			}
		}
	})
	if nblk == 1 {
		return
	}
	ParallelFor(outer*ncol, max(1, grainElems/(nblk*min(inner, chunk))), func(lo, hi int) {
		var vals [chunk]float64
		var idx [chunk]int64
		for it := lo; it < hi; it++ {
			col, o := it%ncol, it/ncol
			c0 := col * chunk
			w := min(chunk, inner-c0)
			a, ix := vals[:w], idx[:w]
			p := o*nblk*inner + c0
			copy(a, pv[p:p+w])
			copy(ix, pi[p:p+w])
			for blk := 1; blk < nblk; blk++ {
				q := p + blk*inner
				for c := range a {
					reduceCombine(op, &a[c], &ix[c], pv[q+c], pi[q+c])
				}
			}
			reduceFinish(op, d, o*inner+c0, a, ix, n)
		}
	})
}

// Softmax implements backend.Backend: per row, subtract the maximum, exponentiate and
// sum in float64, then divide (log-softmax: x - max - log(sum)); each result is rounded
// once on store. A row holding NaN or +Inf yields NaN, as in PyTorch. Float32 and half
// data run on the vector layer (softmaxF32), whose exponential is within 4 ulp of
// math.Exp in float64 and whose sums run in vecSumF64's fixed order; a Float64 source
// or destination runs softmaxKernel in float64.
func (b *Backend) Softmax(dst, src backend.Storage, outer, n int, log bool) {
	d, s := st(dst), st(src)
	if outer < 0 || n < 0 {
		panic(fmt.Sprintf("cpu: Softmax: negative shape [%d, %d]", outer, n))
	}
	elemCheckLen("Softmax", "dst", d, outer*n)
	elemCheckLen("Softmax", "src", s, outer*n)
	elemCheckFloat("Softmax", "dst", d)
	elemCheckFloat("Softmax", "src", s)
	if outer*n == 0 {
		return
	}
	switch {
	case computeF64(s.dt, d.dt):
		softmaxKernel[float64](d, s, outer, n, log)
	case n < 16:
		softmaxShortRows(d, s, outer, n, log)
	default:
		softmaxF32(d, s, outer, n, log)
	}
}

// softmaxF32 is softmaxKernel for float32 and half sources on the vector layer: the row
// maximum by vecMaxF32, the exponentials and their float64 sum by vecExpF64, and the
// results by vecNarrow: rounded to float32 for a Float32 dst, and for a half one to odd,
// then stored, so that they are rounded once from float64.
func softmaxF32(d, s *storage, outer, n int, log bool) {
	src := elemRunOf[float32](s)
	ParallelFor(outer, max(1, grainElems/n), func(lo, hi int) {
		var buf, out [chunk]float32
		var ebuf [chunk]float64
		// Softmax keeps a row's exponentials for the final division.
		e := ebuf[:]
		if !log && n > chunk {
			e = make([]float64, n)
		}
		for r := lo; r < hi; r++ {
			off := r * n
			mx := float32(math.Inf(-1))
			for c := 0; c < n; c += chunk {
				mx = vecMax(mx, vecMaxF32(src.read(buf[:min(chunk, n-c)], off+c)))
			}
			mf := float64(mx)
			var sum float64
			for c := 0; c < n; c += chunk {
				m := min(chunk, n-c)
				ec := ebuf[:m]
				if !log {
					ec = e[c : c+m]
				}
				sum += vecExpF64(ec, src.read(buf[:m], off+c), mf)
			}
			ls := math.Log(sum)
			for c := 0; c < n; c += chunk {
				m := min(chunk, n-c)
				var x []float32
				if log {
					x = src.read(buf[:m], off+c)
				}
				// A half destination gets the float64 results rounded to odd in
				// float32 (narrowOdd), so that its store rounds them once.
				o, odd := out[:m], narrowOp(0)
				if d.dt == backend.Float32 {
					o = d.f32()[off+c : off+c+m]
				} else {
					odd = narrowOdd
				}
				if log {
					vecNarrow(narrowLogSm+odd, o, nil, x, nil, mf, ls)
				} else {
					vecNarrow(narrowDiv+odd, o, e[c:c+m], nil, nil, sum, 0)
				}
				if odd != 0 {
					d.storeF32(off+c, o)
				}
			}
		}
	})
}

// softmaxShortRows is softmaxF32 for rows of n < 16 elements, bit for bit: there every
// vector loop of softmaxF32 would run its pure-Go twin on the whole row, so a block of
// rows is done at once instead — each row's maximum (vecMaxF32) and arguments x - max as
// softmaxF32's exponential forms them, then the exponentials of the whole block on one
// vector loop (vecExpArgsF64, expF64's bits), then each row's sum in vecExpF64's lane
// order (element i in lane i, then vecFold), its logarithm and the results, each
// float64 expression of vecNarrowGo (or the half store's) evaluated as there.
func softmaxShortRows(d, s *storage, outer, n int, log bool) {
	src := elemRunOf[float32](s)
	ParallelFor(outer, max(1, grainElems/n), func(lo, hi int) {
		var buf [chunk]float32
		var args, e [chunk]float64 // args also holds a half destination's float64 results
		var mfs, cs [chunk]float64 // per row: the maximum, and log Σ (log) or Σ
		per := chunk / n           // rows per block
		for r0 := lo; r0 < hi; r0 += per {
			rows := min(per, hi-r0)
			m := rows * n
			off := r0 * n
			x := src.read(buf[:m], off)
			for r := range rows {
				xr := x[r*n : (r+1)*n]
				mf := float64(vecMax(float32(math.Inf(-1)), vecMaxShort(xr)))
				mfs[r] = mf
				for i, v := range xr {
					args[r*n+i] = float64(v) - mf
				}
			}
			vecExpArgsF64(e[:m], args[:m])
			for r := range rows {
				var ls [16]float64
				for i, ev := range e[r*n : (r+1)*n] {
					ls[i] += ev
				}
				var sum float64
				sum += vecFold(&ls)
				if log {
					sum = math.Log(sum)
				}
				cs[r] = sum
			}
			if d.dt == backend.Float32 {
				dst := d.f32()[off : off+m]
				for r := range rows {
					c := cs[r]
					if log {
						mf := mfs[r]
						for i, v := range x[r*n : (r+1)*n] {
							dst[r*n+i] = float32((float64(v) - mf) - c)
						}
					} else {
						for i, ev := range e[r*n : (r+1)*n] {
							dst[r*n+i] = float32(ev / c)
						}
					}
				}
				continue
			}
			o := args[:m] // the arguments are spent
			for r := range rows {
				c := cs[r]
				if log {
					mf := mfs[r]
					for i, v := range x[r*n : (r+1)*n] {
						o[r*n+i] = (float64(v) - mf) - c
					}
				} else {
					for i, ev := range e[r*n : (r+1)*n] {
						o[r*n+i] = ev / c
					}
				}
			}
			d.storeF64(off, o)
		}
	})
}

func softmaxKernel[C numeric](d, s *storage, outer, n int, log bool) {
	src := elemRunOf[C](s)
	ParallelFor(outer, max(1, grainElems/n), func(lo, hi int) {
		var buf [chunk]C
		var out [chunk]float64
		// Softmax keeps a row's exponentials for the final division.
		var ebuf [chunk]float64
		e := ebuf[:]
		if !log && n > chunk {
			e = make([]float64, n)
		}
		for r := lo; r < hi; r++ {
			off := r * n
			mx := src.read(buf[:1], off)[0]
			for c := 0; c < n; c += chunk {
				for _, v := range src.read(buf[:min(chunk, n-c)], off+c) {
					if v > mx {
						mx = v
					}
				}
			}
			mf := float64(mx)
			var sum float64
			for c := 0; c < n; c += chunk {
				x := src.read(buf[:min(chunk, n-c)], off+c)
				for i, v := range x {
					ev := math.Exp(float64(v) - mf)
					sum += ev
					if !log {
						e[c+i] = ev
					}
				}
			}
			ls := math.Log(sum)
			for c := 0; c < n; c += chunk {
				m := min(chunk, n-c)
				o := out[:m]
				if log {
					for i, v := range src.read(buf[:m], off+c) {
						o[i] = (float64(v) - mf) - ls
					}
				} else {
					for i, ev := range e[c : c+m] {
						o[i] = ev / sum
					}
				}
				d.storeF64(off+c, o)
			}
		}
	})
}

// SoftmaxBackward implements backend.Backend: gx = y·(gy - Σ gy·y) for softmax and
// gx = gy - exp(y)·Σ gy for log-softmax, with the row sums in float64 (all of it in
// float64 when any operand is Float64).
func (b *Backend) SoftmaxBackward(gx, gy, y backend.Storage, outer, n int, log bool) {
	gxs, gys, ys := st(gx), st(gy), st(y)
	if outer < 0 || n < 0 {
		panic(fmt.Sprintf("cpu: SoftmaxBackward: negative shape [%d, %d]", outer, n))
	}
	for _, p := range []struct {
		what string
		s    *storage
	}{{"gx", gxs}, {"gy", gys}, {"y", ys}} {
		elemCheckLen("SoftmaxBackward", p.what, p.s, outer*n)
		elemCheckFloat("SoftmaxBackward", p.what, p.s)
	}
	if outer*n == 0 {
		return
	}
	if computeF64(gys.dt, ys.dt, gxs.dt) {
		softmaxBackwardKernel[float64](gxs, gys, ys, outer, n, log)
	} else {
		softmaxBackwardF32(gxs, gys, ys, outer, n, log)
	}
}

// softmaxBackwardF32 is softmaxBackwardKernel for float32 and half data on the vector
// layer: the row sums by vecDotF64 and vecSumF64, exp(y) by vecExpF64, and the results
// by vecNarrow (to odd for a half gx, as in softmaxF32).
func softmaxBackwardF32(gx, gy, y *storage, outer, n int, log bool) {
	gr, yr := elemRunOf[float32](gy), elemRunOf[float32](y)
	ParallelFor(outer, max(1, grainElems/n), func(lo, hi int) {
		var gb, yb, out [chunk]float32
		var e [chunk]float64
		for r := lo; r < hi; r++ {
			off := r * n
			var dot float64 // Σ gy·y, or Σ gy for log-softmax
			for c := 0; c < n; c += chunk {
				m := min(chunk, n-c)
				g := gr.read(gb[:m], off+c)
				if log {
					dot += vecSumF64(g)
				} else {
					dot += vecDotF64(g, yr.read(yb[:m], off+c))
				}
			}
			for c := 0; c < n; c += chunk {
				m := min(chunk, n-c)
				g, yv := gr.read(gb[:m], off+c), yr.read(yb[:m], off+c)
				if log {
					vecExpF64(e[:m], yv, 0)
				}
				o, odd := out[:m], narrowOp(0)
				if gx.dt == backend.Float32 {
					o = gx.f32()[off+c : off+c+m]
				} else {
					odd = narrowOdd // as in softmaxF32
				}
				if log {
					vecNarrow(narrowLsBwd+odd, o, e[:m], g, nil, dot, 0)
				} else {
					vecNarrow(narrowSmBwd+odd, o, nil, g, yv, dot, 0)
				}
				if odd != 0 {
					gx.storeF32(off+c, o)
				}
			}
		}
	})
}

func softmaxBackwardKernel[C numeric](gx, gy, y *storage, outer, n int, log bool) {
	gr, yr := elemRunOf[C](gy), elemRunOf[C](y)
	ParallelFor(outer, max(1, grainElems/n), func(lo, hi int) {
		var gb, yb [chunk]C
		var out [chunk]float64
		for r := lo; r < hi; r++ {
			off := r * n
			var dot float64 // Σ gy·y, or Σ gy for log-softmax
			for c := 0; c < n; c += chunk {
				m := min(chunk, n-c)
				g := gr.read(gb[:m], off+c)
				if log {
					for _, v := range g {
						dot += float64(v)
					}
					continue
				}
				for i, v := range yr.read(yb[:m], off+c) {
					dot += float64(g[i]) * float64(v)
				}
			}
			for c := 0; c < n; c += chunk {
				m := min(chunk, n-c)
				g, yv, o := gr.read(gb[:m], off+c), yr.read(yb[:m], off+c), out[:m]
				if log {
					for i, v := range yv {
						o[i] = float64(g[i]) - math.Exp(float64(v))*dot
					}
				} else {
					for i, v := range yv {
						o[i] = float64(v) * (float64(g[i]) - dot)
					}
				}
				gx.storeF64(off+c, o)
			}
		}
	})
}
