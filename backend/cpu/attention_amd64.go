//go:build amd64 && !purego

package cpu

import (
	"math"
	"runtime"
	"unsafe"

	"github.com/gamp-ml/gamp/half"
	"golang.org/x/sys/cpu"
)

// attnExpAVX512 is attnExpRowGo(x[:n], lo[:n], scale, shift) with zmm registers,
// n ≥ 1, sixteen elements a step and the last 1–16 under a lane mask, the lanes' tree
// at the end, the bf16 rounding as half's AVX-512 loop does it; c is attnExpConsts, lo
// may be nil.
//
//go:noescape
func attnExpAVX512(x *float32, n int, scale, shift float32, c *[12]float32, lo *half.BFloat16) float32

// attnDSAVX512 is attnDSGo(dp[:n], p[:n], delta, lo[:n]), n ≥ 1, lo may be nil.
//
//go:noescape
func attnDSAVX512(dp, p *float32, n int, delta float32, lo *half.BFloat16)

// attnMaxAVX512 is attnMaxGo(x[:n]), n ≥ 1, as attnExpAVX512 walks x.
//
//go:noescape
func attnMaxAVX512(x *float32, n int) float32

// attnExpTileAVX512 is attnExpTileGo(x, ld, rows, cols, vis0, lse, scale, lo, sums)
// with attnExpAVX512's loop per row, rows ≥ 1, cols ≥ 1; c is attnExpConsts, lo and
// sums may be nil.
//
//go:noescape
func attnExpTileAVX512(x *float32, ld, rows, cols, vis0 int, lse *float32, scale float32, c *[12]float32, lo *half.BFloat16, sums *float32)

// attnMaxTileAVX512 is attnMaxTileGo(x, ld, rows, cols, vis0, mx) with
// attnMaxAVX512's loop per row, rows ≥ 1, cols ≥ 1.
//
//go:noescape
func attnMaxTileAVX512(x *float32, ld, rows, cols, vis0 int, mx *float32)

// attnMaxTile is attnMaxTileGo, with AVX-512 where the CPU has it.
func attnMaxTile(x []float32, ld, rows, cols, vis0 int, mx []float32) {
	if attnAsm && rows > 0 && cols > 0 {
		_ = x[(rows-1)*ld+cols-1]
		_ = mx[rows-1]
		attnMaxTileAVX512(&x[0], ld, rows, cols, vis0, &mx[0])
		return
	}
	attnMaxTileGo(x, ld, rows, cols, vis0, mx)
}

// attnDSTileAVX512 is attnDSTileGo(dp, p, ld, rows, cols, delta, lo) with
// attnDSAVX512's loop per row, rows ≥ 1, cols ≥ 1; lo may be nil.
//
//go:noescape
func attnDSTileAVX512(dp, p *float32, ld, rows, cols int, delta *float32, lo *half.BFloat16)

// attnExpTile is attnExpTileGo, with AVX-512 where the CPU has it (and, for the
// bf16 copy, AVX512_BF16: attnCVT).
func attnExpTile(x []float32, ld, rows, cols, vis0 int, lse []float32, scale float32, lo []half.BFloat16, sums []float32) {
	if attnAsm && rows > 0 && cols > 0 && (lo == nil || attnCVT) {
		_ = x[(rows-1)*ld+cols-1]
		_ = lse[rows-1]
		var lp *half.BFloat16
		if lo != nil {
			_ = lo[(rows-1)*ld+cols-1]
			lp = &lo[0]
		}
		var sp *float32
		if sums != nil {
			sp = &sums[:rows][0]
		}
		attnExpTileAVX512(&x[0], ld, rows, cols, vis0, &lse[0], scale, &attnExpConsts, lp, sp)
		return
	}
	attnExpTileGo(x, ld, rows, cols, vis0, lse, scale, lo, sums)
}

// attnDSTile is attnDSTileGo, with AVX-512 where the CPU has it (and, for the
// bf16 copy, AVX512_BF16: attnCVT).
func attnDSTile(dp, p []float32, ld, rows, cols int, delta []float32, lo []half.BFloat16) {
	if attnAsm && rows > 0 && cols > 0 && (lo == nil || attnCVT) {
		_ = dp[(rows-1)*ld+cols-1]
		_ = p[(rows-1)*ld+cols-1]
		_ = delta[rows-1]
		var lp *half.BFloat16
		if lo != nil {
			_ = lo[(rows-1)*ld+cols-1]
			lp = &lo[0]
		}
		attnDSTileAVX512(&dp[0], &p[0], ld, rows, cols, &delta[0], lp)
		return
	}
	attnDSTileGo(dp, p, ld, rows, cols, delta, lo)
}

