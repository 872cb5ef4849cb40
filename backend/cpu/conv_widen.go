package cpu

import (
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// convWidens reports whether the bf16 forward convolution a may widen to float32
// (convForwardWiden): one input channel per group, so that no two channels make a
// bf16 pair, and the float32 in-place kernels at hand. convForward widens only for
// ops without a direct kernel (AMX, the packed path): with AMX the Fashion CNN's
// first convolution (1 → 16 channels, 5×5) would pair taps into 13 pair steps,
// padded to one 16-pair AMX k tile, and compute 32 rows for 16 channels; the 16×16
// float32 kernel computes 16 rows of 25 taps read in place, in half the CPU time. The
// VDPBF16PS direct kernels read those 13 pair steps in place from shifted pair images
// (convForwardFn) and beat the float32 kernel in turn.
func convWidens(a backend.Conv2dArgs) bool {
	return convDirectF32x16 != nil && convDirectF32 != nil && a.C/a.Groups == 1
}

// convForwardWiden is the bf16 forward convolution in float32 arithmetic: each
// image widened as it is padded, the float32 kernels (convF32For), each output
// plane rounded once to bf16. The products of bf16 values are exact in float32, so
// this is the exact sum rounded by float32 fused multiply-adds in ascending k, then
// to bf16 — the float32 path's arithmetic on the widened operands, bit for bit.
func convForwardWiden(y, x, w, bias []half.BFloat16, a backend.Conv2dArgs) {
	w32 := make([]float32, a.O*(a.C/a.Groups)*a.KH*a.KW)
	half.BFloat16ToFloat32(w32, w[:len(w32)])
	var b32 []float32
	if bias != nil {
		b32 = make([]float32, a.O)
		half.BFloat16ToFloat32(b32, bias[:a.O])
	}
	load := func(s *convShape, sc *convScratch[float32, float32], n int) {
		img := x[n*s.C*s.H*s.W:]
		for c := range s.C {
			for h := range s.H {
				half.BFloat16ToFloat32(sc.xp[(c*s.hp+h+s.PadH)*s.wp+s.PadW:][:s.W], img[(c*s.H+h)*s.W:][:s.W])
			}
		}
	}
	store := func(s *convShape, n, oc int, cr []float32) {
		convNarrow(y[(n*s.O+oc)*s.OH*s.OW:][:s.OH*s.OW], cr, s.wp, s.OW, s.OH)
	}
	convForwardFn(convF32For(a.O/a.Groups), w32, b32, a, load, store, nil)
}
