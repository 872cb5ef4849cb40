package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/kernels"
)

// reduceInput returns outer·n·inner values of dt; with nans, some rows hold NaN or ±Inf.
func reduceInput(dt backend.DType, seed uint64, size int, nans bool) *buf {
	r := newRand(seed)
	var v []float64
	switch {
	case dt.IsFloat():
		v = randVals(r, size, false)
		if nans && size > 10 {
			v[size/3] = math.NaN()
			v[size/2] = math.Inf(1)
			v[size-2] = math.Inf(-1)
			v[1] = math.NaN()
		}
	case dt == backend.Bool:
		v = make([]float64, size)
		for i := range v {
			v[i] = float64(r.IntN(2))
		}
	default:
		v = make([]float64, size)
		for i := range v {
			v[i] = float64(r.IntN(2001) - 1000)
		}
	}
	return bufOf(dt, v)
}

// TestShimReduce checks every reduction, dtype and both kernels against the CPU
// backend bit for bit, across the CPU's 1024-element chunks and 16384-element blocks.
func TestShimReduce(t *testing.T) {
	s := loadShim(t)
	shapes := [][3]int{ // outer, n, inner
		{3, 1, 1}, {2, 5, 1}, {3, 1023, 1}, {2, 1025, 1}, {2, 16384, 1}, {1, 16385, 1}, {1, 70001, 1},
		{2, 1, 3}, {2, 7, 3}, {1, 9000, 2}, {2, 40, 1500}, {1, 20, 1025}, {3, 0, 1}, {2, 0, 4},
	}
	ops := []backend.ReduceOp{backend.Sum, backend.Mean, backend.Max, backend.Min, backend.ArgMax, backend.ArgMin}
	for _, dt := range allDTypes {
		for si, sh := range shapes {
			outer, n, inner := sh[0], sh[1], sh[2]
			for _, nans := range []bool{false, true} {
				if nans && !dt.IsFloat() {
					continue
				}
				src := reduceInput(dt, uint64(si), outer*n*inner, nans)
				ss := up(src)
				for _, op := range ops {
					arg := op == backend.ArgMax || op == backend.ArgMin
					if n == 0 && op != backend.Sum && op != backend.Mean {
						continue // no identity: the CPU backend panics, the launcher must too
					}
					if n == 0 && op == backend.Mean && !dt.IsFloat() {
						continue // NaN into an integer
					}
					odt := dt
					if arg {
						odt = backend.Int64
					}
					m := outer * inner
					ds, _ := cpuB().Alloc(odt, max(m, 1))
					cpuB().Reduce(op, ds, ss, outer, n, inner)
					want := down(ds, m)
					got := newBuf(odt, m)
					var dp, ip uint64
					if arg {
						ip = got.ptr()
					} else {
						dp = got.ptr()
					}
					what := fmt.Sprintf("[%d,%d,%d] op %d nans %v", outer, n, inner, op, nans)
					if inner == 1 {
						name := kernels.Name("reduce_rows", dt)
						s.run(t, name, dp, ip, src.ptr(), int64(outer), int64(n), int32(op))
						sameBits(t, name+" "+what, got, want)
					}
					if inner == 1 {
						continue // reduce_cols sums in another order; the launcher uses reduce_rows
					}
					got = newBuf(odt, m)
					if arg {
						ip = got.ptr()
					} else {
						dp = got.ptr()
					}
					name := kernels.Name("reduce_cols", dt)
					s.run(t, name, dp, ip, src.ptr(), int64(outer), int64(n), int64(inner), int32(op))
					sameBits(t, name+" "+what, got, want)
					if (op == backend.Sum || op == backend.Mean) && dt.IsFloat() && n > 0 {
						// The CUDA launcher's two stages, in waves of 1, 2 and all row blocks.
						rows := int64(max(1, 16384/min(inner, 1024)))
						nblk := (int64(n) + rows - 1) / rows
						for _, nbw := range []int64{1, 2, nblk} {
							got = newBuf(odt, m)
							splitReduceCols(t, s, dt, got, src, outer, n, inner, rows, nblk, min(nbw, nblk), op == backend.Mean)
							sameBits(t, fmt.Sprintf("reduce_cols_partial/fold (waves of %d of %d blocks) %s", nbw, nblk, what), got, want)
						}
					}
				}
				cpuB().Free(ss)
			}
		}
	}
}

