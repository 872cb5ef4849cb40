package nn

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gamp-ml/gamp/tensor"
)

// Files of tensors use the safetensors format (https://github.com/huggingface/safetensors),
// so other tools read what gamp writes and the other way round:
//
//	8 bytes     N, the header length, unsigned little-endian
//	N bytes     a JSON object {"name": {"dtype": "F32", "shape": [2, 3],
//	            "data_offsets": [begin, end]}, …, "__metadata__": {"key": "value"}},
//	            padded with spaces to a multiple of 8 bytes
//	the rest    the tensors' data, row-major and little-endian; offsets count from the
//	            start of this region, and the tensors tile it exactly
//
// gamp lays the tensors out as the reference implementation does (see layoutRank).

// ErrCorrupt is wrapped by every error about a file that is not a valid safetensors
// file (check with errors.Is).
var ErrCorrupt = errors.New("corrupt safetensors file")

// FileError reports a problem with a tensor file: the file, the tensor when the
// problem is about one, and what is wrong. It wraps ErrCorrupt for invalid contents
// and the underlying error for I/O failures.
type FileError struct {
	Path   string
	Tensor string // "" when the problem is not about one tensor
	Msg    string
	Err    error
}

func (e *FileError) Error() string {
	var sb strings.Builder
	sb.WriteString("nn: ")
	sb.WriteString(e.Path)
	sb.WriteString(": ")
	if e.Tensor != "" {
		fmt.Fprintf(&sb, "tensor %q: ", e.Tensor)
	}
	sb.WriteString(e.Msg)
	if e.Err != nil && e.Err != ErrCorrupt {
		sb.WriteString(": ")
		sb.WriteString(e.Err.Error())
	}
	return sb.String()
}

// Unwrap returns ErrCorrupt or the underlying I/O error.
func (e *FileError) Unwrap() error { return e.Err }

func corrupt(path, name, format string, args ...any) error {
	return &FileError{Path: path, Tensor: name, Msg: fmt.Sprintf(format, args...), Err: ErrCorrupt}
}

// maxHeader is the largest header accepted, the reference implementation's limit.
const maxHeader = 100 << 20

// metadataKey is the reserved header key holding the free-form string map.
const metadataKey = "__metadata__"

var dtypeCodes = map[tensor.DType]string{
	tensor.Float32:  "F32",
	tensor.Float16:  "F16",
	tensor.BFloat16: "BF16",
	tensor.Float64:  "F64",
	tensor.Int32:    "I32",
	tensor.Int64:    "I64",
	tensor.Bool:     "BOOL",
}

// layoutRank orders dtypes as the reference implementation's Dtype enum does (by
// increasing alignment); files list tensors by decreasing rank, then by name, which
// aligns each tensor's data to its element size and gives gamp's files the
// reference's layout.
var layoutRank = map[tensor.DType]int{
	tensor.Bool: 0, tensor.Float16: 1, tensor.BFloat16: 2, tensor.Int32: 3,
	tensor.Float32: 4, tensor.Float64: 5, tensor.Int64: 6,
}