// attnAsm reports whether the AVX-512 row loops run.
var attnAsm = cpu.X86.HasAVX512F

// attnCVT says whether the tile loops may round to bf16 by VCVTNEPS2BF16 and
// VCVTNE2PS2BF16 (AVX512_BF16) and test lanes by VFPCLASSPS (AVX512DQ): their
// bf16 copies (lo) need it; without it those calls run the Go twins.
var attnCVT = cpu.X86.HasAVX512BF16 && cpu.X86.HasAVX512DQ

// attnExpRow is attnExpRowGo, with AVX-512 where the CPU has it.
func attnExpRow(row []float32, lo []half.BFloat16, scale, shift float32) float32 {
	if attnAsm && len(row) > 0 {
		var lp *half.BFloat16
		if lo != nil {
			lp = &lo[:len(row)][0]
		}
		return attnExpAVX512(&row[0], len(row), scale, shift, &attnExpConsts, lp)
	}
	return attnExpRowGo(row, lo, scale, shift)
}

// attnDS is attnDSGo, with AVX-512 where the CPU has it.
func attnDS(dp, p []float32, delta float32, lo []half.BFloat16) {
	if attnAsm && len(dp) > 0 {
		var lp *half.BFloat16
		if lo != nil {
			lp = &lo[:len(dp)][0]
		}
		attnDSAVX512(&dp[0], &p[:len(dp)][0], len(dp), delta, lp)
		return
	}
	attnDSGo(dp, p, delta, lo)
}

// attnMax returns the largest element of row (-Inf for an empty one): attnMaxGo, with
// AVX-512 where the CPU has it.
func attnMax(row []float32) float32 {
	if attnAsm && len(row) > 0 {
		return attnMaxAVX512(&row[0], len(row))
	}
	return attnMaxGo(row)
}

// attnAMXDirectOK reports whether kern is the AMX kernel, whose A attnAMXDirect reads
// in place.
func attnAMXDirectOK(kern *gemmBF16Kernel) bool { return kern == gemmAMXKernel }

// attnAMXDirect is the AMX kernel's fn reading its 32 rows of A in place (row stride
// lda, 2·kc2 values each, kc2 a positive multiple of amxTileK) instead of from a packed
// panel: the same tiles, so the same result.
func attnAMXDirect(kc2 int, a []half.BFloat16, lda int, b []uint32, c []float32, ldc int, add bool) {
	_ = a[(amxMR-1)*lda+2*kc2-1]
	_ = b[amxNR*kc2-1]
	_ = c[(amxMR-1)*ldc+amxNR-1]
	gemmAMXKernel32x32(kc2/amxTileK, (*uint32)(unsafe.Pointer(&a[0])), 2*lda, 4*amxTileK, &b[0], &c[0], 4*ldc, &amxTileConfig, add)
}

// attnAMXBegin loads the tile configuration cfg for the attnAMXTile calls after it on
// this thread; attnAMXEnd releases the tiles.
//
//go:noescape
func attnAMXBegin(cfg *[64]byte)

func attnAMXEnd()

// attnAMXTile is gemmAMXKernel32x32 on tiles attnAMXBegin configured with
// amxTileConfig: one tile configuration per run of heads instead of one per tile (the
// LDTILECFG and TILERELEASE of each call cost as much as a few k tiles).
//
//go:noescape
func attnAMXTile(kt int, a *uint32, aRow, aStep int, b *uint32, c *float32, ldc int, add bool)

// attnAMXAcquire reports whether kern is the AMX kernel and, if so, locks the
// goroutine to its thread (the tile configuration is the thread's) and loads the
// configuration: the products then run attnAMXHeldFn and attnAMXHeldDirect until
// attnAMXRelease.
func attnAMXAcquire(kern *gemmBF16Kernel) bool {
	if kern != gemmAMXKernel {
		return false
	}
	runtime.LockOSThread()
	attnAMXBegin(&amxTileConfig)
	return true
}

// attnAMXRelease releases the tiles and the thread attnAMXAcquire took.
func attnAMXRelease() {
	attnAMXEnd()
	runtime.UnlockOSThread()
}

// attnAMXHeldFn is gemmAMXKernel32x32Fn on the configured tiles.
func attnAMXHeldFn(kc2 int, a, b []uint32, c []float32, ldc int, add bool) {
	ap, bp := amxPanels(kc2, a, b)
	_ = c[(amxMR-1)*ldc+amxNR-1]
	attnAMXTile(kc2/amxTileK, ap, 4*amxTileK, 4*amxTileK*amxMR, bp, &c[0], 4*ldc, add)
}

