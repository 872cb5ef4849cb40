package cpu

import (
	"math"
	"unsafe"

	"github.com/gamp-ml/gamp/half"
)

// AMX (Intel Advanced Matrix Extensions) BF16 tiles: TDPBF16PS multiplies a
// 16-row tile of A (16 k pairs a row) by a tile of B (16 pair rows of 16
// columns) into a 16×16 float32 tile, 512 multiply-adds per cycle and core
// against 32 for VDPBF16PS on zmm registers. gemmAMXKernel* compute a 32×32
// tile of C, 2×2 accumulator tiles, from panels in the layout tiles load:
//
//	A: a[t*512 + i*16 + p%16], t = p/16: per k tile the 32 rows of 16 pairs,
//	   2 KB in a row (two tiles of 16 rows, row stride 64 bytes), so that the
//	   panel is one sequential stream for the hardware prefetcher;
//	B: b[p*32+j], as for VDPBF16PS (two 16-column tiles with stride 128).
//
// kc2 is a multiple of amxTileK, the packers filling the tail with zero
// pairs.
const (
	amxTileK = 16 // pair steps in one k tile (64 bytes of a tile row)
	amxMR    = 32
	amxNR    = 32
)

// amxTileConfig is the LDTILECFG operand: palette 1, eight tiles of 16 rows
// of 64 bytes. CPUID leaf 0x1D, which describes the palettes, is hidden in
// some VMs; palette 1 is that size on every AMX CPU so far.
var amxTileConfig = func() (c [64]byte) {
	c[0] = 1 // palette
	for t := range 8 {
		c[16+2*t] = 64 // colsb, little-endian uint16
		c[48+t] = 16   // rows
	}
	return c
}()

// gemmAMXKernelGo is the pure-Go twin of the AMX micro-kernel (kc2 a
// multiple of amxTileK): for every i < mr and j < nr it computes
//
//	var acc float32 // or c[i*ldc+j] when add
//	for t := 0; t < kc2; t += 16 { // one TDPBF16PS per k tile
//		var even, odd float32
//		for p := t; p < t+16; p++ {
//			x, y := a[t*mr+i*16+p-t], b[p*nr+j]
//			even = amxFMA(even, bf16Lane(x&0xffff), bf16Lane(y&0xffff))
//			odd = amxFMA(odd, bf16Lane(x>>16), bf16Lane(y>>16))
//		}
//		acc = amxAdd(acc, amxAdd(even, odd))
//	}
//	c[i*ldc+j] = acc
//
// With add the kernel thus goes on accumulating where a previous call on
// the preceding k values stopped: splitting k changes nothing.
//
// which is TDPBF16PS as measured on Sapphire Rapids (TestGemmBF16Semantics,
// TestAMXSummationOrder): within one instruction the products of even k and
// those of odd k accumulate in two chains, in ascending k, and their sum is
// added to C; every addition rounds to nearest even in float32, denormal
// inputs count as zero and denormal products and sums are flushed, whatever
// MXCSR says. (The Intel SDM's pseudo-code reads as one chain, even k then
// odd k per pair step; the hardware does not do that.) Only NaN payloads
// may differ.
func gemmAMXKernelGo(mr, nr, kc2 int, a, b []uint32, c []float32, ldc int, add bool) {
	if kc2%amxTileK != 0 {
		panic("cpu: gemmAMXKernelGo: kc2 is not a multiple of the k tile")
	}
	a = a[:kc2*mr]
	b = b[:kc2*nr]
	for i := range mr {
		crow := c[i*ldc:][:nr]
		for j := 0; j < nr; j += 4 {
			var s [4]float32
			if add {
				copy(s[:], crow[j:][:4])
			}
			for t := 0; t < kc2; t += amxTileK {
				var e, o [4]float32
				for p, x := range a[t*mr+i*amxTileK:][:amxTileK] {
					bp := b[(t+p)*nr+j:][:4]
					xl, xh := bf16Lane(x&0xffff), bf16Lane(x>>16)
					for l, y := range bp {
						e[l] = amxFMA(e[l], xl, bf16Lane(y&0xffff))
						o[l] = amxFMA(o[l], xh, bf16Lane(y>>16))
					}
				}
				for l := range s {
					s[l] = amxAdd(s[l], amxAdd(e[l], o[l]))
				}
			}
			copy(crow[j:][:4], s[:])
		}
	}
}

// amxAdd returns x + y rounded to nearest even, a denormal sum flushed to a
// zero of its sign (x and y are never denormal).
func amxAdd(x, y float32) float32 {
	s := x + y
	if u := math.Float32bits(s); u&0x7f800000 == 0 {
		s = math.Float32frombits(u & 0x80000000)
	}
	return s
}