// otherCodes are dtypes of the format that gamp has no tensor type for.
var otherCodes = []string{"U8", "I8", "I16", "U16", "U32", "U64", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"}

func dtypeOfCode(code string) (tensor.DType, bool) {
	for dt, c := range dtypeCodes {
		if c == code {
			return dt, true
		}
	}
	return 0, false
}

// --- writing

type saveEntry struct {
	name       string
	t          *tensor.Tensor
	begin, end int64
}

// SaveFile writes tensors and metadata to path in the safetensors format, byte for
// byte as the reference implementation lays it out (no checksums; SaveFileWith adds
// them). The write is atomic: the file is written to a temporary file in the same
// directory, synced and renamed over path, so on any error the previous file at path
// is intact and the temporary file is gone. Tensors may live on any device and be
// strided views; they are written row-major. The metadata may be nil.
func SaveFile(path string, tensors map[string]*tensor.Tensor, metadata map[string]string) error {
	return SaveFileWith(path, tensors, metadata, SaveOptions{})
}

// SaveOptions are SaveFileWith's options; the zero value writes a plain file.
type SaveOptions struct {
	// Checksums stores the CRC-32C of every tensor's bytes in the metadata (key
	// "gamp.crc32c", a JSON object from tensor name to 8 hex digits), so a load finds
	// a flipped byte and names the tensor. Other readers see one more metadata entry.
	Checksums bool
}

// checksumKey is the metadata key holding the tensors' CRC-32C values.
const checksumKey = "gamp.crc32c"

// SaveFileWith is SaveFile with options. Before writing it removes temporary files a
// killed save of the same path left behind (see removeStaleTemps).
func SaveFileWith(path string, tensors map[string]*tensor.Tensor, metadata map[string]string, opts SaveOptions) (err error) {
	if _, ok := metadata[checksumKey]; ok {
		return &FileError{Path: path, Msg: "the metadata key " + checksumKey + " is reserved for the tensors' checksums"}
	}
	entries := make([]saveEntry, 0, len(tensors))
	for name, t := range tensors {
		switch {
		case name == metadataKey:
			return &FileError{Path: path, Msg: "cannot save a tensor named " + metadataKey + " (the key is reserved for metadata)"}
		case t == nil:
			return &FileError{Path: path, Tensor: name, Msg: "cannot save a nil tensor"}
		}
		if _, ok := dtypeCodes[t.DType()]; !ok {
			return &FileError{Path: path, Tensor: name, Msg: fmt.Sprintf("cannot save dtype %s", t.DType())}
		}
		entries = append(entries, saveEntry{name: name, t: t})
	}
	slices.SortFunc(entries, func(a, b saveEntry) int {
		if ra, rb := layoutRank[a.t.DType()], layoutRank[b.t.DType()]; ra != rb {
			return rb - ra
		}
		return strings.Compare(a.name, b.name)
	})
	var off int64
	for i := range entries {
		e := &entries[i]
		e.begin = off
		off += int64(e.t.Numel() * e.t.DType().Size())
		e.end = off
	}
	// With checksums the header is written first with zero sums of the same width and
	// rewritten in place once the data, hashed as it is written, is out.
	sums := map[string]uint32{}
	withSums := func() map[string]string {
		if !opts.Checksums {
			return metadata
		}
		m := make(map[string]string, len(metadata)+1)
		maps.Copy(m, metadata)
		m[checksumKey] = encodeChecksums(entries, sums)
		return m
	}
	header := encodeHeader(entries, withSums())

	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	removeStaleTemps(dir, base)
	f, err := os.CreateTemp(dir, tempPrefix(base)+"*")
	if err != nil {
		return &FileError{Path: path, Msg: "cannot create a temporary file next to it", Err: err}
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// The lock tells a concurrent save's cleanup that this temporary file is alive.
	lockTemp(f)
	w := bufio.NewWriterSize(f, 1<<20)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
	w.Write(n[:])
	w.Write(header)
	for _, e := range entries {
		h := crc32.New(castagnoli)
		if err := writeData(io.MultiWriter(w, h), e.t); err != nil {
			return &FileError{Path: path, Tensor: e.name, Msg: "cannot write the data", Err: err}
		}
		sums[e.name] = h.Sum32()
	}
	if err := w.Flush(); err != nil {
		return &FileError{Path: path, Msg: "write failed", Err: err}
	}
	if opts.Checksums {
		final := encodeHeader(entries, withSums())
		if len(final) != len(header) {
			panic("nn: checksummed header changed length") // the sums have a fixed width
		}
		if _, err := f.WriteAt(final, 8); err != nil {
			return &FileError{Path: path, Msg: "write failed", Err: err}
		}
	}
	if err := f.Chmod(0o644); err != nil {
		return &FileError{Path: path, Msg: "cannot set the file mode", Err: err}
	}
	if err := f.Sync(); err != nil {
		return &FileError{Path: path, Msg: "fsync failed", Err: err}
	}
	if err := f.Close(); err != nil {
		return &FileError{Path: path, Msg: "close failed", Err: err}
	}
	if err := os.Rename(tmp, path); err != nil {
		return &FileError{Path: path, Msg: "cannot rename the temporary file into place", Err: err}
	}
	// Make the rename itself durable; not every system can sync a directory.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// castagnoli is the CRC-32C table (hardware-accelerated on amd64 and arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeChecksums returns the JSON object of the entries' sums, names sorted, each
// sum 8 hex digits (so the encoding's length does not depend on the sums).
func encodeChecksums(entries []saveEntry, sums map[string]uint32) string {
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.name
	}
	slices.Sort(names)
	var b bytes.Buffer
	b.WriteByte('{')
	for i, name := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSONString(&b, name)
		fmt.Fprintf(&b, `:"%08x"`, sums[name])
	}
	b.WriteByte('}')
	return b.String()
}

// encodeHeader returns the JSON header padded with spaces to a multiple of 8 bytes.
func encodeHeader(entries []saveEntry, metadata map[string]string) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	sep := func() {
		if !first {
			b.WriteByte(',')
		}
		first = false
	}
	if len(metadata) > 0 {
		sep()
		writeJSONString(&b, metadataKey)
		b.WriteString(":{")
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(&b, k)
			b.WriteByte(':')
			writeJSONString(&b, metadata[k])
		}
		b.WriteByte('}')
	}
	for _, e := range entries {
		sep()
		writeJSONString(&b, e.name)
		b.WriteString(`:{"dtype":"`)
		b.WriteString(dtypeCodes[e.t.DType()])
		b.WriteString(`","shape":[`)
		for i, d := range e.t.Shape() {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, e.begin, e.end)
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	return b.Bytes()
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)           // cannot fail for a string
	b.Truncate(b.Len() - 1) // Encode's newline
}

