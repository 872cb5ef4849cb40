package overflow

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gamp-ml/gamp/amp"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// Pass says what a record measures: an op's output (forward) or the gradients the op
// sends to its inputs (backward).
type Pass string

// The passes.
const (
	PassForward  Pass = "forward"
	PassBackward Pass = "backward"
)

// Outside is the module path of ops that run outside the watched model: the loss, the
// scaler's multiplication.
const Outside = "(outside)"

// accumulateGrad names the pseudo-op of a parameter's gradient arriving at the
// parameter (PyTorch's AccumulateGrad node), e.g. "accumulate_grad(weight)".
func accumulateGrad(local string) string { return "accumulate_grad(" + local + ")" }

type rowKey struct {
	module, op string
	pass       Pass
}

// acc accumulates the measurements of one (module, op, pass) over calls and steps.
type acc struct {
	key     rowKey
	order   int // creation order, for stable sorting
	calls   int64
	st      stats
	badSeq  uint64 // execution position of its first non-finite value (0: none yet)
	badStep int
	bwd     *acc // a forward row's backward row, made when backward first reaches it
}

// paramWatch is the Watcher's gradient hook on one parameter.
type paramWatch struct {
	t      *tensor.Tensor // the tensor the hook is registered on
	key    rowKey
	faults []*gradFault
}

type gradFault struct {
	steps   stepSet
	apply   func(g *tensor.Tensor)
	removed bool
}

// stepSet is a set of steps; nil means every step.
type stepSet map[int]bool

func newStepSet(steps []int) stepSet {
	if steps == nil {
		return nil
	}
	s := stepSet{}
	for _, n := range steps {
		s[n] = true
	}
	return s
}

func (s stepSet) has(n int) bool { return s == nil || s[n] }

// Watcher records, for every op a watched model runs, forward and backward, how close
// its values come to the float16 limits: the largest finite |x|, the Inf and NaN
// counts, and the fractions that would overflow (|x| > 65504), flush to zero
// (0 < |x| < 2^-24) or turn subnormal (2^-24 ≤ |x| < 2^-14) in float16. Rows are keyed
// by module path, op name and pass; backward rows carry the module path the op had in
// forward. It also remembers the first op, in execution order, that produced an Inf or
// NaN.
//
// A Watcher is a tensor.Observer. Watch registers forward hooks on every module of the
// model to follow the current module path, and the hooks bind the model's input into a
// Context observed by the Watcher, so calling the model through nn.Call (or calling
// Model()'s Forward, which amp.Trainer does) is enough; Context attaches it to a
// Context explicitly. A Watcher follows one training loop: its module stack assumes one
// forward at a time.
type Watcher struct {
	model nn.Module

	mu        sync.Mutex
	paths     map[nn.Module]string
	types     map[string]string // module path → module type, for the report
	stack     []string
	step      int
	seq       uint64
	rows      map[rowKey]*acc
	first     *Event
	perStep   []Event
	badSteps  map[int]bool
	seenSteps map[int]bool
	recorded  int
	skipped   []int
	params    map[*nn.Param]*paramWatch
	removes   []func()
	closed    bool
	sc        scratch
}

// Watch starts watching model (the root of the module tree: paths are relative to it,
// parameter names too). Watch after moving or casting the model (nn.To, amp.Prepare):
// the gradient hooks live on the parameter tensors those replace. Close stops it.
func Watch(model nn.Module) *Watcher {
	w := &Watcher{
		model: model, paths: map[nn.Module]string{}, types: map[string]string{}, rows: map[rowKey]*acc{},
		badSteps: map[int]bool{}, seenSteps: map[int]bool{}, params: map[*nn.Param]*paramWatch{},
	}
	w.paths[nn.Hooked(model)] = ""
	nn.Walk(model, func(path string, m nn.Module) {
		w.paths[m] = path
		w.types[path] = moduleType(m)
		w.removes = append(w.removes,
			nn.RegisterForwardPreHook(m, func(_ nn.Module, in *tensor.Tensor) *tensor.Tensor { return w.enter(path, in) }),
			nn.RegisterForwardHook(m, func(nn.Module, *tensor.Tensor, *tensor.Tensor) *tensor.Tensor { w.leave(path); return nil }))
	})
	for _, p := range model.Params() {
		w.watchParam(p)
	}
	return w
}

