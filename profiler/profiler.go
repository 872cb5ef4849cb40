package profiler

import (
	"sort"
	"sync"
	"time"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/tensor"
)

// Pass says whether a record is an op's forward or its backward.
type Pass uint8

// The passes.
const (
	Forward Pass = iota
	Backward
)

func (p Pass) String() string {
	if p == Backward {
		return "backward"
	}
	return "forward"
}

// Record is one op application seen by a Profiler.
type Record struct {
	Op   string
	Pass Pass
	// Device holds the op's output (forward) or its incoming gradient (backward).
	Device tensor.Device
	// InDTypes and InShapes describe the inputs as the op computed with them (after
	// autocast) for a forward record — Invalid and nil for an absent optional input —
	// and the incoming gradient for a backward record.
	InDTypes []tensor.DType
	InShapes []tensor.Shape
	// OutDType is the output's dtype (forward) or the first input gradient's
	// (backward; Invalid when the op sent no gradient).
	OutDType tensor.DType
	// OutShape is the output's shape (forward records; nil for backward ones).
	OutShape tensor.Shape
	// FLOPs counts the floating-point operations of the op's products, 2 per
	// multiply-add, estimated from the shapes (as torch.profiler's with_flops): for
	// linear (and linear_relu, linear_gelu), matmul, conv2d, self_attention and
	// scaled_dot_product_attention, forward and backward (one more product of the
	// forward's size for each operand that gets a gradient; the fused attention's
	// backward recomputes its scores). Attention counts every score, masked or not.
	// The forward ops a checkpointed segment runs again in backward are records of
	// their own and count again: the work done, not the model's. Zero for every other
	// op, and for a backward whose forward was not recorded. Row.GFLOPS sets it
	// against the op's time.
	FLOPs int64
	// Start is the time since the clock's origin; Dur the op's duration including
	// the ops nested in it, and Self the duration without them.
	Start, Dur, Self time.Duration
	// Depth is the nesting level (0: not inside another op) and Lane the row of the
	// trace the record is drawn in: ops that overlap in time without nesting (two
	// goroutines sharing one profiler) go to different lanes.
	Depth, Lane int
	// Bytes allocated: for a forward record, the growth of the device's
	// TotalAllocated between Begin and Forward (everything the op allocated,
	// temporaries included); for a backward record, the size of the gradients it
	// returned. An unmatched record counts its output.
	Bytes int64
	// Unmatched marks a Forward that had no Begin of its own (an autocast cast made
	// inside another op's preparation): a zero-length event at the time of its Forward.
	Unmatched bool
	// ForwardIndex is, for a backward record, the index of the forward record of the
	// same op application in Records (-1: not recorded, e.g. before a Reset).
	ForwardIndex int
}

// DType is the dtype the op ran in: the output's for a forward record, the incoming
// gradient's for a backward one.
func (r Record) DType() tensor.DType {
	if r.Pass == Backward && len(r.InDTypes) > 0 {
		return r.InDTypes[0]
	}
	return r.OutDType
}

// Profiler records every op of the Contexts it observes: attach it with
// tensor.UseObserver(p) or Context.WithObserver(p), or make a Context with
// p.Context(). It implements tensor.Observer and is safe for concurrent use; give each
// goroutine its own Profiler to keep their records apart.
//
// Forward timing. Begin and Forward calls nest: an op that runs other ops inside it
// (a custom op, a checkpointed segment) sees their Begin/Forward pairs between its own.
// Each Forward is matched with the most recent open Begin of the same op in the same
// Context; Begins above it that never got their Forward are dropped (an op that
// panicked, or one that reports no Forward). Some Forwards have no Begin of their own
// — the casts autocast makes while preparing another op's inputs — and are recorded as
// zero-length events (Unmatched) nested in the op that made them. A Begin is timed on
// the device of the previous output (the default device at first); Bytes falls back to
// the output's size when the op's output is on another device.
//
// Each autograd node's backward is one record, timed like an op between two marks of
// the clock: one at StartBackward (tensor.BackwardStarter), just before the node runs,
// and one when Backward reports it — device events on a GPU, so a record is the node's
// kernels as the device ran them, not the host time spent queueing them. A backward
// whose forward the profiler did not record falls back to the engine's host time.
//
// Bytes and concurrency: TotalAllocated is per device, so allocations by other
// goroutines on the same device during an op are counted in it too.
type Profiler struct {
	clock    Clock
	ownClock bool // New made clock: Close closes it

	mu       sync.Mutex
	on       bool
	gen      uint64
	recs     []raw
	bstart   map[int]Stamp // StartBackward's stamps by forward record, until Backward
	states   map[*tensor.Context]*ctxState
	tick     uint64
	lastDev  tensor.Device
	backends map[tensor.Device]backend.Backend
}

