package nn

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/tensor"
)

func TestWalkPaths(t *testing.T) {
	n := newNet(tensor.NewGenerator(1))
	var paths []string
	Walk(n, func(path string, m Module) { paths = append(paths, path) })
	require.Equal(t, []string{"", "stem", "block", "block.0", "block.1", "block.2", "head"}, paths)

	// A shared module is visited once, under its first path.
	shared := NewLinear(2, 2)
	s := NewSequential(shared, NewReLU())
	s.AddModule("again", shared)
	paths = nil
	Walk(s, func(path string, m Module) { paths = append(paths, path) })
	require.Equal(t, []string{"", "0", "1"}, paths)
}

func TestForwardHooksOrderReplaceRemove(t *testing.T) {
	c := tensor.NewContext()
	defer c.Close()
	lin := NewLinear(3, 2, Seeded(1))
	relu := NewReLU()
	s := NewSequential(lin, relu)
	x := tensor.Randn(tensor.Shape{4, 3}, tensor.WithContext(c))
	want := s.Forward(x).Float32s()

	var log []string
	rm1 := RegisterForwardPreHook(lin, func(m Module, in *tensor.Tensor) *tensor.Tensor {
		require.Same(t, lin, m)
		log = append(log, "pre1")
		return nil
	})
	rm2 := RegisterForwardPreHook(lin, func(m Module, in *tensor.Tensor) *tensor.Tensor {
		log = append(log, "pre2")
		return in.MulScalar(2) // replaces the input
	})
	rm3 := RegisterForwardHook(lin, func(m Module, in, out *tensor.Tensor) *tensor.Tensor {
		log = append(log, "post1")
		require.Equal(t, tensor.Shape{4, 2}, out.Shape())
		return out.MulScalar(0) // replaces the output
	})
	rm4 := RegisterForwardHook(relu, func(m Module, in, out *tensor.Tensor) *tensor.Tensor {
		log = append(log, "relu")
		require.Equal(t, make([]float32, 8), in.Float32s(), "the next layer sees the replaced output")
		return nil
	})
	s.Forward(x)
	require.Equal(t, []string{"pre1", "pre2", "post1", "relu"}, log)

	// Call on a leaf runs its hooks; Forward does not.
	log = nil
	Call(lin, x)
	require.Equal(t, []string{"pre1", "pre2", "post1"}, log)
	log = nil
	lin.Forward(x)
	require.Empty(t, log)

	for _, rm := range []func(){rm1, rm2, rm3, rm4} {
		rm()
		rm() // twice is a no-op
	}
	log = nil
	require.Equal(t, want, s.Forward(x).Float32s())
	require.Empty(t, log)
	require.Nil(t, lin.hooks.set.Load(), "no hook left: Call is back on its fast path")
}

func TestHookedRunsRootHooksOnce(t *testing.T) {
	c := tensor.NewContext()
	defer c.Close()
	s := NewSequential(NewLinear(3, 2, Seeded(1)))
	calls := 0
	RegisterForwardPreHook(s, func(Module, *tensor.Tensor) *tensor.Tensor { calls++; return nil })
	x := tensor.Randn(tensor.Shape{1, 3}, tensor.WithContext(c))
	s.Forward(x)
	require.Equal(t, 0, calls, "a direct Forward skips the module's own hooks")
	h := Hooked(s)
	h.Forward(x)
	require.Equal(t, 1, calls)
	Call(h, x)
	require.Equal(t, 2, calls, "Call on the Hooked view runs the hooks once")
	require.Equal(t, names(s.Params()), names(h.Params()))
	require.Equal(t, h, Hooked(h), "Hooked does not wrap twice")
}

func TestHooksConcurrentRegistration(t *testing.T) {
	lin := NewLinear(2, 2)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var removes []func()
	for range 8 {
		wg.Go(func() {
			r := RegisterForwardHook(lin, func(Module, *tensor.Tensor, *tensor.Tensor) *tensor.Tensor { return nil })
			mu.Lock()
			removes = append(removes, r)
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Len(t, lin.hooks.set.Load().post, 8)
	for _, r := range removes {
		wg.Go(r)
	}
	wg.Wait()
	require.Nil(t, lin.hooks.set.Load())
}
