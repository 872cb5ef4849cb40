package nn

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"slices"
	"unsafe"

	"github.com/gamp-ml/gamp/tensor"
)

// ErrNonFinite is wrapped by the error TensorFile.Verify returns for a floating tensor
// holding NaN or ±Inf where finite values were asked for.
var ErrNonFinite = errors.New("non-finite value")

// TensorInfo is what a file's header says about one tensor.
type TensorInfo struct {
	Name  string
	DType tensor.DType
	Shape tensor.Shape
}

// TensorFile is an open safetensors file whose header was read and validated; the
// tensors' data is read one tensor at a time (ReadInto), through one reusable buffer
// the size of the largest tensor read, so loading a file never holds a second copy of
// it. Close it after use.
type TensorFile struct {
	path      string
	r         io.ReaderAt
	closer    io.Closer
	entries   []fileEntry // by offset
	index     map[string]int
	meta      map[string]string
	sums      map[string]uint32 // nil: the file has no checksums
	dataStart int64
	buf       []uint64 // the read buffer, 8-byte aligned for any element type
}

// OpenTensorFile opens path and reads and validates its header (see LoadFile for what
// is checked) and, when present, its checksums; no tensor data is read.
func OpenTensorFile(path string) (*TensorFile, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, &FileError{Path: path, Msg: "cannot open", Err: err}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &FileError{Path: path, Msg: "cannot stat", Err: err}
	}
	tf, err := newTensorFile(path, f, st.Size())
	if err != nil {
		f.Close()
		return nil, err
	}
	tf.closer = f
	return tf, nil
}

// openRegular opens path for reading after checking that it is a regular file:
// opening a FIFO would block until something writes to it, and a directory or device
// is no tensor file.
func openRegular(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &FileError{Path: path, Msg: "cannot open", Err: err}
	}
	if !st.Mode().IsRegular() {
		return nil, &FileError{Path: path, Msg: fmt.Sprintf("not a regular file (%s)", st.Mode().Type()), Err: ErrCorrupt}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &FileError{Path: path, Msg: "cannot open", Err: err}
	}
	return f, nil
}

// newTensorFile reads the header of a file of size bytes from r.
func newTensorFile(path string, r io.ReaderAt, size int64) (*TensorFile, error) {
	entries, meta, dataStart, err := readHeader(path, r, size)
	if err != nil {
		return nil, err
	}
	tf := &TensorFile{path: path, r: r, entries: entries, meta: meta, dataStart: dataStart, index: map[string]int{}}
	for i, e := range entries {
		tf.index[e.name] = i
	}
	if raw, ok := meta[checksumKey]; ok {
		if tf.sums, err = parseChecksums(path, raw, tf.index); err != nil {
			return nil, err
		}
		delete(meta, checksumKey)
	}
	return tf, nil
}

// parseChecksums decodes the checksum map; it must name every tensor and only those.
func parseChecksums(path, raw string, index map[string]int) (map[string]uint32, error) {
	var hexes map[string]string
	if err := json.Unmarshal([]byte(raw), &hexes); err != nil || hexes == nil {
		return nil, corrupt(path, "", "metadata %q is not a JSON object of checksums", checksumKey)
	}
	sums := make(map[string]uint32, len(hexes))
	for name, h := range hexes {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 4 {
			return nil, corrupt(path, name, "checksum %q is not 8 hex digits", h)
		}
		if _, ok := index[name]; !ok {
			return nil, corrupt(path, name, "has a checksum but no entry in the header")
		}
		sums[name] = binary.BigEndian.Uint32(b)
	}
	for name := range index {
		if _, ok := sums[name]; !ok {
			return nil, corrupt(path, name, "has no checksum (the file's checksums are incomplete)")
		}
	}
	return sums, nil
}

