package overflow

import (
	"math"
	"math/bits"

	"github.com/gamp-ml/gamp/tensor"
)

// FP16 limits the fractions are measured against, as float32 bit patterns of |x| (for
// non-negative floats the bit pattern orders like the value, so one integer compare
// classifies an element).
const (
	maxHalfBits      = 0x477fe000 // 65504, the largest finite float16
	smallestSubBits  = 103 << 23  // 2^-24, the smallest float16 subnormal
	smallestNormBits = 113 << 23  // 2^-14, the smallest float16 normal
	infBits          = 0x7f800000
	float32ExpBias   = 127
	histogramBuckets = 256
)

// Histogram counts the finite non-zero magnitudes of a tensor by power of two.
type Histogram struct {
	counts [histogramBuckets]int64 // by float32 biased exponent
}

// Count returns the number of values with 2^k ≤ |x| < 2^(k+1), for k in [-126, 127];
// Count(-127) is the number of float32 subnormals (|x| < 2^-126).
func (h *Histogram) Count(k int) int64 {
	i := k + float32ExpBias
	if i < 0 || i >= histogramBuckets-1 {
		return 0
	}
	return h.counts[i]
}

// Range returns the smallest and largest k with Count(k) > 0; ok is false for a
// histogram with no value.
func (h *Histogram) Range() (lo, hi int, ok bool) {
	lo, hi = 1, 0
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		if !ok {
			lo, ok = i-float32ExpBias, true
		}
		hi = i - float32ExpBias
	}
	return lo, hi, ok
}

// Total returns the number of values counted.
func (h *Histogram) Total() int64 {
	var n int64
	for _, c := range h.counts {
		n += c
	}
	return n
}