// splitReduceCols runs reduce_cols_partial and reduce_cols_fold over nblk row blocks of
// rows rows in waves of nbw, as the CUDA backend's Reduce does (cuda/ops.go).
func splitReduceCols(t *testing.T, s *shim, dt backend.DType, dst, src *buf, outer, n, inner int, rows, nblk, nbw int64, mean bool) {
	t.Helper()
	oi := int64(outer * inner)
	part, total := newBuf(backend.Float64, int(nbw*oi)), newBuf(backend.Float64, int(oi))
	m := int32(0)
	if mean {
		m = 1
	}
	for b0 := int64(0); b0 < nblk; b0 += nbw {
		w := min(nbw, nblk-b0)
		s.run(t, kernels.Name("reduce_cols_partial", dt), part.ptr(), src.ptr(), int64(outer), int64(n), int64(inner), rows, b0, w)
		first, last := int32(0), int32(0)
		if b0 == 0 {
			first = 1
		}
		if b0+w == nblk {
			last = 1
		}
		s.run(t, kernels.Name("reduce_cols_fold", dt), dst.ptr(), total.ptr(), part.ptr(), oi, int64(n), w, first, last, m)
	}
}

// TestShimSoftmax compares softmax and log-softmax, forward and backward. The GPU sums
// the exponentials in a tree, the CPU in order: float32 and half results agree to the
// last bit almost always, float64 ones to a few ulp; the counts are logged.
func TestShimSoftmax(t *testing.T) {
	s := loadShim(t)
	for _, dt := range floatDTypes {
		for _, n := range []int{1, 10, 300, 3000} {
			const outer = 5
			r := newRand(uint64(n))
			v := randVals(r, outer*n, false)
			for i := range v {
				v[i] = math.Mod(v[i], 30)
			}
			if n > 1 {
				v[n] = math.NaN()      // row 1
				v[2*n+1] = math.Inf(1) // row 2
				for i := 3 * n; i < 4*n; i++ {
					v[i] = math.Inf(-1) // row 3
				}
			}
			x, gy := bufOf(dt, v), bufOf(dt, randVals(r, outer*n, false))
			xs, gs := up(x), up(gy)
			for _, lg := range []bool{false, true} {
				tol := mathULP(dt)
				ys, _ := cpuB().Alloc(dt, outer*n)
				cpuB().Softmax(ys, xs, outer, n, lg)
				want := down(ys, outer*n)
				got := newBuf(dt, outer*n)
				name := kernels.Name("softmax", dt)
				lgi := int32(0)
				if lg {
					lgi = 1
				}
				s.run(t, name, got.ptr(), x.ptr(), int64(outer), int64(n), lgi)
				if d := closeTo(t, fmt.Sprintf("%s n=%d log=%v", name, n, lg), got, want, tol); d > 0 {
					t.Logf("%s n=%d log=%v: %d of %d differ (at most %d ulp)", name, n, lg, d, outer*n, tol)
				}
				y := want
				yc := up(y)
				gxs, _ := cpuB().Alloc(dt, outer*n)
				cpuB().SoftmaxBackward(gxs, gs, yc, outer, n, lg)
				want = down(gxs, outer*n)
				cpuB().Free(yc)
				got = newBuf(dt, outer*n)
				name = kernels.Name("softmax_backward", dt)
				s.run(t, name, got.ptr(), gy.ptr(), y.ptr(), int64(outer), int64(n), lgi)
				if d := closeTo(t, fmt.Sprintf("%s n=%d log=%v", name, n, lg), got, want, backwardULP(dt)); d > 0 {
					t.Logf("%s n=%d log=%v: %d of %d differ (at most %d ulp)", name, n, lg, d, outer*n, backwardULP(dt))
				}
			}
			cpuB().Free(xs)
			cpuB().Free(gs)
		}
	}
}

// backwardULP bounds results computed as a difference of a value and a tree-ordered sum
// (x − mean, g − Σ): the sums agree to about 1e-16 relative, which the subtraction can
// magnify; the bound is loose, the logged counts say how often anything differs.
func backwardULP(dt backend.DType) int64 {
	if dt == backend.Float64 {
		return 1 << 20
	}
	return 2
}

func f32s(vals []float64) *buf { return bufOf(backend.Float32, vals) }

// ptrOr returns b's pointer, or 0 for nil.
func ptrOr(b *buf) uint64 {
	if b == nil {
		return 0
	}
	return b.ptr()
}

func upOr(b *buf) backend.Storage {
	if b == nil {
		return nil
	}
	return up(b)
}