// amxFMA returns acc + x·y as TDPBF16PS computes it (measured on Sapphire
// Rapids; acc is never denormal): x·y exact (x and y are bf16 values,
// denormals already read as zero) but flushed to a zero of its sign when
// below the float32 normal range, the sum rounded once to nearest even in
// IEEE float32, gradual underflow included, and a denormal sum then flushed
// to a zero of its sign. Two differences from bf16FMA (VDPBF16PS): a tiny
// product is dropped (1.5·2^-126 - 2^-127 is 1.5·2^-126 here, 2^-126
// there), and tininess of the sum is judged on the float32 result rather
// than before the exponent is bounded (2^-126 - 0.75·2^-150 is 2^-126 here,
// 0 there).
func amxFMA(acc, x, y float32) float32 {
	p := x * y
	if e := math.Float32bits(p) >> 23 & 0xff; e-1 < 0xfe || (x == 0 || y == 0) && p == 0 {
		s := acc + p
		if u := math.Float32bits(s); u&0x7f800000 == 0 {
			s = math.Float32frombits(u & 0x80000000)
		}
		return s
	}
	a, pe := float64(acc), float64(x)*float64(y) // pe is exact
	if math.IsInf(pe, 0) || math.IsNaN(pe) || math.IsInf(a, 0) || math.IsNaN(a) {
		return float32(pe + a)
	}
	if math.Abs(pe) < 0x1p-126 {
		// A product below the float32 normal range is flushed to a zero
		// of its sign before the addition.
		return acc + float32(math.Copysign(0, pe))
	}
	// s+e == pe+a exactly (TwoSum); nudging s one float64 ulp towards the
	// exact sum lets float32(s) break ties as the exact sum would.
	s := pe + a
	bb := s - pe
	if e := (pe - (s - bb)) + (a - bb); e > 0 {
		s = math.Nextafter(s, math.Inf(1))
	} else if e < 0 {
		s = math.Nextafter(s, math.Inf(-1))
	}
	r := float32(s)
	if u := math.Float32bits(r); u&0x7f800000 == 0 {
		r = math.Float32frombits(u & 0x80000000)
	}
	return r
}

// gemmAMXKernelGo32x32 is the twin as a micro-kernel: the AMX tile and
// panel layout, in pure Go.
var gemmAMXKernelGo32x32 = &gemmBF16Kernel{name: "amx-go32x32", mr: amxMR, nr: amxNR, tileK: amxTileK, rowsA: true,
	fn: func(kc2 int, a, b []uint32, c []float32, ldc int, add bool) {
		gemmAMXKernelGo(amxMR, amxNR, kc2, a, b, c, ldc, add)
	},
	store: gemmAMXStoreGo,
	direct: func(kc2 int, a []half.BFloat16, lda int, b []uint32, c []half.BFloat16, ldc int, alpha, beta float32) {
		p := make([]uint32, amxMR*kc2)
		packAMXA(p, a, lda, 2*kc2, kc2, amxMR, true)
		gemmAMXStoreGo(kc2, p, b, c, ldc, alpha, beta)
	},
}

// gemmAMXStoreGo is the twin's bf16 store: the tile, then bf16Out.
func gemmAMXStoreGo(kc2 int, a, b []uint32, c []half.BFloat16, ldc int, alpha, beta float32) {
	var t [amxMR * amxNR]float32
	gemmAMXKernelGo(amxMR, amxNR, kc2, a, b, t[:], amxNR, false)
	for i := range amxMR {
		row := c[i*ldc:][:amxNR]
		for j, v := range t[i*amxNR:][:amxNR] {
			row[j] = bf16Out(alpha, beta, v, row[j])
		}
	}
}

// packAMXA packs lanes ≤ amxMR rows of kc values of op(A) into an AMX A
// panel of kc2 pair steps: dst[t*512 + j*16 + q] = pair(x(j, 2p), x(j,
// 2p+1)), p = 16t+q, zero beyond lanes and beyond kc (kc ≤ 2·kc2). With
// sideBySide, row j's k values are consecutive in memory (x(j, k) =
// src[j*ld+k]) and a tile row is a copy; otherwise rows are adjacent and k
// steps by ld (x(j, k) = src[k*ld+j]).
func packAMXA(dst []uint32, src []half.BFloat16, ld, kc, kc2, lanes int, sideBySide bool) {
	if !sideBySide && packAMXATrans(dst, src, ld, kc, kc2, lanes) {
		return
	}
	if sideBySide && packAMXARows(dst, src, ld, kc, kc2, lanes) {
		return
	}
	packAMXAGo(dst, src, ld, kc, kc2, lanes, sideBySide)
}

// packAMXAGo is packAMXA in pure Go: the twin of packAMXATrans.
func packAMXAGo(dst []uint32, src []half.BFloat16, ld, kc, kc2, lanes int, sideBySide bool) {
	const tile = amxMR * amxTileK
	dst = dst[:amxMR*kc2]
	kt := kc2 / amxTileK
	for t := range kt {
		d := dst[t*tile:][:tile]
		k0 := 2 * amxTileK * t
		n := min(2*amxTileK, kc-k0) // k values of this tile, may be ≤ 0
		if n <= 0 {
			clear(d)
			continue
		}
		if sideBySide && littleEndian {
			for j := range lanes {
				row := bf16Words(d[j*amxTileK:][:amxTileK])
				copy(row, src[j*ld+k0:][:n])
				clear(row[n:])
			}
		} else if sideBySide {
			for j := range lanes {
				row := d[j*amxTileK:][:amxTileK]
				s := src[j*ld+k0:][:n]
				clear(row)
				for q := range n / 2 {
					row[q] = pair(s[2*q], s[2*q+1])
				}
				if n%2 == 1 {
					row[n/2] = uint32(s[n-1])
				}
			}
		} else {
			clear(d[:lanes*amxTileK])
			for q := range n / 2 {
				r0 := src[(k0+2*q)*ld:][:lanes]
				r1 := src[(k0+2*q+1)*ld:][:lanes]
				for j, v := range r0 {
					d[j*amxTileK+q] = pair(v, r1[j])
				}
			}
			if n%2 == 1 {
				for j, v := range src[(k0+n-1)*ld:][:lanes] {
					d[j*amxTileK+n/2] = uint32(v)
				}
			}
		}
		clear(d[lanes*amxTileK:])
	}
}

// littleEndian: a pair word pair(lo, hi) is lo followed by hi in memory, so
// a stored row of bf16 values is already a row of pairs.
var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// bf16Words views the pair words w as their bf16 halves (little-endian
// machines only).
func bf16Words(w []uint32) []half.BFloat16 {
	return unsafe.Slice((*half.BFloat16)(unsafe.Pointer(unsafe.SliceData(w))), 2*len(w))
}
