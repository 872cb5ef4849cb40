// Command fitdemo fits a small MLP to y = tanh(2x₀)·x₁ + x₂²/4 with autograd, three
// times: in float32, and with float16 and bfloat16 storage for the forward pass (FP32
// master weights, FP32 loss), and prints the loss curve's end points. It is the end-to-end
// check of gamp's foundation: tensors, autograd, casts and the CPU backend.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/tensor"
)

func main() {
	steps := flag.Int("steps", 400, "training steps per precision")
	batch := flag.Int("batch", 256, "batch size")
	lr := flag.Float64("lr", 0.05, "SGD learning rate")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if *steps < 1 || *batch < 1 || *lr <= 0 {
		fmt.Fprintln(os.Stderr, "fitdemo: -steps and -batch must be ≥ 1 and -lr > 0")
		os.Exit(2)
	}
	fmt.Printf("fitting y = tanh(2·x0)·x1 + x2²/4 with a 3-64-64-1 MLP, %d steps of batch %d\n", *steps, *batch)
	fmt.Printf("%-10s %12s %12s %10s %14s\n", "precision", "first loss", "final loss", "seconds", "peak memory")
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16} {
		first, last, secs, peak := fit(dt, *steps, *batch, *lr, *seed)
		fmt.Printf("%-10s %12.5f %12.5f %10.2f %14s\n", dt, first, last, secs, backend.FormatBytes(peak))
		if math.IsNaN(last) || last > first {
			fmt.Fprintf(os.Stderr, "fitdemo: %s did not learn (loss %g → %g)\n", dt, first, last)
			os.Exit(1)
		}
	}
}

func fit(dt tensor.DType, steps, batch int, lr float64, seed uint64) (first, last, secs float64, peak int64) {
	dev := tensor.DefaultDevice()
	be := backend.MustGet(dev)
	gen := tensor.NewGenerator(seed)
	init := tensor.NewContext(tensor.UseGenerator(gen))
	layer := func(in, out int) (*tensor.Tensor, *tensor.Tensor) {
		w := tensor.Randn(tensor.Shape{out, in}, tensor.WithContext(init)).MulScalar(math.Sqrt(2 / float64(in)))
		b := tensor.Zeros(tensor.Shape{out}, tensor.WithContext(init))
		init.Keep(w, b)
		return w.SetRequiresGrad(true), b.SetRequiresGrad(true)
	}
	w1, b1 := layer(3, 64)
	w2, b2 := layer(64, 64)
	w3, b3 := layer(64, 1)
	init.Close()
	params := []*tensor.Tensor{w1, b1, w2, b2, w3, b3}
	defer func() {
		for _, p := range params {
			p.Release()
		}
	}()
	be.ResetPeak()
	start := time.Now()
	for step := 0; step < steps; step++ {
		c := tensor.NewContext(tensor.UseGenerator(gen))
		x := tensor.Rand(tensor.Shape{batch, 3}, tensor.WithContext(c)).MulScalar(4).AddScalar(-2)
		x0 := x.Slice(1, 0, 1, 1)
		x1 := x.Slice(1, 1, 2, 1)
		x2 := x.Slice(1, 2, 3, 1)
		y := x0.MulScalar(2).Tanh().Mul(x1).Add(x2.Square().MulScalar(0.25))

		// Forward in dt: weights and activations stored in dt, FP32 masters.
		// Parameters are bound into the step's Context, so their casts are released
		// with it when the step ends.
		p := func(t *tensor.Tensor) *tensor.Tensor { return c.Bind(t).Cast(dt) }
		h := x.Cast(dt)
		h = tensor.Linear(h, p(w1), p(b1)).Tanh()
		h = tensor.Linear(h, p(w2), p(b2)).Tanh()
		out := tensor.Linear(h, p(w3), p(b3)).Cast(tensor.Float32)
		loss := tensor.MSELoss(out, y)
		loss.Backward()
		l := loss.Item()
		if step == 0 {
			first = l
		}
		last = l
		upd := c.NoGrad()
		for _, p := range params {
			p.SubInPlace(upd.Bind(p.Grad()).MulScalar(lr))
			p.ZeroGrad()
		}
		c.Close()
	}
	return first, last, time.Since(start).Seconds(), be.MemoryStats().PeakAllocated
}
