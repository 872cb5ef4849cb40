package overflow

import (
	"testing"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/data"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/scaler"
	"github.com/gamp-ml/gamp/tensor"
)

// BenchmarkMeasure times the one-pass classification of a 1M-element tensor (what the
// Watcher adds per op output or gradient).
func BenchmarkMeasure(b *testing.B) {
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16} {
		b.Run(dt.String(), func(b *testing.B) {
			c := tensor.NewContext(tensor.UseGenerator(tensor.NewGenerator(1)))
			defer c.Close()
			x := tensor.Randn(tensor.Shape{1 << 20}, tensor.WithContext(c)).MulScalar(100).Cast(dt)
			var sc scratch
			b.SetBytes(int64(x.Numel()) * int64(dt.Size()))
			for b.Loop() {
				sc.measure(x)
			}
		})
	}
}

// BenchmarkCNNStep times one float16 O1 training step of the Fashion-MNIST CNN (batch
// 32) with and without a Watcher: the harness's overhead.
func BenchmarkCNNStep(b *testing.B) {
	for _, watched := range []bool{false, true} {
		name := "plain"
		if watched {
			name = "watched"
		}
		b.Run(name, func(b *testing.B) {
			model := models.FashionCNN(models.CNNConfig{}, nn.Seeded(1))
			var m nn.Module = model
			if watched {
				w := Watch(model)
				defer w.Close()
				m = w.Model()
			}
			opt, err := optim.NewAdamW(model.Params(), optim.AdamWConfig{LR: 1e-3})
			if err != nil {
				b.Fatal(err)
			}
			loss := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }
			tr, err := amp.NewTrainer(m, opt, loss, tensor.CPU, amp.Config{Level: amp.O1, Low: tensor.Float16, Scaler: scaler.DefaultConfig()})
			if err != nil {
				b.Fatal(err)
			}
			ds := data.Synthetic(32, 10, tensor.Shape{1, 28, 28}, 1)
			loader, err := data.NewLoader(ds, data.LoaderOptions{BatchSize: 32, Shape: data.ShapeImage})
			if err != nil {
				b.Fatal(err)
			}
			it := loader.Epoch(0)
			it.Next()
			x, y := it.Batch().Tensors()
			it.Close()
			defer x.Release()
			defer y.Release()
			for b.Loop() {
				if _, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
