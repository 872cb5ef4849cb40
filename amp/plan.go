package amp

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// PlanConfig says what Plan may choose from and how much memory it has.
type PlanConfig struct {
	// Build makes a fresh trainer — model (with its layer chain checkpointed in segments
	// pieces when segments > 0), optimizer and Trainer — on the device to plan for.
	// Plan calls it once per checkpointing choice, takes a few real steps and frees
	// what it built (model parameters and buffers, and the optimizer's state through
	// its Release method when it has one).
	Build func(segments int) (*Trainer, error)
	// Batch is the effective batch: examples per optimizer step.
	Batch int
	// Budget is the memory the run may use, in bytes; 0 means what the device has free
	// (its limit or total less what is allocated now).
	Budget int64
	// Margin is the fraction of Budget kept free (default 0.1): the plan's predicted
	// peak is at most (1-Margin)·Budget.
	Margin float64
	// Segments lists checkpoint segment counts to weigh besides no checkpointing.
	Segments []int
	// MaxAccum bounds the accumulation steps (default: Batch, micro-batches of 1).
	MaxAccum int
}

// Candidate is one configuration Plan weighed.
type Candidate struct {
	Micro, Accum, Segments int
	// PredictedPeak is the device memory the run would hold at its peak (model,
	// optimizer state and the step's activations, gradients and temporaries), from the
	// fitted line of the measured peaks. It counts the blocks in use at their allocated
	// size (backend.MemoryStats.PeakActive: the requested bytes plus the allocator's
	// rounding), since that is what a memory cap has to hold; backends that do not
	// report Active are measured by PeakAllocated.
	PredictedPeak int64
	// TimePerExample is predicted from the fitted line of the measured step times.
	TimePerExample time.Duration
	Fits           bool
}

// PlanResult is Plan's choice, the candidates it weighed and what it measured.
type PlanResult struct {
	Best       Candidate
	Candidates []Candidate
	Budget     int64
	Margin     float64
	// Measured holds, per checkpointing choice, the measured micro-batch sizes, peaks
	// and step times the lines were fitted to.
	Measured []PlanPoint
}

// PlanPoint is one measured step.
type PlanPoint struct {
	Segments, Micro int
	Peak            int64
	Time            time.Duration
}

// ErrNoPlan is wrapped by Plan's error when no candidate fits the budget.
var ErrNoPlan = errors.New("amp: no configuration fits the memory budget")