// raw is a record with its times still as stamps.
type raw struct {
	Record
	start, end Stamp
	took       time.Duration
	timed      bool // a backward record whose start is a stamp (StartBackward), not end − took
}

type entry struct {
	op     *tensor.Op
	dev    tensor.Device
	start  Stamp
	total0 int64
	ok     bool // total0 was read
}

// ctxState holds one Context's open Begins.
type ctxState struct {
	stack []entry
	last  uint64
}

// Limits that keep a profiler bounded when Begins never get their Forward.
const (
	maxOpen   = 256 // open Begins per Context
	maxStates = 64  // Contexts with open Begins
)

// fwdTag is what Forward returns; Backward gets it back from the autograd node.
type fwdTag struct {
	p   *Profiler
	gen uint64
	idx int
}

// Option configures a Profiler.
type Option func(*Profiler)

// WithClock sets the timing source (default: a DeviceClock started by New, which times
// GPU ops with device events and everything else with the host clock).
func WithClock(c Clock) Option { return func(p *Profiler) { p.clock = c } }

// New returns a Profiler that is recording.
func New(opts ...Option) *Profiler {
	p := &Profiler{on: true, states: map[*tensor.Context]*ctxState{}, backends: map[tensor.Device]backend.Backend{}, lastDev: tensor.DefaultDevice()}
	for _, o := range opts {
		o(p)
	}
	if p.clock == nil {
		p.clock = NewDeviceClock() // device time for GPU ops, host time for the rest
		p.ownClock = true
	}
	return p
}

// Context returns a new root Context observed by p (tensor.NewContext with
// tensor.UseObserver(p) appended to opts).
func (p *Profiler) Context(opts ...tensor.ContextOption) *tensor.Context {
	return tensor.NewContext(append(append([]tensor.ContextOption(nil), opts...), tensor.UseObserver(p))...)
}

// Stop pauses recording: ops are not recorded until Start.
func (p *Profiler) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = false
}

// Start resumes recording after Stop.
func (p *Profiler) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = true
}

// Reset drops every record. Backward records of forwards recorded before the reset
// get ForwardIndex -1.
func (p *Profiler) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.recs {
		p.release(r.start, r.end)
	}
	for k, st := range p.bstart {
		p.release(st)
		delete(p.bstart, k)
	}
	p.recs = nil
	p.gen++
}

// Close stops recording, drops every record and open Begin, and closes the clock when
// the profiler made it (New's default DeviceClock: its device events are freed). A
// clock given WithClock stays its owner's to close.
func (p *Profiler) Close() {
	p.Reset()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = false
	for c, st := range p.states {
		p.dropEntries(st.stack)
		delete(p.states, c)
	}
	if p.ownClock {
		if c, ok := p.clock.(interface{ Close() }); ok {
			c.Close()
		}
	}
}

// release hands stamps the profiler will never resolve back to a clock that holds
// resources for them.
func (p *Profiler) release(ss ...Stamp) {
	if r, ok := p.clock.(StampReleaser); ok {
		for _, s := range ss {
			r.Release(s)
		}
	}
}

// dropEntries releases the start stamps of open Begins being forgotten.
func (p *Profiler) dropEntries(es []entry) {
	for _, e := range es {
		p.release(e.start)
	}
}

// Len returns the number of records.
func (p *Profiler) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.recs)
}

func (p *Profiler) backendFor(dev tensor.Device) backend.Backend {
	if b, ok := p.backends[dev]; ok {
		return b
	}
	b, err := backend.Get(dev)
	if err != nil {
		b = nil
	}
	p.backends[dev] = b
	return b
}

func (p *Profiler) state(c *tensor.Context) *ctxState {
	p.tick++
	st := p.states[c]
	if st == nil {
		if len(p.states) >= maxStates {
			p.evict()
		}
		st = &ctxState{}
		p.states[c] = st
	}
	st.last = p.tick
	return st
}

