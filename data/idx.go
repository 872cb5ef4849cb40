package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// IDX magic numbers: two zero bytes, the element type (0x08: unsigned byte) and the
// number of dimensions.
const (
	idxImagesMagic = 0x00000803
	idxLabelsMagic = 0x00000801
	idxUbyte       = 0x08
)

// Images is the content of an IDX image file: N images of Rows×Cols unsigned-byte
// pixels, row-major, one image after another (len(Pixels) == N*Rows*Cols).
type Images struct {
	N, Rows, Cols int
	Pixels        []uint8
}

// Image returns the pixels of image i (a slice of Pixels, not a copy).
func (im *Images) Image(i int) []uint8 {
	sz := im.Rows * im.Cols
	return im.Pixels[i*sz : (i+1)*sz : (i+1)*sz]
}

// Labels is the content of an IDX label file: N class labels.
type Labels struct {
	N      int
	Values []uint8
}

// FileError is the error every reader in this package returns for a file it cannot
// use: it names the file and the problem, and wraps the underlying error, if any
// (so errors.Is(err, fs.ErrNotExist) or errors.Is(err, gzip.ErrChecksum) work).
type FileError struct {
	Path    string // the file, as the caller named it
	Problem string // what is wrong, e.g. "truncated: header says …"
	Err     error  // the underlying error, or nil
}

func (e *FileError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("data: %s: %s: %v", e.Path, e.Problem, e.Err)
	}
	return fmt.Sprintf("data: %s: %s", e.Path, e.Problem)
}

func (e *FileError) Unwrap() error { return e.Err }

func fileErr(path string, err error, format string, args ...any) error {
	return &FileError{Path: path, Problem: fmt.Sprintf(format, args...), Err: err}
}

// ReadIDXImages reads an IDX3 unsigned-byte image file (MNIST, Fashion-MNIST), raw or
// gzip-compressed; compression is detected from the content (1f 8b), not the name. It
// checks the magic number, the dimensions and that the payload is exactly as long as
// the header says. Errors are *FileError values naming the file.
func ReadIDXImages(path string) (*Images, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fileErr(path, err, "cannot read IDX images")
	}
	return decodeImages(path, raw)
}

// ReadIDXLabels reads an IDX1 unsigned-byte label file, raw or gzip-compressed, and
// checks that every label is in 0..9. Use ReadIDXLabelsClasses for another number of
// classes.
func ReadIDXLabels(path string) (*Labels, error) { return ReadIDXLabelsClasses(path, 10) }

// ReadIDXLabelsClasses is ReadIDXLabels for labels in 0..classes-1 (classes ≤ 0 or
// > 256 accepts every byte value).
func ReadIDXLabelsClasses(path string, classes int) (*Labels, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fileErr(path, err, "cannot read IDX labels")
	}
	return decodeLabels(path, raw, classes)
}

func decodeImages(path string, raw []byte) (*Images, error) {
	var hdr [16]byte
	src, err := readIDX(path, raw, "IDX images", hdr[:], idxImagesMagic, "images, rows, cols")
	if err != nil {
		return nil, err
	}
	n := uint64(binary.BigEndian.Uint32(hdr[4:]))
	rows := uint64(binary.BigEndian.Uint32(hdr[8:]))
	cols := uint64(binary.BigEndian.Uint32(hdr[12:]))
	if rows == 0 || cols == 0 {
		return nil, fileErr(path, nil, "bad dimensions: header says images of %d×%d; each side must be at least 1", rows, cols)
	}
	size := rows * cols // < 2^64: both sides are < 2^32
	if n != 0 && size > uint64(math.MaxInt)/n {
		return nil, fileErr(path, nil, "bad dimensions: header says %d images of %d×%d, more bytes than this program can address", n, rows, cols)
	}
	want := n * size
	what := fmt.Sprintf("%d images of %d×%d (%d bytes)", n, rows, cols, want)
	pix, err := readPayload(path, src, int(want), what)
	if err != nil {
		return nil, err
	}
	return &Images{N: int(n), Rows: int(rows), Cols: int(cols), Pixels: pix}, nil
}

func decodeLabels(path string, raw []byte, classes int) (*Labels, error) {
	var hdr [8]byte
	src, err := readIDX(path, raw, "IDX labels", hdr[:], idxLabelsMagic, "labels")
	if err != nil {
		return nil, err
	}
	n := uint64(binary.BigEndian.Uint32(hdr[4:]))
	if n > uint64(math.MaxInt) {
		return nil, fileErr(path, nil, "bad dimensions: header says %d labels, more bytes than this program can address", n)
	}
	vals, err := readPayload(path, src, int(n), fmt.Sprintf("%d labels (%d bytes)", n, n))
	if err != nil {
		return nil, err
	}
	if classes > 0 && classes <= 256 {
		for i, v := range vals {
			if int(v) >= classes {
				return nil, fileErr(path, nil, "label %d at index %d is out of range 0..%d", v, i, classes-1)
			}
		}
	}
	return &Labels{N: int(n), Values: vals}, nil
}

