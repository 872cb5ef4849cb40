// Command fashion trains an MLP or a CNN on Fashion-MNIST with mixed precision — gamp's
// main job. It shows a progress bar with loss and throughput and, with -json, ends with
// one JSON line for scripts:
//
//	fashion -model cnn -precision bf16 -epochs 3
//	fashion -model mlp -precision fp16 -opt-level O2 -json
//
// With -ddp it is one rank of a data-parallel job (start it with gamprun): every rank
// trains on its share of each batch and DDP averages the gradients; rank 0 reports.
//
//	gamprun -n 2 -- fashion -ddp -model mlp -epochs 1 -json
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/cuda"
	"github.com/gamp-ml/gamp/data"
	"github.com/gamp-ml/gamp/dist"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
)

type options struct {
	model, precision, optLevel, device, dataDir, save, resume, schedule, channels string
	epochs, batch, accum, limit                                                   int
	lr                                                                            float64
	seed                                                                          uint64
	jsonOut, quiet, ddp                                                           bool
}

// summary is the JSON line printed with -json.
type summary struct {
	Model            string  `json:"model"`
	Precision        string  `json:"precision"`
	OptLevel         string  `json:"opt_level"`
	Device           string  `json:"device"`
	Epochs           int     `json:"epochs"`
	Steps            int64   `json:"steps"`
	SkippedSteps     int64   `json:"skipped_steps"`
	FinalScale       float64 `json:"final_scale"`
	TrainSeconds     float64 `json:"train_seconds"`
	SamplesPerSecond float64 `json:"samples_per_second"`
	TestAccuracy     float64 `json:"test_accuracy"`
	PeakMemoryBytes  int64   `json:"peak_memory_bytes"`
	FinalLoss        float64 `json:"final_loss"`
	WorldSize        int     `json:"world_size"`

	rank int
}

func main() {
	var o options
	flag.StringVar(&o.model, "model", "cnn", "mlp or cnn (2×[conv 5×5 + BatchNorm + ReLU + max-pool] + 2 linear)")
	flag.StringVar(&o.precision, "precision", "auto", "fp32, fp16, bf16 or auto (bf16 on the CPU, fp16 on a GPU)")
	flag.StringVar(&o.optLevel, "opt-level", "", "O0, O1, O2 or O3 (default: O0 for fp32, O1 otherwise)")
	flag.IntVar(&o.epochs, "epochs", 3, "training epochs")
	flag.IntVar(&o.batch, "batch", 128, "examples per optimizer step (split into -accum micro-batches)")
	flag.Float64Var(&o.lr, "lr", 2e-3, "AdamW peak learning rate")
	flag.StringVar(&o.schedule, "schedule", "cosine", "learning-rate schedule: cosine (anneal to 0 over the run) or constant")
	flag.IntVar(&o.accum, "accum", 1, "micro-batches per optimizer step (gradient accumulation)")
	flag.StringVar(&o.device, "device", "", "cpu, cpu:N or cuda:N (default: the best device present)")
	flag.StringVar(&o.dataDir, "data", "/usr/share/datasets/fashion-mnist", "directory with the Fashion-MNIST IDX files")
	flag.Uint64Var(&o.seed, "seed", 1, "random seed (initialisation, shuffling, dropout)")
	flag.StringVar(&o.save, "save", "", "save the training state to FILE after each epoch")
	flag.StringVar(&o.resume, "resume", "", "resume from a state FILE written by -save")
	flag.BoolVar(&o.jsonOut, "json", false, "end with one JSON line of results on stdout")
	flag.StringVar(&o.channels, "channels", "32,64", "CNN channels of the two conv blocks")
	flag.IntVar(&o.limit, "limit", 0, "use only the first N training examples (0: all)")
	flag.BoolVar(&o.quiet, "quiet", false, "no progress bar")
	flag.BoolVar(&o.ddp, "ddp", false, "data-parallel rank started by gamprun: train on this rank's share of every batch, average gradients over the ranks")
	flag.Parse()
	s, err := run(o, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fashion:", err)
		os.Exit(1)
	}
	if o.jsonOut && s.rank == 0 {
		b, _ := json.Marshal(s)
		fmt.Println(string(b))
	}
}