func TestShimLayerNorm(t *testing.T) {
	s := loadShim(t)
	for _, dt := range floatDTypes {
		for _, sh := range [][2]int{{7, 1}, {7, 5}, {7, 300}, {7, 1000}, {300, 300}, {131, 1000}} {
			rows, cols := sh[0], sh[1] // the last two split their rows into 3 and 4 blocks
			for _, affine := range []bool{false, true} {
				const eps = 1e-5
				r := newRand(uint64(cols))
				x := bufOf(dt, randVals(r, rows*cols, false))
				gy := bufOf(dt, randVals(r, rows*cols, false))
				var w, b *buf
				if affine {
					w, b = f32s(randVals(r, cols, false)), f32s(randVals(r, cols, false))
				}
				xs, gs, ws, bs := up(x), up(gy), upOr(w), upOr(b)
				ys, _ := cpuB().Alloc(dt, rows*cols)
				sm, _ := cpuB().Alloc(backend.Float32, rows)
				si, _ := cpuB().Alloc(backend.Float32, rows)
				cpuB().LayerNorm(backend.NormArgs{X: xs, Y: ys, Weight: ws, Bias: bs, SaveMean: sm, SaveInvStd: si, N: rows, C: cols, Eps: eps})
				wantY, wantM, wantI := down(ys, rows*cols), down(sm, rows), down(si, rows)
				gotY, gotM, gotI := newBuf(dt, rows*cols), newBuf(backend.Float32, rows), newBuf(backend.Float32, rows)
				name := kernels.Name("layer_norm", dt)
				s.run(t, name, gotY.ptr(), gotM.ptr(), gotI.ptr(), x.ptr(), ptrOr(w), ptrOr(b), int64(rows), int64(cols), eps)
				what := fmt.Sprintf("%s rows=%d cols=%d affine=%v", name, rows, cols, affine)
				d := closeTo(t, what+" mean", gotM, wantM, 1) + closeTo(t, what+" invstd", gotI, wantI, 1)
				d += closeTo(t, what+" y", gotY, wantY, backwardULP(dt))
				if d > 0 {
					t.Logf("%s: %d values differ", what, d)
				}

				// Backward from the CPU's saved statistics.
				smc, sic := up(wantM), up(wantI)
				gxs, _ := cpuB().Alloc(dt, rows*cols)
				gw, _ := cpuB().Alloc(backend.Float32, cols)
				gb, _ := cpuB().Alloc(backend.Float32, cols)
				cpuB().LayerNormBackward(backend.NormArgs{X: xs, GY: gs, GX: gxs, Weight: ws, SaveMean: smc, SaveInvStd: sic, GWeight: gw, GBias: gb, N: rows, C: cols, Eps: eps})
				wantGX, wantGW, wantGB := down(gxs, rows*cols), down(gw, cols), down(gb, cols)
				gotGX := newBuf(dt, rows*cols)
				name = kernels.Name("layer_norm_backward", dt)
				s.run(t, name, gotGX.ptr(), gy.ptr(), x.ptr(), ptrOr(w), wantM.ptr(), wantI.ptr(), int64(rows), int64(cols))
				if d := closeTo(t, what+" gx", gotGX, wantGX, backwardULP(dt)); d > 0 {
					t.Logf("%s gx: %d of %d differ", what, d, rows*cols)
				}
				gotGW, gotGB := newBuf(backend.Float32, cols), newBuf(backend.Float32, cols)
				name = kernels.Name("layer_norm_backward_params", dt)
				s.run(t, name, gotGW.ptr(), gotGB.ptr(), gy.ptr(), x.ptr(), wantM.ptr(), wantI.ptr(), int64(rows), int64(cols))
				sameBits(t, what+" gweight", gotGW, wantGW)
				sameBits(t, what+" gbias", gotGB, wantGB)
				// The CUDA launcher's two stages over the same row blocks, in one wave and
				// in two (the second folding into the first's running sums).
				nb := min((rows*cols+32767)/32768, rows, 64)
				nb = max(nb, 1)
				per := (rows + nb - 1) / nb
				nb = (rows + per - 1) / per
				for _, wave := range []int{nb, max(1, nb/2)} {
					pw, pb := newBuf(backend.Float64, nb*cols), newBuf(backend.Float64, nb*cols)
					sw, sb := newBuf(backend.Float64, cols), newBuf(backend.Float64, cols)
					gotGW, gotGB = newBuf(backend.Float32, cols), newBuf(backend.Float32, cols)
					for b0 := 0; b0 < nb; b0 += wave {
						w := min(wave, nb-b0)
						s.run(t, kernels.Name("layer_norm_params_partial", dt), pw.ptr(), pb.ptr(), gy.ptr(), x.ptr(), wantM.ptr(),
							wantI.ptr(), int64(rows), int64(cols), int64(per), int64(b0), int64(w))
						first, last := int32(0), int32(0)
						if b0 == 0 {
							first = 1
						}
						if b0+w == nb {
							last = 1
						}
						s.run(t, "layer_norm_params_fold", gotGW.ptr(), gotGB.ptr(), sw.ptr(), sb.ptr(), pw.ptr(), pb.ptr(),
							int64(cols), int64(w), first, last)
					}
					wv := fmt.Sprintf("%s layer_norm_params_partial/fold (%d blocks, waves of %d)", what, nb, wave)
					sameBits(t, wv+" gweight", gotGW, wantGW)
					sameBits(t, wv+" gbias", gotGB, wantGB)
				}
				for _, st := range []backend.Storage{xs, gs, ws, bs, smc, sic} {
					if st != nil {
						cpuB().Free(st)
					}
				}
			}
		}
	}
}

