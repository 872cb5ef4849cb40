package cpu

import (
	"math"

	"github.com/gamp-ml/gamp/half"
)

// The float32 exponential of the fused attention's softmax. A score row s of Q·Kᵀ
// becomes p = exp(fma(s, scale, -shift)), shift being scale·max (forward) or the saved
// log-sum-exp (backward), so the argument is at most a rounding above 0. attnExp32 takes
// k = round(x·log₂e) to even, r = x - k·ln2 in two FMA steps (ln2 split in two), the
// degree-7 Taylor polynomial of e^r by FMA Horner steps (exp32's, vec_gelu.go) and
// multiplies by 2^k; below x = -86 (where 2^k would leave the normal range) it returns 0,
// so a masked score (-Inf) gives an exact 0. Against math.Exp over the float32s in
// [-87, 1] (TestAttnExpUlp) it is within attnExpUlp ulp.
//
// attnExpRow runs it over a row with AVX-512 (attention_amd64.s, sixteen lanes and a
// masked tail) where the CPU has it and in pure Go (attnExpRowGo, its twin bit for bit,
// NaN payloads aside) otherwise; the row sum is kept in sixteen float32 lanes, element i
// added to lane i%16 in ascending i, the lanes added in a fixed tree at the end.
// attnMax, the row maximum, is built the same way.

// attnExpUlp is the bound TestAttnExpUlp asserts; over every 17th float32 in [-87, 1]
// (go test -run TestAttnExpUlp -attnexp.stride=17) the worst was 0.918 ulp, at
// x = -5.88956.
const attnExpUlp = 1.5

// attnExpConsts are the constants of the AVX-512 loop, in the order it reads them:
// log₂e, ln2 high and low, the cut, then expC (1/7! … 1).
var attnExpConsts = [12]float32{expLog2e32, expLn2Hi32, 0, expCut32,
	1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1}

func init() { attnExpConsts[2] = expLn2Lo32 }

// attnExp32 returns e^x in float32 arithmetic (see above).
func attnExp32(x float32) float32 {
	k := float32(math.RoundToEven(float64(x * expLog2e32)))
	r := fma32(-k, expLn2Hi32, x)
	r = fma32(-k, expLn2Lo32, r)
	p := horner32(expC, r)
	if x < expCut32 {
		return 0
	}
	// p·2^k as VSCALEFPS takes it: exact for k ≤ 127 (the product of p and a
	// normal power of two), rounded once, or +Inf, above (x past ln(MaxFloat32)).
	return float32(float64(p) * math.Ldexp(1, int(k)))
}

// attnExpRowGo sets row[i] = attnExp32(fma32(row[i], scale, -shift)) for i < len(row)
// and returns their sum: element i added to lane i%16 of sixteen float32 lanes in
// ascending i, then the lanes folded by attnLaneSum. With lo not nil it also sets
// lo[i] to row[i] rounded to bf16.
func attnExpRowGo(row []float32, lo []half.BFloat16, scale, shift float32) float32 {
	var s [16]float32
	for i, v := range row {
		e := attnExp32(fma32(v, scale, -shift))
		row[i] = e
		s[i%16] += e
	}
	if lo != nil {
		half.Float32ToBFloat16(lo[:len(row)], row)
	}
	return attnLaneSum(&s)
}

// attnDSGo sets dp[i] = p[i]·(dp[i] - delta), the softmax backward's score gradient,
// and with lo not nil lo[i] to its bf16 rounding.
func attnDSGo(dp, p []float32, delta float32, lo []half.BFloat16) {
	p = p[:len(dp)]
	for i, v := range dp {
		dp[i] = p[i] * (v - delta)
	}
	if lo != nil {
		half.Float32ToBFloat16(lo[:len(dp)], dp)
	}
}

// attnExpTileGo is the backward pass's probabilities of one tile: for each row r < rows
// of x (row stride ld, as lo's), with vis = clamp(r + vis0, 0, cols) visible keys and
// the log-sum-exp l = lse[r], the row's cols elements are cleared when vis is 0 or l is
// -Inf (a row with no visible key), else the first vis become attnExpRowGo's
// exponentials (shift l) and the rest are cleared; lo, when not nil, gets their bf16
// roundings (cleared elements 0), and sums, when not nil, attnExpRowGo's sum (0 for a
// cleared row).
func attnExpTileGo(x []float32, ld, rows, cols, vis0 int, lse []float32, scale float32, lo []half.BFloat16, sums []float32) {
	for r := range rows {
		row := x[r*ld:][:cols]
		var lr []half.BFloat16
		if lo != nil {
			lr = lo[r*ld:][:cols]
		}
		vis := min(max(r+vis0, 0), cols)
		l := lse[r]
		if vis == 0 || math.IsInf(float64(l), -1) {
			attnClear(row, lr)
			if sums != nil {
				sums[r] = 0
			}
			continue
		}
		sum := attnExpRowGo(row[:vis], lr, scale, l)
		if sums != nil {
			sums[r] = sum
		}
		if lr != nil {
			lr = lr[vis:]
		}
		attnClear(row[vis:], lr)
	}
}

// attnMaxTileGo sets mx[r] = attnMaxGo of the first vis = clamp(r + vis0, 0, cols)
// elements of row r < rows of x (row stride ld): -Inf where vis is 0.
func attnMaxTileGo(x []float32, ld, rows, cols, vis0 int, mx []float32) {
	for r := range rows {
		vis := min(max(r+vis0, 0), cols)
		mx[r] = attnMaxGo(x[r*ld:][:vis])
	}
}

// attnDSTileGo is attnDSGo on each row r < rows (cols elements, row stride ld for dp,
// p and lo) with delta[r].
func attnDSTileGo(dp, p []float32, ld, rows, cols int, delta []float32, lo []half.BFloat16) {
	for r := range rows {
		var lr []half.BFloat16
		if lo != nil {
			lr = lo[r*ld:][:cols]
		}
		attnDSGo(dp[r*ld:][:cols], p[r*ld:][:cols], delta[r], lr)
	}
}

// attnLaneSum adds the sixteen lanes pairwise: 8 sums of lanes i and i+8, then 4, 2, 1.
func attnLaneSum(s *[16]float32) float32 {
	for w := 8; w >= 1; w /= 2 {
		for i := range w {
			s[i] += s[i+w]
		}
	}
	return s[0]
}

// attnMaxGo returns the largest element of row, -Inf for an empty row: sixteen lanes
// from -Inf, element i folded into lane i%16 by vecMax (VMAXPS) in ascending i, the
// lanes folded as attnLaneSum adds them. A NaN may or may not come out; the caller
// checks a row whose maximum is -Inf for NaNs.
func attnMaxGo(row []float32) float32 {
	var s [16]float32
	for i := range s {
		s[i] = float32(math.Inf(-1))
	}
	for i, v := range row {
		s[i%16] = vecMax(s[i%16], v)
	}
	for w := 8; w >= 1; w /= 2 {
		for i := range w {
			s[i] = vecMax(s[i], s[i+w])
		}
	}
	return s[0]
}

// attnLSEGo sets lse[r] to the log-sum-exp of a row from its running maximum m[r]
// (scaled) and its sum l[r]: m[r] + float32(math.Log(float64(l[r]))), or -Inf for a
// row whose sum is 0 (no visible key, or every visible score -Inf).
func attnLSEGo(lse, m, l []float32) {
	lse, m = lse[:len(l)], m[:len(l)]
	for r, v := range l {
		if v == 0 {
			lse[r] = float32(math.Inf(-1))
			continue
		}
		lse[r] = m[r] + float32(math.Log(float64(v)))
	}
}
