package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

func init() {
	register("BatchNorm", testBatchNorm)
	register("BatchNormBackward", testBatchNormBackward)
	register("LayerNorm", testLayerNorm)
	register("LayerNormBackward", testLayerNormBackward)
}

const (
	normEps      = 1e-5
	normMomentum = 0.1
)

// bnShapes are the [N, C, S] batch-norm geometries checked: the third is large enough
// to be split between workers, and S ranges from 1 to longer than a kernel's buffer.
var bnShapes = []struct{ n, c, s int }{{2, 3, 5}, {16, 4, 1}, {8, 32, 300}, {2, 3, 1500}}

// lnShapes are the [rows, cols] layer-norm geometries checked.
var lnShapes = []struct{ rows, cols int }{{6, 10}, {3, 1}, {128, 768}}

// normParam returns n values in [lo, hi) rounded to float32, as a statistics or
// affine vector holds them.
func normParam(seed uint64, n int, lo, hi float64) []float64 {
	return Rounded(backend.Float32, RandVals(seed, n, lo, hi))
}

// normUpload uploads v as Float32, or returns nil for a nil v.
func normUpload(t testing.TB, b backend.Backend, v []float64) backend.Storage {
	t.Helper()
	if v == nil {
		return nil
	}
	return Upload(t, b, backend.Float32, v)
}

// normGarbage allocates n Float32 values of garbage when want is set, else returns nil.
func normGarbage(t testing.TB, b backend.Backend, want bool, n int) backend.Storage {
	t.Helper()
	if !want {
		return nil
	}
	return uploadGarbage(t, b, backend.Float32, n)
}

// normAt returns v[i], or def when v is nil.
func normAt(v []float64, i int, def float64) float64 {
	if v == nil {
		return def
	}
	return v[i]
}

// bnStatsRef returns each channel's mean and biased variance of x [N, C, S].
func bnStatsRef(x []float64, n, c, s int) (mean, vr []float64) {
	mean, vr = make([]float64, c), make([]float64, c)
	cnt := float64(n * s)
	for ch := 0; ch < c; ch++ {
		for i := 0; i < n; i++ {
			for _, v := range x[(i*c+ch)*s : (i*c+ch+1)*s] {
				mean[ch] += v
			}
		}
		mean[ch] /= cnt
		for i := 0; i < n; i++ {
			for _, v := range x[(i*c+ch)*s : (i*c+ch+1)*s] {
				vr[ch] += (v - mean[ch]) * (v - mean[ch])
			}
		}
		vr[ch] /= cnt
	}
	return mean, vr
}

// bnForwardRef returns y = (x − mean)·invstd·w + b and the statistics used: the batch's
// in training, the running ones otherwise.
func bnForwardRef(x, w, bias, rm, rv []float64, n, c, s int, training bool) (y, mean, invstd []float64) {
	var vr []float64
	if training {
		mean, vr = bnStatsRef(x, n, c, s)
	} else {
		mean, vr = rm, rv
	}
	invstd = make([]float64, c)
	for ch := range invstd {
		invstd[ch] = 1 / math.Sqrt(vr[ch]+normEps)
	}
	y = make([]float64, len(x))
	for i := range x {
		ch := i / s % c
		y[i] = (x[i]-mean[ch])*invstd[ch]*normAt(w, ch, 1) + normAt(bias, ch, 0)
	}
	return y, mean, invstd
}