// Model returns the watched model as a Module whose Forward runs the hooks (nn.Hooked):
// hand it to amp.NewTrainer, which calls Forward directly.
func (w *Watcher) Model() nn.Module { return nn.Hooked(w.model) }

// Context returns a Context derived from ctx whose ops the Watcher observes (next to
// ctx's own Observer, if any), for loops that run ops outside the model's hooks.
func (w *Watcher) Context(ctx *tensor.Context) *tensor.Context {
	obs := ctx.Observer()
	switch {
	case w.observes(obs):
		return ctx
	case obs == nil:
		return ctx.WithObserver(w)
	}
	return ctx.WithObserver(tee{obs, w})
}

// observes reports whether o is w or a tee that includes w.
func (w *Watcher) observes(o tensor.Observer) bool {
	switch o := o.(type) {
	case *Watcher:
		return o == w
	case tee:
		return w.observes(o.a) || w.observes(o.b)
	}
	return false
}

// SetStep sets the step the next records belong to (and that faults count).
func (w *Watcher) SetStep(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.step = n
	w.stack = w.stack[:0]
}

// Step returns the current step.
func (w *Watcher) Step() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.step
}

// Record notes the result of the current step (whether the scaler skipped it) and
// moves to the next step. A loop that calls Record after every amp.Trainer.Step needs
// no SetStep: steps count from 0.
func (w *Watcher) Record(r amp.Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recorded++
	if r.Skipped {
		w.skipped = append(w.skipped, w.step)
	}
	w.step++
	w.stack = w.stack[:0]
}

// Close removes the Watcher's hooks and faults; it records nothing afterwards.
// Closing twice is a no-op.
func (w *Watcher) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	removes := w.removes
	w.removes = nil
	w.mu.Unlock()
	for _, r := range removes {
		r()
	}
}

// pathOf returns the path of a module of the watched model.
func (w *Watcher) pathOf(m nn.Module) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.paths[m]
	if !ok {
		panic(fmt.Sprintf("overflow: the %T is not a module of the watched model", m))
	}
	return p
}

// enter is every module's pre-hook: it pushes the module path and, when the input is
// not observed yet, rebinds it into a Context the Watcher observes.
func (w *Watcher) enter(path string, in *tensor.Tensor) *tensor.Tensor {
	w.mu.Lock()
	closed := w.closed
	if !closed {
		w.stack = append(w.stack, path)
	}
	w.mu.Unlock()
	if closed || in == nil {
		return nil
	}
	c := in.Context()
	if c == nil || w.observes(c.Observer()) {
		return nil
	}
	return w.Context(c).Bind(in)
}

// leave is every module's post-hook: it pops the module path (and whatever a panic
// left above it).
func (w *Watcher) leave(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.stack) - 1; i >= 0; i-- {
		if w.stack[i] == path {
			w.stack = w.stack[:i]
			return
		}
	}
}

func (w *Watcher) current() string {
	if len(w.stack) == 0 {
		return Outside
	}
	return w.stack[len(w.stack)-1]
}

// row returns the accumulator of key, creating it.
func (w *Watcher) row(key rowKey) *acc {
	a := w.rows[key]
	if a == nil {
		a = &acc{key: key, order: len(w.rows)}
		w.rows[key] = a
	}
	return a
}

