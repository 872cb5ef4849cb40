package data

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/internal/testenv"
)

// TestFashionMNISTReal checks the real files of Debian's dataset-fashion-mnist package.
func TestFashionMNISTReal(t *testing.T) {
	if _, err := os.Stat(DefaultDir); err != nil {
		testenv.Skip(t, testenv.FashionMNIST, "the real-data test: %v", err)
	}
	train, test, err := LoadFashionMNIST(DefaultDir)
	require.NoError(t, err)

	assert.Equal(t, 60000, train.Len())
	assert.Equal(t, 10000, test.Len())
	assert.Equal(t, []int{1, 28, 28}, []int(train.Shape()))
	assert.Equal(t, 784, train.Features())
	assert.Equal(t, 10, train.Classes())

	hist := func(d *Dataset) []int {
		h := make([]int, 10)
		for i := range d.Len() {
			h[d.Label(i)]++
		}
		return h
	}
	assert.Equal(t, []int{6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000}, hist(train))
	assert.Equal(t, []int{1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000}, hist(test))

	// Known values: the first training image is an ankle boot, the first ten labels
	// are 9 0 0 3 0 2 7 2 5 5, and the first test image is an ankle boot too.
	first := make([]int64, 10)
	for i := range first {
		first[i] = train.Label(i)
	}
	assert.Equal(t, []int64{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}, first)
	assert.Equal(t, "Ankle boot", FashionMNISTClasses[train.Label(0)])
	assert.Equal(t, int64(9), test.Label(0))

	im, err := ReadIDXImages(filepath.Join(DefaultDir, "train-images-idx3-ubyte.gz"))
	require.NoError(t, err)
	sum := 0
	for _, p := range im.Image(0) {
		sum += int(p)
	}
	assert.Equal(t, 76247, sum, "pixel sum of the first training image")

	// Scaled to [0, 1], the training pixels have mean 0.2860 and std 0.3530 (the
	// default normalisation); normalised with them, mean 0 and std 1.
	mean, std := moments(train.Normalize(0, 1))
	t.Logf("train pixels /255: mean %.5f std %.5f", mean, std)
	assert.InDelta(t, 0.2860, mean, 5e-4)
	assert.InDelta(t, 0.3530, std, 5e-4)
	mean, std = moments(train)
	assert.InDelta(t, 0, mean, 2e-3)
	assert.InDelta(t, 1, std, 2e-3)
}

func moments(d *Dataset) (mean, std float64) {
	var s, s2 float64
	x := make([]float32, d.Features())
	for i := range d.Len() {
		d.fill(x, i)
		for _, v := range x {
			s += float64(v)
			s2 += float64(v) * float64(v)
		}
	}
	n := float64(d.Len() * d.Features())
	mean = s / n
	return mean, math.Sqrt(s2/n - mean*mean)
}
