package data

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/tensor"
)

func newLoader(t testing.TB, ds *Dataset, opt LoaderOptions) *Loader {
	l, err := NewLoader(ds, opt)
	require.NoError(t, err)
	return l
}

// epochIndex runs one epoch and returns the dataset indices in the order they came.
func epochIndex(t testing.TB, l *Loader, e int) []int {
	var got []int
	it := l.Epoch(e)
	defer it.Close()
	for it.Next() {
		got = append(got, it.Batch().Index...)
	}
	require.NoError(t, it.Err())
	return got
}

func TestLoaderEveryIndexOnce(t *testing.T) {
	ds := Synthetic(103, 4, tensor.Shape{5}, 1)
	for _, bs := range []int{1, 7, 10, 103, 200} {
		for _, shuffle := range []bool{false, true} {
			t.Run(fmt.Sprintf("bs=%d/shuffle=%v", bs, shuffle), func(t *testing.T) {
				l := newLoader(t, ds, LoaderOptions{BatchSize: bs, Shuffle: shuffle, Seed: 9})
				wantBatches := (103 + bs - 1) / bs
				assert.Equal(t, wantBatches, l.Len())
				for e := range 3 {
					it := l.Epoch(e)
					var got []int
					n := 0
					for it.Next() {
						b := it.Batch()
						assert.Equal(t, n, b.Seq)
						assert.Equal(t, e, b.Epoch)
						if n < wantBatches-1 {
							assert.Equal(t, bs, b.Len())
						} else {
							assert.Equal(t, 103-bs*(wantBatches-1), b.Len(), "last batch")
						}
						got = append(got, b.Index...)
						n++
					}
					require.NoError(t, it.Err())
					assert.Equal(t, wantBatches, n)
					assert.Equal(t, l.Order(e), got)
					slices.Sort(got)
					assert.Equal(t, seq(0, 103), got, "every index exactly once")
				}
			})
		}
	}
}

func TestLoaderDeterministic(t *testing.T) {
	ds := Synthetic(500, 10, tensor.Shape{2}, 1)
	opt := LoaderOptions{BatchSize: 32, Shuffle: true, Seed: 1234, Workers: 3}
	a, b := newLoader(t, ds, opt), newLoader(t, ds, opt)
	assert.Equal(t, epochIndex(t, a, 0), epochIndex(t, b, 0), "same seed, same order")
	assert.Equal(t, epochIndex(t, a, 5), epochIndex(t, b, 5))
	assert.NotEqual(t, epochIndex(t, a, 0), epochIndex(t, a, 1), "epochs differ")
	assert.NotEqual(t, seq(0, 500), epochIndex(t, a, 0), "shuffled")

	opt.Seed = 1235
	c := newLoader(t, ds, opt)
	assert.NotEqual(t, epochIndex(t, a, 0), epochIndex(t, c, 0), "another seed, another order")
	assert.Equal(t, epochIndex(t, a, 1), epochIndex(t, c, 0), "epoch e uses seed+e")

	opt.Shuffle = false
	d := newLoader(t, ds, opt)
	assert.Equal(t, seq(0, 500), epochIndex(t, d, 0))
	assert.Equal(t, seq(0, 500), epochIndex(t, d, 3))
}

func TestLoaderDropLast(t *testing.T) {
	ds := Synthetic(10, 2, tensor.Shape{1}, 1)
	l := newLoader(t, ds, LoaderOptions{BatchSize: 3, DropLast: true, Shuffle: true})
	assert.Equal(t, 3, l.Len())
	it := l.Epoch(0)
	var sizes []int
	var got []int
	for it.Next() {
		sizes = append(sizes, it.Batch().Len())
		got = append(got, it.Batch().Index...)
	}
	assert.Equal(t, []int{3, 3, 3}, sizes)
	assert.Equal(t, l.Order(0)[:9], got)

	l = newLoader(t, ds, LoaderOptions{BatchSize: 3})
	assert.Equal(t, 4, l.Len())
	l = newLoader(t, ds, LoaderOptions{BatchSize: 11, DropLast: true})
	assert.Equal(t, 0, l.Len())
	assert.False(t, l.Epoch(0).Next())
	l = newLoader(t, ds, LoaderOptions{BatchSize: 5, DropLast: true})
	assert.Equal(t, 2, l.Len(), "exact multiple drops nothing")
}

