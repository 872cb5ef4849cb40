package parallel

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/models"
	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// tied holds one Linear in a field and registers it twice (weight sharing).
type tied struct {
	nn.Base
	a, b *nn.Linear
	n    int
}

func (m *tied) Forward(x *tensor.Tensor) *tensor.Tensor { return nn.Call(m.b, nn.Call(m.a, x)) }

func TestReplicateCopiesTheModuleTree(t *testing.T) {
	orig := models.NewTransformer(models.TransformerConfig{Vocab: 20, SeqLen: 6, Dim: 8, Heads: 2, Layers: 2, Classes: 3}, nn.Seeded(1))
	rep := replicate(orig).(*models.Transformer)
	require.NotSame(t, orig, rep)

	op, rp := orig.Params(), rep.Params()
	require.Len(t, rp, len(op))
	for k := range op {
		require.NotSame(t, op[k], rp[k], "parameter %s is a new Param", op[k].Name)
		require.Equal(t, op[k].Name, rp[k].Name)
		require.Same(t, op[k].T, rp[k].T, "until the caller replaces it, T is the original's")
	}
	require.Len(t, rep.Buffers(), len(orig.Buffers()))

	// The replica's module structs are new at every level, and its fields and its
	// registered children are the same objects, as in the original.
	seen := map[nn.Module]bool{}
	nn.Walk(orig, func(_ string, m nn.Module) { seen[m] = true })
	count := 0
	nn.Walk(rep, func(path string, m nn.Module) {
		count++
		require.False(t, seen[m], "module %q is shared with the original", path)
	})
	require.Equal(t, len(seen), count)
	require.Same(t, rep.Blocks(), childNamed(t, rep, "blocks"), "the field and the registered child are one module")

	// Changing a replica parameter leaves the original alone.
	rp[0].T = tensor.Zeros(rp[0].T.Shape())
	defer rp[0].T.Release()
	require.NotSame(t, op[0].T, rp[0].T)
}

func childNamed(t *testing.T, m nn.Module, name string) nn.Module {
	t.Helper()
	b, ok := m.(interface {
		Children() ([]string, []nn.Module)
	})
	require.True(t, ok)
	names, mods := b.Children()
	for i, n := range names {
		if n == name {
			return mods[i]
		}
	}
	t.Fatalf("no child %q", name)
	return nil
}

func TestReplicateKeepsSharing(t *testing.T) {
	l := nn.NewLinear(3, 3, nn.Seeded(1))
	m := &tied{a: l, b: l, n: 7}
	m.AddModule("a", l)
	m.AddModule("b", l)
	r := replicate(m).(*tied)
	require.NotSame(t, m.a, r.a)
	require.Same(t, r.a, r.b, "a module held twice is copied once")
	require.Same(t, r.a.Weight, r.Params()[0], "the field and the registered Param are one")
	require.Len(t, r.Params(), 2)
	require.Equal(t, 7, r.n)

	// A replica of a sub-module is detached from the original tree.
	seq := nn.NewSequential(nn.NewLinear(2, 2, nn.Seeded(1)))
	parent := nn.NewSequential(seq)
	sub := replicate(seq).(*nn.Sequential)
	require.Equal(t, "0.0.weight", sub.Params()[0].Name, "names are kept as they are")
	_ = parent
	sub.Append(nn.NewReLU()) // renaming walks the parents: none, so it does not reach the original
	require.Equal(t, 1, parent.At(0).(*nn.Sequential).Len())

	// A module that is not a pointer (nn.Hooked's wrapper) is copied by value.
	h := replicate(nn.Hooked(seq))
	require.NotSame(t, seq.Params()[0], h.Params()[0])
	require.Equal(t, seq.Params()[0].Name, h.Params()[0].Name)
}

// A model written as a struct with its sub-modules in unexported fields trains under
// DataParallel as on one device: replication reaches into those fields.
func TestDataParallelTransformer(t *testing.T) {
	devs := []tensor.Device{tensor.CPUDevice(20), tensor.CPUDevice(21)}
	cfg := models.TransformerConfig{Vocab: 20, SeqLen: 6, Dim: 8, Heads: 2, Layers: 1, Classes: 3}
	ids := make([]int64, 5*6)
	for i := range ids {
		ids[i] = int64((i * 7) % cfg.Vocab)
	}
	run := func(m nn.Module) []float64 {
		x := tensor.FromSlice(ids, tensor.Shape{5, 6}, tensor.WithDevice(devs[0]))
		defer x.Release()
		ctx := tensor.NewContext()
		defer ctx.Close()
		out := m.Forward(ctx.Bind(x))
		out.Sum().Backward()
		return append(out.Float64s(), m.Params()[0].Grad().Float64s()...)
	}
	ref := models.NewTransformer(cfg, nn.Seeded(4))
	nn.To(ref, devs[0])
	want := run(ref)
	model := models.NewTransformer(cfg, nn.Seeded(4))
	nn.To(model, devs[0])
	dp, err := NewDataParallel(model, devs, Options{})
	require.NoError(t, err)
	got := run(dp)
	require.InDeltaSlice(t, want, got, 1e-5)
}
