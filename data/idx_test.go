package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// idxImages encodes an IDX3 image file.
func idxImages(n, rows, cols int, pix []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, idxImagesMagic)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = binary.BigEndian.AppendUint32(b, uint32(rows))
	b = binary.BigEndian.AppendUint32(b, uint32(cols))
	return append(b, pix...)
}

// idxLabels encodes an IDX1 label file.
func idxLabels(vals []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, idxLabelsMagic)
	b = binary.BigEndian.AppendUint32(b, uint32(len(vals)))
	return append(b, vals...)
}

func gz(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, err := w.Write(b)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func writeFile(t testing.TB, dir, name string, b []byte) string {
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

func ramp(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

func TestIDXRoundTrip(t *testing.T) {
	pix := ramp(3 * 4 * 5)
	labs := []byte{0, 9, 4}
	for _, tc := range []struct {
		name string
		gzip bool
		file string // compression must be detected from content, not name
	}{
		{"raw", false, "images-idx3-ubyte"},
		{"gzip", true, "images-idx3-ubyte.gz"},
		{"gzip without .gz", true, "images-idx3-ubyte"},
		{"raw named .gz", false, "images-idx3-ubyte.gz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ib, lb := idxImages(3, 4, 5, pix), idxLabels(labs)
			if tc.gzip {
				ib, lb = gz(t, ib), gz(t, lb)
			}
			ip := writeFile(t, dir, tc.file, ib)
			lp := writeFile(t, dir, "labels"+filepath.Ext(tc.file), lb)

			im, err := ReadIDXImages(ip)
			require.NoError(t, err)
			assert.Equal(t, Images{N: 3, Rows: 4, Cols: 5, Pixels: pix}, *im)
			assert.Equal(t, pix[20:40], im.Image(1))

			lab, err := ReadIDXLabels(lp)
			require.NoError(t, err)
			assert.Equal(t, Labels{N: 3, Values: labs}, *lab)
		})
	}
}

func TestIDXEmptySet(t *testing.T) {
	dir := t.TempDir()
	im, err := ReadIDXImages(writeFile(t, dir, "i", idxImages(0, 28, 28, nil)))
	require.NoError(t, err)
	assert.Equal(t, 0, im.N)
	lab, err := ReadIDXLabels(writeFile(t, dir, "l", gz(t, idxLabels(nil))))
	require.NoError(t, err)
	assert.Equal(t, 0, lab.N)
}

func TestIDXCorrupt(t *testing.T) {
	good := idxImages(3, 4, 5, ramp(60))
	withMagic := func(b []byte, m uint32) []byte {
		c := bytes.Clone(b)
		binary.BigEndian.PutUint32(c, m)
		return c
	}
	badCRC := gz(t, good)
	badCRC[len(badCRC)-8] ^= 0xff // CRC-32 in the gzip trailer
	cutStream := gz(t, good)
	cutStream = cutStream[:len(cutStream)-12]

	type reader func(string) error
	images := func(p string) error { _, err := ReadIDXImages(p); return err }
	labels := func(p string) error { _, err := ReadIDXLabels(p); return err }
	labels3 := func(p string) error { _, err := ReadIDXLabelsClasses(p, 3); return err }

	for _, tc := range []struct {
		name    string
		content []byte
		read    reader
		want    []string
		is      error
	}{
		{"labels file read as images", idxLabels([]byte{1, 2}), images,
			[]string{"bad magic 0x00000801", "1 dimensions, want 3", "looks like a labels file"}, nil},
		{"images file read as labels", good, labels,
			[]string{"bad magic 0x00000803", "3 dimensions, want 1", "looks like an images file"}, nil},
		{"not IDX", append([]byte("PK\x03\x04"), make([]byte, 60)...), images,
			[]string{"bad magic 0x504b0304", "not an IDX file"}, nil},
		{"element type", withMagic(good, 0x00000d03), images,
			[]string{"bad magic 0x00000d03", "element type 0x0d, want 0x08"}, nil},
		{"wrong dims", withMagic(good, 0x00000804), images,
			[]string{"4 dimensions, want 3"}, nil},
		{"zero rows", idxImages(3, 0, 5, nil), images,
			[]string{"bad dimensions", "images of 0×5"}, nil},
		{"absurd size", idxImages(0xffffffff, 0xffffffff, 0xffffffff, nil), images,
			[]string{"bad dimensions", "4294967295 images of 4294967295×4294967295"}, nil},
		{"empty file", nil, images,
			[]string{"truncated header: only 0 of the 16 bytes of an IDX images header"}, nil},
		{"truncated header", good[:10], images,
			[]string{"truncated header: only 10 of the 16 bytes"}, nil},
		{"truncated header gzip", gz(t, good[:10]), images,
			[]string{"truncated header: only 10 of the 16 bytes"}, nil},
		{"truncated labels header", idxLabels(nil)[:7], labels,
			[]string{"truncated header: only 7 of the 8 bytes of an IDX labels header"}, nil},
		{"truncated payload", good[:len(good)-1], images,
			[]string{"truncated: header says 3 images of 4×5 (60 bytes) but only 59 bytes follow"}, nil},
		{"truncated payload gzip", gz(t, good[:17]), images,
			[]string{"truncated: header says 3 images of 4×5 (60 bytes) but only 1 byte follows"}, nil},
		{"truncated gzip stream", cutStream, images,
			[]string{"truncated: header says 3 images of 4×5 (60 bytes) but the gzip stream ends"}, nil},
		{"truncated labels", idxLabels([]byte{1, 2, 3})[:10], labels,
			[]string{"truncated: header says 3 labels (3 bytes) but only 2 bytes follow"}, nil},
		{"trailing bytes", append(bytes.Clone(good), 0, 0), images,
			[]string{"trailing garbage: 2 bytes after the 3 images of 4×5 (60 bytes)"}, nil},
		{"trailing bytes gzip", gz(t, append(bytes.Clone(good), 1, 2, 3)), images,
			[]string{"trailing garbage: 3 bytes after the 3 images"}, nil},
		{"trailing label byte", append(idxLabels([]byte{1, 2}), 7), labels,
			[]string{"trailing garbage: 1 byte after the 2 labels"}, nil},
		{"bad gzip header", []byte{0x1f, 0x8b, 0, 0}, images,
			[]string{"bad gzip stream"}, nil},
		{"bad gzip checksum", badCRC, images,
			[]string{"bad gzip stream"}, gzip.ErrChecksum},
		{"label out of range", idxLabels([]byte{0, 9, 10, 3}), labels,
			[]string{"label 10 at index 2 is out of range 0..9"}, nil},
		{"label out of range for 3 classes", idxLabels([]byte{0, 2, 1, 3}), labels3,
			[]string{"label 3 at index 3 is out of range 0..2"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "train-images-idx3-ubyte.gz", tc.content)
			err := tc.read(p)
			require.Error(t, err)
			msg := err.Error()
			assert.True(t, strings.HasPrefix(msg, "data: "+p+": "), "error does not name the file: %s", msg)
			for _, w := range tc.want {
				assert.Contains(t, msg, w)
			}
			var fe *FileError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, p, fe.Path)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
		})
	}
}

func TestIDXMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nope-idx3-ubyte")
	for _, read := range []func(string) error{
		func(p string) error { _, err := ReadIDXImages(p); return err },
		func(p string) error { _, err := ReadIDXLabels(p); return err },
	} {
		err := read(p)
		require.Error(t, err)
		assert.ErrorIs(t, err, fs.ErrNotExist)
		assert.Contains(t, err.Error(), "data: "+p+": cannot read IDX")
	}
}

func TestLoadIDXCountMismatch(t *testing.T) {
	dir := t.TempDir()
	ip := writeFile(t, dir, "i.gz", gz(t, idxImages(3, 2, 2, ramp(12))))
	lp := writeFile(t, dir, "l", idxLabels([]byte{1, 2}))
	_, err := LoadIDX(ip, lp)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "data: "+ip+": count mismatch: 3 images, but "+lp+" has 2 labels")

	_, err = FromIDX(&Images{N: 3, Rows: 2, Cols: 2, Pixels: ramp(12)}, &Labels{N: 2, Values: []byte{1, 2}})
	assert.ErrorContains(t, err, "3 images but 2 labels")
}

// fakeFashion writes a small Fashion-MNIST-shaped directory: train with nTrain
// examples, t10k with nTest, some files gzip'd and some raw.
func fakeFashion(t testing.TB, nTrain, nTest int) string {
	dir := t.TempDir()
	lab := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i % 10)
		}
		return b
	}
	writeFile(t, dir, "train-images-idx3-ubyte.gz", gz(t, idxImages(nTrain, 28, 28, ramp(nTrain*784))))
	writeFile(t, dir, "train-labels-idx1-ubyte", idxLabels(lab(nTrain)))
	writeFile(t, dir, "t10k-images-idx3-ubyte", idxImages(nTest, 28, 28, ramp(nTest*784)))
	writeFile(t, dir, "t10k-labels-idx1-ubyte.gz", gz(t, idxLabels(lab(nTest))))
	return dir
}

