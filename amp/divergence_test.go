package amp

import (
	"errors"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/data"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

func TestDivergenceRules(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	ok := func(loss float64) Result { return Result{Loss: loss, Scale: 1} }
	for _, tc := range []struct {
		name  string
		cfg   DivergenceConfig
		steps []Result
		trip  int // index of the step whose observe returns the error; -1: none
	}{
		{"NaN losses", DivergenceConfig{Patience: 3}, []Result{ok(2.3), ok(nan), ok(nan), ok(nan)}, 3},
		{"Inf losses", DivergenceConfig{Patience: 2}, []Result{ok(inf), ok(-inf)}, 1},
		{"a good step resets the count", DivergenceConfig{Patience: 3}, []Result{ok(2), ok(nan), ok(nan), ok(1), ok(nan), ok(nan)}, -1},
		{"exploding loss stays finite", DivergenceConfig{Patience: 3}, []Result{ok(2.3), ok(4e13), ok(1e9), ok(3e3)}, 3},
		{"under the factor is healthy", DivergenceConfig{Patience: 2}, []Result{ok(2.3), ok(2000), ok(2200), ok(10)}, -1},
		{"the reference has a floor of 1", DivergenceConfig{Patience: 2}, []Result{ok(1e-4), ok(0.5), ok(900), ok(999)}, -1},
		{"negative losses explode too", DivergenceConfig{Patience: 2, Factor: 10}, []Result{ok(-2), ok(-30), ok(-40)}, 2},
		{"a custom factor", DivergenceConfig{Patience: 1, Factor: 10}, []Result{ok(2), ok(19), ok(21)}, 2},
		{"first loss NaN: reference from the first finite one", DivergenceConfig{Patience: 2}, []Result{ok(nan), ok(5), ok(4000), ok(4000)}, -1},
		{"skips at the floor", DivergenceConfig{Patience: 2}, []Result{
			{Loss: 2, Skipped: true, Scale: 2}, {Loss: 2, Skipped: true, Scale: 1}, {Loss: 2, Skipped: true, Scale: 0.5}}, 2},
		{"skips above the floor are the scaler's business", DivergenceConfig{Patience: 2}, []Result{
			{Loss: 2, Skipped: true, Scale: 4}, {Loss: 2, Skipped: true, Scale: 2}, {Loss: 2, Skipped: true, Scale: 1.5}}, -1},
		{"a custom scale floor", DivergenceConfig{Patience: 2, ScaleFloor: 1024}, []Result{
			{Loss: 2, Skipped: true, Scale: 1024}, {Loss: 2, Skipped: true, Scale: 512}}, 1},
		{"off", DivergenceConfig{Off: true, Patience: 1}, []Result{ok(nan), ok(nan), ok(1e30)}, -1},
		{"default patience", DivergenceConfig{}, []Result{ok(1), ok(nan), ok(nan), ok(nan), ok(nan), ok(nan), ok(nan), ok(nan), ok(nan), ok(nan), ok(nan)}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.cfg.validate())
			var d divergence
			tripped := -1
			for i, r := range tc.steps {
				r.Step = int64(i + 1)
				err := d.observe(tc.cfg, r, 0)
				if err != nil && tripped < 0 {
					tripped = i
					var de *DivergenceError
					require.ErrorAs(t, err, &de)
					require.ErrorIs(t, err, ErrDiverged)
					require.Equal(t, int64(i+1), de.Step)
					require.Contains(t, err.Error(), "Lower the learning rate")
					require.Contains(t, err.Error(), "Config.Divergence")
				}
			}
			require.Equal(t, tc.trip, tripped)
		})
	}
	// The scaler's MinScale raises the floor.
	var d divergence
	cfg := DivergenceConfig{Patience: 1}
	require.Error(t, d.observe(cfg, Result{Loss: 1, Skipped: true, Scale: 128}, 128))
}

func TestDivergenceConfigValidated(t *testing.T) {
	m := newMLP(1)
	opt, err := optim.NewSGD(m.Params(), optim.SGDConfig{LR: 0.1})
	require.NoError(t, err)
	for _, c := range []DivergenceConfig{{Patience: -1}, {Factor: 0.5}, {Factor: math.Inf(1)}, {ScaleFloor: -1}, {Factor: math.NaN()}} {
		_, err := NewTrainer(m, opt, ce, tensor.CPU, Config{Divergence: c})
		require.Error(t, err, "%+v", c)
		require.Contains(t, err.Error(), "Divergence.")
	}
}

