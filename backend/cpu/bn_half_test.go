package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// halfInputs returns n random 16-bit patterns, every class (zeros, subnormals,
// infinities, NaNs) among them, a third of them values near 1 in magnitude.
func halfInputs(rng *rand.Rand, bf bool, n int) []uint16 {
	u := make([]uint16, n)
	for i := range u {
		switch rng.IntN(3) {
		case 0:
			f := float32(rng.Float64()*8 - 4)
			if bf {
				u[i] = uint16(half.BFloat16FromFloat32(f))
			} else {
				u[i] = uint16(half.Float16FromFloat32(f))
			}
		default:
			u[i] = uint16(rng.Uint32())
		}
	}
	return u
}

// roundProbes returns n float32s that end exactly halfway between two 16-bit values,
// or just off it, or are subnormal, huge, infinite or NaN: where rounding to bfloat16 or
// float16 can go wrong.
func roundProbes(rng *rand.Rand, n int) []float32 {
	f := make([]float32, n)
	for i := range f {
		b := rng.Uint32()
		switch rng.IntN(4) {
		case 0:
			b = b&^0xffff | 0x8000 // a bfloat16 tie
		case 1:
			b = b&^0x1fff | 0x1000 // a float16 tie (in the normal range)
		case 2:
			b = b&^0x7f800000 | uint32(rng.IntN(0x72))<<23 // small: float16 subnormals
		case 3:
			if rng.IntN(4) == 0 {
				b &^= 0x7f800000 // a float32 subnormal (VCVTNEPS2BF16 would flush it)
			}
		}
		f[i] = math.Float32frombits(b)
	}
	return f
}

// widenAll is half's bulk widening of u.
func widenAll(bf bool, u []uint16) []float32 {
	f := make([]float32, len(u))
	if bf {
		b := make([]half.BFloat16, len(u))
		for i, v := range u {
			b[i] = half.BFloat16(v)
		}
		half.BFloat16ToFloat32(f, b)
		return f
	}
	h := make([]half.Float16, len(u))
	for i, v := range u {
		h[i] = half.Float16(v)
	}
	half.Float16ToFloat32(f, h)
	return f
}

// roundAll is half's bulk rounding of f.
func roundAll(bf bool, f []float32) []uint16 {
	u := make([]uint16, len(f))
	if bf {
		b := make([]half.BFloat16, len(f))
		half.Float32ToBFloat16(b, f)
		for i, v := range b {
			u[i] = uint16(v)
		}
		return u
	}
	h := make([]half.Float16, len(f))
	half.Float32ToFloat16(h, f)
	for i, v := range h {
		u[i] = uint16(v)
	}
	return u
}

// sameHalf reports whether a and b are the same 16-bit value, any two NaNs counting
// as equal.
func sameHalf(bf bool, a, b uint16) bool {
	if a == b {
		return true
	}
	if bf {
		return a&0x7fff > 0x7f80 && b&0x7fff > 0x7f80
	}
	return a&0x7fff > 0x7c00 && b&0x7fff > 0x7c00
}

// TestBNHalfTwins compares the half batch-norm passes (bnAccHalf, bnDevSqHalf,
// bnAffineHalf with and without ReLU, bnSumsHalf with and without the mask,
// bnGradHalf with and without it, writing apart and over g, y or x) with their float32
// passes on the operands widened by package half, the output rounded by it, bit for bit
// (NaN payloads aside), in bfloat16 and float16, at every length to 200 and a few
// longer, misaligned, with every class of value in every operand and outputs that
// land on rounding ties; the loops must not write past n.
func TestBNHalfTwins(t *testing.T) {
	// Where the CPU has them, the VCVTNEPS2BF16 loops (bnCVT) and the integer
	// rounding ones both.
	cvts := []bool{false}
	if bnCVT {
		cvts = append(cvts, true)
	}
	defer func(c bool) { bnCVT = c }(bnCVT)
	for _, cvt := range cvts {
		bnCVT = cvt
		testBNHalfTwins(t)
	}
}

