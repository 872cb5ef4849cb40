package parallel

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// Place moves every parameter, buffer and gradient of m to dev (nn.To): the model of a
// DataParallel to its main device, a stage of a Pipeline to its own. The *nn.Param
// values stay the same, but build the optimizer afterwards: its state is made on the
// parameters' device.
func Place(m nn.Module, dev tensor.Device) { nn.To(m, dev) }

// PipelineOptions configures a Pipeline.
type PipelineOptions struct {
	// MicroBatches splits every batch into this many micro-batches run on the GPipe
	// schedule; 0 or 1 runs the stages one after the other on the whole batch.
	MicroBatches int
}

// Pipeline is model parallelism: a model cut into stages, each on its own device,
// run one after the other with the activations moved between devices by To (so
// gradients flow back across devices as through any op). The output is on the last
// stage's device: put the targets there (OutputDevice).
//
// With MicroBatches M > 1 the batch is split into M micro-batches and the stages run
// on GPipe's schedule, one goroutine per stage: stage s works on micro-batch m while
// stage s+1 works on micro-batch m-1. Backward runs the same way in reverse, from the
// last micro-batch. Each stage is idle for S-1 of the M+S-1 slots of each pass (the
// bubble, Bubble); Stats reports it and the idle fraction actually measured.
// BatchNorm in a stage then sees micro-batches, and updates its running statistics
// once per micro-batch, as with GPipe.
//
// A Pipeline is an nn.Module whose children are the stages, named "0", "1", … as in a
// Sequential: its parameters are "0.weight", "1.bias", ….
type Pipeline struct {
	nn.Base
	stages  []nn.Module
	devices []tensor.Device
	micro   int

	mu    sync.Mutex
	stats PipelineStats
}

// PipelineStats describes the schedule of a Pipeline's last step.
type PipelineStats struct {
	Stages       int
	MicroBatches int
	// Bubble is the fraction of the schedule each stage is idle in theory:
	// (S-1)/(M+S-1).
	Bubble float64
	// Busy is the time each stage computed, forward and backward; Wall is the length
	// of the two passes (the loss computed between them not counted). Both are only
	// measured with micro-batching (nil and 0 otherwise).
	Busy []time.Duration
	Wall time.Duration
	// Idle is the measured idle fraction of each stage, 1 - Busy/Wall. On logical CPU
	// devices the stages share the machine's cores, so it says more about the
	// schedule than about speed.
	Idle []float64
}

// Bubble returns GPipe's bubble fraction (S-1)/(M+S-1) for S stages and M
// micro-batches: the share of a pass during which each stage waits.
func Bubble(stages, microBatches int) float64 {
	return float64(stages-1) / float64(microBatches+stages-1)
}

// NewPipeline returns stages run in order, stage i on devices[i]. Each stage's
// parameters and buffers must already be there (Place). Two stages may share a device.
func NewPipeline(stages []nn.Module, devices []tensor.Device, opts PipelineOptions) (*Pipeline, error) {
	if len(stages) == 0 || len(stages) != len(devices) {
		return nil, fmt.Errorf("%w: %d stages on %d devices; give one device per stage", ErrDevices, len(stages), len(devices))
	}
	if opts.MicroBatches < 0 {
		return nil, fmt.Errorf("parallel: MicroBatches must be ≥ 0, got %d", opts.MicroBatches)
	}
	for i, st := range stages {
		if _, err := backend.Get(devices[i]); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrDevices, err)
		}
		for _, p := range append(st.Params(), st.Buffers()...) {
			if d := p.T.Device(); d != devices[i] {
				return nil, fmt.Errorf("%w: %q of stage %d is on %s, not on the stage's device %s; Place the stage first", ErrDevices, p.Name, i, d, devices[i])
			}
		}
	}
	p := &Pipeline{stages: append([]nn.Module(nil), stages...), devices: append([]tensor.Device(nil), devices...), micro: max(opts.MicroBatches, 1)}
	for i, st := range stages {
		p.AddModule(strconv.Itoa(i), st)
	}
	return p, nil
}