func TestShimBatchNorm(t *testing.T) {
	s := loadShim(t)
	for _, dt := range floatDTypes {
		for _, sp := range []int{1, 5, 64} {
			for _, training := range []bool{true, false} {
				const n, c, eps, mom = 4, 3, 1e-5, 0.1
				r := newRand(uint64(sp))
				x := bufOf(dt, randVals(r, n*c*sp, false))
				gy := bufOf(dt, randVals(r, n*c*sp, false))
				w, b := f32s(randVals(r, c, false)), f32s(randVals(r, c, false))
				rm, rv := f32s([]float64{0.1, -0.2, 0.3}), f32s([]float64{1, 0.5, 2})
				xs, gs, ws, bs := up(x), up(gy), up(w), up(b)
				rmc, rvc := up(rm), up(rv)
				ys, _ := cpuB().Alloc(dt, n*c*sp)
				sm, _ := cpuB().Alloc(backend.Float32, c)
				si, _ := cpuB().Alloc(backend.Float32, c)
				cpuB().BatchNorm(backend.NormArgs{X: xs, Y: ys, Weight: ws, Bias: bs, RunningMean: rmc, RunningVar: rvc,
					SaveMean: sm, SaveInvStd: si, N: n, C: c, S: sp, Training: training, Momentum: mom, Eps: eps})
				wantY, wantSM, wantSI := down(ys, n*c*sp), down(sm, c), down(si, c)
				wantRM, wantRV := down(rmc, c), down(rvc, c)
				gotY, gotSM, gotSI := newBuf(dt, n*c*sp), newBuf(backend.Float32, c), newBuf(backend.Float32, c)
				gotRM, gotRV := rm.clone(), rv.clone()
				tr := int32(0)
				if training {
					tr = 1
				}
				name := kernels.Name("batch_norm", dt)
				s.run(t, name, gotY.ptr(), gotRM.ptr(), gotRV.ptr(), gotSM.ptr(), gotSI.ptr(), x.ptr(), w.ptr(), b.ptr(),
					int64(n), int64(c), int64(sp), mom, eps, tr)
				what := fmt.Sprintf("%s S=%d training=%v", name, sp, training)
				d := closeTo(t, what+" save_mean", gotSM, wantSM, 1) + closeTo(t, what+" save_invstd", gotSI, wantSI, 1)
				d += closeTo(t, what+" running_mean", gotRM, wantRM, 1) + closeTo(t, what+" running_var", gotRV, wantRV, 1)
				d += closeTo(t, what+" y", gotY, wantY, backwardULP(dt))
				if d > 0 {
					t.Logf("%s: %d values differ", what, d)
				}

				smc, sic := up(wantSM), up(wantSI)
				rmc2, rvc2 := up(rm), up(rv)
				gxs, _ := cpuB().Alloc(dt, n*c*sp)
				gw, _ := cpuB().Alloc(backend.Float32, c)
				gb, _ := cpuB().Alloc(backend.Float32, c)
				cpuB().BatchNormBackward(backend.NormArgs{X: xs, GY: gs, GX: gxs, Weight: ws, SaveMean: smc, SaveInvStd: sic,
					RunningMean: rmc2, RunningVar: rvc2, GWeight: gw, GBias: gb, N: n, C: c, S: sp, Training: training, Eps: eps})
				wantGX, wantGW, wantGB := down(gxs, n*c*sp), down(gw, c), down(gb, c)
				gotGX, gotGW, gotGB := newBuf(dt, n*c*sp), newBuf(backend.Float32, c), newBuf(backend.Float32, c)
				name = kernels.Name("batch_norm_backward", dt)
				s.run(t, name, gotGX.ptr(), gotGW.ptr(), gotGB.ptr(), gy.ptr(), x.ptr(), w.ptr(), wantSM.ptr(), wantSI.ptr(),
					rm.ptr(), rv.ptr(), int64(n), int64(c), int64(sp), eps, tr)
				d = closeTo(t, what+" gweight", gotGW, wantGW, 1) + closeTo(t, what+" gbias", gotGB, wantGB, 1)
				d += closeTo(t, what+" gx", gotGX, wantGX, backwardULP(dt))
				if d > 0 {
					t.Logf("%s backward: %d values differ", what, d)
				}
				for _, st := range []backend.Storage{xs, gs, ws, bs, smc, sic, rmc2, rvc2} {
					cpuB().Free(st)
				}
			}
		}
	}
}