// TestLoaderOrderWithWorkers makes workers finish out of order and checks that the
// batches still come out in sequence, with the right contents.
func TestLoaderOrderWithWorkers(t *testing.T) {
	ds := pixelSet(t, 300)
	testHookBuild = func(seq int) {
		if seq%4 == 0 { // every fourth batch is slow, so later ones overtake it
			time.Sleep(2 * time.Millisecond)
		}
	}
	defer func() { testHookBuild = nil }()

	for _, shape := range []string{ShapeFlat, ShapeImage} {
		l := newLoader(t, ds, LoaderOptions{BatchSize: 8, Shuffle: true, Seed: 3, Workers: 4, Prefetch: 3, Shape: shape})
		for e := range 2 {
			order := l.Order(e)
			it := l.Epoch(e)
			n := 0
			for it.Next() {
				b := it.Batch()
				require.Equal(t, n, b.Seq)
				lo := n * 8
				require.Equal(t, order[lo:min(lo+8, 300)], b.Index)
				if shape == ShapeImage {
					require.Equal(t, tensor.Shape{b.Len(), 1, 2, 2}, b.Shape)
				} else {
					require.Equal(t, tensor.Shape{b.Len(), 4}, b.Shape)
				}
				for j, i := range b.Index {
					x, y := ds.Example(i)
					require.Equal(t, x, b.X[j*4:(j+1)*4])
					require.Equal(t, y, b.Y[j])
				}
				// The consumer owns the batch until Next: scribbling on it must not
				// race with the workers (go test -race checks) nor leak into later batches.
				for j := range b.X {
					b.X[j] = -1
				}
				n++
			}
			require.NoError(t, it.Err())
			require.Equal(t, l.Len(), n)
		}
	}
}