func pickDevice(name string) (tensor.Device, error) {
	if name == "" {
		// The best device present: a GPU when one is usable, else the CPU.
		if _, err := backend.Get(tensor.CUDA(0)); err == nil {
			return tensor.CUDA(0), nil
		}
		return tensor.CPU, nil
	}
	d, err := tensor.ParseDevice(name)
	if err != nil {
		return d, err
	}
	if _, err := backend.Get(d); err != nil {
		return d, fmt.Errorf("device %s is not available: %w", d, err)
	}
	return d, nil
}

func levelFor(o options) (amp.OptLevel, tensor.DType, error) {
	var low tensor.DType
	switch strings.ToLower(o.precision) {
	case "fp32", "float32":
	case "fp16", "float16":
		low = tensor.Float16
	case "bf16", "bfloat16":
		low = tensor.BFloat16
	default:
		return 0, 0, fmt.Errorf("unknown -precision %q (want fp32, fp16 or bf16)", o.precision)
	}
	level := amp.O0
	if low != 0 {
		level = amp.O1
	}
	if o.optLevel != "" {
		l, err := amp.ParseOptLevel(o.optLevel)
		if err != nil {
			return 0, 0, err
		}
		if l != amp.O0 && low == 0 {
			return 0, 0, fmt.Errorf("-opt-level %s needs -precision fp16 or bf16", l)
		}
		level = l
	}
	if low == 0 {
		low = tensor.BFloat16 // unused at O0
	}
	return level, low, nil
}

// buildModel returns the network; seeded init makes runs reproducible.
func buildModel(kind, channels string, seed uint64) (nn.Module, string, error) {
	switch kind {
	case "mlp":
		return models.MLP(784, []int{256, 128}, 10, nn.Seeded(seed)), data.ShapeFlat, nil
	case "cnn":
		var c1, c2 int
		if channels == "" {
			channels = "32,64"
		}
		if n, err := fmt.Sscanf(channels, "%d,%d", &c1, &c2); n != 2 || err != nil || c1 < 1 || c2 < 1 {
			return nil, "", fmt.Errorf("bad -channels %q (want two positive counts, e.g. 32,64)", channels)
		}
		return models.FashionCNN(models.CNNConfig{C1: c1, C2: c2}, nn.Seeded(seed)), data.ShapeImage, nil
	}
	return nil, "", fmt.Errorf("unknown -model %q (want mlp or cnn)", kind)
}