// evict forgets the least recently active half of the Contexts with open Begins:
// Contexts long done whose last ops never reported a Forward. (A Context still inside
// an op would see that op's Forward recorded as unmatched.)
func (p *Profiler) evict() {
	type kv struct {
		c    *tensor.Context
		last uint64
	}
	all := make([]kv, 0, len(p.states))
	for c, st := range p.states {
		all = append(all, kv{c, st.last})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].last < all[j].last })
	for _, x := range all[:len(all)/2] {
		p.dropEntries(p.states[x.c].stack)
		delete(p.states, x.c)
	}
}

// Begin implements tensor.Observer.
func (p *Profiler) Begin(c *tensor.Context, op *tensor.Op) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return
	}
	st := p.state(c)
	e := entry{op: op, dev: p.lastDev}
	if b := p.backendFor(e.dev); b != nil {
		e.total0, e.ok = b.MemoryStats().TotalAllocated, true
	}
	if len(st.stack) >= maxOpen {
		p.dropEntries(st.stack[:1])
		st.stack = append(st.stack[:0], st.stack[1:]...)
	}
	e.start = p.clock.Mark(e.dev) // last, so the bookkeeping is not timed
	st.stack = append(st.stack, e)
}

// Forward implements tensor.Observer.
func (p *Profiler) Forward(c *tensor.Context, op *tensor.Op, inputs []*tensor.Tensor, output *tensor.Tensor) any {
	dev := p.peekDev()
	if output != nil {
		dev = output.Device()
	}
	end := p.clock.Mark(dev)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		p.release(end)
		return nil
	}
	r := raw{Record: Record{Op: op.Name(), Pass: Forward, Device: dev, ForwardIndex: -1}, end: end}
	r.InDTypes, r.InShapes = describe(inputs)
	outBytes := int64(0)
	if output != nil {
		r.OutDType = output.DType()
		r.OutShape = output.Shape().Clone()
		outBytes = bytesOf(output)
	}
	r.FLOPs = forwardFLOPs(r.Op, r.InShapes, r.OutShape)
	matched := false
	if st := p.states[c]; st != nil {
		for i := len(st.stack) - 1; i >= 0; i-- {
			e := st.stack[i]
			if e.op != op {
				continue
			}
			r.start = e.start
			r.Bytes = outBytes
			if e.ok && e.dev == dev {
				if b := p.backendFor(dev); b != nil {
					r.Bytes = b.MemoryStats().TotalAllocated - e.total0
				}
			}
			p.dropEntries(st.stack[i+1:]) // Begins that never got their Forward
			st.stack = st.stack[:i]
			matched = true
			break
		}
		if len(st.stack) == 0 {
			delete(p.states, c)
		}
	}
	if !matched {
		r.start, r.Unmatched, r.Bytes = end, true, outBytes
	}
	p.lastDev = dev
	p.recs = append(p.recs, r)
	return fwdTag{p, p.gen, len(p.recs) - 1}
}

func (p *Profiler) peekDev() tensor.Device {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastDev
}

// DeferWiden implements tensor.WidenDeferrer: a profiled step keeps the half gradients
// of autocast's weight casts deferred, as an unprofiled one does, so that it times the
// same work; such a cast's backward is recorded with no output gradient (OutDType
// Invalid, no bytes) and no time.
func (p *Profiler) DeferWiden() bool { return true }

// StartBackward implements tensor.BackwardStarter: it marks the clock on the device of
// gradOut just before the backward of a node whose forward this profiler recorded, so
// that Backward's record spans the node's work as the device ran it (device events on
// CUDA) rather than the host time spent queueing it.
func (p *Profiler) StartBackward(op *tensor.Op, tag any, gradOut *tensor.Tensor) {
	t, ok := tag.(fwdTag)
	if !ok || t.p != p || gradOut == nil {
		return
	}
	p.mu.Lock()
	if !p.on || t.gen != p.gen {
		p.mu.Unlock()
		return
	}
	if old, ok := p.bstart[t.idx]; ok { // a backward that never reported (a panic)
		p.release(old)
	}
	p.mu.Unlock()
	st := p.clock.Mark(gradOut.Device()) // last, so the bookkeeping is not timed
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on || t.gen != p.gen {
		p.release(st)
		return
	}
	if p.bstart == nil {
		p.bstart = map[int]Stamp{}
	}
	p.bstart[t.idx] = st
}