// ReadMetadata reads only the header of the safetensors file at path and returns its
// metadata: the tensors' data is neither read nor checked against the file's size.
func ReadMetadata(path string) (map[string]string, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var nb [8]byte
	if err := readAt(f, nb[:], 0); err != nil {
		return nil, &FileError{Path: path, Msg: "cannot read the header length", Err: fmt.Errorf("%w: %w", ErrCorrupt, err)}
	}
	n := binary.LittleEndian.Uint64(nb[:])
	if n > maxHeader {
		return nil, corrupt(path, "", "header length %d exceeds the %d-byte limit", n, maxHeader)
	}
	hdr := make([]byte, n)
	if err := readAt(f, hdr, 8); err != nil {
		return nil, &FileError{Path: path, Msg: "cannot read the header", Err: fmt.Errorf("%w: %w", ErrCorrupt, err)}
	}
	_, meta, err := parseHeaderEntries(path, hdr, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	delete(meta, checksumKey)
	return meta, nil
}

// Close closes the file.
func (f *TensorFile) Close() error {
	f.buf = nil
	if f.closer != nil {
		return f.closer.Close()
	}
	return nil
}

// Path returns the file's path.
func (f *TensorFile) Path() string { return f.path }

// Metadata returns the file's metadata (gamp's checksums left out).
func (f *TensorFile) Metadata() map[string]string { return f.meta }

// HasChecksums reports whether the file carries a checksum for every tensor (files
// saved before checksums existed, and by other writers, do not).
func (f *TensorFile) HasChecksums() bool { return f.sums != nil }

// Tensors describes the file's tensors, sorted by name.
func (f *TensorFile) Tensors() []TensorInfo {
	out := make([]TensorInfo, len(f.entries))
	for i, e := range f.entries {
		out[i] = TensorInfo{Name: e.name, DType: e.dtype, Shape: e.shape}
	}
	slices.SortFunc(out, func(a, b TensorInfo) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// Lookup describes the tensor called name.
func (f *TensorFile) Lookup(name string) (TensorInfo, bool) {
	i, ok := f.index[name]
	if !ok {
		return TensorInfo{}, false
	}
	e := f.entries[i]
	return TensorInfo{Name: e.name, DType: e.dtype, Shape: e.shape}, true
}

// raw reads entry e's bytes into the reusable buffer and checks its checksum.
func (f *TensorFile) raw(e fileEntry) ([]byte, error) {
	n := e.end - e.begin
	if words := int((n + 7) / 8); cap(f.buf) < words {
		f.buf = make([]uint64, words)
	}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f.buf[:cap(f.buf)]))), n)
	if err := readAt(f.r, raw, f.dataStart+e.begin); err != nil {
		return nil, &FileError{Path: f.path, Tensor: e.name, Msg: "cannot read the data", Err: err}
	}
	if f.sums != nil {
		if got, want := crc32.Checksum(raw, castagnoli), f.sums[e.name]; got != want {
			return nil, corrupt(f.path, e.name, "the data does not match its checksum (crc32c %08x, saved %08x): the file was damaged after it was written", got, want)
		}
	}
	if e.dtype == tensor.Bool {
		for i, b := range raw {
			if b > 1 {
				return nil, corrupt(f.path, e.name, "BOOL element %d holds byte %d, want 0 or 1", i, b)
			}
		}
	}
	return raw, nil
}

// Verify reads every tensor once, checking its checksum (when the file has them) and
// its bytes, and — for the tensors finite reports true for (nil: none) — that no
// floating element is NaN or ±Inf. Errors name the tensor; a non-finite value wraps
// ErrNonFinite. A load calls it before changing anything, so a damaged file is refused
// whole.
func (f *TensorFile) Verify(finite func(name string) bool) error {
	for _, e := range f.entries {
		raw, err := f.raw(e)
		if err != nil {
			return err
		}
		if finite == nil || !finite(e.name) {
			continue
		}
		if i := firstNonFinite(e.dtype, raw); i >= 0 {
			return &FileError{Path: f.path, Tensor: e.name, Msg: fmt.Sprintf("element %d is NaN or infinite", i), Err: ErrNonFinite}
		}
	}
	return nil
}

