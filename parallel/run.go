package parallel

import (
	"fmt"
	"sync"

	"github.com/gamp-ml/gamp/tensor"
)

// each calls fn(0) … fn(n-1), each in a goroutine of its own unless serial, and returns
// when all have returned. A panic in one of them (a device mismatch, an out-of-memory
// error) is raised again in the caller once all have finished, with its original value
// so that tensor.CatchOOM and errors.As still recognise it; with several, the one of
// the lowest index wins.
func each(n int, serial bool, fn func(i int)) {
	if serial || n == 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	panics := make([]any, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			defer func() {
				if r := recover(); r != nil {
					panics[i] = r
				}
			}()
			fn(i)
		})
	}
	wg.Wait()
	for _, p := range panics {
		if p != nil {
			panic(p)
		}
	}
}

// split divides n samples into min(n, k) chunks whose sizes differ by at most one,
// the larger ones first (5 over 3 devices: 2, 2, 1).
func split(n, k int) []int {
	k = min(n, k)
	sizes := make([]int, k)
	for i := range sizes {
		sizes[i] = n / k
		if i < n%k {
			sizes[i]++
		}
	}
	return sizes
}

// childGenerators returns n generators for the replicas or stages of one step, derived
// from the generator c uses on dev. Random ops in concurrent goroutines drawing from
// one generator would interleave in a different order on every run; each replica
// drawing from its own stream keeps dropout masks reproducible. The parent advances
// by one draw, so the next step gets new streams.
func childGenerators(c *tensor.Context, dev tensor.Device, n int) []*tensor.Generator {
	st := c.Generator(dev).Next(1)
	gs := make([]*tensor.Generator, n)
	for i := range gs {
		gs[i] = tensor.NewGenerator(mix(mix(st.Seed^0x5851f42d4c957f2d, st.Offset), uint64(i)))
	}
	return gs
}

// mix is SplitMix64's finaliser applied to a combined with b.
func mix(a, b uint64) uint64 {
	z := a + 0x9e3779b97f4a7c15*(b+1)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// region returns the Context a replica or stage runs its ops in: derived from c, so it
// has c's grad mode, autocast policy, observer and memory scope, with a weight-cast
// cache of its own (one cast per parameter per replica) and generator g. Close the
// returned closer when the forward is done: it drops the cache.
func region(c *tensor.Context, g *tensor.Generator) (rc, closer *tensor.Context) {
	closer = c.WithAutocast(c.Autocast())
	return closer.WithGenerator(g), closer
}

// leaf returns a copy of t on dev (a view of t when t is there already) that is a
// leaf of no autograd graph, requiring grad as asked. sc is a no-grad root Context whose
// tensors the caller hands to the step's Context with Adopt, so they are released when
// the step's Context closes. Replica parameters, replica input chunks and pipeline
// stage inputs are such leaves: each replica or stage runs backward into leaves of its
// own and the gradients are moved between devices explicitly, so concurrent backward
// passes never accumulate into one tensor.
func leaf(sc *tensor.Context, t *tensor.Tensor, dev tensor.Device, requiresGrad bool) *tensor.Tensor {
	l := sc.Bind(t).To(dev)
	l.SetRequiresGrad(requiresGrad)
	return l
}

// misuse panics with the typed error gamp uses for programmer errors.
func misuse(op, format string, args ...any) {
	panic(&tensor.OpError{Op: op, Msg: fmt.Sprintf(format, args...)})
}
