package cpu

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/backend"
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
	case hs.dt == backend.Float16 && hw.Rounding == backend.RoundNearest:
	default:
		panic(fmt.Sprintf("cpu: %s: rounding %d needs bfloat16 weights (float16 only rounds to nearest), got %s", op, hw.Rounding, hs.dt))
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
				roundStochastic(bits[c:c+m], w, h.hw.RNG, uint64(c))
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