// firstNonFinite returns the index of the first NaN or ±Inf element of raw, -1 if none
// (or if dt is not floating).
func firstNonFinite(dt tensor.DType, raw []byte) int {
	switch dt {
	case tensor.Float32:
		for i := 0; i+4 <= len(raw); i += 4 {
			if binary.LittleEndian.Uint32(raw[i:])&0x7f800000 == 0x7f800000 {
				return i / 4
			}
		}
	case tensor.Float64:
		for i := 0; i+8 <= len(raw); i += 8 {
			if binary.LittleEndian.Uint64(raw[i:])&0x7ff0000000000000 == 0x7ff0000000000000 {
				return i / 8
			}
		}
	case tensor.Float16, tensor.BFloat16:
		mask := uint16(0x7c00)
		if dt == tensor.BFloat16 {
			mask = 0x7f80
		}
		for i := 0; i+2 <= len(raw); i += 2 {
			if binary.LittleEndian.Uint16(raw[i:])&mask == mask {
				return i / 2
			}
		}
	}
	return -1
}

// nativeLittleEndian reports whether the host stores numbers as the format does, so
// the read buffer can be handed to the backend as typed elements without decoding.
var nativeLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// ReadInto reads the tensor called name into dst, which must have its shape; dst's
// dtype may differ within floating types (or within integer types): the values are
// converted, rounding to nearest even. A dense tensor of the saved dtype is filled
// straight from the read buffer; otherwise one temporary tensor is made. It checks the
// tensor's checksum again (the file could have changed since Verify).
func (f *TensorFile) ReadInto(name string, dst *tensor.Tensor) error {
	i, ok := f.index[name]
	if !ok {
		return &FileError{Path: f.path, Tensor: name, Msg: "no such tensor in the file"}
	}
	e := f.entries[i]
	if !dst.Shape().Equal(e.shape) {
		return &FileError{Path: f.path, Tensor: name, Msg: fmt.Sprintf("has shape %v in the file, the destination has %v", e.shape, dst.Shape())}
	}
	if kindOf(dst.DType()) != kindOf(e.dtype) {
		return &FileError{Path: f.path, Tensor: name, Msg: fmt.Sprintf("is %s in the file, the destination is %s", e.dtype, dst.DType())}
	}
	raw, err := f.raw(e)
	if err != nil {
		return err
	}
	if e.shape.Numel() == 0 {
		return nil
	}
	var derr error
	oerr := tensor.CatchOOM(func() {
		if dst.DType() == e.dtype && dst.IsContiguous() && nativeLittleEndian {
			s, off := dst.Storage()
			dst.Backend().Upload(s, off, typedView(e.dtype, raw))
			return
		}
		var tmp *tensor.Tensor
		if tmp, derr = decodeData(f.path, e, raw); derr != nil {
			return
		}
		defer tmp.Release()
		if tmp.Device() != dst.Device() {
			moved := tmp.To(dst.Device())
			defer moved.Release()
			tmp = moved
		}
		dst.CopyFrom(tmp)
	})
	if oerr != nil {
		return &FileError{Path: f.path, Tensor: name, Msg: "cannot allocate", Err: oerr}
	}
	return derr
}

// typedView returns raw as the slice type Upload takes for dt, sharing its memory
// (raw is 8-byte aligned: it comes from the []uint64 read buffer).
func typedView(dt tensor.DType, raw []byte) any {
	p := unsafe.Pointer(unsafe.SliceData(raw))
	switch dt {
	case tensor.Float32:
		return unsafe.Slice((*float32)(p), len(raw)/4)
	case tensor.Float64:
		return unsafe.Slice((*float64)(p), len(raw)/8)
	case tensor.Int32:
		return unsafe.Slice((*int32)(p), len(raw)/4)
	case tensor.Int64:
		return unsafe.Slice((*int64)(p), len(raw)/8)
	case tensor.Bool: // raw checked to hold only 0 and 1
		return unsafe.Slice((*bool)(p), len(raw))
	default: // Float16, BFloat16: raw bits
		return unsafe.Slice((*uint16)(p), len(raw)/2)
	}
}