func TestLoadFashionMNISTFiles(t *testing.T) {
	dir := fakeFashion(t, 30, 20)
	train, test, err := LoadFashionMNIST(dir)
	require.NoError(t, err)
	assert.Equal(t, 30, train.Len())
	assert.Equal(t, 20, test.Len())
	assert.Equal(t, []int{1, 28, 28}, []int(train.Shape()))
	assert.Equal(t, 784, train.Features())
	assert.Equal(t, 10, train.Classes())
	assert.Equal(t, "fashion-mnist/train", train.Name())
	x, y := train.Example(1)
	assert.Equal(t, int64(1), y)
	pix := ramp(2 * 784)[784:]
	for j := range x {
		want := (float32(pix[j])/255 - FashionMNISTMean) / FashionMNISTStd
		require.Equal(t, want, x[j], "feature %d", j)
	}
}

func TestLoadFashionMNISTMissing(t *testing.T) {
	dir := fakeFashion(t, 3, 2)
	require.NoError(t, os.Remove(filepath.Join(dir, "t10k-labels-idx1-ubyte.gz")))
	_, _, err := LoadFashionMNIST(dir)
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	msg := err.Error()
	for _, w := range []string{
		"data: Fashion-MNIST not found in " + dir + ": missing t10k-labels-idx1-ubyte(.gz) (found",
		"train-images-idx3-ubyte.gz, train-labels-idx1-ubyte, t10k-images-idx3-ubyte)",
		"apt-get install dataset-fashion-mnist",
		"/usr/share/datasets/fashion-mnist/",
		"-data DIR",
	} {
		assert.Contains(t, msg, w)
	}

	_, _, err = LoadFashionMNIST(filepath.Join(dir, "absent"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "absent (no such directory): none of the four files is there: train-images-idx3-ubyte(.gz), train-labels")
	// Each file is named once (issue 16: the message listed them twice).
	assert.Equal(t, 1, strings.Count(err.Error(), "t10k-labels-idx1-ubyte"), err.Error())
}

func TestLoadFashionMNISTCorrupt(t *testing.T) {
	dir := fakeFashion(t, 3, 2)
	p := writeFile(t, dir, "t10k-labels-idx1-ubyte.gz", gz(t, idxLabels([]byte{1})))
	_, _, err := LoadFashionMNIST(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "count mismatch: 2 images, but "+p+" has 1 labels")

	dir = fakeFashion(t, 3, 2)
	p = writeFile(t, dir, "t10k-images-idx3-ubyte", idxImages(2, 32, 32, ramp(2*32*32)))
	_, _, err = LoadFashionMNIST(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "data: "+p+": test images are 32×32 but the training images")
}

func FuzzReadIDX(f *testing.F) {
	good := idxImages(2, 3, 2, ramp(12))
	f.Add(good)
	f.Add(gz(f, good))
	f.Add(good[:20])
	f.Add(idxLabels([]byte{1, 2, 3}))
	f.Add(gz(f, idxLabels([]byte{1, 2, 11})))
	f.Add(idxImages(0xffffffff, 1, 1, nil))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, b []byte) {
		im, err := decodeImages("fuzz", b)
		if err == nil {
			if len(im.Pixels) != im.N*im.Rows*im.Cols || im.Rows < 1 || im.Cols < 1 {
				t.Fatalf("inconsistent images %d×%d×%d with %d pixels", im.N, im.Rows, im.Cols, len(im.Pixels))
			}
		} else if !strings.HasPrefix(err.Error(), "data: fuzz: ") {
			t.Fatalf("error does not name the file: %v", err)
		}
		for _, classes := range []int{10, 0} {
			lab, err := decodeLabels("fuzz", b, classes)
			if err == nil {
				if len(lab.Values) != lab.N {
					t.Fatalf("%d labels but %d values", lab.N, len(lab.Values))
				}
				for _, v := range lab.Values {
					if classes > 0 && int(v) >= classes {
						t.Fatalf("label %d passed with %d classes", v, classes)
					}
				}
			} else if !strings.HasPrefix(err.Error(), "data: fuzz: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
		}
	})
}

func TestFileErrorUnwrap(t *testing.T) {
	inner := errors.New("boom")
	err := fileErr("f", inner, "problem %d", 1)
	assert.Equal(t, "data: f: problem 1: boom", err.Error())
	assert.ErrorIs(t, err, inner)
}
