package data

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/gamp-ml/gamp/tensor"
)

// Batch layouts for LoaderOptions.Shape.
const (
	ShapeFlat  = "flat"  // X is [B, features], e.g. [B 784] for an MLP
	ShapeImage = "image" // X is [B, example shape...], e.g. [B 1 28 28] for a CNN
)

// LoaderOptions configures a Loader. The zero value of a field means its default.
type LoaderOptions struct {
	BatchSize int    // examples per batch (required, ≥ 1)
	Shuffle   bool   // visit the examples in a seeded random order
	Seed      uint64 // epoch e shuffles with seed Seed+e: same seed, same orders
	DropLast  bool   // skip the last batch if it is smaller than BatchSize
	Workers   int    // goroutines preparing batches (default 2)
	Prefetch  int    // prepared batches allowed to wait beyond those being built (default 2)
	Shape     string // ShapeFlat (default) or ShapeImage

	// Device is where Batch.Tensors puts the tensors. The zero value (cpu) means
	// tensor.DefaultDevice(); a WithDevice passed to Tensors overrides it.
	Device tensor.Device
}

// Loader cuts a Dataset into batches, one epoch at a time, with worker goroutines that
// prepare the next batches while the current one trains. A Loader is safe for
// concurrent use; each Iterator it returns belongs to one goroutine.
type Loader struct {
	ds     *Dataset
	opt    LoaderOptions
	xshape tensor.Shape // shape of one example inside a batch
	pool   sync.Pool    // *Batch buffers of full batch size
}

// NewLoader returns a Loader over ds. It fails on a bad configuration: a batch size
// below 1, negative Workers or Prefetch, or an unknown Shape.
func NewLoader(ds *Dataset, opt LoaderOptions) (*Loader, error) {
	if ds == nil {
		return nil, errors.New("data: NewLoader: nil Dataset")
	}
	switch {
	case opt.BatchSize < 1:
		return nil, fmt.Errorf("data: NewLoader: BatchSize is %d, want at least 1", opt.BatchSize)
	case opt.Workers < 0:
		return nil, fmt.Errorf("data: NewLoader: Workers is %d, want 0 (default 2) or more", opt.Workers)
	case opt.Prefetch < 0:
		return nil, fmt.Errorf("data: NewLoader: Prefetch is %d, want 0 (default 2) or more", opt.Prefetch)
	}
	if opt.Workers == 0 {
		opt.Workers = 2
	}
	if opt.Prefetch == 0 {
		opt.Prefetch = 2
	}
	l := &Loader{ds: ds, opt: opt}
	switch opt.Shape {
	case "", ShapeFlat:
		l.opt.Shape = ShapeFlat
		l.xshape = tensor.Shape{ds.Features()}
	case ShapeImage:
		l.xshape = ds.Shape()
	default:
		return nil, fmt.Errorf("data: NewLoader: Shape %q, want %q or %q", opt.Shape, ShapeFlat, ShapeImage)
	}
	return l, nil
}

// Options returns the options with the defaults filled in.
func (l *Loader) Options() LoaderOptions { return l.opt }

// Dataset returns the dataset the loader reads.
func (l *Loader) Dataset() *Dataset { return l.ds }

// Len returns the number of batches in one epoch.
func (l *Loader) Len() int {
	n, bs := l.ds.Len(), l.opt.BatchSize
	if l.opt.DropLast {
		return n / bs
	}
	return (n + bs - 1) / bs
}

// Order returns the order in which epoch e visits the examples: a permutation drawn
// with seed Seed+e if Shuffle is set (it depends on nothing else: not the workers, not
// the Go release), 0, 1, 2, … otherwise.
func (l *Loader) Order(e int) []int {
	n := l.ds.Len()
	if !l.opt.Shuffle {
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		return order
	}
	return permutation(n, l.opt.Seed+uint64(e))
}