func testBNHalfTwins(t *testing.T) {
	rng := rand.New(rand.NewPCG(57, 58))
	for _, bf := range []bool{true, false} {
		for _, n := range vecLens {
			mis := rng.IntN(3)
			hin := func() []uint16 { return halfInputs(rng, bf, n+mis)[mis:] }
			fin := func() []float32 { return vecInputs(rng, n+mis)[mis:] }
			// Outputs and accumulators lie at the front of longer buffers whose rest,
			// which the loops must leave alone, holds guard values.
			const guard = 16
			f64 := func() []float64 {
				v := make([]float64, n+guard)
				for i := range v {
					v[i] = rng.NormFloat64()
				}
				return v[:n]
			}
			out16 := func() []uint16 {
				v := make([]uint16, n+guard)
				for i := range v {
					v[i] = 0x5a5a
				}
				return v[:n]
			}
			guarded16 := func(what string, v []uint16) {
				t.Helper()
				for i, u := range v[n : n+guard] {
					if u != 0x5a5a {
						t.Fatalf("%s bf=%v n=%d: wrote %d past the end", what, bf, n, i)
					}
				}
			}
			guarded64 := func(what string, got, was []float64) {
				t.Helper()
				for i := n; i < n+guard; i++ {
					if math.Float64bits(got[:n+guard][i]) != math.Float64bits(was[:n+guard][i]) {
						t.Fatalf("%s bf=%v n=%d: wrote %d past the end", what, bf, n, i-n)
					}
				}
			}
			checkHalf := func(what string, got, want []uint16) {
				t.Helper()
				for i := range want {
					if !sameHalf(bf, got[i], want[i]) {
						t.Fatalf("%s bf=%v n=%d: %d = %#04x, float32 pass %#04x", what, bf, n, i, got[i], want[i])
					}
				}
			}
			check64 := func(what string, got, want []float64) {
				t.Helper()
				for i := range want {
					if !sameBits64(got[i], want[i]) {
						t.Fatalf("%s bf=%v n=%d: %d = %v, float32 pass %v", what, bf, n, i, got[i], want[i])
					}
				}
			}

			x, m0 := hin(), f64()
			acc := f64()
			want := append([]float64(nil), acc[:n+guard]...)
			vecAccF64(want[:n], widenAll(bf, x))
			bnAccHalf(bf, acc, x, rng.IntN(2)*n)
			check64("bnAccHalf", acc, want[:n])
			guarded64("bnAccHalf", acc, want)
			acc = f64()
			want = append([]float64(nil), acc[:n+guard]...)
			vecAccDevF64(accSq, want[:n], nil, widenAll(bf, x), m0)
			bnDevSqHalf(bf, acc, x, m0)
			check64("bnDevSqHalf", acc, want[:n])
			guarded64("bnDevSqHalf", acc, want)

			// Lanes with s = 0 put b itself (a rounding probe) out.
			v, m, s, b := hin(), fin(), fin(), fin()
			probes := roundProbes(rng, n)
			for i := range s {
				if rng.IntN(4) == 0 {
					s[i], b[i] = 0, probes[i]
				}
			}
			for _, relu := range []bool{false, true} {
				wf := make([]float32, n)
				bnAffineVec(wf, widenAll(bf, v), m, s, b, relu)
				want := roundAll(bf, wf)
				got := out16()
				bnAffineHalf(bf, got, v, m, s, b, relu)
				checkHalf("bnAffineHalf", got, want)
				guarded16("bnAffineHalf", got)
				inPlace := append([]uint16(nil), v...)
				bnAffineHalf(bf, inPlace, inPlace, m, s, b, relu)
				checkHalf("bnAffineHalf in place", inPlace, want)
			}

			g, y, xg := hin(), hin(), hin()
			for _, masked := range []bool{false, true} {
				var yv []uint16
				var yf []float32
				gf := widenAll(bf, g)
				if masked {
					yv, yf = y, widenAll(bf, y)
					vecBinary(vecMask, gf, gf, yf)
				}
				a1, a2 := f64(), f64()
				w1, w2 := append([]float64(nil), a1[:n+guard]...), append([]float64(nil), a2[:n+guard]...)
				bnSumsVec(nil, w1[:n], w2[:n], gf, nil, widenAll(bf, xg), m0)
				bnSumsHalf(bf, a1, a2, g, yv, xg, m0, rng.IntN(2)*n)
				check64("bnSumsHalf acc1", a1, w1[:n])
				check64("bnSumsHalf acc2", a2, w2[:n])
				guarded64("bnSumsHalf acc1", a1, w1)
				guarded64("bnSumsHalf acc2", a2, w2)

				// ec = a probe, ea = eb = 0 where g and x are finite: the probe comes out.
				ea, eb, ec, em := fin(), fin(), fin(), fin()
				probes := roundProbes(rng, n)
				for i := range ea {
					if rng.IntN(4) == 0 {
						ea[i], eb[i], ec[i] = 0, 0, probes[i]
					}
				}
				wf, tb := make([]float32, n), make([]float32, n)
				bnGradVec(wf, gf, widenAll(bf, xg), ea, eb, ec, em, tb)
				want := roundAll(bf, wf)
				for _, alias := range []string{"", "g", "y", "x"} {
					gc, yc, xc := append([]uint16(nil), g...), append([]uint16(nil), y...), append([]uint16(nil), xg...)
					if !masked {
						yc = nil
					}
					got := out16()
					switch alias {
					case "g":
						got = gc
					case "y":
						if !masked {
							continue
						}
						got = yc
					case "x":
						got = xc
					}
					bnGradHalf(bf, got, gc, yc, xc, ea, eb, ec, em)
					if alias == "" {
						guarded16("bnGradHalf", got)
					}
					checkHalf("bnGradHalf masked="+map[bool]string{false: "no", true: "yes"}[masked]+" over "+alias, got, want)
				}
			}
		}
	}
}

