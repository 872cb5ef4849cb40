package overflow

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/data"
	"github.com/gamp-ml/gamp/internal/testenv"
	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/scaler"
	"github.com/gamp-ml/gamp/tensor"
)

// The main job under faults: the Fashion-MNIST CNN trained in float16 (O1, AdamW with
// the main job's cosine schedule) for one epoch of a 6400-example subset (200 steps),
// once clean and once with Inf and NaN injected into random parameters' gradients at
// six random (seeded) steps.
const (
	suiteTrain   = 6400
	suiteTest    = 2000
	suiteBatch   = 32
	suiteLR      = 1e-3
	suiteFaults  = 6
	suiteRecover = 1 // K: no skipped step later than the last fault + K
)

// fashionData returns the real Fashion-MNIST subset when Debian's
// dataset-fashion-mnist package is installed, else a stand-in built from
// data.Synthetic (GAMP_OVERFLOW_DATA=synthetic forces it).
func fashionData(t *testing.T) (train, test *data.Dataset, source string) {
	if os.Getenv("GAMP_OVERFLOW_DATA") != "synthetic" {
		_, err := os.Stat(data.DefaultDir)
		if err == nil {
			tr, te, err := data.LoadFashionMNIST(data.DefaultDir)
			require.NoError(t, err)
			return tr.Head(suiteTrain), te.Head(suiteTest), "real Fashion-MNIST from " + data.DefaultDir
		}
		testenv.Fallback(t, testenv.FashionMNIST, "the overflow suite trains on synthetic images instead: %v", err)
	}
	all := syntheticImages(t, suiteTrain+suiteTest, 3)
	idx := make([]int, all.Len())
	for i := range idx {
		idx[i] = i
	}
	return all.Subset(idx[:suiteTrain]), all.Subset(idx[suiteTrain:]), "synthetic images (data.Synthetic 7×7 blobs upsampled to 28×28; Fashion-MNIST is not installed)"
}

// syntheticImages turns data.Synthetic's Gaussian blobs into 28×28 8-bit images a CNN
// can learn in one epoch: blobs drawn at 7×7 (where the class centres stand out of
// the noise) with each feature spread over a 4×4 block. Blobs drawn at 28×28 directly
// hide the class in per-pixel differences that the CNN's pooling averages away.
func syntheticImages(t *testing.T, n int, seed uint64) *data.Dataset {
	blobs := data.Synthetic(n, 10, tensor.Shape{1, 7, 7}, seed)
	im := &data.Images{N: n, Rows: 28, Cols: 28, Pixels: make([]uint8, n*28*28)}
	lab := &data.Labels{N: n, Values: make([]uint8, n)}
	for i := range n {
		x, y := blobs.Example(i)
		lab.Values[i] = uint8(y)
		px := im.Image(i)
		for r := range 28 {
			for c := range 28 {
				v := 128 + 40*float64(x[(r/4)*7+c/4])
				px[r*28+c] = uint8(min(max(v, 0), 255))
			}
		}
	}
	ds, err := data.FromIDX(im, lab)
	require.NoError(t, err)
	return ds
}

type gradFaultSpec struct {
	step  int
	param int
	value float64
}

// pickFaults draws n fault steps in [5, steps-10), at least 3 apart, each on a random
// parameter with +Inf or NaN.
func pickFaults(seed uint64, n, steps, params int) []gradFaultSpec {
	rng := rand.New(rand.NewPCG(seed, 0xfa17))
	used := map[int]bool{}
	var out []gradFaultSpec
	for len(out) < n {
		s := 5 + rng.IntN(steps-15)
		if used[s-2] || used[s-1] || used[s] || used[s+1] || used[s+2] {
			continue
		}
		used[s] = true
		v := math.Inf(1)
		if rng.IntN(2) == 0 {
			v = math.NaN()
		}
		out = append(out, gradFaultSpec{step: s, param: rng.IntN(params), value: v})
	}
	return out
}

type fashionRun struct {
	results  []amp.Result
	accuracy float64
	report   Report
	params   []*nn.Param
}

