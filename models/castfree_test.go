package models

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/autocast"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// castInputs records the input of every cast op a forward pass runs.
type castInputs struct{ ins []*tensor.Tensor }

func (r *castInputs) Begin(*tensor.Context, *tensor.Op) {}
func (r *castInputs) Forward(_ *tensor.Context, op *tensor.Op, ins []*tensor.Tensor, _ *tensor.Tensor) any {
	if op.Name() == "cast" {
		r.ins = append(r.ins, ins[0])
	}
	return nil
}
func (r *castInputs) Backward(*tensor.Op, any, *tensor.Tensor, []*tensor.Tensor, time.Duration) {}

// TestNormsWriteLinearInputs checks that under BF16 autocast the transformer's and
// GPT's forward passes cast parameters only: every LayerNorm that feeds a Linear
// (the blocks' two, the final one before a Linear head) writes the Linear's bf16 input
// itself (nn.CallInto), so no activation is cast.
func TestNormsWriteLinearInputs(t *testing.T) {
	cases := []struct {
		name  string
		model nn.Module
		input func(c *tensor.Context) *tensor.Tensor
	}{
		{"transformer", NewTransformer(TransformerConfig{Vocab: 50, SeqLen: 12, Dim: 16, Heads: 4, Layers: 2}, nn.Seeded(1)), func(c *tensor.Context) *tensor.Tensor {
			return tokens(c, 4, 12, 50)
		}},
		{"gpt", NewGPT(tinyGPT, nn.Seeded(1)), func(c *tensor.Context) *tensor.Tensor { return tokens(c, 3, 9, 11) }},
	}
	for _, tc := range cases {
		rec := &castInputs{}
		c := tensor.NewContext(tensor.UseObserver(rec))
		region := autocast.Enter(c, autocast.Half(tensor.BFloat16))
		tc.model.Forward(region.Bind(tc.input(c)))
		params := map[*tensor.Tensor]bool{}
		for _, p := range tc.model.Params() {
			params[p.T] = true
		}
		require.NotEmpty(t, rec.ins, tc.name)
		for _, in := range rec.ins {
			require.True(t, params[in], "%s: a %v %s activation was cast", tc.name, in.Shape(), in.DType())
		}
		region.Close()
		c.Close()
	}
}