// idxSource is an IDX file's content after the header: the rest of a raw file, or a
// gzip stream positioned after the header.
type idxSource struct {
	rest []byte       // raw file: the bytes after the header
	zr   *gzip.Reader // gzip file: the decompressor
	zlen int          // gzip file: compressed size, to size the first buffer
}

// readIDX fills hdr from raw (decompressing if it is gzip) and checks the magic number
// against want, whose last byte is the number of dimensions.
func readIDX(path string, raw []byte, kind string, hdr []byte, want uint32, dimNames string) (idxSource, error) {
	var src idxSource
	got := 0 // header bytes present
	if len(raw) >= 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return src, fileErr(path, err, "bad gzip stream")
		}
		src.zr, src.zlen = zr, len(raw)
		got, err = io.ReadFull(zr, hdr)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return src, fileErr(path, err, "bad gzip stream in the header")
		}
	} else {
		got = copy(hdr, raw)
		src.rest = raw[got:]
	}
	// Check the magic number first when it is there: "this is a labels file" says
	// more than "the header is short".
	if got >= 4 {
		if err := checkMagic(path, hdr, kind, want, dimNames); err != nil {
			return src, err
		}
	}
	if got < len(hdr) {
		return src, fileErr(path, nil, "truncated header: only %d of the %d bytes of an %s header", got, len(hdr), kind)
	}
	return src, nil
}

func checkMagic(path string, hdr []byte, kind string, want uint32, dimNames string) error {
	magic := binary.BigEndian.Uint32(hdr)
	wantDims := int(want & 0xff)
	switch {
	case hdr[0] != 0 || hdr[1] != 0:
		return fileErr(path, nil, "bad magic 0x%08x: not an IDX file (want 0x%08x, %s); is it the right file, or compressed with something other than gzip?", magic, want, kind)
	case hdr[2] != idxUbyte:
		return fileErr(path, nil, "bad magic 0x%08x: element type 0x%02x, want 0x%02x (unsigned byte) for %s", magic, hdr[2], idxUbyte, kind)
	case int(hdr[3]) != wantDims:
		hint := ""
		switch magic {
		case idxLabelsMagic:
			hint = " (this looks like a labels file)"
		case idxImagesMagic:
			hint = " (this looks like an images file)"
		}
		return fileErr(path, nil, "bad magic 0x%08x: %d dimensions, want %d (%s) for %s%s", magic, hdr[3], wantDims, dimNames, kind, hint)
	}
	return nil
}

// readPayload returns exactly want bytes after the header, and fails if fewer follow
// or if anything follows them.
func readPayload(path string, src idxSource, want int, what string) ([]byte, error) {
	if src.zr == nil {
		switch {
		case len(src.rest) < want:
			return nil, fileErr(path, nil, "truncated: header says %s but only %s", what, follow(len(src.rest)))
		case len(src.rest) > want:
			return nil, fileErr(path, nil, "trailing garbage: %s after the %s the header announces", nbytes(len(src.rest)-want), what)
		}
		return src.rest, nil
	}
	// Grow the buffer with the data rather than trusting the header's size, so a
	// corrupt header cannot make us allocate gigabytes up front.
	var buf bytes.Buffer
	buf.Grow(min(want+1, 16*src.zlen+1<<16))
	_, err := buf.ReadFrom(io.LimitReader(src.zr, int64(want)+1))
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fileErr(path, err, "truncated: header says %s but the gzip stream ends after %d bytes", what, buf.Len())
	case err != nil:
		return nil, fileErr(path, err, "bad gzip stream after %d bytes of data", buf.Len())
	case buf.Len() < want:
		return nil, fileErr(path, nil, "truncated: header says %s but only %s", what, follow(buf.Len()))
	case buf.Len() > want:
		// Count what follows (up to a limit: the stream may be a decompression bomb).
		const countLimit = 1 << 20
		n, _ := io.Copy(io.Discard, io.LimitReader(src.zr, countLimit))
		more := ""
		if n == countLimit {
			more = "at least "
		}
		return nil, fileErr(path, nil, "trailing garbage: %s%s after the %s the header announces", more, nbytes(int(n)+1), what)
	}
	return buf.Bytes()[:want:want], nil
}

func nbytes(n int) string {
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

func follow(n int) string {
	if n == 1 {
		return "1 byte follows"
	}
	return fmt.Sprintf("%d bytes follow", n)
}