// permutation is a Fisher–Yates shuffle of 0..n-1 driven by PCG-DXSM, with Lemire's
// unbiased bounded draws. It is spelled out here (not rand.Perm) so that an order
// depends on the seed alone, never on the Go release.
func permutation(n int, seed uint64) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	src := rand.NewPCG(seed, 0x10ade7)
	for i := n - 1; i > 0; i-- {
		j := bounded(src, uint64(i)+1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// bounded returns a uniform draw in [0, n).
func bounded(src *rand.PCG, n uint64) uint64 {
	hi, lo := bits.Mul64(src.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(src.Uint64(), n)
		}
	}
	return hi
}

// Batch is one batch on the host. The Iterator that returned it recycles its buffers
// when Next is called again (or the Iterator is closed): use the slices before then,
// or Clone the batch. Tensors copies, so its tensors stay valid.
type Batch struct {
	X     []float32    // normalised features, row-major with shape Shape
	Y     []int64      // labels, len B
	Shape tensor.Shape // shape of X: [B, 784] (ShapeFlat) or [B, 1, 28, 28] (ShapeImage)
	Index []int        // the dataset index of each example
	Epoch int          // the epoch the batch belongs to
	Seq   int          // its position in the epoch, from 0

	device tensor.Device
}

// Len returns the number of examples in the batch.
func (b *Batch) Len() int { return len(b.Y) }

// Tensors builds the batch's tensors: x, float32 with shape b.Shape, and y, int64 with
// shape [B]. Pass tensor.WithContext(ctx) so the step's Context owns (and releases)
// them; the loader's Device applies unless opts name another. A WithDType in opts
// applies to x only.
func (b *Batch) Tensors(opts ...tensor.Option) (x, y *tensor.Tensor) {
	xo := make([]tensor.Option, 0, len(opts)+1)
	if b.device != (tensor.Device{}) {
		xo = append(xo, tensor.WithDevice(b.device))
	}
	xo = append(xo, opts...)
	yo := append(xo[:len(xo):len(xo)], tensor.WithDType(tensor.Int64))
	return tensor.FromSlice(b.X, b.Shape, xo...), tensor.FromSlice(b.Y, tensor.Shape{len(b.Y)}, yo...)
}

// Clone returns a copy of the batch that nothing recycles.
func (b *Batch) Clone() *Batch {
	c := *b
	c.X = append([]float32(nil), b.X...)
	c.Y = append([]int64(nil), b.Y...)
	c.Shape = b.Shape.Clone()
	c.Index = append([]int(nil), b.Index...)
	return &c
}

func (l *Loader) getBatch() *Batch {
	if b, ok := l.pool.Get().(*Batch); ok {
		return b
	}
	bs := l.opt.BatchSize
	return &Batch{
		X:      make([]float32, 0, bs*l.xshape.Numel()),
		Y:      make([]int64, 0, bs),
		Index:  make([]int, 0, bs),
		Shape:  make(tensor.Shape, 0, 1+len(l.xshape)),
		device: l.opt.Device,
	}
}

// fill prepares batch seq of epoch e from the examples idx.
func (l *Loader) fill(b *Batch, e, seq int, idx []int) {
	f := l.ds.Features()
	k := len(idx)
	b.X, b.Y = b.X[:k*f], b.Y[:k]
	b.Index = append(b.Index[:0], idx...)
	b.Shape = append(append(b.Shape[:0], k), l.xshape...)
	b.Epoch, b.Seq = e, seq
	for j, i := range idx {
		b.Y[j] = l.ds.fill(b.X[j*f:(j+1)*f], i)
	}
}

// Iterator walks one epoch's batches, in order:
//
//	it := loader.Epoch(e)
//	defer it.Close()
//	for it.Next() {
//		b := it.Batch()
//		…
//	}
//	if err := it.Err(); err != nil { … }
//
// Workers build batches ahead, possibly out of order; the Iterator hands them out by
// sequence number. At most Workers+Prefetch batches are prepared ahead of the one in
// use. An Iterator belongs to one goroutine.
type Iterator struct {
	l     *Loader
	epoch int
	order []int
	nb    int // batches in the epoch

	claim   atomic.Int64  // next batch a worker builds
	slots   chan struct{} // one token per batch allowed to exist: bounds the work ahead
	results chan result
	done    chan struct{}
	wg      sync.WaitGroup

	pending map[int]result // built, waiting for their turn
	want    int            // next batch to hand out
	cur     *Batch
	err     error
	closed  bool
}

type result struct {
	b   *Batch
	seq int
	err error
}

// testHookBuild, if set, runs in the worker before it fills batch seq (tests inject
// failures with it).
var testHookBuild func(seq int)

// Epoch starts the workers for epoch e and returns the Iterator over its batches.
// Call Close when done early; an Iterator run to the end closes itself.
func (l *Loader) Epoch(e int) *Iterator {
	it := &Iterator{l: l, epoch: e, order: l.Order(e), nb: l.Len(), pending: map[int]result{}}
	if it.nb == 0 {
		it.closed = true
		return it
	}
	// One slot for the batch in use, one per worker, and Prefetch waiting.
	n := 1 + l.opt.Workers + l.opt.Prefetch
	it.slots = make(chan struct{}, n)
	for range n {
		it.slots <- struct{}{}
	}
	it.results = make(chan result, n)
	it.done = make(chan struct{})
	for range min(l.opt.Workers, it.nb) {
		it.wg.Go(it.work)
	}
	return it
}

func (it *Iterator) work() {
	hook := testHookBuild
	for {
		select {
		case <-it.slots:
		case <-it.done:
			return
		}
		seq := int(it.claim.Add(1) - 1)
		if seq >= it.nb {
			it.slots <- struct{}{} // ours; room is guaranteed
			return
		}
		r := it.build(seq, hook)
		select {
		case it.results <- r: // never blocks: one result per slot
		case <-it.done:
			if r.b != nil {
				it.l.pool.Put(r.b)
			}
			return
		}
		if r.err != nil {
			return
		}
	}
}

// build prepares batch seq, turning a panic into an error so that the consumer, not
// a worker goroutine, reports it.
func (it *Iterator) build(seq int, hook func(int)) (r result) {
	r.seq = seq
	defer func() {
		if p := recover(); p != nil {
			r = result{seq: seq, err: fmt.Errorf("data: preparing batch %d of epoch %d: %v", seq, it.epoch, p)}
		}
	}()
	if hook != nil {
		hook(seq)
	}
	bs := it.l.opt.BatchSize
	lo, hi := seq*bs, min((seq+1)*bs, len(it.order))
	b := it.l.getBatch()
	it.l.fill(b, it.epoch, seq, it.order[lo:hi])
	r.b = b
	return r
}

// Next advances to the next batch, recycling the previous one. It returns false at the
// end of the epoch, after Close, or on an error (see Err).
func (it *Iterator) Next() bool {
	it.recycleCurrent()
	if it.closed || it.want >= it.nb {
		it.Close()
		return false
	}
	r, ok := it.pending[it.want]
	for !ok {
		r = <-it.results
		if r.seq == it.want {
			ok = true
		} else {
			it.pending[r.seq] = r
		}
	}
	delete(it.pending, it.want)
	if r.err != nil {
		it.err = r.err
		it.Close()
		return false
	}
	it.want++
	it.cur = r.b
	return true
}

func (it *Iterator) recycleCurrent() {
	if it.cur == nil {
		return
	}
	it.l.pool.Put(it.cur)
	it.cur = nil
	it.slots <- struct{}{} // the slot the batch held; room is guaranteed
}

// Batch returns the current batch, valid until the next call to Next or Close.
func (it *Iterator) Batch() *Batch { return it.cur }

// Epoch returns the epoch the Iterator walks.
func (it *Iterator) Epoch() int { return it.epoch }

// Len returns the number of batches in the epoch.
func (it *Iterator) Len() int { return it.nb }

// Err returns the error that stopped the iteration, if any: a panic while preparing a
// batch, reported when that batch's turn comes (the batches before it are delivered).
// Stopping early with Close is not an error.
func (it *Iterator) Err() error { return it.err }

// Close stops the workers, waits for them to exit and recycles the batches, the
// current one included. It is safe to call more than once.
func (it *Iterator) Close() {
	if it.closed {
		it.recycleCurrent()
		return
	}
	it.closed = true
	close(it.done)
	it.wg.Wait()
	it.recycleCurrent()
	for seq, r := range it.pending {
		if r.b != nil {
			it.l.pool.Put(r.b)
		}
		delete(it.pending, seq)
	}
	for {
		select {
		case r := <-it.results:
			if r.b != nil {
				it.l.pool.Put(r.b)
			}
		default:
			return
		}
	}
}
