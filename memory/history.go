package memory

import (
	"fmt"
	"strings"
	"sync"

	"github.com/gamp-ml/gamp/tensor"
)

// HistoryOptions configures a HistoryDetector.
type HistoryOptions struct {
	// Steps is how many consecutive observations of strictly growing graph size
	// make a warning (default 3, at least 2): sizes 4 < 9 < 14 over three steps.
	Steps int
}

// HistoryDetector catches the classic accumulation bug: a tensor kept across steps
// that still carries its autograd history, so every step's graph (and on PyTorch every
// step's activations) stays alive:
//
//	total = tensor.Add(total, loss) // wrong: total remembers every step's graph
//	total += loss.Item()            // right: a number, no history
//
// Call Observe once a step with the tensors the loop keeps across steps; it measures
// the autograd graph reachable from each (tensor.GraphSize) and warns when one keeps
// growing. A HistoryDetector is safe for concurrent use.
type HistoryDetector struct {
	steps int
	mu    sync.Mutex
	runs  [][]int // per position: the current run of strictly growing sizes
	// warned marks positions already warned about in their current run.
	warned []bool
}

// NewHistoryDetector returns a detector with opts (zero value: defaults).
func NewHistoryDetector(opts HistoryOptions) *HistoryDetector {
	n := opts.Steps
	if n == 0 {
		n = 3
	}
	n = max(n, 2)
	return &HistoryDetector{steps: n}
}

// Warning says which kept tensor's history grows and where it was created.
type Warning struct {
	// Step is the step Observe was called with when the warning fired.
	Step int
	// Index is the tensor's position among Observe's arguments.
	Index int
	// Sizes are the graph sizes (autograd nodes) over the growing steps, oldest first.
	Sizes []int
	// Origin is the source line that created the tensor ("" when debug tracking is
	// off; see tensor.SetDebugTracking).
	Origin string
}

func (w *Warning) String() string {
	sizes := make([]string, len(w.Sizes))
	for i, s := range w.Sizes {
		sizes[i] = fmt.Sprint(s)
	}
	where := "turn on tensor.SetDebugTracking(true) to see the line that creates it"
	if w.Origin != "" {
		where = "it is created at " + w.Origin
	}
	return fmt.Sprintf("memory: step %d: the autograd graph kept by tensor #%d grew for %d steps (%s nodes): "+
		"a tensor kept across steps still carries each step's history, as `total = total + loss` does; "+
		"accumulate loss.Item() or loss.Detach() instead; %s",
		w.Step, w.Index, len(w.Sizes), strings.Join(sizes, " → "), where)
}

// Observe records the graph size reachable from each of ts (by position: pass the
// same kept tensors in the same order every step) and returns a warning the first time
// one has grown at Steps consecutive observations, or nil. A position warns again
// only after its growth stopped and started over. A nil or released tensor counts as
// no graph.
func (d *HistoryDetector) Observe(step int, ts ...*tensor.Tensor) *Warning {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.runs) < len(ts) {
		d.runs = append(d.runs, nil)
		d.warned = append(d.warned, false)
	}
	var out *Warning
	for i, t := range ts {
		size := 0
		if t != nil && !t.Released() {
			size = t.GraphSize()
		}
		run := d.runs[i]
		if len(run) > 0 && size > run[len(run)-1] {
			run = append(run, size)
			if len(run) > d.steps {
				run = run[len(run)-d.steps:]
			}
		} else {
			run = append(run[:0], size)
			d.warned[i] = false
		}
		d.runs[i] = run
		if len(run) >= d.steps && !d.warned[i] && out == nil {
			d.warned[i] = true
			out = &Warning{Step: step, Index: i, Sizes: append([]int(nil), run...), Origin: t.Origin()}
		}
	}
	return out
}