// bnBackwardRef is batch-norm's gradient written out from the formula, with n = N·S,
// x̂ = (x − mean)·invstd, gb = Σ gy and gw = Σ gy·x̂ per channel:
//
//	training: gx = w·invstd·(gy − gb/n − x̂·gw/n)
//	eval:     gx = w·invstd·gy
//
// It also returns the scales of the rounding errors: max w·invstd·|gy|, and per
// channel Σ|gy·x̂| and Σ|gy| (largest over channels).
func bnBackwardRef(x, gy, w, mean, invstd []float64, n, c, s int, training bool) (gx, gw, gb []float64, gxScale, gwScale, gbScale float64) {
	gw, gb = make([]float64, c), make([]float64, c)
	gwAbs, gbAbs := make([]float64, c), make([]float64, c)
	xhat := make([]float64, len(x))
	for i := range x {
		ch := i / s % c
		xhat[i] = (x[i] - mean[ch]) * invstd[ch]
		gw[ch] += gy[i] * xhat[i]
		gb[ch] += gy[i]
		gwAbs[ch] += math.Abs(gy[i] * xhat[i])
		gbAbs[ch] += math.Abs(gy[i])
	}
	cnt := float64(n * s)
	gx = make([]float64, len(x))
	for i := range x {
		ch := i / s % c
		k := normAt(w, ch, 1) * invstd[ch]
		gxScale = math.Max(gxScale, math.Abs(k*gy[i]))
		if training {
			gx[i] = k * (gy[i] - gb[ch]/cnt - xhat[i]*gw[ch]/cnt)
		} else {
			gx[i] = k * gy[i]
		}
	}
	return gx, gw, gb, gxScale, absMaxOf(gwAbs), absMaxOf(gbAbs)
}

func testBatchNorm(t *testing.T, b backend.Backend) {
	for si, sh := range bnShapes {
		for _, mode := range []struct {
			name              string
			training, affine  bool
			running, saveStat bool
		}{
			{"train-affine-running", true, true, true, true},
			{"train-plain", true, false, false, false},
			{"eval-affine", false, true, true, true},
			{"eval-plain", false, false, true, false},
		} {
			for _, dt := range FloatDTypes {
				t.Run(fmt.Sprintf("%dx%dx%d/%s/%s", sh.n, sh.c, sh.s, mode.name, dt), func(t *testing.T) {
					n, c, s := sh.n, sh.c, sh.s
					seed := uint64(1000 + 10*si)
					x := Rounded(dt, RandVals(seed, n*c*s, -1, 3))
					var w, bias, rm, rv []float64
					if mode.affine {
						w, bias = normParam(seed+1, c, 0.5, 1.5), normParam(seed+2, c, -0.5, 0.5)
					}
					if mode.running {
						rm, rv = normParam(seed+3, c, -0.5, 0.5), normParam(seed+4, c, 0.5, 1.5)
					}
					xs, ys := Upload(t, b, dt, x), uploadGarbage(t, b, dt, len(x))
					ws, bs, rms, rvs := normUpload(t, b, w), normUpload(t, b, bias), normUpload(t, b, rm), normUpload(t, b, rv)
					sms, sis := normGarbage(t, b, mode.saveStat, c), normGarbage(t, b, mode.saveStat, c)
					defer Free(b, xs, ys, ws, bs, rms, rvs, sms, sis)
					b.BatchNorm(backend.NormArgs{
						X: xs, Y: ys, Weight: ws, Bias: bs, RunningMean: rms, RunningVar: rvs,
						SaveMean: sms, SaveInvStd: sis, N: n, C: c, S: s,
						Training: mode.training, Momentum: normMomentum, Eps: normEps,
					})
					y, mean, invstd := bnForwardRef(x, w, bias, rm, rv, n, c, s, mode.training)
					ExpectClose(t, "Y", Download(t, b, ys), y, Tol(dt), 1)
					f32 := Tol(backend.Float32)
					if mode.saveStat {
						ExpectClose(t, "SaveMean", Download(t, b, sms), mean, f32, 1)
						ExpectClose(t, "SaveInvStd", Download(t, b, sis), invstd, f32, 1)
					}
					if !mode.running {
						return
					}
					wantM, wantV := rm, rv // eval leaves them alone
					if mode.training {
						_, vr := bnStatsRef(x, n, c, s)
						cnt := float64(n * s)
						wantM, wantV = make([]float64, c), make([]float64, c)
						for ch := range wantM {
							wantM[ch] = (1-normMomentum)*rm[ch] + normMomentum*mean[ch]
							wantV[ch] = (1-normMomentum)*rv[ch] + normMomentum*vr[ch]*cnt/(cnt-1)
						}
					} else {
						f32 = 0
					}
					ExpectClose(t, "RunningMean", Download(t, b, rms), wantM, f32, 1)
					ExpectClose(t, "RunningVar", Download(t, b, rvs), wantV, f32, 1)
				})
			}
		}
	}
}