// writeData writes t's elements row-major and little-endian. Reading a tensor panics
// on misuse (a released tensor) or a device failure; that becomes the error.
func writeData(w io.Writer, t *tensor.Tensor) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
			} else {
				err = fmt.Errorf("%v", r)
			}
		}
	}()
	var buf []byte
	switch t.DType() {
	case tensor.Float32:
		v := t.Float32s()
		buf = make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
		}
	case tensor.Float64:
		v := t.Float64s()
		buf = make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(x))
		}
	case tensor.Float16, tensor.BFloat16:
		v := t.Uint16s()
		buf = make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(buf[2*i:], x)
		}
	case tensor.Int32:
		v := t.Int32s()
		buf = make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(buf[4*i:], uint32(x))
		}
	case tensor.Int64:
		v := t.Int64s()
		buf = make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(buf[8*i:], uint64(x))
		}
	case tensor.Bool:
		v := t.Bools()
		buf = make([]byte, len(v))
		for i, x := range v {
			if x {
				buf[i] = 1
			}
		}
	}
	_, err = w.Write(buf)
	return err
}

// --- reading

// fileEntry is one tensor as the header describes it.
type fileEntry struct {
	name       string
	dtype      tensor.DType
	shape      tensor.Shape
	begin, end int64
}

// LoadFile reads a safetensors file and returns its tensors, created on
// tensor.DefaultDevice() outside any Context (the caller releases them), and its
// metadata (empty when the file has none). Everything is validated before a tensor is
// created: the header length against the file size, the JSON, each dtype, shape and
// data_offsets, and that the tensors' data tile the data region exactly with no
// overlap, gap or trailing bytes. When the file carries checksums (SaveOptions), each
// tensor's bytes must match theirs. Errors are *FileError values naming the file and
// the tensor, wrapping ErrCorrupt for invalid contents.
func LoadFile(path string) (map[string]*tensor.Tensor, map[string]string, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, &FileError{Path: path, Msg: "cannot stat", Err: err}
	}
	return readFile(path, f, st.Size())
}

// readFile reads a safetensors file of size bytes from r; path names it in errors.
func readFile(path string, r io.ReaderAt, size int64) (map[string]*tensor.Tensor, map[string]string, error) {
	tf, err := newTensorFile(path, r, size)
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]*tensor.Tensor, len(tf.entries))
	fail := func(err error) (map[string]*tensor.Tensor, map[string]string, error) {
		for _, t := range out {
			t.Release()
		}
		return nil, nil, err
	}
	for _, e := range tf.entries {
		var t *tensor.Tensor
		if err := tensor.CatchOOM(func() { t = tensor.Empty(e.shape, tensor.WithDType(e.dtype)) }); err != nil {
			return fail(&FileError{Path: path, Tensor: e.name, Msg: "cannot allocate", Err: err})
		}
		if err := tf.ReadInto(e.name, t); err != nil {
			t.Release()
			return fail(err)
		}
		out[e.name] = t
	}
	return out, tf.meta, nil
}