func run(o options, log io.Writer) (summary, error) {
	if o.epochs < 1 || o.batch < 1 || o.accum < 1 || o.lr <= 0 || math.IsNaN(o.lr) {
		return summary{}, errors.New("-epochs, -batch and -accum must be ≥ 1 and -lr > 0")
	}
	if o.batch%o.accum != 0 {
		return summary{}, fmt.Errorf("-batch %d is not divisible by -accum %d", o.batch, o.accum)
	}
	pg := dist.ProcessGroup(dist.NewLocal())
	if o.ddp {
		var err error
		if pg, err = dist.Init(); err != nil {
			return summary{}, err
		}
		defer pg.Close()
		if (o.batch/o.accum)%pg.Size() != 0 {
			return summary{rank: pg.Rank()}, fmt.Errorf("-ddp: the micro-batch %d (-batch/-accum) does not split evenly over %d ranks", o.batch/o.accum, pg.Size())
		}
		if pg.Rank() != 0 {
			o.quiet, o.save = true, ""
		}
	}
	dev, err := pickDevice(o.device)
	if err != nil {
		return summary{}, err
	}
	if err := tensor.SetDefaultDevice(dev); err != nil {
		return summary{}, err
	}
	if o.precision == "auto" {
		o.precision = "bf16"
		if dev.Kind == backend.KindCUDA {
			o.precision = "fp16"
		}
	}
	level, low, err := levelFor(o)
	if err != nil {
		return summary{}, err
	}
	train, test, err := data.LoadFashionMNIST(o.dataDir)
	if err != nil {
		return summary{}, err
	}
	if o.limit > 0 && o.limit < train.Len() {
		train = train.Head(o.limit)
	}
	model, shape, err := buildModel(o.model, o.channels, o.seed)
	if err != nil {
		return summary{}, err
	}
	nn.To(model, dev)
	amp.Prepare(model, level, low)
	opt, err := optim.NewAdamW(model.Params(), optim.AdamWConfig{LR: o.lr, WeightDecay: 1e-4})
	if err != nil {
		return summary{}, err
	}
	lossFn := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }
	var trModel nn.Module = model
	var trOpt optim.Optimizer = opt
	if o.ddp {
		ddp, err := dist.NewDDP(model, pg, dist.DDPOptions{})
		if err != nil {
			return summary{}, err
		}
		if trOpt, err = ddp.Optimizer(opt); err != nil {
			return summary{}, err
		}
		trModel = ddp
	}
	tr, err := amp.NewTrainer(trModel, trOpt, lossFn, dev, amp.Config{Level: level, Low: low, Accum: o.accum})
	if err != nil {
		return summary{}, err
	}
	dist.SyncScaler(tr.Scaler, pg)
	tr.Gen.Seed(o.seed)
	micro := o.batch / o.accum
	stepsPerEpoch := int64(train.Len() / micro / o.accum)
	switch o.schedule {
	case "cosine", "":
		sched, err := optim.NewScheduler(opt, optim.CosineAnnealing{TMax: stepsPerEpoch * int64(o.epochs)})
		if err != nil {
			return summary{}, err
		}
		tr.Sched = sched
	case "constant":
	default:
		return summary{}, fmt.Errorf("unknown -schedule %q (want cosine or constant)", o.schedule)
	}
	startEpoch := 0
	if o.resume != "" {
		st, err := amp.Load(o.resume, tr)
		if err != nil {
			return summary{}, err
		}
		startEpoch = st.Epoch
		fmt.Fprintf(log, "resumed from %s at epoch %d (step %d)\n", o.resume, startEpoch, tr.Steps())
	}
	// With -ddp each rank loads its shard of the data, micro/size examples per
	// micro-batch; the ranks' micro-batches together make one of the full size.
	local := train
	if pg.Size() > 1 {
		local = shard(train, pg.Rank(), pg.Size())
	}
	loader, err := data.NewLoader(local, data.LoaderOptions{BatchSize: micro / pg.Size(), Shuffle: true, Seed: o.seed, DropLast: true, Shape: shape, Device: dev})
	if err != nil {
		return summary{}, err
	}
	be := backend.MustGet(dev)
	be.ResetPeak()
	res := summary{Model: o.model, Precision: o.precision, OptLevel: level.String(), Device: dev.String(), Epochs: o.epochs,
		WorldSize: pg.Size(), rank: pg.Rank()}
	if !o.quiet {
		fmt.Fprintf(log, "fashion: %s, %s (%s, %s), %d train / %d test examples, batch %d×%d\n",
			o.model, dev, o.precision, level, train.Len(), test.Len(), o.accum, micro)
		if o.device == "" && dev.Kind == backend.KindCPU && !cuda.Available() {
			// Say why the GPU was not used: the first reason, not every path tried.
			why, _, _ := strings.Cut(cuda.Reason().Error(), ": tried")
			fmt.Fprintf(log, "fashion: no GPU: %s; training on the CPU\n", why)
		}
	}
	var trainTime time.Duration
	var samples int
	for epoch := startEpoch; epoch < o.epochs; epoch++ {
		it := loader.Epoch(epoch)
		perEpoch := local.Len() / (micro / pg.Size()) / o.accum
		start := time.Now()
		var xs, ys []*tensor.Tensor
		step := 0
		for it.Next() {
			b := it.Batch()
			x, y := b.Tensors()
			xs, ys = append(xs, x), append(ys, y)
			if len(xs) < o.accum {
				continue
			}
			r, err := tr.Step(xs, ys)
			for i := range xs {
				xs[i].Release()
				ys[i].Release()
			}
			xs, ys = xs[:0], ys[:0]
			if err != nil {
				it.Close()
				return res, err
			}
			step++
			samples += o.batch
			res.FinalLoss = r.Loss
			if r.Skipped {
				res.SkippedSteps++
			}
			if !o.quiet && (step%10 == 0 || step == perEpoch) {
				el := time.Since(start).Seconds()
				progress(log, epoch+1, o.epochs, step, perEpoch, r.Loss, float64(step*o.batch)/el, r.Scale)
			}
		}
		for i := range xs {
			xs[i].Release()
			ys[i].Release()
		}
		if err := it.Err(); err != nil {
			return res, err
		}
		it.Close()
		trainTime += time.Since(start)
		if pg.Rank() != 0 {
			continue // rank 0 evaluates and reports; the replicas are identical
		}
		acc, err := evaluate(tr, test, shape, dev)
		if err != nil {
			return res, err
		}
		res.TestAccuracy = acc
		if !o.quiet {
			fmt.Fprintf(log, "\nepoch %d: test accuracy %.4f\n", epoch+1, acc)
		}
		if o.save != "" {
			if err := amp.Save(o.save, tr, amp.SaveInfo{Epoch: epoch + 1}); err != nil {
				return res, err
			}
		}
	}
	res.Steps = tr.Steps()
	res.FinalScale = tr.Scaler.ScaleValue()
	res.TrainSeconds = trainTime.Seconds()
	if res.TrainSeconds > 0 {
		res.SamplesPerSecond = float64(samples) / res.TrainSeconds
	}
	res.PeakMemoryBytes = be.MemoryStats().PeakAllocated
	return res, nil
}

