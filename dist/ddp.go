package dist

import (
	"fmt"
	"slices"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
)

// Default bucket sizes, PyTorch's: 25 MiB buckets, and a first bucket of 1 MiB so the
// first all-reduce starts as soon as the last layers have their gradients.
const (
	DefaultBucketBytes      = 25 << 20
	DefaultFirstBucketBytes = 1 << 20
)

// DDPOptions configures NewDDP. The zero value takes PyTorch's defaults.
type DDPOptions struct {
	// BucketBytes caps the gradient bytes per all-reduce (0: DefaultBucketBytes).
	BucketBytes int
	// FirstBucketBytes caps the first bucket (0: DefaultFirstBucketBytes).
	FirstBucketBytes int
	// NoBroadcastBuffers stops Forward from broadcasting rank 0's buffers (BatchNorm's
	// running statistics) before every training forward, which PyTorch does by default.
	NoBroadcastBuffers bool
	// DynamicGraph all-reduces every bucket in Finish rather than while backward runs.
	// Use it when which parameters receive gradients, or how many times, changes from
	// one iteration to the next; by default DDP learns that on the first synchronised
	// backward (PyTorch's static_graph) and overlaps communication from then on.
	DynamicGraph bool
}

// DDP is distributed data parallelism (torch.nn.parallel.DistributedDataParallel):
// each process holds a replica of the model and trains on its own share of every
// batch; DDP keeps the replicas identical by averaging the gradients over the
// processes during backward.
//
// NewDDP broadcasts rank 0's parameters and buffers, then registers a gradient hook on
// every parameter. As backward produces a parameter's gradient the hook copies it into
// a bucket (about 25 MiB, filled in reverse registration order — roughly the order
// backward produces gradients); when a bucket is complete its all-reduce starts
// asynchronously, so communication overlaps the rest of backward. Finish waits for the
// all-reduces and writes the averaged gradients into the parameters; call it (or use
// the optimizer Optimizer returns, or the next Forward, which call it) before reading
// gradients. Inside NoSync, backward accumulates gradients locally without
// communicating: gradient accumulation all-reduces once, on the last micro-batch.
//
// DDP is a Module: train it in place of the model. Build it after moving and casting
// the model (nn.To, amp.Prepare), since hooks live on the parameters' tensors, and
// register gradient hooks that change gradients before it (DDP reads a gradient when
// its hook runs). A DDP is driven by one goroutine.
type DDP struct {
	nn.Module
	pg   ProcessGroup
	opts DDPOptions

	params  []*nn.Param
	tensors []*tensor.Tensor // the parameters' tensors at NewDDP (the hooks are on them)
	slots   []ddpSlot
	buckets []*ddpBucket

	sync     bool
	active   bool // a synchronised backward has started and Finish has not run
	learning bool // the first synchronised backward: expected arrivals unknown
	next     int  // first bucket not yet launched, in this iteration
}

// ddpSlot is one parameter's place in a bucket and its progress in this backward.
type ddpSlot struct {
	bucket, index    int            // bucket and position inside it
	view             *tensor.Tensor // its slice of the bucket, shaped like the parameter
	expect, arrivals int            // gradient contributions per backward: learned, seen
}

// ddpBucket is a group of gradients all-reduced together: a flat tensor of their
// values followed by one presence flag per parameter (so a parameter that received no
// gradient anywhere keeps none, and one that received a gradient on some process gets
// the average everywhere).
type ddpBucket struct {
	params   []int // indices into DDP.params
	n        int   // value elements
	flat     *tensor.Tensor
	flags    []float64
	pending  int // parameters still expected before the bucket can launch
	launched bool
	handle   Handle
}