func testBatchNormBackward(t *testing.T, b backend.Backend) {
	for si, sh := range bnShapes {
		for _, mode := range []struct {
			name             string
			training, affine bool
			grads            bool
		}{
			{"train-affine", true, true, true},
			{"train-plain", true, false, false},
			{"train-plain-grads", true, false, true},
			{"eval-affine", false, true, true},
		} {
			for _, dt := range FloatDTypes {
				t.Run(fmt.Sprintf("%dx%dx%d/%s/%s", sh.n, sh.c, sh.s, mode.name, dt), func(t *testing.T) {
					n, c, s := sh.n, sh.c, sh.s
					seed := uint64(2000 + 10*si)
					x := Rounded(dt, RandVals(seed, n*c*s, -1, 3))
					gy := Rounded(dt, RandVals(seed+1, n*c*s, -1, 1))
					var w []float64
					if mode.affine {
						w = normParam(seed+2, c, 0.5, 1.5)
					}
					args := backend.NormArgs{N: n, C: c, S: s, Training: mode.training, Momentum: normMomentum, Eps: normEps}
					var mean, invstd []float64
					if mode.training {
						// The statistics the forward pass saved: float32.
						m, vr := bnStatsRef(x, n, c, s)
						is := make([]float64, c)
						for ch := range is {
							is[ch] = 1 / math.Sqrt(vr[ch]+normEps)
						}
						mean, invstd = Rounded(backend.Float32, m), Rounded(backend.Float32, is)
						args.SaveMean, args.SaveInvStd = normUpload(t, b, mean), normUpload(t, b, invstd)
					} else {
						rm, rv := normParam(seed+3, c, -0.5, 0.5), normParam(seed+4, c, 0.5, 1.5)
						args.RunningMean, args.RunningVar = normUpload(t, b, rm), normUpload(t, b, rv)
						mean, invstd = rm, make([]float64, c)
						for ch := range invstd {
							invstd[ch] = 1 / math.Sqrt(rv[ch]+normEps)
						}
					}
					args.X, args.GY, args.GX = Upload(t, b, dt, x), Upload(t, b, dt, gy), uploadGarbage(t, b, dt, len(x))
					args.Weight = normUpload(t, b, w)
					args.GWeight, args.GBias = normGarbage(t, b, mode.grads, c), normGarbage(t, b, mode.grads, c)
					defer Free(b, args.X, args.GY, args.GX, args.Weight, args.GWeight, args.GBias,
						args.SaveMean, args.SaveInvStd, args.RunningMean, args.RunningVar)
					b.BatchNormBackward(args)
					gx, gw, gb, gxS, gwS, gbS := bnBackwardRef(x, gy, w, mean, invstd, n, c, s, mode.training)
					ExpectClose(t, "GX", Download(t, b, args.GX), gx, Tol(dt), gxS)
					if mode.grads {
						ExpectClose(t, "GWeight", Download(t, b, args.GWeight), gw, Tol(backend.Float32), gwS)
						ExpectClose(t, "GBias", Download(t, b, args.GBias), gb, Tol(backend.Float32), gbS)
					}
				})
			}
		}
	}
	// The reference formula itself, against central differences of the reference
	// forward pass.
	for _, training := range []bool{true, false} {
		t.Run(fmt.Sprintf("finite-differences/training=%v", training), func(t *testing.T) {
			n, c, s := 2, 3, 4
			x := RandVals(2100, n*c*s, -1, 3)
			gy := RandVals(2101, n*c*s, -1, 1)
			w, bias := RandVals(2102, c, 0.5, 1.5), RandVals(2103, c, -0.5, 0.5)
			rm, rv := RandVals(2104, c, -0.5, 0.5), RandVals(2105, c, 0.5, 1.5)
			loss := func() float64 {
				y, _, _ := bnForwardRef(x, w, bias, rm, rv, n, c, s, training)
				l, _ := convDot(y, gy)
				return l
			}
			_, mean, invstd := bnForwardRef(x, w, bias, rm, rv, n, c, s, training)
			gx, gw, gb, _, _, _ := bnBackwardRef(x, gy, w, mean, invstd, n, c, s, training)
			normCheckFD(t, "GX", loss, x, gx)
			normCheckFD(t, "GWeight", loss, w, gw)
			normCheckFD(t, "GBias", loss, bias, gb)
		})
	}
}