// TestBatchNormHalfInPlace runs the half kernels with Y = X in the forward and GX = GY
// in the backward (with and without the ReLU) and compares them, bit for bit, with the
// same calls on separate storages.
func TestBatchNormHalfInPlace(t *testing.T) {
	b, _ := New(0)
	rng := rand.New(rand.NewPCG(59, 60))
	for _, dt := range []backend.DType{backend.BFloat16, backend.Float16} {
		for _, gm := range [][3]int{{8, 6, 196}, {3, 2, 1500}, {5, 7, 3}} {
			n, c, s := gm[0], gm[1], gm[2]
			total := n * c * s
			vals := func() []float32 {
				v := make([]float32, total)
				for i := range v {
					v[i] = float32(rng.NormFloat64()*2 + 1)
				}
				return v
			}
			xv, gv := vals(), vals()
			alloc := func(v []float32) *storage {
				s0, err := b.Alloc(dt, total)
				if err != nil {
					t.Fatal(err)
				}
				st(s0).storeF32(0, v)
				return st(s0)
			}
			f32 := func() []float32 { return make([]float32, c) }
			for _, relu := range []bool{false, true} {
				run := func(inPlace bool) (y, gx []float32) {
					x, gy := alloc(xv), alloc(gv)
					ys, gxs := x, gy
					if !inPlace {
						ys, gxs = alloc(make([]float32, total)), alloc(make([]float32, total))
					}
					a := backend.NormArgs{N: n, C: c, S: s, Training: true, Momentum: 0.1, Eps: 1e-5}
					p := bnParams{sm: f32(), si: f32()}
					batchNorm[float32](&a, x, ys, &p, relu)
					y = make([]float32, total)
					ys.loadF32(y, 0)
					// The backward reads X: give it the input again (Y overwrote it).
					xb := alloc(xv)
					bp := bnParams{sm: p.sm, si: p.si, gw: f32(), gb: f32()}
					var yr *storage
					if relu {
						yr = alloc(y)
					}
					batchNormBackward[float32](&a, xb, gy, gxs, yr, &bp)
					gx = make([]float32, total)
					gxs.loadF32(gx, 0)
					return y, gx
				}
				wy, wgx := run(false)
				gy, ggx := run(true)
				for i := range wy {
					if !sameBits(gy[i], wy[i]) || !sameBits(ggx[i], wgx[i]) {
						t.Fatalf("%s %v relu=%v: %d: in place y %v gx %v, apart %v %v", dt, gm, relu, i, gy[i], ggx[i], wy[i], wgx[i])
					}
				}
			}
		}
	}
}

// BenchmarkBNHalfRounding times the bfloat16 output passes of batch norm (bnAffineHalf
// with the ReLU, bnGradHalf with the mask) on one group of 1024 elements in L1,
// rounding by VCVTNEPS2BF16 (cvt, where the CPU has it) and by the integer loops, in ns
// per element.
func BenchmarkBNHalfRounding(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 1024
	v, g, y := halfInputs(rng, true, n), halfInputs(rng, true, n), halfInputs(rng, true, n)
	m, s, c := vecInputs(rng, n), vecInputs(rng, n), vecInputs(rng, n)
	o := make([]uint16, n)
	cvts := []bool{false}
	if bnCVT {
		cvts = append(cvts, true)
	}
	for _, cvt := range cvts {
		for _, p := range []struct {
			name string
			run  func()
		}{
			{"affine-relu", func() { bnAffineHalf(true, o, v, m, s, c, true) }},
			{"grad-mask", func() { bnGradHalf(true, o, g, y, v, m, s, c, m) }},
		} {
			b.Run(fmt.Sprintf("%s/cvt=%v", p.name, cvt), func(b *testing.B) {
				defer func(c bool) { bnCVT = c }(bnCVT)
				bnCVT = cvt
				for b.Loop() {
					p.run()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/elem")
			})
		}
	}
}