// readAt fills p from r at off. An io.EOF that comes with a full p (ReaderAt allows
// it at the end of the input) is not an error, nor is an empty p.
func readAt(r io.ReaderAt, p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// readHeader reads and validates the header; the entries come sorted by offset.
func readHeader(path string, r io.ReaderAt, size int64) ([]fileEntry, map[string]string, int64, error) {
	if size < 8 {
		return nil, nil, 0, corrupt(path, "", "the file has %d bytes, too short for the 8-byte header length", size)
	}
	var nb [8]byte
	if err := readAt(r, nb[:], 0); err != nil {
		return nil, nil, 0, &FileError{Path: path, Msg: "cannot read the header length", Err: err}
	}
	n := binary.LittleEndian.Uint64(nb[:])
	if n > uint64(size-8) {
		return nil, nil, 0, corrupt(path, "", "header length %d goes beyond the end of the file (%d bytes after the length)", n, size-8)
	}
	if n > maxHeader {
		return nil, nil, 0, corrupt(path, "", "header length %d exceeds the %d-byte limit", n, maxHeader)
	}
	hdr := make([]byte, n)
	if err := readAt(r, hdr, 8); err != nil {
		return nil, nil, 0, &FileError{Path: path, Msg: "cannot read the header", Err: err}
	}
	dataLen := size - 8 - int64(n)
	entries, meta, err := parseHeader(path, hdr, dataLen)
	return entries, meta, 8 + int64(n), err
}

// parseHeader decodes and validates a header for a data region of dataLen bytes.
func parseHeader(path string, hdr []byte, dataLen int64) ([]fileEntry, map[string]string, error) {
	entries, meta, err := parseHeaderEntries(path, hdr, dataLen)
	if err != nil {
		return nil, nil, err
	}
	if err := checkTiling(path, entries, dataLen); err != nil {
		return nil, nil, err
	}
	return entries, meta, nil
}

// parseHeaderEntries decodes a header and validates each entry against a data region
// of at most dataLen bytes, without checking that the entries tile it.
func parseHeaderEntries(path string, hdr []byte, dataLen int64) ([]fileEntry, map[string]string, error) {
	if len(hdr) == 0 || hdr[0] != '{' {
		return nil, nil, corrupt(path, "", "the header does not start with '{' (not a safetensors file?)")
	}
	if !utf8.Valid(hdr) {
		return nil, nil, corrupt(path, "", "the header is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, nil, corrupt(path, "", "malformed JSON header: %v", err)
	}
	meta := map[string]string{}
	seen := map[string]bool{}
	var entries []fileEntry
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, corrupt(path, "", "malformed JSON header: %v", err)
		}
		name, _ := tok.(string) // object keys are always strings
		if seen[name] {
			return nil, nil, corrupt(path, name, "appears twice in the header")
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, corrupt(path, name, "malformed JSON header: %v", err)
		}
		if name == metadataKey {
			if string(raw) == "null" {
				continue
			}
			if err := json.Unmarshal(raw, &meta); err != nil {
				return nil, nil, corrupt(path, "", "%s must map strings to strings: %v", metadataKey, err)
			}
			continue
		}
		e, err := parseEntry(path, name, raw, dataLen)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, e)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, corrupt(path, "", "malformed JSON header: %v", err)
	}
	if rest := hdr[dec.InputOffset():]; len(bytes.TrimRight(rest, " \t\r\n")) != 0 {
		return nil, nil, corrupt(path, "", "malformed JSON header: %d unexpected bytes after the object", len(rest))
	}
	return entries, meta, nil
}