// runFashion trains the CNN for one epoch with faults armed, checking every faulted
// step as it goes, and returns the results and the test accuracy.
func runFashion(t *testing.T, train, test *data.Dataset, faults []gradFaultSpec) fashionRun {
	model := models.FashionCNN(models.CNNConfig{}, nn.Seeded(1))
	params := model.Params()
	w := Watch(model)
	defer w.Close()
	faultAt := map[int]bool{}
	for _, f := range faults {
		w.InjectGrad(params[f.param], []int{f.step}, f.value)
		faultAt[f.step] = true
	}
	opt, err := optim.NewAdamW(params, optim.AdamWConfig{LR: suiteLR, WeightDecay: 1e-4})
	require.NoError(t, err)
	loss := func(out, y *tensor.Tensor) *tensor.Tensor { return tensor.CrossEntropy(out, y, 0) }
	tr, err := amp.NewTrainer(w.Model(), opt, loss, tensor.CPU, amp.Config{Level: amp.O1, Low: tensor.Float16, Scaler: scaler.DefaultConfig()})
	require.NoError(t, err)
	tr.Gen.Seed(1)
	// The main job's cosine schedule; a skipped step does not advance it.
	sched, err := optim.NewScheduler(opt, optim.CosineAnnealing{TMax: int64(train.Len() / suiteBatch)})
	require.NoError(t, err)
	tr.Sched = sched
	loader, err := data.NewLoader(train, data.LoaderOptions{BatchSize: suiteBatch, Shuffle: true, Seed: 1, DropLast: true, Shape: data.ShapeImage})
	require.NoError(t, err)

	var run fashionRun
	run.params = params
	it := loader.Epoch(0)
	for it.Next() {
		x, y := it.Batch().Tensors()
		step := len(run.results)
		var before *Snapshot
		if faultAt[step] {
			before = SnapshotTraining(model, opt, tr.Scaler)
		}
		r, err := tr.Step([]*tensor.Tensor{x}, []*tensor.Tensor{y})
		x.Release()
		y.Release()
		require.NoError(t, err)
		w.Record(r)
		run.results = append(run.results, r)
		if before != nil {
			after := SnapshotTraining(model, opt, tr.Scaler)
			require.True(t, r.Skipped, "faulted step %d was not skipped", step)
			AssertUnchanged(t, before, after, ExceptRunningStats())
			AssertScaleBackedOff(t, before.Scaler.Scale, after.Scaler.Scale)
		}
	}
	require.NoError(t, it.Err())
	it.Close()
	run.report = w.Report()
	w.Close() // evaluation is not part of the report

	eval, err := data.NewLoader(test, data.LoaderOptions{BatchSize: 500, Shape: data.ShapeImage})
	require.NoError(t, err)
	correct, total := 0, 0
	it = eval.Epoch(0)
	for it.Next() {
		x, y := it.Batch().Tensors()
		out := tr.Evaluate(x)
		pred, labels := out.ArgMax(1).Int64s(), y.Int64s()
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
	require.NoError(t, it.Err())
	it.Close()
	run.accuracy = float64(correct) / float64(total)
	return run
}

func skippedSteps(rs []amp.Result) []int {
	var out []int
	for i, r := range rs {
		if r.Skipped {
			out = append(out, i)
		}
	}
	return out
}

func TestFashionCNNSurvivesInjectedFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the Fashion-MNIST CNN twice")
	}
	train, test, source := fashionData(t)
	t.Logf("data: %s (%d train / %d test, batch %d, 1 epoch, float16 O1)", source, train.Len(), test.Len(), suiteBatch)
	steps := train.Len() / suiteBatch

	start := time.Now()
	clean := runFashion(t, train, test, nil)
	t.Logf("clean run: %d steps in %v, skipped %v, accuracy %.4f, final scale %g",
		steps, time.Since(start).Round(time.Millisecond), skippedSteps(clean.results), clean.accuracy, clean.results[steps-1].Scale)
	require.Len(t, clean.results, steps)

	faults := pickFaults(11, suiteFaults, steps, len(clean.params))
	start = time.Now()
	faulty := runFashion(t, train, test, faults)
	t.Logf("faulted run: faults %v, skipped %v, accuracy %.4f, final scale %g (%v)",
		describe(faults, faulty.params), skippedSteps(faulty.results), faulty.accuracy, faulty.results[steps-1].Scale, time.Since(start).Round(time.Millisecond))

	// Every faulted step was skipped, and the harness names the faulted parameter as
	// the step's first non-finite value.
	last := 0
	firstOf := map[int]Event{}
	for _, ev := range faulty.report.NonFiniteSteps {
		firstOf[ev.Step] = ev
	}
	for _, f := range faults {
		require.True(t, faulty.results[f.step].Skipped, "step %d", f.step)
		p := faulty.params[f.param]
		k := gradKey(p.Name)
		ev := firstOf[f.step]
		require.Contains(t, []string{"Conv2d", "BatchNorm2d", "Linear"}, ev.ModuleType, "the module's type names what ran at path %q", k.module)
		require.Equal(t, Event{Module: k.module, ModuleType: ev.ModuleType, Op: k.op, Pass: PassBackward, Step: f.step}, ev)
		last = max(last, f.step)
	}
	require.Subset(t, skippedSteps(faulty.results), stepsOf(faults))
	AssertRecovers(t, faulty.results, last, suiteRecover)

	// Skipping the faulted steps costs at most a point of test accuracy.
	require.InDelta(t, clean.accuracy, faulty.accuracy, 0.01, "accuracy with faults %.4f, without %.4f", faulty.accuracy, clean.accuracy)
	require.Greater(t, clean.accuracy, 0.6, "the clean run learned")
}

func stepsOf(fs []gradFaultSpec) []int {
	var out []int
	for _, f := range fs {
		out = append(out, f.step)
	}
	return out
}

func describe(fs []gradFaultSpec, params []*nn.Param) []string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s@%d=%g", params[f.param].Name, f.step, f.value))
	}
	return out
}