// normCheckFD compares grad with central differences of loss with respect to each
// element of v (which loss reads).
func normCheckFD(t *testing.T, what string, loss func() float64, v, grad []float64) {
	t.Helper()
	const h = 1e-5
	num := make([]float64, len(v))
	for i := range v {
		old := v[i]
		v[i] = old + h
		up := loss()
		v[i] = old - h
		down := loss()
		v[i] = old
		num[i] = (up - down) / (2 * h)
	}
	ExpectClose(t, what+" vs finite differences", grad, num, 1e-6, absMaxOf(num))
}

// lnForwardRef normalises each row of x [rows, cols].
func lnForwardRef(x, w, bias []float64, rows, cols int) (y, mean, invstd []float64) {
	y, mean, invstd = make([]float64, len(x)), make([]float64, rows), make([]float64, rows)
	for r := 0; r < rows; r++ {
		row := x[r*cols : (r+1)*cols]
		m, ss := 0.0, 0.0
		for _, v := range row {
			m += v
		}
		m /= float64(cols)
		for _, v := range row {
			ss += (v - m) * (v - m)
		}
		mean[r], invstd[r] = m, 1/math.Sqrt(ss/float64(cols)+normEps)
		for j, v := range row {
			y[r*cols+j] = (v-m)*invstd[r]*normAt(w, j, 1) + normAt(bias, j, 0)
		}
	}
	return y, mean, invstd
}

// lnBackwardRef is layer-norm's gradient from the formula: per row, with g = gy·w and
// x̂ = (x − mean)·invstd,
//
//	gx = invstd·(g − mean(g) − x̂·mean(g·x̂)),
//
// and gw = Σ_rows gy·x̂, gb = Σ_rows gy. It also returns the rounding-error scales:
// max invstd·|g|, and the largest column Σ|gy·x̂| and Σ|gy|.
func lnBackwardRef(x, gy, w, mean, invstd []float64, rows, cols int) (gx, gw, gb []float64, gxScale, gwScale, gbScale float64) {
	gx, gw, gb = make([]float64, len(x)), make([]float64, cols), make([]float64, cols)
	gwAbs, gbAbs := make([]float64, cols), make([]float64, cols)
	g, xhat := make([]float64, cols), make([]float64, cols)
	for r := 0; r < rows; r++ {
		mg, mgx := 0.0, 0.0
		for j := 0; j < cols; j++ {
			i := r*cols + j
			g[j] = gy[i] * normAt(w, j, 1)
			xhat[j] = (x[i] - mean[r]) * invstd[r]
			mg += g[j]
			mgx += g[j] * xhat[j]
			gw[j] += gy[i] * xhat[j]
			gb[j] += gy[i]
			gwAbs[j] += math.Abs(gy[i] * xhat[j])
			gbAbs[j] += math.Abs(gy[i])
			gxScale = math.Max(gxScale, math.Abs(invstd[r]*g[j]))
		}
		mg /= float64(cols)
		mgx /= float64(cols)
		for j := 0; j < cols; j++ {
			gx[r*cols+j] = invstd[r] * (g[j] - mg - xhat[j]*mgx)
		}
	}
	return gx, gw, gb, gxScale, absMaxOf(gwAbs), absMaxOf(gbAbs)
}

func testLayerNorm(t *testing.T, b backend.Backend) {
	for si, sh := range lnShapes {
		for _, affine := range []bool{true, false} {
			for _, dt := range FloatDTypes {
				t.Run(fmt.Sprintf("%dx%d/affine=%v/%s", sh.rows, sh.cols, affine, dt), func(t *testing.T) {
					rows, cols := sh.rows, sh.cols
					seed := uint64(3000 + 10*si)
					x := Rounded(dt, RandVals(seed, rows*cols, -1, 3))
					var w, bias []float64
					if affine {
						w, bias = normParam(seed+1, cols, 0.5, 1.5), normParam(seed+2, cols, -0.5, 0.5)
					}
					xs, ys := Upload(t, b, dt, x), uploadGarbage(t, b, dt, len(x))
					ws, bs := normUpload(t, b, w), normUpload(t, b, bias)
					sms, sis := normGarbage(t, b, true, rows), normGarbage(t, b, true, rows)
					defer Free(b, xs, ys, ws, bs, sms, sis)
					b.LayerNorm(backend.NormArgs{X: xs, Y: ys, Weight: ws, Bias: bs, SaveMean: sms, SaveInvStd: sis, N: rows, C: cols, Eps: normEps})
					y, mean, invstd := lnForwardRef(x, w, bias, rows, cols)
					ExpectClose(t, "Y", Download(t, b, ys), y, Tol(dt), 1)
					ExpectClose(t, "SaveMean", Download(t, b, sms), mean, Tol(backend.Float32), 1)
					ExpectClose(t, "SaveInvStd", Download(t, b, sis), invstd, Tol(backend.Float32), 1)
				})
			}
		}
	}
}