// settle waits for the goroutine count to drop back to at most base.
func settle(base int) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= base || time.Now().After(deadline) {
			return n
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLoaderCloseLeaksNoGoroutines(t *testing.T) {
	ds := Synthetic(1000, 10, tensor.Shape{16}, 1)
	l := newLoader(t, ds, LoaderOptions{BatchSize: 10, Shuffle: true, Workers: 4, Prefetch: 2})
	base := runtime.NumGoroutine()

	for range 20 {
		it := l.Epoch(0)
		require.True(t, it.Next())
		require.True(t, it.Next())
		it.Close()
		assert.False(t, it.Next(), "Next after Close")
		it.Close() // twice is fine
		assert.NoError(t, it.Err())
		assert.Nil(t, it.Batch())
	}
	assert.LessOrEqual(t, settle(base), base, "early Close leaked goroutines")

	for range 20 {
		l.Epoch(1).Close() // closed before the first batch
	}
	assert.LessOrEqual(t, settle(base), base, "Close before Next leaked goroutines")

	for range 5 {
		it := l.Epoch(2)
		for it.Next() { // run to the end with no Close
		}
	}
	assert.LessOrEqual(t, settle(base), base, "a finished epoch leaked goroutines")
}

func TestLoaderWorkerPanic(t *testing.T) {
	ds := Synthetic(100, 10, tensor.Shape{4}, 1)
	testHookBuild = func(seq int) {
		if seq == 3 {
			panic("boom")
		}
	}
	defer func() { testHookBuild = nil }()
	base := runtime.NumGoroutine()
	l := newLoader(t, ds, LoaderOptions{BatchSize: 10, Workers: 4})
	it := l.Epoch(7)
	n := 0
	for it.Next() {
		n++
	}
	assert.Equal(t, 3, n, "the batches before the failing one are delivered")
	require.Error(t, it.Err())
	assert.Equal(t, "data: preparing batch 3 of epoch 7: boom", it.Err().Error())
	it.Close()
	assert.LessOrEqual(t, settle(base), base)
}

func TestLoaderTensors(t *testing.T) {
	ds := Synthetic(20, 3, tensor.Shape{1, 2, 3}, 5)
	l := newLoader(t, ds, LoaderOptions{BatchSize: 8, Shape: ShapeImage})
	it := l.Epoch(0)
	defer it.Close()
	require.True(t, it.Next())
	b := it.Batch()

	ctx := tensor.NewContext()
	x, y := b.Tensors(tensor.WithContext(ctx))
	assert.Equal(t, tensor.Shape{8, 1, 2, 3}, x.Shape())
	assert.Equal(t, tensor.Float32, x.DType())
	assert.Equal(t, tensor.Shape{8}, y.Shape())
	assert.Equal(t, tensor.Int64, y.DType())
	assert.Equal(t, b.X, x.Float32s())
	assert.Equal(t, b.Y, y.Int64s())
	assert.Equal(t, 2, ctx.Tracked(), "the Context owns both tensors")

	// The tensors are copies: recycling the batch does not touch them.
	want := slices.Clone(b.X)
	c := b.Clone()
	require.True(t, it.Next())
	assert.Equal(t, want, x.Float32s())
	assert.Equal(t, want, c.X)
	ctx.Close()
	assert.True(t, x.Released())
	assert.True(t, y.Released())

	// WithDType applies to x only.
	x16, y16 := it.Batch().Tensors(tensor.WithDType(tensor.Float16))
	defer x16.Release()
	defer y16.Release()
	assert.Equal(t, tensor.Float16, x16.DType())
	assert.Equal(t, tensor.Int64, y16.DType())
	assert.InDeltaSlice(t, it.Batch().X, x16.Float32s(), 0.01)
}

func TestNewLoaderErrors(t *testing.T) {
	ds := Synthetic(10, 2, tensor.Shape{1, 28, 28}, 1)
	for _, tc := range []struct {
		opt  LoaderOptions
		want string
	}{
		{LoaderOptions{}, "BatchSize is 0, want at least 1"},
		{LoaderOptions{BatchSize: 1, Workers: -1}, "Workers is -1"},
		{LoaderOptions{BatchSize: 1, Prefetch: -2}, "Prefetch is -2"},
		{LoaderOptions{BatchSize: 1, Shape: "nchw"}, `Shape "nchw", want "flat" or "image"`},
	} {
		_, err := NewLoader(ds, tc.opt)
		assert.ErrorContains(t, err, tc.want)
	}
	_, err := NewLoader(nil, LoaderOptions{BatchSize: 1})
	assert.Error(t, err)

	l := newLoader(t, ds, LoaderOptions{BatchSize: 4})
	o := l.Options()
	assert.Equal(t, 2, o.Workers)
	assert.Equal(t, 2, o.Prefetch)
	assert.Equal(t, ShapeFlat, o.Shape)
	assert.Same(t, ds, l.Dataset())
}

func TestLoaderEmptyDataset(t *testing.T) {
	l := newLoader(t, Synthetic(0, 2, tensor.Shape{3}, 1), LoaderOptions{BatchSize: 4, Shuffle: true})
	assert.Equal(t, 0, l.Len())
	it := l.Epoch(0)
	assert.False(t, it.Next())
	assert.NoError(t, it.Err())
	it.Close()
}

func BenchmarkLoader(b *testing.B) {
	// Fashion-MNIST-sized images from bytes, the path real training takes.
	const n = 60000
	pix := make([]byte, n*784)
	for i := range pix {
		pix[i] = byte(i * 31)
	}
	lab := make([]byte, n)
	ds, err := FromIDX(&Images{N: n, Rows: 28, Cols: 28, Pixels: pix}, &Labels{N: n, Values: lab})
	require.NoError(b, err)
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("bs=128/workers=%d", workers), func(b *testing.B) {
			l := newLoader(b, ds, LoaderOptions{BatchSize: 128, Shuffle: true, Workers: workers, Shape: ShapeImage})
			b.SetBytes(128 * 784 * 4) // float32 bytes produced per batch
			b.ReportAllocs()
			epoch := 0
			it := l.Epoch(epoch)
			b.ResetTimer()
			for range b.N {
				if !it.Next() {
					epoch++
					it = l.Epoch(epoch)
					it.Next()
				}
			}
			b.StopTimer()
			it.Close()
		})
	}
}

func TestPermutationUniform(t *testing.T) {
	// Every ordering of 3 elements is about equally likely across seeds.
	counts := map[[3]int]int{}
	const seeds = 60000
	for s := range uint64(seeds) {
		p := permutation(3, s)
		counts[[3]int(p)]++
	}
	require.Len(t, counts, 6)
	for p, c := range counts {
		assert.InDelta(t, seeds/6, c, seeds/6*0.05, "ordering %v", p)
	}
	assert.Equal(t, []int{}, permutation(0, 1))
	assert.Equal(t, []int{0}, permutation(1, 1))
}