// Stages returns the stages.
func (p *Pipeline) Stages() []nn.Module { return append([]nn.Module(nil), p.stages...) }

// Devices returns the stages' devices.
func (p *Pipeline) Devices() []tensor.Device { return append([]tensor.Device(nil), p.devices...) }

// OutputDevice is the device of Forward's output (the last stage's).
func (p *Pipeline) OutputDevice() tensor.Device { return p.devices[len(p.devices)-1] }

// Stats returns the schedule of the last step.
func (p *Pipeline) Stats() PipelineStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Busy = append([]time.Duration(nil), s.Busy...)
	s.Idle = append([]float64(nil), s.Idle...)
	return s
}

func (p *Pipeline) setStats(s PipelineStats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats = s
}

// Forward runs the stages on x and returns the output on OutputDevice. x may be on any
// device; with micro-batching it must belong to a Context (the step's).
func (p *Pipeline) Forward(x *tensor.Tensor) *tensor.Tensor {
	if p.micro <= 1 {
		h := x
		for s, st := range p.stages {
			h = nn.Call(st, h.To(p.devices[s]))
		}
		p.setStats(PipelineStats{Stages: len(p.stages), MicroBatches: 1, Bubble: Bubble(len(p.stages), 1)})
		return h
	}
	s := &pipeStep{p: p}
	return tensor.Custom(opPipeline, []*tensor.Tensor{x}, s.forward, s.backward)
}

const opPipeline = "pipeline"

// pipeStep is one micro-batched forward and its backward.
type pipeStep struct {
	p       *Pipeline
	x       *tensor.Tensor
	sizes   []int
	starts  []int
	acts    [][]*tensor.Tensor // [stage][micro-batch]: the stage's input, a leaf on its device
	outs    [][]*tensor.Tensor // [stage][micro-batch]: the stage's output
	busy    []time.Duration
	fwdWall time.Duration
}

func (s *pipeStep) forward(c *tensor.Context, in []*tensor.Tensor) *tensor.Tensor {
	x := in[0]
	if c == nil {
		misuse(opPipeline, "with micro-batches the input must belong to a Context (tensor.NewContext, then ctx.Bind(x)): the stages' activations are released when it closes")
	}
	if x.Dim() == 0 || x.Size(0) == 0 {
		misuse(opPipeline, "the input %v must have a non-empty batch dimension 0 to split into micro-batches", x.Shape())
	}
	p := s.p
	S := len(p.stages)
	s.x = x
	s.sizes = split(x.Size(0), p.micro)
	M := len(s.sizes)
	s.starts = make([]int, M)
	for m := 1; m < M; m++ {
		s.starts[m] = s.starts[m-1] + s.sizes[m-1]
	}
	s.acts, s.outs = make([][]*tensor.Tensor, S), make([][]*tensor.Tensor, S)
	for st := range S {
		s.acts[st], s.outs[st] = make([]*tensor.Tensor, M), make([]*tensor.Tensor, M)
	}
	s.busy = make([]time.Duration, S)

	// ch[st] carries stage st's inputs: the micro-batches for stage 0, the previous
	// stage's outputs after that.
	ch := make([]chan *tensor.Tensor, S)
	for st := range ch {
		ch[st] = make(chan *tensor.Tensor, M)
	}
	sc := tensor.NewContext(tensor.NoGradMode())
	for m := range M {
		ch[0] <- leaf(sc, sc.Bind(x).Narrow(0, s.starts[m], s.sizes[m]), p.devices[0], x.RequiresGrad())
	}
	c.Adopt(sc)
	close(ch[0])
	gens := childGenerators(c, p.devices[0], S)
	t0 := time.Now()
	each(S, false, func(st int) {
		if st+1 < S {
			// Closing on the way out, panic included, releases the next stage.
			defer close(ch[st+1])
		}
		rc, closer := region(c, gens[st])
		defer closer.Close()
		dev := p.devices[st]
		for m := range M {
			in, ok := <-ch[st]
			if !ok {
				return
			}
			start := time.Now()
			a := in
			if st > 0 {
				sc := tensor.NewContext(tensor.NoGradMode())
				a = leaf(sc, in, dev, in.RequiresGrad())
				c.Adopt(sc)
			}
			o := nn.Call(p.stages[st], rc.Bind(a))
			s.busy[st] += time.Since(start)
			s.acts[st][m], s.outs[st][m] = a, o
			if st+1 < S {
				ch[st+1] <- o
			}
		}
	})
	s.fwdWall = time.Since(t0)
	s.record(0)

	nc := c.NoGrad()
	last := make([]*tensor.Tensor, M)
	grad := false
	for m, o := range s.outs[S-1] {
		last[m] = nc.Bind(o)
		grad = grad || o.RequiresGrad()
	}
	res := tensor.Concat(last, 0)
	if grad && c.GradEnabled() {
		// The result is a leaf of no graph: marking it makes Custom attach the
		// pipeline's backward to the output it returns.
		res.SetRequiresGrad(true)
	}
	return res
}

