package cpu

import "github.com/gamp-ml/gamp/half"

// attnDeltaBF16Go sets delta[i] = attnDotBF16(g[i*lg:][:d], o[i*lo:][:d]) for i < t:
// the softmax backward's row terms, the twin of attnDeltaBF16AVX.
func attnDeltaBF16Go(delta []float32, g []half.BFloat16, lg int, o []half.BFloat16, lo int, t, d int) {
	for i := range t {
		delta[i] = attnDotBF16(g[i*lg:][:d], o[i*lo:][:d])
	}
}