// Plan finds the fastest configuration — micro-batch, accumulation steps, checkpoint
// segments — that trains cfg.Batch examples per step within the memory budget. For
// each checkpointing choice it builds a trainer, takes real steps at two micro-batch
// sizes (examples from x and y, whose first dimension must hold at least the larger),
// reads the allocator's peak and the step time of each, fits a line per example
// through both (what a micro-batch costs in activations is proportional to its size),
// and predicts every candidate from the lines. The trainers it builds are freed.
//
// A measurement that runs out of memory is not an error: the budget is tight, and the
// smaller sizes tell. ErrNoPlan is returned (wrapped) when nothing fits.
func Plan(x, y *tensor.Tensor, cfg PlanConfig) (*PlanResult, error) {
	if cfg.Build == nil {
		return nil, fmt.Errorf("amp: Plan: PlanConfig.Build is nil; give a function that builds the trainer")
	}
	if cfg.Batch < 1 {
		return nil, fmt.Errorf("amp: Plan: Batch must be ≥ 1, got %d", cfg.Batch)
	}
	if cfg.Margin == 0 {
		cfg.Margin = 0.1
	}
	if cfg.Margin < 0 || cfg.Margin >= 1 {
		return nil, fmt.Errorf("amp: Plan: Margin must be in [0, 1), got %g", cfg.Margin)
	}
	if cfg.MaxAccum <= 0 || cfg.MaxAccum > cfg.Batch {
		cfg.MaxAccum = cfg.Batch
	}
	if x.Dim() == 0 || y.Dim() == 0 || x.Shape()[0] != y.Shape()[0] {
		return nil, fmt.Errorf("amp: Plan: the sample batch needs examples along the first dimension of x and y, got %v and %v", x.Shape(), y.Shape())
	}
	// The two sizes measured: small enough to fit where the plan is needed, large
	// enough that activations outweigh noise.
	have := x.Shape()[0]
	m2 := min(have, max(2, cfg.Batch/4))
	m1 := max(1, m2/2)
	if m1 == m2 {
		return nil, fmt.Errorf("amp: Plan: the sample batch has %d example(s); give at least 2", have)
	}
	res := &PlanResult{Margin: cfg.Margin}
	segs := append([]int{0}, cfg.Segments...)
	type line struct{ peak0, peakPer, time0, timePer, grads float64 }
	lines := map[int]line{}
	for _, s := range slices.Compact(segs) {
		pts, budget, grads, err := measure(x, y, cfg, s, []int{m1, m2})
		if err != nil {
			return nil, err
		}
		if res.Budget == 0 {
			res.Budget = budget
		}
		res.Measured = append(res.Measured, pts...)
		if len(pts) < 2 {
			continue // the larger size did not fit: no line to draw for this choice
		}
		a, b := pts[0], pts[1]
		dm := float64(b.Micro - a.Micro)
		l := line{peakPer: float64(b.Peak-a.Peak) / dm, timePer: float64(b.Time-a.Time) / dm, grads: float64(grads)}
		l.peak0 = float64(a.Peak) - l.peakPer*float64(a.Micro)
		l.time0 = math.Max(0, float64(a.Time)-l.timePer*float64(a.Micro))
		l.timePer = math.Max(l.timePer, 0)
		lines[s] = l
	}
	limit := int64(float64(res.Budget) * (1 - cfg.Margin))
	for _, s := range slices.Compact(segs) {
		l, ok := lines[s]
		if !ok {
			continue
		}
		for accum := 1; accum <= cfg.MaxAccum; accum++ {
			if cfg.Batch%accum != 0 {
				continue
			}
			m := cfg.Batch / accum
			peak := l.peak0 + l.peakPer*float64(m)
			if accum > 1 {
				// Accumulating, a micro-batch's backward adds its gradients into the ones
				// kept from the micro-batches before: one more set is alive.
				peak += l.grads
			}
			c := Candidate{Micro: m, Accum: accum, Segments: s,
				PredictedPeak:  int64(peak),
				TimePerExample: time.Duration((l.time0 + l.timePer*float64(m)) / float64(m)),
			}
			c.Fits = c.PredictedPeak <= limit
			res.Candidates = append(res.Candidates, c)
		}
	}
	best := -1
	for i, c := range res.Candidates {
		if c.Fits && (best < 0 || c.TimePerExample < res.Candidates[best].TimePerExample) {
			best = i
		}
	}
	if best < 0 {
		return res, fmt.Errorf("%w: %d bytes (%.0f%% margin kept free) for a batch of %d; lower the batch, allow checkpointing or a lower-memory opt level", ErrNoPlan, res.Budget, 100*cfg.Margin, cfg.Batch)
	}
	res.Best = res.Candidates[best]
	return res, nil
}