func testLayerNormBackward(t *testing.T, b backend.Backend) {
	for si, sh := range lnShapes {
		for _, affine := range []bool{true, false} {
			for _, dt := range FloatDTypes {
				t.Run(fmt.Sprintf("%dx%d/affine=%v/%s", sh.rows, sh.cols, affine, dt), func(t *testing.T) {
					rows, cols := sh.rows, sh.cols
					seed := uint64(4000 + 10*si)
					x := Rounded(dt, RandVals(seed, rows*cols, -1, 3))
					gy := Rounded(dt, RandVals(seed+1, rows*cols, -1, 1))
					var w []float64
					if affine {
						w = normParam(seed+2, cols, 0.5, 1.5)
					}
					// The statistics the forward pass saved: float32.
					_, m, is := lnForwardRef(x, nil, nil, rows, cols)
					mean, invstd := Rounded(backend.Float32, m), Rounded(backend.Float32, is)
					args := backend.NormArgs{
						X: Upload(t, b, dt, x), GY: Upload(t, b, dt, gy), GX: uploadGarbage(t, b, dt, len(x)),
						Weight: normUpload(t, b, w), SaveMean: normUpload(t, b, mean), SaveInvStd: normUpload(t, b, invstd),
						GWeight: normGarbage(t, b, affine, cols), GBias: normGarbage(t, b, affine, cols),
						N: rows, C: cols, Eps: normEps,
					}
					defer Free(b, args.X, args.GY, args.GX, args.Weight, args.SaveMean, args.SaveInvStd, args.GWeight, args.GBias)
					b.LayerNormBackward(args)
					gx, gw, gb, gxS, gwS, gbS := lnBackwardRef(x, gy, w, mean, invstd, rows, cols)
					got := Download(t, b, args.GX)
					ExpectClose(t, "GX", got, gx, Tol(dt), gxS)
					if !affine {
						return
					}
					gotW, gotB := Download(t, b, args.GWeight), Download(t, b, args.GBias)
					ExpectClose(t, "GWeight", gotW, gw, Tol(backend.Float32), gwS)
					ExpectClose(t, "GBias", gotB, gb, Tol(backend.Float32), gbS)
					// Run again: the row sums must come out bit for bit the same.
					b.LayerNormBackward(args)
					ExpectClose(t, "GX (second run)", Download(t, b, args.GX), got, 0, 0)
					ExpectClose(t, "GWeight (second run)", Download(t, b, args.GWeight), gotW, 0, 0)
					ExpectClose(t, "GBias (second run)", Download(t, b, args.GBias), gotB, 0, 0)
				})
			}
		}
	}
	t.Run("finite-differences", func(t *testing.T) {
		rows, cols := 3, 5
		x := RandVals(4100, rows*cols, -1, 3)
		gy := RandVals(4101, rows*cols, -1, 1)
		w, bias := RandVals(4102, cols, 0.5, 1.5), RandVals(4103, cols, -0.5, 0.5)
		loss := func() float64 {
			y, _, _ := lnForwardRef(x, w, bias, rows, cols)
			l, _ := convDot(y, gy)
			return l
		}
		_, mean, invstd := lnForwardRef(x, w, bias, rows, cols)
		gx, gw, gb, _, _, _ := lnBackwardRef(x, gy, w, mean, invstd, rows, cols)
		normCheckFD(t, "GX", loss, x, gx)
		normCheckFD(t, "GWeight", loss, w, gw)
		normCheckFD(t, "GBias", loss, bias, gb)
	})
}