// parseEntry decodes and validates one tensor's header entry.
func parseEntry(path, name string, raw json.RawMessage, dataLen int64) (fileEntry, error) {
	var f struct {
		DType   *string       `json:"dtype"`
		Shape   []json.Number `json:"shape"`
		Offsets []json.Number `json:"data_offsets"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&f); err != nil {
		return fileEntry{}, corrupt(path, name, "malformed entry %s: %v", raw, err)
	}
	switch {
	case f.DType == nil:
		return fileEntry{}, corrupt(path, name, "the entry has no dtype")
	case f.Shape == nil:
		return fileEntry{}, corrupt(path, name, "the entry has no shape")
	case f.Offsets == nil:
		return fileEntry{}, corrupt(path, name, "the entry has no data_offsets")
	}
	dt, ok := dtypeOfCode(*f.DType)
	if !ok {
		if slices.Contains(otherCodes, *f.DType) {
			return fileEntry{}, corrupt(path, name, "dtype %s is not supported by gamp (supported: F32, F16, BF16, F64, I32, I64, BOOL)", *f.DType)
		}
		return fileEntry{}, corrupt(path, name, "unknown dtype %q", *f.DType)
	}
	e := fileEntry{name: name, dtype: dt, shape: make(tensor.Shape, len(f.Shape))}
	// The product of the non-zero dimensions is bounded first, so sizes never overflow.
	const maxElems = 1 << 53
	prod, zero := uint64(1), false
	for i, s := range f.Shape {
		d, err := strconv.ParseUint(s.String(), 10, 63)
		if err != nil {
			return fileEntry{}, corrupt(path, name, "shape entry %s is not a non-negative integer", s)
		}
		if d == 0 {
			zero = true
		} else if d > maxElems/prod {
			return fileEntry{}, corrupt(path, name, "shape %v is too large", f.Shape)
		} else {
			prod *= d
		}
		e.shape[i] = int(d)
	}
	want := int64(prod) * int64(dt.Size())
	if zero {
		want = 0
	}
	if want > dataLen {
		return fileEntry{}, corrupt(path, name, "shape %v of %s needs %d bytes, more than the %d-byte data region", e.shape, *f.DType, want, dataLen)
	}
	if len(f.Offsets) != 2 {
		return fileEntry{}, corrupt(path, name, "data_offsets must be [begin, end], got %v", f.Offsets)
	}
	var off [2]int64
	for i, s := range f.Offsets {
		v, err := strconv.ParseUint(s.String(), 10, 63)
		if err != nil {
			return fileEntry{}, corrupt(path, name, "data_offsets %v: %s is not a non-negative integer", f.Offsets, s)
		}
		off[i] = int64(v)
	}
	e.begin, e.end = off[0], off[1]
	if e.begin > e.end {
		return fileEntry{}, corrupt(path, name, "data_offsets [%d, %d] end before they begin", e.begin, e.end)
	}
	if e.end > dataLen {
		return fileEntry{}, corrupt(path, name, "data_offsets [%d, %d] run past the %d-byte data region", e.begin, e.end, dataLen)
	}
	if e.end-e.begin != want {
		return fileEntry{}, corrupt(path, name, "shape %v of %s needs %d bytes, data_offsets [%d, %d] hold %d", e.shape, *f.DType, want, e.begin, e.end, e.end-e.begin)
	}
	return e, nil
}

// checkTiling sorts entries by offset and checks that they cover [0, dataLen) exactly
// once, as the reference implementation requires.
func checkTiling(path string, entries []fileEntry, dataLen int64) error {
	slices.SortFunc(entries, func(a, b fileEntry) int {
		if a.begin != b.begin {
			return int(a.begin - b.begin)
		}
		if a.end != b.end {
			return int(a.end - b.end)
		}
		return strings.Compare(a.name, b.name)
	})
	var pos int64
	prev := ""
	for _, e := range entries {
		switch {
		case e.begin < pos:
			return corrupt(path, e.name, "data_offsets [%d, %d] overlap those of tensor %q, which end at %d", e.begin, e.end, prev, pos)
		case e.begin > pos:
			return corrupt(path, e.name, "data_offsets [%d, %d] leave bytes [%d, %d) that belong to no tensor", e.begin, e.end, pos, e.begin)
		}
		pos, prev = e.end, e.name
	}
	if pos != dataLen {
		return corrupt(path, "", "%d bytes after the last tensor's data belong to no tensor (data region %d bytes, tensors cover %d)", dataLen-pos, dataLen, pos)
	}
	return nil
}

// decodeData builds the tensor of entry e from its little-endian bytes.
func decodeData(path string, e fileEntry, raw []byte) (*tensor.Tensor, error) {
	n := e.shape.Numel()
	if len(raw) == 0 {
		n = 0
	}
	switch e.dtype {
	case tensor.Float32:
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return tensor.FromSlice(v, e.shape), nil
	case tensor.Float64:
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
		}
		return tensor.FromSlice(v, e.shape), nil
	case tensor.Int32:
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return tensor.FromSlice(v, e.shape), nil
	case tensor.Int64:
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
		}
		return tensor.FromSlice(v, e.shape), nil
	case tensor.Bool:
		v := make([]bool, n)
		for i := range v {
			switch raw[i] {
			case 0:
			case 1:
				v[i] = true
			default:
				return nil, corrupt(path, e.name, "BOOL element %d holds byte %d, want 0 or 1", i, raw[i])
			}
		}
		return tensor.FromSlice(v, e.shape), nil
	default: // Float16, BFloat16: upload the raw bits
		v := make([]uint16, n)
		for i := range v {
			v[i] = binary.LittleEndian.Uint16(raw[2*i:])
		}
		t := tensor.Empty(e.shape, tensor.WithDType(e.dtype))
		if n > 0 {
			s, off := t.Storage()
			t.Backend().Upload(s, off, v)
		}
		return t, nil
	}
}
