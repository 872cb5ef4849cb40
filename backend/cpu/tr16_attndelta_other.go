//go:build !amd64 || purego

package cpu

import "github.com/gamp-ml/gamp/half"

// attnDeltaBF16 is attnDeltaBF16Go.
func attnDeltaBF16(delta []float32, g []half.BFloat16, lg int, o []half.BFloat16, lo int, t, d int) {
	attnDeltaBF16Go(delta, g, lg, o, lo, t, d)
}