func (h *Histogram) add(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

// stats are the counts measured over the values of one or more tensors.
type stats struct {
	n, inf, nan, zero int64
	over              int64   // finite, |x| > 65504
	flush             int64   // 0 < |x| < 2^-24: float16 rounds them to zero
	sub               int64   // 2^-24 ≤ |x| < 2^-14: float16 subnormals
	dtypes            uint8   // the dtypes measured, one bit each (dtypeBit)
	maxBits           uint32  // largest finite |x| of float32 and half values, as bits
	max64             float64 // largest finite |x| of float64 values
	hist              Histogram
}

func (s *stats) add(o *stats) {
	s.n += o.n
	s.dtypes |= o.dtypes
	s.inf += o.inf
	s.nan += o.nan
	s.zero += o.zero
	s.over += o.over
	s.flush += o.flush
	s.sub += o.sub
	s.maxBits = max(s.maxBits, o.maxBits)
	s.max64 = max(s.max64, o.max64)
	s.hist.add(&o.hist)
}

func (s *stats) nonFinite() int64 { return s.inf + s.nan }

func (s *stats) maxAbs() float64 { return max(float64(math.Float32frombits(s.maxBits)), s.max64) }

// addFloat32 classifies xs in one pass.
func (s *stats) addFloat32(xs []float32) {
	s.n += int64(len(xs))
	for _, x := range xs {
		s.addBits(math.Float32bits(x) & 0x7fffffff)
	}
}

// addFloat64 classifies xs in one pass (float64 tensors are rare: no bit tricks).
func (s *stats) addFloat64(xs []float64) {
	s.n += int64(len(xs))
	for _, x := range xs {
		a := math.Abs(x)
		switch {
		case math.IsNaN(a):
			s.nan++
			continue
		case math.IsInf(a, 0):
			s.inf++
			continue
		case a == 0:
			s.zero++
			continue
		case a < 0x1p-24:
			s.flush++
		case a < 0x1p-14:
			s.sub++
		case a > 65504:
			s.over++
		}
		s.max64 = max(s.max64, a)
		_, e := math.Frexp(a) // a = f·2^e, f in [0.5, 1)
		s.hist.counts[min(max(e-1+float32ExpBias, 0), histogramBuckets-2)]++
	}
}

// addBFloat16 classifies bfloat16 bit patterns (the top half of a float32).
func (s *stats) addBFloat16(xs []uint16) {
	s.n += int64(len(xs))
	for _, x := range xs {
		s.addBits(uint32(x&0x7fff) << 16)
	}
}

func (s *stats) addBits(b uint32) {
	switch {
	case b >= infBits:
		if b == infBits {
			s.inf++
		} else {
			s.nan++
		}
		return
	case b == 0:
		s.zero++
		return
	case b < smallestSubBits:
		s.flush++
	case b < smallestNormBits:
		s.sub++
	case b > maxHalfBits:
		s.over++
	}
	s.maxBits = max(s.maxBits, b)
	s.hist.counts[b>>23]++
}

// addFloat16 classifies float16 bit patterns: nothing in them can overflow or flush
// (that happened when they were rounded), but their subnormals are counted.
func (s *stats) addFloat16(xs []uint16) {
	s.n += int64(len(xs))
	for _, x := range xs {
		a := x & 0x7fff
		e := a >> 10
		switch {
		case e == 31:
			if a == 0x7c00 {
				s.inf++
			} else {
				s.nan++
			}
			continue
		case a == 0:
			s.zero++
			continue
		case e == 0:
			s.sub++
			// A subnormal m·2^-24 has exponent len(m)-1-24.
			s.hist.counts[float32ExpBias-25+bits.Len16(a)]++
		default:
			s.hist.counts[int(e)-15+float32ExpBias]++
		}
		s.maxBits = max(s.maxBits, half16ToFloat32Bits(a))
	}
}

// half16ToFloat32Bits converts a finite non-negative float16 bit pattern.
func half16ToFloat32Bits(a uint16) uint32 {
	e, m := uint32(a>>10), uint32(a&0x3ff)
	if e == 0 {
		return math.Float32bits(float32(m) * 0x1p-24)
	}
	return (e-15+float32ExpBias)<<23 | m<<13
}

var measuredDTypes = []tensor.DType{tensor.Float16, tensor.BFloat16, tensor.Float32, tensor.Float64}

func dtypeBit(dt tensor.DType) uint8 {
	for i, d := range measuredDTypes {
		if d == dt {
			return 1 << i
		}
	}
	return 0
}

// dtypeNames lists the dtypes of a dtypes bit set, "float16+float32".
func dtypeNames(bits uint8) string {
	var s string
	for i, d := range measuredDTypes {
		if bits&(1<<i) != 0 {
			if s != "" {
				s += "+"
			}
			s += d.String()
		}
	}
	return s
}

// scratch holds the host buffers a Watcher downloads tensors into, reused across ops.
type scratch struct {
	f32 []float32
	u16 []uint16
}

// measure returns the stats of t's values (zero stats for non-floating tensors). Dense
// float32 and half tensors are downloaded raw into reused buffers; anything else is
// converted to float32 first. It runs no tensor op, so an Observer may call it.
func (sc *scratch) measure(t *tensor.Tensor) stats {
	var s stats
	if t == nil || t.Released() || !t.DType().IsFloat() {
		return s
	}
	n := t.Numel()
	dt := t.DType()
	s.dtypes = dtypeBit(dt)
	dense := t.IsContiguous()
	if dense && (dt == tensor.Float32 || dt.IsHalf()) {
		if err := t.Backend().Synchronize(); err != nil {
			panic(err)
		}
	}
	switch {
	case dense && dt == tensor.Float32:
		sc.f32 = grow(sc.f32, n)
		st, off := t.Storage()
		t.Backend().Download(sc.f32, st, off)
		s.addFloat32(sc.f32)
	case dt.IsHalf():
		var raw []uint16
		if dense {
			sc.u16 = grow(sc.u16, n)
			st, off := t.Storage()
			t.Backend().Download(sc.u16, st, off)
			raw = sc.u16
		} else {
			raw = t.Uint16s()
		}
		if dt == tensor.Float16 {
			s.addFloat16(raw)
		} else {
			s.addBFloat16(raw)
		}
	case dt == tensor.Float64:
		s.addFloat64(t.Float64s())
	default:
		s.addFloat32(t.Float32s())
	}
	return s
}

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}
