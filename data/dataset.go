package data

import (
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gamp-ml/gamp/tensor"
)

// Fashion-MNIST's pixel statistics over the 60,000 training images, after scaling to
// [0, 1]: the default normalisation of datasets read from IDX files.
const (
	FashionMNISTMean = 0.2860
	FashionMNISTStd  = 0.3530
)

// DefaultDir is where Debian's dataset-fashion-mnist package puts the files;
// LoadFashionMNIST("") looks there.
const DefaultDir = "/usr/share/datasets/fashion-mnist"

// FashionMNISTClasses names Fashion-MNIST's ten labels.
var FashionMNISTClasses = [10]string{
	"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
	"Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
}

// Dataset is a fixed set of labelled examples: float32 feature vectors of one shape
// (1×28×28 for Fashion-MNIST) and int64 class labels. Image datasets keep their
// pixels as bytes and normalise on the fly — x/255, then (x-mean)/std — so the
// normalisation can change (Normalize) without re-reading the files.
//
// A Dataset is immutable: Normalize and Subset return new Datasets that share the
// storage, and any number of goroutines and Loaders may read one at once.
type Dataset struct {
	name    string
	shape   tensor.Shape // of one example
	size    int          // features per example
	classes int

	pix    []uint8   // image datasets: size bytes per stored example
	feat   []float32 // feature datasets (Synthetic): size values per stored example
	labels []int64   // per stored example
	index  []int     // position → stored example; nil: identity
	n      int

	mean, std float32
	lut       *[256]float32 // pixel byte → normalised feature (image datasets)
}

// Len returns the number of examples.
func (d *Dataset) Len() int { return d.n }

// Shape returns the shape of one example, e.g. [1 28 28] (a copy).
func (d *Dataset) Shape() tensor.Shape { return d.shape.Clone() }

// Features returns the number of features of one example (784 for Fashion-MNIST).
func (d *Dataset) Features() int { return d.size }

// Classes returns the number of classes; labels are in 0..Classes()-1.
func (d *Dataset) Classes() int { return d.classes }

// Name returns a short description of where the examples come from.
func (d *Dataset) Name() string { return d.name }

// Normalization returns the mean and standard deviation features are normalised with.
func (d *Dataset) Normalization() (mean, std float32) { return d.mean, d.std }

func (d *Dataset) String() string {
	return fmt.Sprintf("Dataset(%s: %d examples of %v, %d classes)", d.name, d.n, d.shape, d.classes)
}

// Example returns the normalised features and the label of example i.
func (d *Dataset) Example(i int) (x []float32, y int64) {
	x = make([]float32, d.size)
	return x, d.fill(x, i)
}

// Label returns the label of example i.
func (d *Dataset) Label(i int) int64 { return d.labels[d.stored(i)] }

func (d *Dataset) stored(i int) int {
	if i < 0 || i >= d.n {
		panic(fmt.Sprintf("data: example %d out of range for a dataset of %d", i, d.n))
	}
	if d.index != nil {
		return d.index[i]
	}
	return i
}

// fill writes example i's normalised features into dst (len Features()) and returns
// its label.
func (d *Dataset) fill(dst []float32, i int) int64 {
	s := d.stored(i)
	dst = dst[:d.size]
	if d.pix != nil {
		lut := d.lut
		for j, p := range d.pix[s*d.size : (s+1)*d.size] {
			dst[j] = lut[p]
		}
	} else {
		mean, std := d.mean, d.std
		for j, v := range d.feat[s*d.size : (s+1)*d.size] {
			dst[j] = (v - mean) / std
		}
	}
	return d.labels[s]
}

