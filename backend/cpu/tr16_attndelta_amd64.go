//go:build amd64 && !purego

package cpu

import "github.com/gamp-ml/gamp/half"

// attnDeltaBF16AVX sets delta[i] = attnDotBF16(gr[i*lg:][:d], o[i*lo:][:d]) for i < t,
// bit for bit (NaN payloads aside), t ≥ 1 and d a positive multiple of 4: the four
// partial sums in the lanes of an xmm register.
//
//go:noescape
func attnDeltaBF16AVX(delta *float32, gr *half.BFloat16, lg int, o *half.BFloat16, lo int, t, d int)

// attnDeltaBF16 sets delta[i] = attnDotBF16(g[i*lg:][:d], o[i*lo:][:d]) for i < t.
func attnDeltaBF16(delta []float32, g []half.BFloat16, lg int, o []half.BFloat16, lo int, t, d int) {
	if attnAsm && t > 0 && d > 0 && d%4 == 0 {
		_ = delta[t-1]
		_ = g[(t-1)*lg+d-1]
		_ = o[(t-1)*lo+d-1]
		attnDeltaBF16AVX(&delta[0], &g[0], lg, &o[0], lo, t, d)
		return
	}
	attnDeltaBF16Go(delta, g, lg, o, lo, t, d)
}