// backward runs the stages' backward passes on the reverse schedule: the last stage
// starts from the last micro-batch, and each stage hands its input gradients to the
// previous stage. Every stage accumulates into its own parameters from its own
// goroutine; the only gradient the custom op returns is x's.
func (s *pipeStep) backward(bc *tensor.Context, g *tensor.Tensor) []*tensor.Tensor {
	p := s.p
	S, M := len(p.stages), len(s.sizes)
	gch := make([]chan *tensor.Tensor, S)
	for st := range gch {
		gch[st] = make(chan *tensor.Tensor, M)
	}
	for m := M - 1; m >= 0; m-- {
		gch[S-1] <- g.Narrow(0, s.starts[m], s.sizes[m])
	}
	close(gch[S-1])
	xgrads := make([]*tensor.Tensor, M)
	t0 := time.Now()
	each(S, false, func(st int) {
		if st > 0 {
			defer close(gch[st-1])
		}
		for j := range M {
			gm, ok := <-gch[st]
			if !ok {
				return
			}
			start := time.Now()
			m := M - 1 - j
			o, a := s.outs[st][m], s.acts[st][m]
			if gm != nil && o.RequiresGrad() {
				o.Backward(tensor.GradOutput(gm), tensor.RetainGraph())
			}
			var ga *tensor.Tensor
			if lg := a.Grad(); lg != nil {
				if st > 0 {
					ga = bc.Bind(lg).To(p.devices[st-1])
				} else {
					xgrads[m] = bc.Bind(lg).To(s.x.Device())
				}
				a.ZeroGrad()
			}
			s.busy[st] += time.Since(start)
			if st > 0 {
				gch[st-1] <- ga
			}
		}
	})
	s.record(time.Since(t0))
	if !s.x.RequiresGrad() {
		return nil
	}
	for m, gx := range xgrads {
		if gx == nil {
			a := s.acts[0][m]
			xgrads[m] = tensor.Zeros(a.Shape(), tensor.WithDType(a.DType()), tensor.WithDevice(s.x.Device()), tensor.WithContext(bc))
		}
	}
	return []*tensor.Tensor{tensor.Concat(xgrads, 0)}
}

// record publishes the step's statistics, with bwdWall the backward pass's length (0
// before backward).
func (s *pipeStep) record(bwdWall time.Duration) {
	S, M := len(s.p.stages), len(s.sizes)
	wall := s.fwdWall + bwdWall
	st := PipelineStats{Stages: S, MicroBatches: M, Bubble: Bubble(S, M), Wall: wall,
		Busy: append([]time.Duration(nil), s.busy...), Idle: make([]float64, S)}
	for i, b := range s.busy {
		if wall > 0 {
			st.Idle[i] = max(0, 1-float64(b)/float64(wall))
		}
	}
	s.p.setStats(st)
}
