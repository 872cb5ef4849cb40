package half

import (
	"math"
	"strconv"
	"strings"
)

// shortest formats x with the fewest significant digits (at most maxDigits,
// enough for any value of the type) for which same reports a round trip.
// Like strconv's shortest 'g' format it uses %e for exponents below -4 or
// above 5; in %f form the integer digits are printed exactly ("65504", not
// "65500").
func shortest(x float64, maxDigits int, same func(float64) bool) string {
	if math.IsNaN(x) || math.IsInf(x, 0) || x == 0 {
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	var s string
	p := 1
	for ; p < maxDigits; p++ {
		s = strconv.FormatFloat(x, 'e', p-1, 64)
		if v, err := strconv.ParseFloat(s, 64); err == nil && same(v) {
			break
		}
	}
	s = strconv.FormatFloat(x, 'e', p-1, 64)
	// The exponent of the rounded decimal, which can exceed x's (9.9997 → 1e+01).
	exp, _ := strconv.Atoi(s[strings.IndexByte(s, 'e')+1:])
	if exp < -4 || exp >= 6 {
		return s
	}
	return strconv.FormatFloat(x, 'f', max(p-1-exp, 0), 64)
}
