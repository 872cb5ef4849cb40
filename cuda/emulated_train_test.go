package cuda_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/cuda"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
)

// TestEmulatedTraining trains small models for a few fp16 AMP steps (amp.Trainer: autocast
// at O1, half weights with FP32 masters at O2, the loss scaler, SGD with momentum) on
// cuda:0 and on the CPU from the same seed and data, and compares the losses, the
// scaler's decisions and the parameters. They differ only by the GEMMs' accumulation
// order (the stand-in cuBLAS sums in float64) propagated through half precision.
func TestEmulatedTraining(t *testing.T) {
	g := cuda.NeedEmulated(t)
	mlp := func() nn.Module { return models.MLP(24, []int{32, 32}, 5, nn.Seeded(7)) }
	cnn := func() nn.Module {
		return models.FashionCNN(models.CNNConfig{C1: 4, C2: 4, Hidden: 16, Classes: 5}, nn.Seeded(7))
	}
	transformer := func() nn.Module {
		return models.NewTransformer(models.TransformerConfig{Vocab: 50, SeqLen: 8, Dim: 16, Heads: 2, Layers: 1, Classes: 5}, nn.Seeded(7))
	}
	for _, tc := range []struct {
		name  string
		level amp.OptLevel
		model func() nn.Module
		shape tensor.Shape // of one input; nil: 8 token ids
		// tol bounds a parameter's difference, relative to the largest magnitude in it.
		// Where a GEMM's float64 sum rounds to the other float16 neighbour than the CPU's
		// float32 one, the values differ by an ulp of float16 (5e-4), and the batch
		// norm's backward, which subtracts nearly equal terms, magnifies that in its
		// parameters' and the convolutions' gradients.
		tol float64
	}{
		{"mlp-O1", amp.O1, mlp, tensor.Shape{24}, 1e-3},
		{"mlp-O2", amp.O2, mlp, tensor.Shape{24}, 1e-3},
		{"cnn-O0", amp.O0, cnn, tensor.Shape{1, 28, 28}, 1e-5},
		{"cnn-O1", amp.O1, cnn, tensor.Shape{1, 28, 28}, 5e-2},
		{"transformer-O0", amp.O0, transformer, nil, 1e-5},
		{"transformer-O1", amp.O1, transformer, nil, 1e-2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g.ResetPeak()
			before := g.MemoryStats()
			const batch, steps = 8, 4
			r := rand.New(rand.NewPCG(1, 2))
			feat := tc.shape.Numel()
			if tc.shape == nil {
				feat = 8
			}
			xs := make([][]float32, steps)
			ids := make([][]int64, steps)
			ys := make([][]int64, steps)
			for s := range xs {
				xs[s] = make([]float32, batch*feat)
				ids[s] = make([]int64, batch*feat)
				for i := range xs[s] {
					xs[s][i] = float32(r.NormFloat64())
					ids[s][i] = r.Int64N(50)
				}
				ys[s] = make([]int64, batch)
				for i := range ys[s] {
					ys[s][i] = r.Int64N(5)
				}
			}
			train := func(dev tensor.Device) ([]amp.Result, [][]float64) {
				m := tc.model()
				nn.To(m, dev)
				for _, p := range m.Params() {
					if p.T.Device() != dev {
						t.Fatalf("a parameter is on %s after nn.To(%s)", p.T.Device(), dev)
					}
				}
				amp.Prepare(m, tc.level, tensor.Float16)
				opt, err := optim.NewSGD(m.Params(), optim.SGDConfig{LR: 0.05, Momentum: 0.9})
				if err != nil {
					t.Fatal(err)
				}
				loss := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }
				tr, err := amp.NewTrainer(m, opt, loss, dev, amp.Config{Level: tc.level, Low: tensor.Float16})
				if err != nil {
					t.Fatal(err)
				}
				var res []amp.Result
				for s := range steps {
					var x *tensor.Tensor
					if tc.shape == nil {
						x = tensor.FromSlice(ids[s], tensor.Shape{batch, feat}, tensor.WithDevice(dev))
					} else {
						x = tensor.FromSlice(xs[s], append(tensor.Shape{batch}, tc.shape...), tensor.WithDevice(dev))
					}
					y := tensor.FromSlice(ys[s], tensor.Shape{batch}, tensor.WithDevice(dev))
					rs, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
					if err != nil {
						t.Fatalf("%s step %d: %v", dev, s, err)
					}
					res = append(res, rs)
					x.Release()
					y.Release()
				}
				var params [][]float64
				for _, p := range append(m.Params(), m.Buffers()...) {
					params = append(params, p.T.Float64s())
					p.T.ZeroGrad()
					p.T.Release()
				}
				return res, params
			}
			gres, gparams := train(backend.CUDA(0))
			cres, cparams := train(tensor.CPU)
			for s := range gres {
				gr, cr := gres[s], cres[s]
				t.Logf("step %d: loss %.6f (CPU %.6f), scale %g, skipped %v", s, gr.Loss, cr.Loss, gr.Scale, gr.Skipped)
				if gr.Skipped != cr.Skipped || gr.Scale != cr.Scale {
					t.Errorf("step %d: skipped %v, scale %g on the GPU; %v, %g on the CPU", s, gr.Skipped, gr.Scale, cr.Skipped, cr.Scale)
				}
				lossTol := 1e-3 // float16 autocast: the first differences grow over the steps
				if tc.level == amp.O0 {
					lossTol = 1e-6
				}
				if !(math.Abs(gr.Loss-cr.Loss) <= lossTol*math.Abs(cr.Loss)) {
					t.Errorf("step %d: loss %v on the GPU, %v on the CPU", s, gr.Loss, cr.Loss)
				}
			}
			if len(gparams) != len(cparams) {
				t.Fatalf("%d parameters and buffers on the GPU, %d on the CPU", len(gparams), len(cparams))
			}
			for i := range gparams {
				scale := 0.0
				for _, v := range cparams[i] {
					scale = math.Max(scale, math.Abs(v))
				}
				for j := range gparams[i] {
					if d := math.Abs(gparams[i][j] - cparams[i][j]); !(d <= tc.tol*scale) {
						t.Errorf("parameter %d element %d: %v on the GPU, %v on the CPU", i, j, gparams[i][j], cparams[i][j])
						break
					}
				}
			}
			after := g.MemoryStats()
			if after.NumAllocs == before.NumAllocs {
				t.Errorf("nothing was allocated on cuda:0")
			}
			t.Logf("cuda:0: %d allocations, peak %s", after.NumAllocs-before.NumAllocs, backend.FormatBytes(after.PeakAllocated))
		})
	}
}