// shard is rank's share of ds, as PyTorch's DistributedSampler deals it: every
// size-th example from the rank-th, the same number for every rank (so all run the
// same number of steps).
func shard(ds *data.Dataset, rank, size int) *data.Dataset {
	idx := make([]int, 0, ds.Len()/size)
	for i := rank; len(idx) < ds.Len()/size; i += size {
		idx = append(idx, i)
	}
	return ds.Subset(idx)
}

func progress(w io.Writer, epoch, epochs, step, total int, loss, sps, scale float64) {
	const width = 30
	done := width * step / max(total, 1)
	bar := strings.Repeat("█", done) + strings.Repeat("·", width-done)
	fmt.Fprintf(w, "\repoch %d/%d %s %5d/%d  loss %.4f  %7.0f samples/s  scale %g ", epoch, epochs, bar, step, total, loss, sps, scale)
}

// evaluate computes test accuracy in eval mode without gradients.
func evaluate(tr *amp.Trainer, test *data.Dataset, shape string, dev tensor.Device) (float64, error) {
	loader, err := data.NewLoader(test, data.LoaderOptions{BatchSize: 500, Shape: shape, Device: dev})
	if err != nil {
		return 0, err
	}
	it := loader.Epoch(0)
	defer it.Close()
	correct, total := 0, 0
	for it.Next() {
		x, y := it.Batch().Tensors()
		out := tr.Evaluate(x)
		pred := out.ArgMax(1, false).Int64s()
		labels := y.Int64s()
		for i := range pred {
			if pred[i] == labels[i] {
				correct++
			}
		}
		total += len(pred)
		out.Release()
		x.Release()
		y.Release()
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	return float64(correct) / float64(max(total, 1)), nil
}