// NewDDP wraps model for data-parallel training over pg. It broadcasts rank 0's
// parameters and buffers to every process (so replicas start identical whatever their
// seeds), assigns the parameters to buckets and installs the gradient hooks.
func NewDDP(model nn.Module, pg ProcessGroup, opts DDPOptions) (*DDP, error) {
	if model == nil || pg == nil {
		return nil, fmt.Errorf("dist: NewDDP needs a model and a process group")
	}
	if opts.BucketBytes == 0 {
		opts.BucketBytes = DefaultBucketBytes
	}
	if opts.FirstBucketBytes == 0 {
		opts.FirstBucketBytes = DefaultFirstBucketBytes
	}
	if opts.BucketBytes < 0 || opts.FirstBucketBytes < 0 {
		return nil, fmt.Errorf("dist: bucket sizes must be positive, got %d and %d", opts.BucketBytes, opts.FirstBucketBytes)
	}
	d := &DDP{Module: model, pg: pg, opts: opts, sync: true, learning: true}
	d.params = model.Params()
	for _, p := range d.params {
		if !p.T.DType().IsFloat() {
			return nil, fmt.Errorf("dist: parameter %q is %s; DDP averages floating-point gradients", p.Name, p.T.DType())
		}
		d.tensors = append(d.tensors, p.T)
	}
	for _, p := range append(model.Params(), model.Buffers()...) {
		if err := pg.Broadcast(p.T, 0); err != nil {
			return nil, fmt.Errorf("dist: broadcasting %q from rank 0: %w", p.Name, err)
		}
	}
	d.slots = make([]ddpSlot, len(d.params))
	for _, idx := range assignBuckets(d.params, opts.FirstBucketBytes, opts.BucketBytes) {
		d.addBucket(idx)
	}
	for i, p := range d.params {
		p.T.RegisterHook(func(g *tensor.Tensor) *tensor.Tensor {
			d.onGrad(i, g)
			return nil
		})
	}
	return d, nil
}

// reduceDType is the dtype a parameter's gradient is averaged in: float64 for float64
// parameters, float32 for the others (half gradients are averaged in float32).
func reduceDType(dt tensor.DType) tensor.DType {
	if dt == tensor.Float64 {
		return tensor.Float64
	}
	return tensor.Float32
}

// assignBuckets groups the parameters, taken in reverse registration order, into
// buckets of one reduce dtype and device each, as PyTorch's
// compute_bucket_assignment_by_size: a bucket closes once it holds at least its cap
// (the first bucket of each kind first, then the rest). Buckets are ordered by their
// first parameter.
func assignBuckets(params []*nn.Param, first, rest int) [][]int {
	type key struct {
		dt  tensor.DType
		dev tensor.Device
	}
	type open struct {
		idx   []int
		bytes int
		cap   int
	}
	cur := map[key]*open{}
	var out [][]int
	for i := len(params) - 1; i >= 0; i-- {
		t := params[i].T
		k := key{reduceDType(t.DType()), t.Device()}
		b := cur[k]
		if b == nil {
			b = &open{cap: first}
			cur[k] = b
		}
		b.idx = append(b.idx, i)
		b.bytes += t.Numel() * k.dt.Size()
		if b.bytes >= b.cap {
			out = append(out, b.idx)
			cur[k] = &open{cap: rest}
		}
	}
	for _, b := range cur {
		if len(b.idx) > 0 {
			out = append(out, b.idx)
		}
	}
	// Parameters were visited in reverse, so a larger first index comes first.
	slices.SortFunc(out, func(a, b []int) int { return b[0] - a[0] })
	return out
}

func (d *DDP) addBucket(idx []int) {
	b := &ddpBucket{params: idx, flags: make([]float64, len(idx))}
	first := d.params[idx[0]].T
	for _, i := range idx {
		b.n += d.params[i].T.Numel()
	}
	b.flat = tensor.Zeros(tensor.Shape{b.n + len(idx)}, tensor.WithDType(reduceDType(first.DType())), tensor.WithDevice(first.Device()))
	off := 0
	for k, i := range idx {
		p := d.params[i].T
		part := b.flat.Narrow(0, off, p.Numel())
		view := part.Reshape(p.Shape()...)
		if view != part {
			part.Release()
		}
		d.slots[i] = ddpSlot{bucket: len(d.buckets), index: k, view: view}
		off += p.Numel()
	}
	d.buckets = append(d.buckets, b)
}

// Buckets lists the parameter names of each bucket, in all-reduce order.
func (d *DDP) Buckets() [][]string {
	out := make([][]string, len(d.buckets))
	for k, b := range d.buckets {
		for _, i := range b.params {
			out[k] = append(out[k], d.params[i].Name)
		}
	}
	return out
}

