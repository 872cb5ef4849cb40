package amp

import (
	"errors"
	"fmt"

	"github.com/gamp-ml/gamp/tensor"
)

// piece is examples [start, start+length) of a micro-batch of of examples; the zero
// piece is the whole micro-batch.
type piece struct{ start, length, of int }

// Step runs one optimizer step from len(xs) == Accum micro-batches. The tensors in xs
// and ys stay the caller's; everything the step creates is released before it
// returns. A step that fails leaves the trainer as it was (see step for what that
// covers). With Config.OOMFallback, a step that runs out of memory is redone with
// every micro-batch split in two (then four, …), and the split stays for later steps.
func (t *Trainer) Step(xs, ys []*tensor.Tensor) (Result, error) {
	res, err := t.step(xs, ys)
	if !t.cfg.OOMFallback {
		return res, err
	}
	from := t.Split()
	for err != nil && errors.Is(err, tensor.ErrOutOfMemory) && t.canSplit(xs, 2*t.Split()) {
		t.split = 2 * t.Split()
		res, err = t.step(xs, ys)
	}
	if t.Split() != from {
		if err != nil {
			// Nothing fitted: keep the plan the caller knew.
			t.split = from
			return res, err
		}
		res.Replanned = fmt.Sprintf("out of memory at micro-batches of %d examples: each micro-batch now runs as %d pieces of about %d, accumulated (same examples, same effective batch)",
			micro(xs, from), t.Split(), micro(xs, t.Split()))
	}
	return res, err
}

// Split is the number of pieces each micro-batch runs as: 1 unless SplitMicroBatches
// or the out-of-memory fallback split them.
func (t *Trainer) Split() int { return max(t.split, 1) }

// SplitMicroBatches makes every later step run each micro-batch as k pieces along its
// first dimension, accumulated: the same examples and effective batch in k times
// smaller pieces (mean losses weighted by the pieces' sizes). It is what the
// out-of-memory fallback does, exposed to plan ahead or to reproduce a fallen-back run.
// k < 1 is an error.
func (t *Trainer) SplitMicroBatches(k int) error {
	if k < 1 {
		return fmt.Errorf("amp: SplitMicroBatches(%d): want at least 1 piece", k)
	}
	t.split = k
	return nil
}

// canSplit reports whether every micro-batch has at least k examples.
func (t *Trainer) canSplit(xs []*tensor.Tensor, k int) bool {
	for _, x := range xs {
		if x.Dim() == 0 || x.Shape()[0] < k {
			return false
		}
	}
	return len(xs) > 0
}

// micro is the first micro-batch's size in k pieces.
func micro(xs []*tensor.Tensor, k int) int {
	if len(xs) == 0 || xs[0].Dim() == 0 {
		return 0
	}
	return xs[0].Shape()[0] / k
}

// microSteps runs one micro-batch as t.Split() pieces and returns its mean loss.
func (t *Trainer) microSteps(x, y *tensor.Tensor) float64 {
	k := t.Split()
	if k == 1 {
		return t.microStep(x, y, piece{})
	}
	n := x.Shape()[0]
	var total float64
	for i := range k {
		lo, hi := i*n/k, (i+1)*n/k
		if hi > lo {
			total += t.microStep(x, y, piece{start: lo, length: hi - lo, of: n})
		}
	}
	return total
}