// Normalize returns the dataset with features normalised as (x-mean)/std, where x is
// the pixel value divided by 255 for image datasets and the raw feature for Synthetic
// ones (whose default is mean 0, std 1). It panics if std is not a positive finite
// number.
func (d *Dataset) Normalize(mean, std float32) *Dataset {
	if !(std > 0) || math.IsInf(float64(std), 0) || math.IsNaN(float64(mean)) || math.IsInf(float64(mean), 0) {
		panic(fmt.Sprintf("data: Normalize(%g, %g): std must be positive and both finite", mean, std))
	}
	c := *d
	c.mean, c.std = mean, std
	if c.pix != nil {
		c.lut = pixelTable(mean, std)
	}
	return &c
}

// pixelTable computes the normalised value of every byte the way torchvision's
// ToTensor+Normalize does, in float32: (p/255 - mean) / std.
func pixelTable(mean, std float32) *[256]float32 {
	var t [256]float32
	for p := range t {
		t[p] = (float32(p)/255 - mean) / std
	}
	return &t
}

// Subset returns the dataset made of the examples idx names, in that order (an index
// may repeat); Head(n) is the common case of the first n. It panics on an index out
// of range.
func (d *Dataset) Subset(idx []int) *Dataset {
	c := *d
	c.index = make([]int, len(idx))
	for k, i := range idx {
		c.index[k] = d.stored(i)
	}
	c.n = len(idx)
	c.name = fmt.Sprintf("%s[subset of %d]", d.name, len(idx))
	return &c
}

// Head returns the first n examples (all of them if n ≥ Len()).
func (d *Dataset) Head(n int) *Dataset {
	n = max(0, min(n, d.n))
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return d.Subset(idx)
}

// FromIDX builds an image dataset from images and labels read from IDX files. The
// number of classes is 10, or the largest label plus one if that is more. Features
// are normalised with Fashion-MNIST's mean and std (see Normalize).
func FromIDX(images *Images, labels *Labels) (*Dataset, error) {
	if images.N != labels.N {
		return nil, fmt.Errorf("data: %d images but %d labels; the two files must be a matching pair", images.N, labels.N)
	}
	if len(images.Pixels) != images.N*images.Rows*images.Cols || len(labels.Values) != labels.N {
		return nil, fmt.Errorf("data: inconsistent Images (%d×%d×%d, %d pixels) or Labels (%d, %d values)",
			images.N, images.Rows, images.Cols, len(images.Pixels), labels.N, len(labels.Values))
	}
	d := &Dataset{
		name:    "idx",
		shape:   tensor.Shape{1, images.Rows, images.Cols},
		size:    images.Rows * images.Cols,
		classes: 10,
		pix:     images.Pixels,
		labels:  make([]int64, labels.N),
		n:       images.N,
	}
	for i, v := range labels.Values {
		d.labels[i] = int64(v)
		d.classes = max(d.classes, int(v)+1)
	}
	return d.Normalize(FashionMNISTMean, FashionMNISTStd), nil
}

// LoadIDX reads an image file and its label file (raw or gzip) into a Dataset, and
// checks that they hold the same number of examples.
func LoadIDX(imagesPath, labelsPath string) (*Dataset, error) {
	var (
		img    *Images
		lab    *Labels
		ie, le error
		wg     sync.WaitGroup
	)
	// Decompressing the images is the slow part; read the two files side by side.
	wg.Go(func() { img, ie = ReadIDXImages(imagesPath) })
	lab, le = ReadIDXLabels(labelsPath)
	wg.Wait()
	if ie != nil {
		return nil, ie
	}
	if le != nil {
		return nil, le
	}
	if img.N != lab.N {
		return nil, fileErr(imagesPath, nil, "count mismatch: %d images, but %s has %d labels; the two files must be a matching pair", img.N, labelsPath, lab.N)
	}
	d, err := FromIDX(img, lab)
	if err != nil {
		return nil, err
	}
	d.name = filepath.Base(imagesPath)
	return d, nil
}

// The four Fashion-MNIST files, each looked for with and without ".gz".
var fashionFiles = [4]string{
	"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
	"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
}

// notFoundError is a missing-data error that errors.Is matches with fs.ErrNotExist.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }
func (e *notFoundError) Unwrap() error { return fs.ErrNotExist }

