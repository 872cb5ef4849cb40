//go:build amd64 && !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gamp-ml/gamp/half"
)

// TestConvKernelDirect checks convKernel12x32AVX512, convKernel16x16AVX512 and convKernel8x32AVX512 against the loop of its doc
// comment with an exactly fused multiply-add (gemmFMA32), bit for bit, and its
// pure-Go twin convKernelGo on the same operands within float32 rounding; B rows at
// scattered, overlapping offsets, C with a row stride wider than the tile.
func TestConvKernelDirect(t *testing.T) {
	if gemmKernel32 != gemmKernelAVX512 {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	const ldc = 40
	for _, k := range []struct {
		mr, nr int
		fn     func(kc int, a []float32, b *float32, offs []int, c []float32, ldc int)
	}{{12, 32, convKernel12x32AVX512}, {16, 16, convKernel16x16AVX512}, {8, 32, convKernel8x32AVX512}} {
		for _, kc := range []int{1, 2, 25, 400, 513} {
			t.Run(fmt.Sprintf("%dx%d/kc=%d", k.mr, k.nr, kc), func(t *testing.T) {
				mr, nr := k.mr, k.nr
				a := make([]float32, kc*mr)
				b := make([]float32, 1000)
				for _, v := range [][]float32{a, b} {
					for i := range v {
						v[i] = rng.Float32()*2 - 1
					}
				}
				offs := make([]int, kc)
				for p := range offs {
					offs[p] = 4 * rng.IntN(len(b)-32)
				}
				c0 := make([]float32, mr*ldc)
				for i := range c0 {
					c0[i] = rng.Float32()
				}
				got, twin := append([]float32(nil), c0...), append([]float32(nil), c0...)
				k.fn(kc, a, &b[0], offs, got, ldc)
				convKernelGo(mr, nr, kc, a, b, offs, twin, ldc)
				for i := range mr {
					for j := range ldc {
						k := i*ldc + j
						want := c0[k]
						if j < nr {
							var acc float32
							for p := range kc {
								acc = gemmFMA32(a[p*mr+i], b[offs[p]/4+j], acc)
							}
							want += acc
						}
						if math.Float32bits(got[k]) != math.Float32bits(want) {
							t.Fatalf("c[%d][%d] = %v, want %v", i, j, got[k], want)
						}
						if d := math.Abs(float64(twin[k] - want)); d > 1e-5*float64(kc) {
							t.Fatalf("Go twin c[%d][%d] = %v, want %v", i, j, twin[k], want)
						}
					}
				}
			})
		}
	}
}

// TestConvAMXKernelStack pits convAMXKernel32x32 against its pure-Go twin,
// convAMXStackGo(gemmAMXKernelGo32x32), bit for bit: random finite bf16 pairs, one
// and several panels, A in the packed and in the rows layout, B tiles at scattered,
// overlapping offsets with a row stride wider than a tile row, C with a row stride
// wider than the tile and random starting values.
func TestConvAMXKernelStack(t *testing.T) {
	asm := convAMXStack(convBF16Kernel)
	if asm == nil {
		t.Skip("no AMX in this process")
	}
	twin := convAMXStackGo(gemmAMXKernelGo32x32)
	rng := rand.New(rand.NewPCG(15, 16))
	word := func() uint32 {
		h := func() uint32 { return uint32(half.BFloat16FromFloat64(rng.NormFloat64())) }
		return h() | h()<<16
	}
	const ldc, bStride, bPanel = 40, 50, 32
	for _, np := range []int{1, 3} {
		for _, kt := range []int{1, 2, 5, 15} {
			for _, rows := range []bool{false, true} {
				aRow, aTile := amxTileK, amxMR*amxTileK // packed
				if rows {
					aRow, aTile = kt*amxTileK, amxTileK
				}
				aPanel := amxMR * kt * amxTileK
				a := make([]uint32, np*aPanel)
				b := make([]uint32, 3000)
				for _, v := range [][]uint32{a, b} {
					for i := range v {
						v[i] = word()
					}
				}
				offs := make([]int, kt)
				for i := range offs {
					offs[i] = rng.IntN(len(b) - (np-1)*bPanel - 15*bStride - amxNR)
				}
				cPanel := amxMR * ldc
				got := make([]float32, np*cPanel)
				for i := range got {
					got[i] = float32(rng.NormFloat64())
				}
				want := append([]float32(nil), got...)
				asm(np, kt, a, aRow, aTile, aPanel, b, offs, bStride, bPanel, got, ldc, cPanel)
				twin(np, kt, a, aRow, aTile, aPanel, b, offs, bStride, bPanel, want, ldc, cPanel)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("np %d kt %d rows %v: c[%d] = %v, twin %v", np, kt, rows, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestConvKernelRows checks convKernelRows8x32AVX512 and convKernelRows8x16AVX512
// against the loop of their doc comment with an exactly fused multiply-add
// (gemmFMA32), bit for bit, and their pure-Go twin convKernelRowsGo within float32
// rounding; rows at scattered, overlapping offsets, fewer taps than rows, C with a
// row stride wider than the tile.
func TestConvKernelRows(t *testing.T) {
	if convRowsF32x32 == nil {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(17, 18))
	const ldc = 40
	for _, k := range []struct {
		nr int
		fn func(steps int, x []float32, offs []int, b []float32, c []float32, ldc int)
	}{{32, convRowsF32x32}, {16, convRowsF32x16}} {
		for _, kc := range []int{1, 2, 25, 400, 513} {
			for _, w := range []int{8, 3} {
				x := make([]float32, 2000)
				b := make([]float32, kc*k.nr)
				for _, v := range [][]float32{x, b} {
					for i := range v {
						v[i] = rng.Float32()*2 - 1
					}
				}
				offs := make([]int, w)
				for i := range offs {
					offs[i] = rng.IntN(len(x) - kc)
				}
				c0 := make([]float32, convRowsMR*ldc)
				for i := range c0 {
					c0[i] = rng.Float32()
				}
				got, twin := append([]float32(nil), c0...), append([]float32(nil), c0...)
				k.fn(kc, x, offs, b, got, ldc)
				convKernelRowsGo(convRowsMR, k.nr, kc, x, offs, b, twin, ldc)
				for i := range convRowsMR {
					for j := range ldc {
						e := i*ldc + j
						want := c0[e]
						if j < k.nr {
							var acc float32
							for p := range kc {
								acc = gemmFMA32(x[offs[min(i, w-1)]+p], b[p*k.nr+j], acc)
							}
							want += acc
						}
						if math.Float32bits(got[e]) != math.Float32bits(want) {
							t.Fatalf("8x%d kc %d w %d: c[%d][%d] = %v, want %v", k.nr, kc, w, i, j, got[e], want)
						}
						if d := math.Abs(float64(twin[e] - want)); d > 1e-5*float64(kc) {
							t.Fatalf("Go twin 8x%d: c[%d][%d] = %v, want %v", k.nr, i, j, twin[e], want)
						}
					}
				}
			}
		}
	}
}

// convRandomPairs returns random bf16 pairs with both halves normal values in ±[1/8, 2)
// and, at every 97th word, an Inf, a NaN or a denormal half (VDPBF16PS reads
// denormals as zeros; the twins do too).
func convRandomPairs(rng *rand.Rand, n int) []uint32 {
	h := func() uint32 {
		return uint32(half.BFloat16FromFloat64((rng.Float64()*1.875 + 0.125) * float64(1-2*rng.IntN(2))))
	}
	v := make([]uint32, n)
	for i := range v {
		v[i] = h() | h()<<16
		if i%97 == 96 {
			v[i] = v[i]&0xffff0000 | []uint32{0x7f80, 0x7fc1, 0x0003}[i%3]
		}
	}
	return v
}

// TestConvPairKernels checks the bf16 in-place kernels against their pure-Go
// twins, bit for bit: convPairKernel<mr>x<nr>AVX512 with B rows at scattered
// word offsets, and convPairKernelRows8x<nr>AVX512 with rows at scattered element
// offsets (odd ones, so that a pair straddles two words), fewer taps than rows, C
// with a row stride wider than the tile and random contents.
func TestConvPairKernels(t *testing.T) {
	if convDirectPairs == nil {
		t.Skip("no VDPBF16PS in-place kernels (needs AVX512_BF16 without AMX)")
	}
	rng := rand.New(rand.NewPCG(21, 22))
	const ldc = 40
	same := func(got, want []float32) int {
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
				return i
			}
		}
		return -1
	}
	for _, k := range []struct {
		mr, nr int
		fn     func(steps int, a, b []uint32, offs []int, maxOff int, c []float32, ldc int)
	}{{12, 32, convDirectPairs}, {16, 16, convDirectPairsx16}, {8, 32, convDirectPairsx8}} {
		for _, kc := range []int{1, 2, 13, 200, 513} {
			a := convRandomPairs(rng, kc*k.mr)
			b := convRandomPairs(rng, 3000)
			offs := make([]int, kc)
			maxOff := 0
			for p := range offs {
				offs[p] = 4 * rng.IntN(len(b)-k.nr)
				maxOff = max(maxOff, offs[p])
			}
			c0 := make([]float32, k.mr*ldc)
			for i := range c0 {
				c0[i] = rng.Float32()
			}
			got, want := slices.Clone(c0), slices.Clone(c0)
			k.fn(kc, a, b, offs, maxOff, got, ldc)
			convPairKernelGo(k.mr, k.nr, kc, a, b, offs, want, ldc)
			if e := same(got, want); e >= 0 {
				t.Fatalf("%dx%d kc %d: c[%d] = %v, Go twin %v", k.mr, k.nr, kc, e, got[e], want[e])
			}
		}
	}
	for _, k := range []struct {
		nr int
		fn func(steps int, x []half.BFloat16, offs []int, b []uint32, c []float32, ldc int)
	}{{32, convRowsPairs32}, {16, convRowsPairs16}} {
		for _, kc := range []int{1, 2, 25, 256, 513} {
			for _, w := range []int{8, 3} {
				xw := convRandomPairs(rng, 1500)
				x := make([]half.BFloat16, 2*len(xw))
				for i, v := range xw {
					x[2*i], x[2*i+1] = half.BFloat16(v), half.BFloat16(v>>16)
				}
				b := convRandomPairs(rng, kc*k.nr)
				offs := make([]int, w)
				for i := range offs {
					offs[i] = rng.IntN(len(x) - 2*kc)
				}
				c0 := make([]float32, convRowsMR*ldc)
				for i := range c0 {
					c0[i] = rng.Float32()
				}
				got, want := slices.Clone(c0), slices.Clone(c0)
				k.fn(kc, x, offs, b, got, ldc)
				convPairKernelRowsGo(convRowsMR, k.nr, kc, x, offs, b, want, ldc)
				if e := same(got, want); e >= 0 {
					t.Fatalf("rows 8x%d kc %d w %d: c[%d] = %v, Go twin %v", k.nr, kc, w, e, got[e], want[e])
				}
			}
		}
	}
}

// TestConvInterleave checks convInterleave (assembly where the CPU has it) against
// convInterleaveGo for lengths around the 16-word chunks.
func TestConvInterleave(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, n := range []int{1, 15, 16, 17, 33, 324, 1000} {
		lo, hi := make([]half.BFloat16, n+5), make([]half.BFloat16, n+5)
		for i := range lo {
			lo[i], hi[i] = half.BFloat16(rng.Uint32()), half.BFloat16(rng.Uint32())
		}
		got, want := make([]uint32, n+1), make([]uint32, n+1)
		got[n], want[n] = 0xdeadbeef, 0xdeadbeef // past the end: untouched
		convInterleave(got[:n], lo, hi)
		convInterleaveGo(want[:n], lo, hi)
		if !slices.Equal(got, want) {
			t.Fatalf("n %d: %x, want %x", n, got, want)
		}
	}
}

// TestConvPairKernelsNarrow checks convPairKernel<mr>x<nr>NarrowAVX512 against its
// pure-Go twin convPairKernelNarrowGo, bit for bit (NaN for NaN): B rows at
// scattered, overlapping offsets, starting values of each sign, −0 and NaN, tiles
// scaled so that some sums round from subnormal float32 (the integer rounding)
// and some overflow, C with a row stride wider than the tile, whose other
// elements must stay as they were.
func TestConvPairKernelsNarrow(t *testing.T) {
	if convDirectPairsNarrow == nil {
		t.Skip("no VDPBF16PS in-place kernels (needs AVX512_BF16 without AMX)")
	}
	rng := rand.New(rand.NewPCG(31, 32))
	const ldc = 40
	scale := func(v []uint32, f float64) {
		for i, w := range v {
			lo := half.BFloat16FromFloat64(half.BFloat16(w).Float64() * f)
			hi := half.BFloat16FromFloat64(half.BFloat16(w>>16).Float64() * f)
			v[i] = uint32(lo) | uint32(hi)<<16
		}
	}
	for _, k := range []struct {
		mr, nr int
		fn     func(steps int, a, b []uint32, offs []int, maxOff int, c []half.BFloat16, ldc int, init []float32)
	}{{12, 32, convDirectPairsNarrow}, {16, 16, convDirectPairsx16Narrow}, {8, 32, convDirectPairsx8Narrow}} {
		for _, kc := range []int{0, 1, 2, 13, 200} {
			for _, f := range []float64{1, 0x1p-66, 0x1p60} {
				a := convRandomPairs(rng, kc*k.mr)
				b := convRandomPairs(rng, 3000)
				scale(a, f)
				offs := make([]int, kc)
				maxOff := 0
				for p := range offs {
					offs[p] = 4 * rng.IntN(len(b)-k.nr)
					maxOff = max(maxOff, offs[p])
				}
				init := make([]float32, k.mr)
				for i := range init {
					init[i] = float32(rng.NormFloat64() * f)
				}
				init[0] = float32(math.Copysign(0, -1))
				init[1] = 3e-39 // subnormal: the integer rounding wherever the tile adds ~0
				if k.mr > 3 {
					init[3] = float32(math.NaN())
				}
				c0 := make([]half.BFloat16, k.mr*ldc)
				for i := range c0 {
					c0[i] = half.BFloat16(rng.Uint32())
				}
				got, want := slices.Clone(c0), slices.Clone(c0)
				k.fn(kc, a, b, offs, maxOff, got, ldc, init)
				convPairKernelNarrowGo(k.mr, k.nr, kc, a, b, offs, want[:(k.mr-1)*ldc+k.nr], ldc, init)
				for i := range got {
					g, w := got[i], want[i]
					if g != w && !(g.IsNaN() && w.IsNaN()) {
						t.Fatalf("%dx%d kc %d scale %g: c[%d][%d] = %#04x, Go twin %#04x", k.mr, k.nr, kc, f, i/ldc, i%ldc, uint16(g), uint16(w))
					}
				}
			}
		}
	}
}