// ProcessGroup returns the group DDP communicates over.
func (d *DDP) ProcessGroup() ProcessGroup { return d.pg }

// Forward runs the model. In training mode with grad enabled it first completes the
// previous iteration's all-reduces (Finish) and, unless NoBroadcastBuffers, broadcasts
// rank 0's buffers. It panics if communication fails.
func (d *DDP) Forward(x *tensor.Tensor) *tensor.Tensor {
	if d.Module.Training() && x.Context().GradEnabled() {
		if err := d.Finish(); err != nil {
			panic(err)
		}
		if !d.opts.NoBroadcastBuffers && d.pg.Size() > 1 {
			for _, p := range d.Module.Buffers() {
				if err := d.pg.Broadcast(p.T, 0); err != nil {
					panic(fmt.Errorf("dist: broadcasting buffer %q: %w", p.Name, err))
				}
			}
		}
	}
	// Module.Forward, not nn.Call: DDP shares the model's hooks (its base), so
	// nn.Call(ddp, x) — what amp.Trainer and containers do — already ran them.
	return d.Module.Forward(x)
}

// SetSync turns gradient synchronisation on (the default) or off. With it off,
// backward only accumulates gradients locally.
func (d *DDP) SetSync(on bool) { d.sync = on }

// NoSync runs f with gradient synchronisation off (PyTorch's no_sync): the backward
// passes in f accumulate gradients locally, and the next synchronised backward
// all-reduces the accumulated sum. For gradient accumulation, run every micro-batch
// but the last inside NoSync.
func (d *DDP) NoSync(f func()) {
	prev := d.sync
	d.sync = false
	defer func() { d.sync = prev }()
	f()
}

// onGrad is the gradient hook of parameter i.
func (d *DDP) onGrad(i int, g *tensor.Tensor) {
	if !d.sync {
		return
	}
	if !d.active {
		d.begin()
	}
	s := &d.slots[i]
	b := d.buckets[s.bucket]
	if b.launched {
		panic(fmt.Errorf("dist: DDP: parameter %q received a gradient after its bucket was all-reduced: "+
			"either backward ran twice without Forward or Finish in between (call Finish), or the parameters that "+
			"receive gradients changed since the first iteration (set DDPOptions.DynamicGraph)", d.params[i].Name))
	}
	if s.arrivals == 0 {
		// The slot starts from what NoSync micro-batches accumulated locally.
		if old := d.params[i].T.Grad(); old != nil {
			s.view.CopyFrom(old)
			addInto(s.view, g)
		} else {
			s.view.CopyFrom(g)
		}
		b.flags[s.index] = 1
	} else {
		addInto(s.view, g)
	}
	s.arrivals++
	if !d.learning && !d.opts.DynamicGraph && s.arrivals == s.expect {
		b.pending--
		if b.pending == 0 {
			d.launchReady()
		}
	}
}

// addInto adds g into dst (same shape), converting g's dtype.
func addInto(dst, g *tensor.Tensor) {
	if g.DType() == dst.DType() {
		dst.AddInPlace(g)
		return
	}
	c := tensor.Empty(g.Shape(), tensor.WithDType(dst.DType()), tensor.WithDevice(dst.Device()))
	c.CopyFrom(g)
	dst.AddInPlace(c)
	c.Release()
}

// begin starts a synchronised backward.
func (d *DDP) begin() {
	for i, p := range d.params {
		if p.T != d.tensors[i] {
			panic(fmt.Errorf("dist: DDP: parameter %q was replaced (moved or cast) after NewDDP; build the DDP after nn.To and amp.Prepare", p.Name))
		}
	}
	d.active, d.next = true, 0
	for i := range d.slots {
		d.slots[i].arrivals = 0
	}
	for _, b := range d.buckets {
		b.launched, b.handle, b.pending = false, nil, 0
		clear(b.flags)
		for _, i := range b.params {
			if d.slots[i].expect > 0 {
				b.pending++
			}
		}
	}
	if !d.learning && !d.opts.DynamicGraph {
		d.launchReady() // buckets whose parameters get no gradient
	}
}