// measure builds a trainer with s checkpoint segments and takes three steps at each
// micro-batch size (the first makes the optimizer state; the others are measured), until a
// size runs out of memory. It returns the points, the budget and the bytes of one set
// of gradients.
func measure(x, y *tensor.Tensor, cfg PlanConfig, s int, sizes []int) (pts []PlanPoint, budget, grads int64, err error) {
	dev := x.Device()
	b, err := backend.Get(dev)
	if err != nil {
		return nil, 0, 0, err
	}
	b.EmptyCache()
	base := inUse(b.MemoryStats())
	budget = cfg.Budget
	if budget == 0 {
		st := b.MemoryStats()
		if st.Limit <= 0 {
			return nil, 0, 0, fmt.Errorf("amp: Plan: %v reports no memory limit or total; set PlanConfig.Budget (on the CPU: GAMP_CPU_MEMORY_LIMIT or SetMemoryLimit)", dev)
		}
		budget = st.Limit - base
	}
	var tr *Trainer
	oom := tensor.CatchOOM(func() { tr, err = cfg.Build(s) })
	if oom != nil {
		return nil, budget, 0, nil // the model itself does not fit: nothing to measure
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("amp: Plan: building the trainer (%d checkpoint segments): %w", s, err)
	}
	defer freeTrainer(tr)
	saved := tr.cfg.Accum
	tr.cfg.Accum = 1
	defer func() { tr.cfg.Accum = saved }()
	for _, p := range tr.Model.Params() {
		grads += int64(p.T.Numel() * p.T.DType().Size())
	}
	for _, m := range sizes {
		var p PlanPoint
		ok := true
		// The first step makes the optimizer state and warms the caches; the peak and the
		// fastest time of the two after it are measured.
		for rep := range 3 {
			xs, ys := x.Narrow(0, 0, m), y.Narrow(0, 0, m)
			b.ResetPeak()
			start := time.Now()
			_, err := tr.step([]*tensor.Tensor{xs}, []*tensor.Tensor{ys})
			el := time.Since(start)
			xs.Release()
			ys.Release()
			if err != nil {
				if errors.Is(err, tensor.ErrOutOfMemory) {
					ok = false
					break
				}
				return nil, 0, 0, fmt.Errorf("amp: Plan: a step of %d examples: %w", m, err)
			}
			if rep > 0 {
				pk := peakInUse(b.MemoryStats()) - base
				if rep == 1 || el < p.Time {
					p.Time = el
				}
				p.Segments, p.Micro, p.Peak = s, m, max(p.Peak, pk)
			}
		}
		if !ok {
			break
		}
		pts = append(pts, p)
	}
	return pts, budget, grads, nil
}

// inUse is what a memory cap must hold of st now: the blocks in use at their size
// (Active) where the backend reports it, else the requested bytes.
func inUse(st backend.MemoryStats) int64 {
	if st.PeakActive > 0 {
		return st.Active
	}
	return st.Allocated
}

// peakInUse is inUse's peak.
func peakInUse(st backend.MemoryStats) int64 {
	if st.PeakActive > 0 {
		return st.PeakActive
	}
	return st.PeakAllocated
}

// freeTrainer releases what Build made: the model's parameters and buffers and the
// optimizer's state.
func freeTrainer(tr *Trainer) {
	tr.Opt.ZeroGrad()
	if r, ok := tr.Opt.(interface{ Release() }); ok {
		r.Release()
	}
	for _, p := range nn.State(tr.Model) {
		p.T.Release()
	}
}

// Report prints the budget, the measured steps and every candidate, the chosen one
// marked.
func (r *PlanResult) Report(w io.Writer) {
	fmt.Fprintf(w, "plan: budget %s, %.0f%% kept free (usable %s)\n", bytesStr(r.Budget), 100*r.Margin, bytesStr(int64(float64(r.Budget)*(1-r.Margin))))
	for _, p := range r.Measured {
		fmt.Fprintf(w, "  measured: %d checkpoint segments, micro-batch %d: peak %s, step %v\n", p.Segments, p.Micro, bytesStr(p.Peak), p.Time.Round(time.Microsecond))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tmicro\taccum\tsegments\tpredicted peak\tµs/example\tfits\t")
	for _, c := range r.Candidates {
		mark := ""
		if c == r.Best {
			mark = "→"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%.1f\t%v\t\n", mark, c.Micro, c.Accum, c.Segments, bytesStr(c.PredictedPeak), float64(c.TimePerExample)/1e3, c.Fits)
	}
	tw.Flush()
}

func bytesStr(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
