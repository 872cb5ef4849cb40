package main

import (
	"fmt"
	"math"

	"github.com/gamp-ml/gamp/checkpoint"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// segmentsFor is the number of checkpoint segments for a chain of n layers: √n
// rounded, but at least 2 when n ≥ 2 — checkpoint.Sequential never checkpoints its
// last segment, so a single segment (round(√2) = 1 for the transformer's two blocks)
// would checkpoint nothing.
func segmentsFor(n int) int {
	if n < 2 {
		return 1
	}
	return max(2, int(math.Round(math.Sqrt(float64(n)))))
}

// withCheckpointing wraps the model's layer chain with activation checkpointing: the
// layers of the MLP and the CNN, the encoder blocks of the transformer.
func withCheckpointing(m nn.Module) (nn.Module, error) {
	switch m := m.(type) {
	case *nn.Sequential:
		return checkpoint.NewSequentialModule(m, segmentsFor(m.Len())), nil
	case *models.Transformer:
		return newCheckpointedTransformer(m)
	}
	return nil, fmt.Errorf("-checkpoint: no layer chain known for %T", m)
}

// checkpointedTransformer runs a models.Transformer with its encoder blocks
// checkpointed; it holds the transformer as its only child, so the parameters are the
// transformer's.
type checkpointedTransformer struct {
	nn.Base
	t        *models.Transformer
	blocks   []nn.Module
	segments int
}

func newCheckpointedTransformer(t *models.Transformer) (nn.Module, error) {
	seq := t.Blocks()
	c := &checkpointedTransformer{t: t}
	for j := range seq.Len() {
		c.blocks = append(c.blocks, seq.At(j))
	}
	if len(c.blocks) == 0 {
		return nil, fmt.Errorf("-checkpoint: the transformer has no encoder blocks")
	}
	c.segments = segmentsFor(len(c.blocks))
	c.AddModule("transformer", t)
	c.SetTraining(t.Training())
	return c, nil
}

// Forward is models.Transformer.Forward with checkpoint.Sequential over the blocks.
func (c *checkpointedTransformer) Forward(ids *tensor.Tensor) *tensor.Tensor {
	return c.t.Head(checkpoint.Sequential(c.blocks, c.segments, c.t.Embed(ids)))
}
