package backendtest

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

func init() {
	register("BatchNormReLU", testBatchNormReLU)
}

// testBatchNormReLU checks a backend.BatchNormReLUer against BatchNorm then Relu, and
// BatchNormReLUBackward against UnaryBackward(Relu) then BatchNormBackward, on the same
// backend, bit for bit: outputs, gradients, saved and running statistics. The inputs
// straddle zero after normalisation, with signed zeros among them.
func testBatchNormReLU(t *testing.T, b backend.Backend) {
	f, ok := b.(backend.BatchNormReLUer)
	if !ok {
		t.Skip("the backend has no backend.BatchNormReLUer")
	}
	for si, sh := range bnShapes {
		for _, training := range []bool{true, false} {
			for _, dt := range FloatDTypes {
				t.Run(fmt.Sprintf("%dx%dx%d/train=%v/%s", sh.n, sh.c, sh.s, training, dt), func(t *testing.T) {
					n, c, s := sh.n, sh.c, sh.s
					seed := uint64(3000 + 10*si)
					x := Rounded(dt, RandVals(seed, n*c*s, -1, 3))
					x[0], x[len(x)-1] = 0, math.Copysign(0, -1)
					gy := Rounded(dt, RandVals(seed+1, n*c*s, -1, 1))
					w, bias := normParam(seed+2, c, 0.5, 1.5), normParam(seed+3, c, -0.5, 0.5)
					rm, rv := normParam(seed+4, c, -0.5, 0.5), normParam(seed+5, c, 0.5, 1.5)
					type run struct {
						y, gx, gw, gb, sm, si, rm, rv backend.Storage
					}
					xs, gys := Upload(t, b, dt, x), Upload(t, b, dt, gy)
					ws, bs := normUpload(t, b, w), normUpload(t, b, bias)
					defer Free(b, xs, gys, ws, bs)
					do := func(fused bool) run {
						r := run{
							y: uploadGarbage(t, b, dt, len(x)), gx: uploadGarbage(t, b, dt, len(x)),
							gw: normGarbage(t, b, true, c), gb: normGarbage(t, b, true, c),
							sm: normGarbage(t, b, true, c), si: normGarbage(t, b, true, c),
							rm: normUpload(t, b, rm), rv: normUpload(t, b, rv),
						}
						a := backend.NormArgs{
							X: xs, Y: r.y, Weight: ws, Bias: bs, RunningMean: r.rm, RunningVar: r.rv,
							SaveMean: r.sm, SaveInvStd: r.si, N: n, C: c, S: s,
							Training: training, Momentum: normMomentum, Eps: normEps,
						}
						ga := a
						ga.GY, ga.GX, ga.GWeight, ga.GBias = gys, r.gx, r.gw, r.gb
						if fused {
							f.BatchNormReLU(a)
							f.BatchNormReLUBackward(ga)
							return r
						}
						b.BatchNorm(a)
						pre := uploadGarbage(t, b, dt, len(x)) // BatchNorm's output, ReLU's input
						gpre := uploadGarbage(t, b, dt, len(x))
						defer Free(b, pre, gpre)
						b.Copy(backend.Dense(pre, 0, len(x)), backend.Dense(r.y, 0, len(x)))
						b.Unary(backend.Relu, r.y, pre, len(x), 0, 0)
						b.UnaryBackward(backend.Relu, gpre, gys, pre, nil, len(x), 0, 0)
						ga.GY = gpre
						b.BatchNormBackward(ga)
						return r
					}
					want, got := do(false), do(true)
					defer Free(b, want.y, want.gx, want.gw, want.gb, want.sm, want.si, want.rm, want.rv)
					defer Free(b, got.y, got.gx, got.gw, got.gb, got.sm, got.si, got.rm, got.rv)
					for _, p := range []struct {
						name string
						g, w backend.Storage
					}{{"Y", got.y, want.y}, {"GX", got.gx, want.gx}, {"GWeight", got.gw, want.gw},
						{"GBias", got.gb, want.gb}, {"SaveMean", got.sm, want.sm}, {"SaveInvStd", got.si, want.si},
						{"RunningMean", got.rm, want.rm}, {"RunningVar", got.rv, want.rv}} {
						if g, w := Bits(t, b, p.g), Bits(t, b, p.w); !slices.Equal(g, w) {
							i := 0
							for g[i] == w[i] {
								i++
							}
							t.Fatalf("%s[%d]: fused %#x, composed %#x", p.name, i, g[i], w[i])
						}
					}
				})
			}
		}
	}
}