// note adds one measurement to a and tracks the first non-finite value.
func (w *Watcher) note(a *acc, s *stats) {
	w.seq++
	w.seenSteps[w.step] = true
	a.calls++
	a.st.add(s)
	if s.nonFinite() == 0 {
		return
	}
	if a.badSeq == 0 {
		a.badSeq, a.badStep = w.seq, w.step
	}
	ev := Event{Module: a.key.module, ModuleType: w.types[a.key.module], Op: a.key.op, Pass: a.key.pass, Step: w.step}
	if w.first == nil {
		w.first = &ev
	}
	if !w.badSteps[w.step] {
		w.badSteps[w.step] = true
		w.perStep = append(w.perStep, ev)
	}
}

// Begin implements tensor.Observer.
func (w *Watcher) Begin(*tensor.Context, *tensor.Op) {}

// Forward implements tensor.Observer: it measures the op's output.
func (w *Watcher) Forward(c *tensor.Context, op *tensor.Op, ins []*tensor.Tensor, out *tensor.Tensor) any {
	if op.Name() == "bind" {
		return nil // a view of a tensor already measured
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	a := w.row(rowKey{w.current(), op.Name(), PassForward})
	s := w.sc.measure(out)
	w.note(a, &s)
	return a
}

// Backward implements tensor.Observer: it measures the gradients the op sends to its
// inputs, under the module path the op ran in during forward.
func (w *Watcher) Backward(op *tensor.Op, tag any, gradOut *tensor.Tensor, gradIn []*tensor.Tensor, took time.Duration) {
	a, ok := tag.(*acc)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if a.bwd == nil {
		a.bwd = w.row(rowKey{a.key.module, a.key.op, PassBackward})
	}
	var s stats
	for _, g := range gradIn {
		gs := w.sc.measure(g)
		s.add(&gs)
	}
	w.note(a.bwd, &s)
}

// watchParam registers the Watcher's gradient hook on p's tensor (again, if the tensor
// was replaced since). The caller holds w.mu or owns w exclusively.
func (w *Watcher) watchParam(p *nn.Param) *paramWatch {
	pw := w.params[p]
	if pw != nil && pw.t == p.T {
		return pw
	}
	if pw == nil {
		pw = &paramWatch{key: gradKey(p.Name)}
		w.params[p] = pw
	}
	t := p.T
	pw.t = t
	t.RegisterHook(func(g *tensor.Tensor) *tensor.Tensor {
		w.onGrad(pw, t, g)
		return nil
	})
	return pw
}

// gradKey is the row of the gradient arriving at the parameter named name: its module
// path and "accumulate_grad(<local name>)".
func gradKey(name string) rowKey {
	module, local := "", name // a dotless name belongs to the root
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		module, local = name[:i], name[i+1:]
	}
	return rowKey{module, accumulateGrad(local), PassBackward}
}

// onGrad is a parameter's gradient hook: it applies the faults due at this step, then
// measures the gradient about to be accumulated.
func (w *Watcher) onGrad(pw *paramWatch, t, g *tensor.Tensor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || pw.t != t {
		return
	}
	for _, f := range pw.faults {
		if !f.removed && f.steps.has(w.step) {
			f.apply(g)
		}
	}
	s := w.sc.measure(g)
	w.note(w.row(pw.key), &s)
}

// tee lets the Watcher observe a Context that already has an Observer (the profiler).
type tee struct{ a, b tensor.Observer }

type teeTag struct{ a, b any }

func (t tee) Begin(c *tensor.Context, op *tensor.Op) { t.a.Begin(c, op); t.b.Begin(c, op) }

func (t tee) Forward(c *tensor.Context, op *tensor.Op, ins []*tensor.Tensor, out *tensor.Tensor) any {
	return teeTag{t.a.Forward(c, op, ins, out), t.b.Forward(c, op, ins, out)}
}

func (t tee) Backward(op *tensor.Op, tag any, g *tensor.Tensor, gin []*tensor.Tensor, took time.Duration) {
	tt, _ := tag.(teeTag)
	t.a.Backward(op, tt.a, g, gin, took)
	t.b.Backward(op, tt.b, g, gin, took)
}