// fashionTrainer is examples/fashion's MLP or CNN with its optimizer (AdamW, weight
// decay 1e-4) at a precision: "fp32" (O0), "bf16" or "fp16" (O1).
func fashionTrainer(t *testing.T, model, precision string, lr float64, div DivergenceConfig) (*Trainer, string) {
	var m nn.Module
	shape := data.ShapeFlat
	switch model {
	case "mlp":
		m = models.MLP(784, []int{256, 128}, 10, nn.Seeded(1))
	case "cnn":
		m = models.FashionCNN(models.CNNConfig{C1: 8, C2: 16}, nn.Seeded(1))
		shape = data.ShapeImage
	}
	level, low := O1, tensor.BFloat16
	switch precision {
	case "fp32":
		level = O0
	case "fp16":
		low = tensor.Float16
	}
	Prepare(m, level, low)
	opt, err := optim.NewAdamW(m.Params(), optim.AdamWConfig{LR: lr, WeightDecay: 1e-4})
	require.NoError(t, err)
	tr, err := NewTrainer(m, opt, ce, tensor.CPU, Config{Level: level, Low: low, Divergence: div})
	require.NoError(t, err)
	return tr, shape
}

// trainSynthetic runs steps steps on data.Synthetic Fashion-shaped blobs and returns the
// first error and the step it came at (0: none).
func trainSynthetic(t *testing.T, tr *Trainer, shape string, steps, batchSize int) (int, error) {
	ds := data.Synthetic(batchSize*25, 10, tensor.Shape{1, 28, 28}, 3)
	ld, err := data.NewLoader(ds, data.LoaderOptions{BatchSize: batchSize, Shuffle: true, Seed: 1, DropLast: true, Shape: shape})
	require.NoError(t, err)
	step := 0
	for epoch := 0; step < steps; epoch++ {
		it := ld.Epoch(epoch)
		for step < steps && it.Next() {
			x, y := it.Batch().Tensors()
			_, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
			x.Release()
			y.Release()
			step++
			if err != nil {
				it.Close()
				return step, err
			}
		}
		require.NoError(t, it.Err())
		it.Close()
	}
	return 0, nil
}

// A healthy run at fashion's default learning rate never trips the check; a learning
// rate of 1e4 trips it in every precision (issue 16: FP32's loss climbs to ~1e16 and
// stays finite; FP16's loss turns NaN and every step is skipped).
func TestTrainerDivergence(t *testing.T) {
	const defaultLR = 2e-3 // examples/fashion's -lr
	for _, model := range []string{"mlp", "cnn"} {
		// The CNN is fashion's with fewer channels (8, 16 instead of 32, 64), to keep
		// the test to seconds on two cores.
		steps := 300
		if model == "cnn" {
			steps = 200
		}
		if testing.Short() {
			steps /= 3
		}
		for _, p := range []string{"fp32", "bf16", "fp16"} {
			tr, shape := fashionTrainer(t, model, p, defaultLR, DivergenceConfig{})
			at, err := trainSynthetic(t, tr, shape, steps, 32)
			require.NoError(t, err, "%s %s healthy run tripped at step %d", model, p, at)
		}
	}
	for _, p := range []string{"fp32", "bf16", "fp16"} {
		tr, shape := fashionTrainer(t, "mlp", p, 1e4, DivergenceConfig{})
		at, err := trainSynthetic(t, tr, shape, 100, 32)
		var de *DivergenceError
		require.ErrorAs(t, err, &de, "%s at lr 1e4 did not trip", p)
		require.True(t, errors.Is(err, ErrDiverged))
		require.LessOrEqual(t, at, 1+DefaultDivergencePatience+5, "%s tripped late: %v", p, err)
		require.Equal(t, int64(at), de.Step)

		off, shape := fashionTrainer(t, "mlp", p, 1e4, DivergenceConfig{Off: true})
		_, err = trainSynthetic(t, off, shape, 30, 32)
		require.NoError(t, err, "%s: Off turns the check off", p)
	}
}
