package cpu_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
)

// BenchmarkMLPStep times one training step of the 784-1024-1024-10 MLP at batch 256
// (forward, cross-entropy, backward, SGD with momentum) through amp.Trainer: FP32 (O0)
// and BF16 autocast (O1). Besides ns/op it reports the median step, less sensitive to
// the other tenants of a shared machine (scripts/bench-torch.sh compares the same step,
// through cmd/ampbench, with PyTorch); profile it with
//
//	go test -run '^$' -bench MLPStep/bf16 -benchtime 50x -cpuprofile cpu.out ./backend/cpu/
//	go tool pprof -top cpu.out
func BenchmarkMLPStep(b *testing.B) {
	for _, c := range []struct {
		name  string
		level amp.OptLevel
	}{{"fp32", amp.O0}, {"bf16", amp.O1}} {
		b.Run(c.name, func(b *testing.B) { benchMLPStep(b, c.level) })
	}
}

func benchMLPStep(b *testing.B, level amp.OptLevel) {
	const batch, in, classes = 256, 784, 10
	model := models.MLP(in, []int{1024, 1024}, classes, nn.Seeded(1))
	amp.Prepare(model, level, tensor.BFloat16)
	opt, err := optim.NewSGD(model.Params(), optim.SGDConfig{LR: 0.01, Momentum: 0.9})
	if err != nil {
		b.Fatal(err)
	}
	loss := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }
	tr, err := amp.NewTrainer(model, opt, loss, tensor.CPU, amp.Config{Level: level, Low: tensor.BFloat16})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	xs := make([]float32, batch*in)
	for i := range xs {
		xs[i] = float32(r.NormFloat64())
	}
	ys := make([]int64, batch)
	for i := range ys {
		ys[i] = r.Int64N(classes)
	}
	x := tensor.FromSlice(xs, tensor.Shape{batch, 1, 28, 28})
	y := tensor.FromSlice(ys, tensor.Shape{batch})
	defer x.Release()
	defer y.Release()
	step := func() {
		if _, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y}); err != nil {
			b.Fatal(err)
		}
	}
	for range 3 { // warm the allocator cache and the pool
		step()
	}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		step()
		times = append(times, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2])/1e6, "ms/step-median")
}
