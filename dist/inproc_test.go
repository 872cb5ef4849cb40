package dist

import (
	"sync"

	"github.com/gamp-ml/gamp/tensor"
)

// inprocGroups returns n process groups whose ranks are goroutines of this process:
// the collectives' semantics without MPI, for testing DDP anywhere.
func inprocGroups(n int) []ProcessGroup {
	w := &inprocWorld{n: n, seq: make([]int, n), ops: map[int]*inprocOp{}}
	out := make([]ProcessGroup, n)
	for r := range out {
		out[r] = &inprocGroup{w: w, rank: r}
	}
	return out
}

type inprocWorld struct {
	n   int
	mu  sync.Mutex
	seq []int // collectives called so far, per rank
	ops map[int]*inprocOp
}

type inprocOp struct {
	kind    string
	vals    [][]float64
	arrived int
	result  []float64
	done    chan struct{}
}

type inprocGroup struct {
	w    *inprocWorld
	rank int
}

// join contributes vals to this rank's next collective; reduce runs when all arrived.
func (g *inprocGroup) join(kind string, vals []float64, reduce func(vals [][]float64) []float64) *inprocOp {
	w := g.w
	w.mu.Lock()
	defer w.mu.Unlock()
	k := w.seq[g.rank]
	w.seq[g.rank]++
	op := w.ops[k]
	if op == nil {
		op = &inprocOp{kind: kind, vals: make([][]float64, w.n), done: make(chan struct{})}
		w.ops[k] = op
	}
	if op.kind != kind {
		panic("inproc: ranks called different collectives: " + op.kind + " and " + kind)
	}
	op.vals[g.rank] = vals
	op.arrived++
	if op.arrived == w.n {
		op.result = reduce(op.vals)
		delete(w.ops, k)
		close(op.done)
	}
	return op
}

func (g *inprocGroup) Rank() int       { return g.rank }
func (g *inprocGroup) Size() int       { return g.w.n }
func (g *inprocGroup) Backend() string { return "inproc" }
func (g *inprocGroup) Close() error    { return nil }

func (g *inprocGroup) Barrier() error {
	<-g.join("barrier", nil, func([][]float64) []float64 { return nil }).done
	return nil
}

type inprocHandle struct {
	op *inprocOp
	t  *tensor.Tensor
}

func (h inprocHandle) Wait() error {
	<-h.op.done
	writeBack(h.t, h.op.result)
	return nil
}

func writeBack(t *tensor.Tensor, v []float64) {
	tmp := tensor.FromSlice(v, shapeOf(t), tensor.WithDType(t.DType()))
	t.CopyFrom(tmp)
	tmp.Release()
}

func (g *inprocGroup) AllReduceAsync(t *tensor.Tensor, op ReduceOp) Handle {
	if err := checkReduce(t, op); err != nil {
		return doneHandle{err}
	}
	n := g.w.n
	o := g.join("allreduce", t.Float64s(), func(vals [][]float64) []float64 {
		out := append([]float64(nil), vals[0]...)
		for _, v := range vals[1:] {
			for i := range out {
				switch op {
				case Sum, Avg:
					// Sum in the tensor's precision, as MPI does on the staged buffer.
					out[i] = float64(float32(out[i]) + float32(v[i]))
				case Max:
					out[i] = max(out[i], v[i])
				case Min:
					out[i] = min(out[i], v[i])
				}
			}
		}
		if op == Avg {
			for i := range out {
				out[i] = float64(float32(out[i]) / float32(n))
			}
		}
		return out
	})
	return inprocHandle{o, t}
}

func (g *inprocGroup) AllReduce(t *tensor.Tensor, op ReduceOp) error {
	return g.AllReduceAsync(t, op).Wait()
}

func (g *inprocGroup) Broadcast(t *tensor.Tensor, root int) error {
	if err := checkRoot(g, root); err != nil {
		return err
	}
	o := g.join("broadcast", t.Float64s(), func(vals [][]float64) []float64 { return vals[root] })
	<-o.done
	if g.rank != root {
		writeBack(t, o.result)
	}
	return nil
}
