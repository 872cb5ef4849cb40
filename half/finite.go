package half

import "math"

// AllFinite32 reports whether no element of x is Inf or NaN.
func AllFinite32(x []float32) bool {
	// Branch-free over blocks: the exponent field plus one exponent unit
	// reaches bit 31 exactly when the exponent is all ones (Inf or NaN).
	const block = 256
	for len(x) > 0 {
		n := min(len(x), block)
		var acc uint32
		for _, f := range x[:n] {
			acc |= math.Float32bits(f)&0x7f800000 + 0x00800000
		}
		if acc&0x80000000 != 0 {
			return false
		}
		x = x[n:]
	}
	return true
}

// CountNonFinite32 returns the number of infinite and of NaN elements of x.
func CountNonFinite32(x []float32) (inf, nan int) {
	for _, f := range x {
		u := math.Float32bits(f) & 0x7fffffff
		if u >= 0x7f800000 {
			if u == 0x7f800000 {
				inf++
			} else {
				nan++
			}
		}
	}
	return inf, nan
}
