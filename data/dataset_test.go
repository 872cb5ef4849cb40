package data

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/tensor"
)

// pixelSet is a small image dataset with pixel bytes 0..255 and labels 0..9.
func pixelSet(t testing.TB, n int) *Dataset {
	pix := make([]byte, n*4)
	for i := range pix {
		pix[i] = byte(i)
	}
	lab := make([]byte, n)
	for i := range lab {
		lab[i] = byte(i % 10)
	}
	ds, err := FromIDX(&Images{N: n, Rows: 2, Cols: 2, Pixels: pix}, &Labels{N: n, Values: lab})
	require.NoError(t, err)
	return ds
}

func TestNormalize(t *testing.T) {
	ds := pixelSet(t, 64) // pixels 0..255
	m, s := ds.Normalization()
	assert.Equal(t, float32(FashionMNISTMean), m)
	assert.Equal(t, float32(FashionMNISTStd), s)
	x, _ := ds.Example(0)
	assert.Equal(t, (float32(0)/255-0.2860)/0.3530, x[0])
	x, _ = ds.Example(63)
	assert.Equal(t, (float32(255)/255-0.2860)/0.3530, x[3])

	raw := ds.Normalize(0, 1)
	for i := range raw.Len() {
		x, _ := raw.Example(i)
		for j, v := range x {
			require.Equal(t, float32(i*4+j)/255, v)
		}
	}
	// The original is unchanged: Normalize returns a new Dataset.
	x, _ = ds.Example(0)
	assert.Equal(t, (float32(0)/255-0.2860)/0.3530, x[0])

	syn := Synthetic(10, 2, tensor.Shape{3}, 1)
	a, _ := syn.Example(4)
	b, _ := syn.Normalize(1, 2).Example(4)
	for j := range a {
		assert.Equal(t, (a[j]-1)/2, b[j])
	}

	for _, bad := range [][2]float32{{0, 0}, {0, -1}, {float32(math.NaN()), 1}, {0, float32(math.Inf(1))}} {
		assert.Panics(t, func() { ds.Normalize(bad[0], bad[1]) }, "Normalize(%v, %v)", bad[0], bad[1])
	}
}

func TestSubset(t *testing.T) {
	ds := pixelSet(t, 50)
	sub := ds.Subset([]int{7, 3, 3, 49})
	require.Equal(t, 4, sub.Len())
	for k, i := range []int{7, 3, 3, 49} {
		a, ya := sub.Example(k)
		b, yb := ds.Example(i)
		assert.Equal(t, b, a)
		assert.Equal(t, yb, ya)
		assert.Equal(t, ds.Label(i), sub.Label(k))
	}
	// Subsets compose, and normalisation carries over.
	subsub := sub.Normalize(0, 1).Subset([]int{3, 0})
	x, y := subsub.Example(0)
	assert.Equal(t, int64(9), y)
	assert.Equal(t, float32(49*4)/255, x[0])

	head := ds.Head(10)
	assert.Equal(t, 10, head.Len())
	assert.Equal(t, ds.Label(9), head.Label(9))
	assert.Equal(t, 50, ds.Head(1000).Len())
	assert.Equal(t, 0, ds.Head(-1).Len())

	assert.Panics(t, func() { ds.Subset([]int{50}) })
	assert.Panics(t, func() { ds.Subset([]int{-1}) })
	assert.Panics(t, func() { sub.Example(4) })
}

func TestSynthetic(t *testing.T) {
	shape := tensor.Shape{1, 4, 4}
	a := Synthetic(1000, 5, shape, 42)
	b := Synthetic(1000, 5, shape, 42)
	c := Synthetic(1000, 5, shape, 43)
	assert.Equal(t, 1000, a.Len())
	assert.Equal(t, 16, a.Features())
	assert.Equal(t, 5, a.Classes())
	assert.Equal(t, []int{1, 4, 4}, []int(a.Shape()))
	assert.Equal(t, a.feat, b.feat, "same seed, same data")
	assert.Equal(t, a.labels, b.labels)
	assert.NotEqual(t, a.feat, c.feat, "different seed, different data")

	hist := make([]int, 5)
	for i := range a.Len() {
		hist[a.Label(i)]++
	}
	assert.Equal(t, []int{200, 200, 200, 200, 200}, hist, "balanced labels")
	assert.NotEqual(t, []int64{0, 1, 2, 3, 4}, a.labels[:5], "labels are shuffled")

	// Separable-ish: nearest centroid, fitted on one half, is right on most of the other.
	train, test := a.Head(500), a.Subset(seq(500, 1000))
	cent := make([][]float64, 5)
	count := make([]int, 5)
	for c := range cent {
		cent[c] = make([]float64, 16)
	}
	for i := range train.Len() {
		x, y := train.Example(i)
		for j, v := range x {
			cent[y][j] += float64(v)
		}
		count[y]++
	}
	right := 0
	for i := range test.Len() {
		x, y := test.Example(i)
		best, bestD := -1, math.Inf(1)
		for c := range cent {
			d := 0.0
			for j, v := range x {
				diff := float64(v) - cent[c][j]/float64(count[c])
				d += diff * diff
			}
			if d < bestD {
				best, bestD = c, d
			}
		}
		if int64(best) == y {
			right++
		}
	}
	acc := float64(right) / float64(test.Len())
	t.Logf("nearest-centroid accuracy on synthetic blobs: %.3f", acc)
	assert.Greater(t, acc, 0.85)

	assert.Equal(t, 0, Synthetic(0, 3, tensor.Shape{2}, 1).Len())
	assert.Panics(t, func() { Synthetic(-1, 3, tensor.Shape{2}, 1) })
	assert.Panics(t, func() { Synthetic(10, 0, tensor.Shape{2}, 1) })
	assert.Panics(t, func() { Synthetic(10, 3, nil, 1) })
}

func seq(lo, hi int) []int {
	s := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		s = append(s, i)
	}
	return s
}