// Backward implements tensor.Observer.
func (p *Profiler) Backward(op *tensor.Op, tag any, gradOut *tensor.Tensor, gradIn []*tensor.Tensor, took time.Duration) {
	dev := p.peekDev()
	if gradOut != nil {
		dev = gradOut.Device()
	}
	end := p.clock.Mark(dev)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		p.release(end)
		return
	}
	r := raw{Record: Record{Op: op.Name(), Pass: Backward, Device: dev, ForwardIndex: -1}, end: end, took: took}
	if t, ok := tag.(fwdTag); ok && t.p == p && t.gen == p.gen && t.idx < len(p.recs) {
		r.ForwardIndex = t.idx
		if st, ok := p.bstart[t.idx]; ok {
			r.start, r.timed = st, true
			delete(p.bstart, t.idx)
		}
	}
	r.InDTypes, r.InShapes = describe([]*tensor.Tensor{gradOut})
	grad := make([]bool, len(gradIn))
	for i, g := range gradIn {
		if g == nil {
			continue
		}
		grad[i] = true
		if r.OutDType == backend.Invalid {
			r.OutDType = g.DType()
		}
		r.Bytes += bytesOf(g)
	}
	if r.ForwardIndex >= 0 {
		f := p.recs[r.ForwardIndex]
		r.FLOPs = backwardFLOPs(r.Op, f.InShapes, f.OutShape, grad)
	}
	p.recs = append(p.recs, r)
}

func describe(ts []*tensor.Tensor) ([]tensor.DType, []tensor.Shape) {
	dts := make([]tensor.DType, len(ts))
	shapes := make([]tensor.Shape, len(ts))
	for i, t := range ts {
		if t != nil {
			dts[i], shapes[i] = t.DType(), t.Shape().Clone()
		}
	}
	return dts, shapes
}

func bytesOf(t *tensor.Tensor) int64 { return int64(t.Numel() * t.DType().Size()) }

// Records returns the records so far in the order their ops finished, with times
// resolved (a device clock may wait for the device here), nesting and lanes.
func (p *Profiler) Records() []Record {
	p.mu.Lock()
	rs := append([]raw(nil), p.recs...)
	clock := p.clock
	p.mu.Unlock()

	out := make([]Record, len(rs))
	var fwd, bwd []int
	for i, r := range rs {
		rec := r.Record
		if r.Pass == Backward && r.timed {
			rec.Start = clock.Resolve(r.start)
			rec.Dur = max(clock.Resolve(r.end)-rec.Start, 0)
		} else if r.Pass == Backward {
			end := clock.Resolve(r.end)
			rec.Start, rec.Dur = end-r.took, r.took
			bwd = append(bwd, i)
		} else {
			rec.Start = clock.Resolve(r.start)
			rec.Dur = max(0, clock.Resolve(r.end)-rec.Start)
			fwd = append(fwd, i)
		}
		rec.Self = rec.Dur
		out[i] = rec
	}
	layout(out, fwd)
	layout(out, bwd)
	return out
}

// layout nests the records idx (one pass) by time and packs them into lanes: a record
// goes to the first lane where it either starts after everything open has ended or
// lies within the innermost open record, which becomes its parent (its Dur is taken
// off the parent's Self). On one goroutine this is exactly the Begin/Forward nesting,
// across Contexts too.
func layout(recs []Record, idx []int) {
	end := func(i int) time.Duration { return recs[i].Start + recs[i].Dur }
	sort.SliceStable(idx, func(a, b int) bool {
		i, j := idx[a], idx[b]
		if recs[i].Start != recs[j].Start {
			return recs[i].Start < recs[j].Start
		}
		if end(i) != end(j) {
			return end(i) > end(j)
		}
		return i < j
	})
	var lanes [][]int // per lane, the stack of open records
	for _, i := range idx {
		placed := false
		for l := range lanes {
			st := lanes[l]
			for len(st) > 0 && end(st[len(st)-1]) <= recs[i].Start {
				st = st[:len(st)-1]
			}
			lanes[l] = st
			if len(st) == 0 || end(i) <= end(st[len(st)-1]) {
				if len(st) > 0 {
					parent := st[len(st)-1]
					recs[parent].Self = max(0, recs[parent].Self-recs[i].Dur)
				}
				recs[i].Lane, recs[i].Depth = l, len(st)
				lanes[l] = append(st, i)
				placed = true
				break
			}
		}
		if !placed {
			recs[i].Lane, recs[i].Depth = len(lanes), 0
			lanes = append(lanes, []int{i})
		}
	}
}
