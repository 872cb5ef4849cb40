package cpu

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// Updates of half weights without an FP32 master (backend.HalfWeights): each chunk of
// the half weights is widened to float32, updated by the same span functions as the
// masters (so the arithmetic is the masters' bit for bit) and written back rounded to
// nearest, stochastically, or split into high and low halves.

// halfWeights is a checked half-weights update: the weights, the low halves (RoundSplit)
// and the rounding.
type halfWeights struct {
	n   int
	h   *storage
	lo  []uint16 // RoundSplit only
	hw  backend.HalfWeights
	f16 bool
}

func (b *Backend) halfWeightsCheck(op string, n int, w, g, h backend.Storage, hw backend.HalfWeights, state ...backend.Storage) halfWeights {
	if w != nil {
		panic(fmt.Sprintf("cpu: %s: a half-weights update (%v) takes no FP32 master W", op, hw.Rounding))
	}
	if h == nil {
		panic(fmt.Sprintf("cpu: %s: a half-weights update needs the half weights", op))
	}
	hs := st(h)
	switch {
	case hs.n < n:
		panic(fmt.Sprintf("cpu: %s: %d elements, the half weights hold %d", op, n, hs.n))
	case hs.dt == backend.BFloat16:
	case hs.dt == backend.Float16 && hw.Rounding != backend.RoundSplit:
	default:
		panic(fmt.Sprintf("cpu: %s: rounding %d needs bfloat16 weights (float16 rounds to nearest or stochastically), got %s", op, hw.Rounding, hs.dt))
	}
	for _, s := range append([]backend.Storage{g}, state...) {
		if s == nil {
			continue
		}
		if c := st(s); c.dt != backend.Float32 || c.n < n {
			panic(fmt.Sprintf("cpu: %s: operand %s[%d], want float32[%d] beside half weights", op, c.dt, c.n, n))
		}
	}
	out := halfWeights{n: n, h: hs, hw: hw, f16: hs.dt == backend.Float16}
	switch hw.Rounding {
	case backend.RoundNearest, backend.RoundStochastic:
	case backend.RoundSplit:
		if hw.Lo == nil {
			panic(fmt.Sprintf("cpu: %s: the 16+16 split needs the low halves Lo", op))
		}
		ls := st(hw.Lo)
		if !ls.dt.IsHalf() || ls.n < n {
			panic(fmt.Sprintf("cpu: %s: the low halves are %s[%d], want a 16-bit storage of %d", op, ls.dt, ls.n, n))
		}
		out.lo = ls.u16()
	default:
		panic(fmt.Sprintf("cpu: %s: unknown half rounding %d", op, hw.Rounding))
	}
	return out
}

// run calls update on every chunk of the weights widened to float32, in parallel, with
// the chunk's element range, and writes the result back.
func (h halfWeights) run(update func(w []float32, lo, hi int)) {
	ParallelFor(h.n, grainElems, func(lo, hi int) {
		var wb [chunk]float32
		bits := h.h.u16()
		for c := lo; c < hi; c += chunk {
			m := min(chunk, hi-c)
			w := wb[:m]
			switch h.hw.Rounding {
			case backend.RoundSplit:
				splitDecode(w, bits[c:c+m], h.lo[c:c+m])
			default:
				h.h.loadF32(w, c)
			}
			update(w, c, c+m)
			switch h.hw.Rounding {
			case backend.RoundSplit:
				splitEncode(bits[c:c+m], h.lo[c:c+m], w)
			case backend.RoundStochastic:
				if h.f16 {
					roundStochasticF16(bits[c:c+m], w, h.hw.RNG, uint64(c))
				} else {
					roundStochastic(bits[c:c+m], w, h.hw.RNG, uint64(c))
				}
			default:
				h.h.storeF32(c, w)
			}
		}
	})
}

// splitDecode sets w[i] to the float32 whose bits are hi[i]·2¹⁶ plus lo[i] read as a
// signed difference in (-2¹⁵, 2¹⁵] (see splitEncode).
func splitDecode(w []float32, hi, lo []uint16) {
	hi, lo = hi[:len(w)], lo[:len(w)] // one bounds check for the loop
	for i := range w {
		w[i] = splitValue(hi[i], lo[i])
	}
}

// splitValue is one element of splitDecode.
func splitValue(hi, lo uint16) float32 {
	d := uint32(lo)
	if d > 0x8000 {
		d -= 0x10000 // wraps: a negative difference
	}
	return math.Float32frombits(uint32(hi)<<16 + d)
}