// LoadFashionMNIST reads the Fashion-MNIST training (60,000) and test (10,000) sets
// from dir (DefaultDir if dir is ""), where it looks for train-images-idx3-ubyte,
// train-labels-idx1-ubyte, t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each
// with or without ".gz". The same layout of MNIST itself loads too.
//
// If a file is missing, the error lists what was looked for, says how to get the data,
// and matches errors.Is(err, fs.ErrNotExist).
func LoadFashionMNIST(dir string) (train, test *Dataset, err error) {
	if dir == "" {
		dir = DefaultDir
	}
	var paths [4]string
	var missing, found []string
	for k, base := range fashionFiles {
		for _, name := range []string{base + ".gz", base} {
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				paths[k] = p
				found = append(found, name)
				break
			}
		}
		if paths[k] == "" {
			missing = append(missing, base+"(.gz)")
		}
	}
	if len(missing) > 0 {
		where := dir
		if _, err := os.Stat(dir); err != nil {
			where += " (no such directory)"
		}
		// Each file is named once: the missing ones, then the ones that are there.
		what := "missing " + strings.Join(missing, ", ")
		if len(found) == 0 {
			what = "none of the four files is there: " + strings.Join(missing, ", ")
		} else {
			what += " (found " + strings.Join(found, ", ") + ")"
		}
		return nil, nil, &notFoundError{fmt.Sprintf(
			"data: Fashion-MNIST not found in %s: %s; "+
				"install it with `apt-get install dataset-fashion-mnist` (the files land in %s/) "+
				"or pass -data DIR naming a directory that holds the four files",
			where, what, DefaultDir)}
	}
	var errs [2]error
	var wg sync.WaitGroup
	wg.Go(func() { train, errs[0] = LoadIDX(paths[0], paths[1]) })
	test, errs[1] = LoadIDX(paths[2], paths[3])
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	if !train.shape.Equal(test.shape) {
		return nil, nil, fileErr(paths[2], nil, "test images are %d×%d but the training images (%s) are %d×%d",
			test.shape[1], test.shape[2], paths[0], train.shape[1], train.shape[2])
	}
	train.name, test.name = "fashion-mnist/train", "fashion-mnist/test"
	return train, test, nil
}

// Synthetic returns n examples of the given shape in classes Gaussian blobs: class c's
// examples are drawn from N(μ_c, I), with centres μ_c drawn once from
// N(0, 16/features·I) so any two centres lie about 5.7 standard deviations apart —
// separable by a linear model up to a few per cent of overlap. Labels are balanced
// (n/classes each, in shuffled order). The same arguments give the same data. It is
// for tests and benchmarks that need no files; features are not normalised (mean 0,
// std 1, see Normalize).
func Synthetic(n, classes int, shape tensor.Shape, seed uint64) *Dataset {
	size := shape.Numel()
	if n < 0 || classes < 1 || len(shape) == 0 || size < 1 {
		panic(fmt.Sprintf("data: Synthetic(%d, %d, %v): need n ≥ 0, classes ≥ 1 and a non-empty shape", n, classes, shape))
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed_da7a))
	scale := 4 / math.Sqrt(float64(size))
	centers := make([]float32, classes*size)
	for i := range centers {
		centers[i] = float32(rng.NormFloat64() * scale)
	}
	d := &Dataset{
		name:    fmt.Sprintf("synthetic(seed %d)", seed),
		shape:   shape.Clone(),
		size:    size,
		classes: classes,
		feat:    make([]float32, n*size),
		labels:  make([]int64, n),
		n:       n,
		mean:    0,
		std:     1,
	}
	for i, p := range rng.Perm(n) {
		d.labels[p] = int64(i % classes)
	}
	for i, c := range d.labels {
		mu := centers[int(c)*size : (int(c)+1)*size]
		x := d.feat[i*size : (i+1)*size]
		for j := range x {
			x[j] = mu[j] + float32(rng.NormFloat64())
		}
	}
	return d
}
