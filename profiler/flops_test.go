package profiler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/profiler"
	"github.com/gamp-ml/gamp/tensor"
)

// flopsOf returns the FLOPs of op's forward and backward records (each must be there
// once).
func flopsOf(t *testing.T, recs []profiler.Record, op string) (fwd, bwd int64) {
	t.Helper()
	require.Equal(t, 1, count(recs, op, profiler.Forward), "%s forward", op)
	require.Equal(t, 1, count(recs, op, profiler.Backward), "%s backward", op)
	for _, r := range recs {
		if r.Op != op {
			continue
		}
		if r.Pass == profiler.Forward {
			fwd = r.FLOPs
		} else {
			bwd = r.FLOPs
		}
	}
	return fwd, bwd
}

// leaf is a random tensor of shape, requiring grad where grad is set.
func leaf(ctx *tensor.Context, grad bool, shape ...int) *tensor.Tensor {
	x := tensor.Randn(tensor.Shape(shape), tensor.WithContext(ctx))
	if grad {
		x = x.SetRequiresGrad(true)
	}
	return x
}

// TestFLOPsProducts checks each product op's counts against the multiply-adds written
// out by hand for small shapes, with and without the gradients of its operands.
func TestFLOPsProducts(t *testing.T) {
	cases := []struct {
		name, op string
		run      func(ctx *tensor.Context) *tensor.Tensor
		fwd, bwd int64
	}{
		// x [8, 16] · w [32, 16]ᵀ: 8·32 outputs of 16 multiply-adds; only w gets a
		// gradient (x is data), so the backward is the one product dW.
		{"linear, dW only", "linear", func(c *tensor.Context) *tensor.Tensor {
			return tensor.Linear(leaf(c, false, 8, 16), leaf(c, true, 32, 16), leaf(c, true, 32))
		}, 2 * 8 * 32 * 16, 2 * 8 * 32 * 16},
		{"linear, dX and dW", "linear", func(c *tensor.Context) *tensor.Tensor {
			return tensor.Linear(leaf(c, true, 2, 4, 16), leaf(c, true, 32, 16), nil)
		}, 2 * 8 * 32 * 16, 2 * 2 * 8 * 32 * 16},
		{"linear_relu", "linear_relu", func(c *tensor.Context) *tensor.Tensor {
			return tensor.LinearReLU(leaf(c, true, 8, 16), leaf(c, true, 32, 16), leaf(c, true, 32))
		}, 2 * 8 * 32 * 16, 2 * 2 * 8 * 32 * 16},
		// a [3, 4, 5] · b [5, 6]: 3·4·6 outputs of 5.
		{"matmul, broadcast", "matmul", func(c *tensor.Context) *tensor.Tensor {
			return tensor.MatMul(leaf(c, true, 3, 4, 5), leaf(c, true, 5, 6))
		}, 2 * 72 * 5, 2 * 2 * 72 * 5},
		{"matmul, dA only", "matmul", func(c *tensor.Context) *tensor.Tensor {
			return tensor.MatMul(leaf(c, true, 4, 5), leaf(c, false, 5, 6))
		}, 2 * 24 * 5, 2 * 24 * 5},
		// x [2, 3, 8, 8], w [4, 3, 3, 3], padding 1: 2·4·8·8 outputs of 3·3·3.
		{"conv2d", "conv2d", func(c *tensor.Context) *tensor.Tensor {
			return tensor.Conv2d(leaf(c, true, 2, 3, 8, 8), leaf(c, true, 4, 3, 3, 3), leaf(c, true, 4),
				tensor.ConvOptions{Padding: [2]int{1, 1}})
		}, 2 * 512 * 27, 2 * 2 * 512 * 27},
		// Depthwise, stride 2: x [1, 4, 8, 8], w [4, 1, 3, 3], 4 groups → [1, 4, 3, 3]
		// outputs of 1·3·3; the input is data.
		{"conv2d, groups and stride", "conv2d", func(c *tensor.Context) *tensor.Tensor {
			return tensor.Conv2d(leaf(c, false, 1, 4, 8, 8), leaf(c, true, 4, 1, 3, 3), nil,
				tensor.ConvOptions{Stride: [2]int{2, 2}, Groups: 4})
		}, 2 * 36 * 9, 2 * 36 * 9},
		// qkv [2, 5, 3·8], 2 heads: Q·Kᵀ and P·V are 2·5·5·8 multiply-adds each;
		// the backward five such products.
		{"self_attention", "self_attention", func(c *tensor.Context) *tensor.Tensor {
			return tensor.SelfAttention(leaf(c, true, 2, 5, 24), 2, tensor.AttentionOptions{})
		}, 2 * 2 * 400, 5 * 2 * 400},
		// q, k and v [2, 3, 5, 4], a gradient for q alone: forward 6·5·5·(4 + 4)
		// multiply-adds; backward the scores and dP again (6·5·5·8) and dQ (6·5·5·4).
		{"scaled_dot_product_attention, dQ only", "scaled_dot_product_attention", func(c *tensor.Context) *tensor.Tensor {
			return tensor.ScaledDotProductAttention(leaf(c, true, 2, 3, 5, 4), leaf(c, false, 2, 3, 5, 4),
				leaf(c, false, 2, 3, 5, 4), tensor.AttentionOptions{Causal: true})
		}, 2 * 150 * 8, 2 * (150*8 + 150*4)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := profiler.New()
			defer p.Close()
			ctx := p.Context(tensor.UseGenerator(tensor.NewGenerator(1)))
			y := tc.run(ctx)
			y.Sum().Backward()
			ctx.Close()
			recs := p.Records()
			fwd, bwd := flopsOf(t, recs, tc.op)
			require.Equal(t, tc.fwd, fwd, "forward")
			require.Equal(t, tc.bwd, bwd, "backward")
			for _, r := range recs {
				if r.Op != tc.op {
					require.Zero(t, r.FLOPs, "%s %s is not a product", r.Op, r.Pass)
				}
			}
		})
	}
}

// TestFLOPsRowsAndTable checks that rows add up their records' FLOPs, that GFLOPS
// divides by the self time, and that WithFLOPs prints both columns.
func TestFLOPsRowsAndTable(t *testing.T) {
	p := profiledStep(t)

	var lin profiler.Row
	for _, r := range p.Rows(false) {
		if r.Op == "linear" && r.Pass == profiler.Forward {
			lin = r
		}
		if r.Op != "linear" {
			require.Zero(t, r.FLOPs, r.Op)
			require.Zero(t, r.GFLOPS(), r.Op)
		}
	}
	// x [8, 16] · w1 [32, 16]ᵀ and h [8, 32] · w2 [10, 32]ᵀ.
	require.Equal(t, int64(2*8*32*16+2*8*10*32), lin.FLOPs)
	require.Greater(t, lin.Self, time.Duration(0))
	require.InDelta(t, float64(lin.FLOPs)/lin.Self.Seconds()/1e9, lin.GFLOPS(), 1e-9)

	var plain, with strings.Builder
	require.NoError(t, p.Table(&plain))
	require.NoError(t, p.Table(&with, profiler.WithFLOPs()))
	require.NotContains(t, plain.String(), "GFLOP/s")
	require.Contains(t, with.String(), "GFLOP/s")
	require.Contains(t, with.String(), "13.312K") // the linear forward row's FLOPs
}