// launchReady starts the complete buckets in order: every process must start the same
// all-reduces in the same order, so a complete bucket waits for the ones before it.
func (d *DDP) launchReady() {
	for d.next < len(d.buckets) && d.buckets[d.next].pending == 0 {
		d.launch(d.buckets[d.next])
		d.next++
	}
}

func (d *DDP) launch(b *ddpBucket) {
	for k, i := range b.params {
		s := &d.slots[i]
		if s.arrivals > 0 {
			continue
		}
		// No gradient arrived in this backward: contribute what accumulated locally, or
		// nothing (a zero with the flag down).
		if old := d.params[i].T.Grad(); old != nil {
			s.view.CopyFrom(old)
			b.flags[k] = 1
		} else {
			s.view.FillInPlace(0)
		}
	}
	fl := b.flat.Narrow(0, b.n, len(b.params))
	writeHost(fl, b.flags)
	fl.Release()
	b.handle = d.pg.AllReduceAsync(b.flat, Avg)
	b.launched = true
}

// Finish completes the synchronised backward: it starts the buckets not started yet,
// waits for every all-reduce and writes the averaged gradients into the parameters. A
// parameter that received a gradient on some process gets the average on all (it
// counts as zero where it had none). Without a synchronised backward since the last
// Finish it does nothing.
func (d *DDP) Finish() error {
	if !d.active {
		return nil
	}
	d.active = false
	if d.learning {
		for i := range d.slots {
			d.slots[i].expect = d.slots[i].arrivals
		}
		d.learning = false
	}
	for d.next < len(d.buckets) {
		d.launch(d.buckets[d.next])
		d.next++
	}
	var first error
	for _, b := range d.buckets {
		if err := b.handle.Wait(); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		fl := b.flat.Narrow(0, b.n, len(b.params))
		flags := fl.Float64s()
		fl.Release()
		for k, i := range b.params {
			if flags[k] == 0 {
				continue
			}
			p, v := d.params[i].T, d.slots[i].view
			if g := p.Grad(); g != nil {
				g.CopyFrom(v)
			} else {
				ng := tensor.Empty(p.Shape(), tensor.WithDType(p.DType()), tensor.WithDevice(p.Device()))
				p.SetGrad(ng.CopyFrom(v))
			}
		}
	}
	if first != nil {
		return fmt.Errorf("dist: DDP gradient all-reduce: %w", first)
	}
	return nil
}

// Optimizer returns opt with Finish run before MasterGrads, Step and ZeroGrad, so code
// that drives an optimizer — amp.Trainer, scaler.GradScaler, optim.ClipGradNorm on
// MasterGrads — sees the averaged gradients; the wrapper panics if communication
// failed. It also broadcasts rank 0's FP32 master weights, which gamp's optimizers keep
// for half parameters (opt level O2): they were copied from each process's parameters
// before NewDDP broadcast rank 0's.
func (d *DDP) Optimizer(opt optim.Optimizer) (optim.Optimizer, error) {
	if mp, ok := opt.(interface{ MasterParams() []*tensor.Tensor }); ok {
		params := opt.Params()
		for i, m := range mp.MasterParams() {
			if i < len(params) && m != params[i].T {
				if err := d.pg.Broadcast(m, 0); err != nil {
					return nil, fmt.Errorf("dist: broadcasting the master weight of %q: %w", params[i].Name, err)
				}
			}
		}
	}
	return &ddpOptimizer{Optimizer: opt, d: d}, nil
}

type ddpOptimizer struct {
	optim.Optimizer
	d *DDP
}

func (o *ddpOptimizer) finish() {
	if err := o.d.Finish(); err != nil {
		panic(err)
	}
}

func (o *ddpOptimizer) MasterGrads() []*tensor.Tensor { o.finish(); return o.Optimizer.MasterGrads() }
func (o *ddpOptimizer) Step()                         { o.finish(); o.Optimizer.Step() }
func (o *ddpOptimizer) ZeroGrad()                     { o.finish(); o.Optimizer.ZeroGrad() }