// attnAMXHeldDirect is attnAMXDirect on the configured tiles.
func attnAMXHeldDirect(kc2 int, a []half.BFloat16, lda int, b []uint32, c []float32, ldc int, add bool) {
	if kc2 <= 0 || kc2%amxTileK != 0 {
		panic("cpu: attnAMXHeldDirect: kc2 is not a positive multiple of the k tile")
	}
	_ = a[(amxMR-1)*lda+2*kc2-1]
	_ = b[amxNR*kc2-1]
	_ = c[(amxMR-1)*ldc+amxNR-1]
	attnAMXTile(kc2/amxTileK, (*uint32)(unsafe.Pointer(&a[0])), 2*lda, 4*amxTileK, &b[0], &c[0], 4*ldc, add)
}

// attnPackTAVX512 is attnPackTGo(dst, src, ld, k, rows, mr) for rows ≤ mr ≤ 16 with a
// masked load and store per p.
//
//go:noescape
func attnPackTAVX512(dst, src *float32, ld, k, rows, mr int)

// attnPackT is attnPackTGo, with AVX-512 where the CPU has it.
func attnPackT(dst, src []float32, ld, k, rows, mr int) {
	if attnAsm && k > 0 && mr <= 16 && rows > 0 {
		_ = dst[(k-1)*mr+mr-1]
		_ = src[(k-1)*ld+rows-1]
		attnPackTAVX512(&dst[0], &src[0], ld, k, rows, mr)
		return
	}
	attnPackTGo(dst, src, ld, k, rows, mr)
}

// attnDeltaF32AVX sets delta[i] = attnDot(g[i*lg:][:d], o[i*lo:][:d]) for i < t, bit
// for bit (NaN payloads aside), t ≥ 1 and d a positive multiple of 4: the four partial
// sums in the lanes of an xmm register, four rows at once (vec_amd64.s, from
// internal/vecgen's attnDeltaF32).
//
//go:noescape
func attnDeltaF32AVX(delta *float32, gr *float32, lg int, o *float32, lo int, t, d int)

// attnDeltaF32 is attnDeltaF32Go, with AVX where the CPU has AVX-512.
func attnDeltaF32(delta, g []float32, lg int, o []float32, lo int, t, d int) {
	if attnAsm && t > 0 && d > 0 && d%4 == 0 {
		_ = delta[t-1]
		_ = g[(t-1)*lg+d-1]
		_ = o[(t-1)*lo+d-1]
		attnDeltaF32AVX(&delta[0], &g[0], lg, &o[0], lo, t, d)
		return
	}
	attnDeltaF32Go(delta, g, lg, o, lo, t, d)
}

// attnLSEAVX512 is attnLSEGo for n rows whose sums l are all positive and finite,
// with archLog's steps on eight float64 lanes (attention_amd64.s); c is
// attnLogConsts.
//
//go:noescape
func attnLSEAVX512(lse, m, l *float32, n int, c *[16]uint64)

// attnLSEAsm selects attnLSEAVX512 where the CPU has AVX-512 (F, DQ: VCVTQQ2PD);
// tests clear it to compare.
var attnLSEAsm = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ

// attnLSERows is attnLSEGo, with AVX-512 where the CPU has it and every sum is
// positive and finite (a row with no visible key, whose sum is 0, takes the Go
// loop for its block).
func attnLSERows(lse, m, l []float32) {
	n := len(l)
	if !attnLSEAsm || n == 0 {
		attnLSEGo(lse, m, l)
		return
	}
	for _, v := range l {
		if !(v > 0 && v <= math.MaxFloat32) {
			attnLSEGo(lse, m, l)
			return
		}
	}
	_, _ = lse[n-1], m[n-1]
	attnLSEAVX512(&lse[0], &m[0], &l[0], n, &attnLogConsts)
}

// attnLogConsts are the constants of attnLSEAVX512, in the order it reads them:
// the mantissa's bits, 0.5's bits, 0x3fe, √2/2, 1, 2, archLog's L1 … L7, Ln2Hi,
// Ln2Lo (math/log_amd64.s) and 0x7ff.
var attnLogConsts = [16]uint64{
	0x000FFFFFFFFFFFFF, 0x3FE0000000000000, 0x3FE,
	math.Float64bits(7.07106781186547524401e-01), math.Float64bits(1), math.Float64bits(2),
	0x3FE5555555555593, 0x3FD999999997FA04, 0x3FD2492494229359, 0x3FCC71C51D8E78AF,
	0x3FC7466496CB03DE, 0x3FC39A09D078C69F, 0x3FC2F112DF3E5244,
	0x3fe62e42fee00000, 0x3dea39ef35793c76, 0x7FF,
}