// splitEncode splits each w[i] into hi, its nearest bfloat16, and lo, the difference of
// their bit patterns. Of the two neighbours at an exact tie, hi is the one below in
// magnitude (not the even one, as round-to-nearest-even would pick), so that every hi
// stands for exactly 2¹⁶ float32 values and the pair is w bit for bit; a NaN stays a
// NaN in hi (quieted) and is not recovered exactly.
func splitEncode(hi, lo []uint16, w []float32) {
	hi, lo = hi[:len(w)], lo[:len(w)]
	for i, x := range w {
		hi[i], lo[i] = splitBits(x)
	}
}

// splitBits is one element of splitEncode.
func splitBits(x float32) (hi, lo uint16) {
	b := math.Float32bits(x)
	if x != x {
		return uint16(b>>16) | 0x40, uint16(b)
	}
	h := (b + 0x7fff) >> 16
	return uint16(h), uint16(b - h<<16)
}

// randBits16 is the 16 random bits element i of a draw from r gets: the top bits of
// the counter-based generator's hash (uniformAt takes its top 53).
func randBits16(r backend.RNG, i uint64) uint32 {
	return uint32(mix64(r.Seed*0x9e3779b97f4a7c15^mix64(r.Offset+i)) >> 48)
}

// roundStochastic writes each w[i] as a bfloat16 rounded stochastically: adding 16
// random bits below the kept ones and truncating rounds the magnitude up with
// probability (fraction of an ulp above the lower neighbour), so E[round(x)] = x. Element
// i draws counter off+i of r. NaN stays NaN.
func roundStochastic(dst []uint16, w []float32, r backend.RNG, off uint64) {
	dst = dst[:len(w)]
	for i, x := range w {
		b := math.Float32bits(x)
		if x != x {
			dst[i] = uint16(b>>16) | 0x40
			continue
		}
		dst[i] = uint16((b + randBits16(r, off+uint64(i))) >> 16)
	}
}

// roundStochasticF16 writes each w[i] as a float16 rounded stochastically: between t,
// w's neighbour toward zero, and the next float16 away from zero, it picks the far one
// when the element's 16 random bits r satisfy r·2⁻¹⁶ < (|w|−t)/ulp. Every step is exact
// in float32, so the choice is the same on every backend; on normal and subnormal
// float16s the fraction has at most 13 bits, so P(up) equals it exactly and the rounding
// is unbiased. Past the largest finite float16 (65504) there is no upper neighbour to
// draw: w then rounds to nearest, as the round-to-nearest write does (65520 and above
// become Inf). NaN stays NaN (quieted), as the nearest conversion makes it.
func roundStochasticF16(dst []uint16, w []float32, r backend.RNG, off uint64) {
	dst = dst[:len(w)]
	for i, x := range w {
		dst[i] = stochasticF16(x, randBits16(r, off+uint64(i)))
	}
}

// stochasticF16 is one element of roundStochasticF16 with random bits r (< 2¹⁶).
func stochasticF16(x float32, r uint32) uint16 {
	if x != x {
		return half.Float16FromFloat32(x).Bits()
	}
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	a := math.Float32frombits(b &^ (1 << 31))
	var t uint16        // the float16 bits of a's neighbour toward zero
	var tv, inv float32 // its value and 1/ulp (a power of two: the products are exact)
	switch {
	case a >= 65504:
		t, tv, inv = 0x7bff, 65504, 1.0/32
	case a < 0x1p-14: // subnormal float16s are k·2⁻²⁴
		k := uint32(a * 0x1p24) // exact scaling; the conversion truncates
		t, tv, inv = uint16(k), float32(k)*0x1p-24, 0x1p24
	default:
		ab := math.Float32bits(a)
		e := ab>>23 - 127 + 15 // float16 biased exponent, 1…30
		t = uint16(e<<10 | ab>>13&0x3ff)
		tv = math.Float32frombits(ab &^ 0x1fff)
		inv = math.Float32frombits((264 - ab>>23) << 23) // 2^(10−exponent)
	}
	if float32(r)*0x1p-16 >= (a-tv)*inv {
		return sign | t
	}
	if t == 0x7bff {
		return half.Float16FromFloat32(x).Bits()
	}
	return sign | (t + 1) // the bit pattern's successor: carries into the exponent
}
