package nn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/internal/testenv"
	"github.com/gamp-ml/gamp/tensor"
)

// rawBytes returns t's data as the file stores it.
func rawBytes(t *testing.T, x *tensor.Tensor) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, writeData(&b, x))
	return b.Bytes()
}

// referenceFile is a safetensors file written out byte by byte from the format's
// specification, as the reference implementation (huggingface/safetensors) lays it
// out: the header length, the JSON with __metadata__ first and the tensors by
// decreasing dtype alignment then name, space padding to 8 bytes, then the data.
var referenceFile = concat(
	[]byte{0xc8, 0, 0, 0, 0, 0, 0, 0}, // header length 200, little-endian u64
	[]byte(`{"__metadata__":{"format":"pt"},`+
		`"n":{"dtype":"I64","shape":[],"data_offsets":[0,8]},`+
		`"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},`+
		`"b":{"dtype":"BF16","shape":[2],"data_offsets":[16,20]}}`+
		`      `), // 194 bytes of JSON + 6 spaces
	[]byte{7, 0, 0, 0, 0, 0, 0, 0},                         // n = 7
	[]byte{0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40}, // a = [1, 2]
	[]byte{0x80, 0x3f, 0x00, 0xc0},                         // b = [1, -2] as bfloat16
)

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestSafetensorsMatchesReferenceBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ref.safetensors")
	ts := map[string]*tensor.Tensor{
		"a": tensor.FromSlice([]float32{1, 2}, nil),
		"b": tensor.FromSlice([]float32{1, -2}, nil, tensor.WithDType(tensor.BFloat16)),
		"n": tensor.FromSlice([]int64{7}, tensor.Shape{}),
	}
	require.NoError(t, SaveFile(path, ts, map[string]string{"format": "pt"}))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, referenceFile, got)

	// And the reference bytes read back.
	loaded, meta, err := readFile("ref", bytes.NewReader(referenceFile), int64(len(referenceFile)))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"format": "pt"}, meta)
	assert.Equal(t, []float32{1, 2}, loaded["a"].Float32s())
	assert.Equal(t, tensor.BFloat16, loaded["b"].DType())
	assert.Equal(t, []float64{1, -2}, loaded["b"].Float64s())
	assert.Equal(t, 0, loaded["n"].Dim())
	assert.Equal(t, []int64{7}, loaded["n"].Int64s())
}

// TestSafetensorsPython checks interoperability with the reference implementation when
// its Python package is installed (it is optional: the byte-level test above always
// runs): Python reads gamp's file, and writing the same tensors back gives the same bytes.
func TestSafetensorsPython(t *testing.T) {
	py := testenv.Python(t, testenv.PythonSafetensors, "numpy", "safetensors.numpy")
	dir := t.TempDir()
	ours, theirs := filepath.Join(dir, "ours.safetensors"), filepath.Join(dir, "theirs.safetensors")
	require.NoError(t, SaveFile(ours, map[string]*tensor.Tensor{
		"a": tensor.FromSlice([]float32{1, 2, 3, 4}, tensor.Shape{2, 2}),
		"h": tensor.FromSlice([]float32{0.5, -1, 65504}, nil, tensor.WithDType(tensor.Float16)),
		"n": tensor.FromSlice([]int64{7}, tensor.Shape{}),
	}, map[string]string{"format": "pt"}))
	script := `
import sys, numpy as np
from safetensors.numpy import load_file, save_file
d = load_file(sys.argv[1])
assert d["a"].dtype == np.float32 and d["a"].tolist() == [[1.0, 2.0], [3.0, 4.0]], d
assert d["h"].dtype == np.float16 and d["h"].tolist() == [0.5, -1.0, 65504.0], d
assert d["n"].dtype == np.int64 and d["n"].shape == () and int(d["n"]) == 7, d
save_file(d, sys.argv[2], metadata={"format": "pt"})
`
	out, err := exec.Command(py, "-c", script, ours, theirs).CombinedOutput()
	require.NoError(t, err, "%s", out)
	a, err := os.ReadFile(ours)
	require.NoError(t, err)
	b, err := os.ReadFile(theirs)
	require.NoError(t, err)
	assert.Equal(t, b, a, "gamp writes the reference implementation's bytes")
}

func TestSafetensorsRoundTripBitExact(t *testing.T) {
	all16 := make([]uint16, 1<<16)
	for i := range all16 {
		all16[i] = uint16(i)
	}
	half := func(dt tensor.DType, bits []uint16, shape tensor.Shape) *tensor.Tensor {
		x := tensor.Empty(shape, tensor.WithDType(dt))
		s, off := x.Storage()
		x.Backend().Upload(s, off, bits)
		return x
	}
	f32 := []float32{0, float32(math.Copysign(0, -1)), 1, -1.5, math.MaxFloat32, math.SmallestNonzeroFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1)), math.Float32frombits(0x7fc00001), math.Float32frombits(0xffa00000)}
	f64 := []float64{0, math.Copysign(0, -1), math.Pi, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(-1), math.Float64frombits(0x7ff8000000000123)}
	cases := map[string]*tensor.Tensor{
		"f32":            tensor.FromSlice(f32, tensor.Shape{2, 5}),
		"f16 all":        half(tensor.Float16, all16, tensor.Shape{256, 256}),
		"bf16 all":       half(tensor.BFloat16, all16, tensor.Shape{1 << 16}),
		"f64":            tensor.FromSlice(f64, nil),
		"i32":            tensor.FromSlice([]int32{math.MinInt32, -1, 0, math.MaxInt32}, tensor.Shape{2, 1, 2}),
		"i64":            tensor.FromSlice([]int64{math.MinInt64, -1, 0, 1 << 40, math.MaxInt64}, nil),
		"bool":           tensor.FromSlice([]bool{true, false, true}, nil),
		"scalar":         tensor.Scalar(3.25),
		"empty":          tensor.Zeros(tensor.Shape{0, 3}, tensor.WithDType(tensor.Float16)),
		"transposed f32": tensor.FromSlice([]float32{1, 2, 3, 4, 5, 6}, tensor.Shape{2, 3}).T(),
		"on cpu:1":       tensor.FromSlice([]int64{5, 6}, nil, tensor.WithDevice(tensor.CPUDevice(1))),
	}
	path := filepath.Join(t.TempDir(), "all.safetensors")
	meta := map[string]string{"format": "pt", "step": "12", "quote \"&<>\"": "ünïcode\n"}
	require.NoError(t, SaveFile(path, cases, meta))
	loaded, gotMeta, err := LoadFile(path)
	require.NoError(t, err)
	assert.Equal(t, meta, gotMeta)
	require.Len(t, loaded, len(cases))
	for name, want := range cases {
		got := loaded[name]
		require.NotNil(t, got, name)
		assert.Equal(t, want.Shape(), got.Shape(), name)
		assert.Equal(t, want.DType(), got.DType(), name)
		assert.Equal(t, tensor.DefaultDevice(), got.Device(), name)
		assert.Equal(t, rawBytes(t, want), rawBytes(t, got), "%s is bit-exact", name)
	}
	assert.Equal(t, []float32{1, 4, 2, 5, 3, 6}, loaded["transposed f32"].Float32s(), "views are written row-major")

	// The header is padded to 8 bytes and every tensor is aligned to its element size.
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	n := binary.LittleEndian.Uint64(raw)
	assert.Zero(t, n%8)
	entries, _, err := parseHeader(path, raw[8:8+n], int64(len(raw))-8-int64(n))
	require.NoError(t, err)
	for _, e := range entries {
		assert.Zero(t, e.begin%int64(e.dtype.Size()), e.name)
	}
}

// file builds a safetensors file from a header (padded here) and data.
func file(header string, data []byte) []byte {
	for len(header)%8 != 0 {
		header += " "
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
	return concat(n[:], []byte(header), data)
}

// hugeReader claims to be size bytes long and serves head, then zeros.
type hugeReader struct{ head []byte }

func (h hugeReader) ReadAt(p []byte, off int64) (int, error) {
	for i := range p {
		if int(off)+i < len(h.head) {
			p[i] = h.head[int(off)+i]
		} else {
			p[i] = 0
		}
	}
	return len(p), nil
}

func TestLoadRejectsCorruptFiles(t *testing.T) {
	f32x2 := make([]byte, 8)
	one := `{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	for _, tc := range []struct {
		name   string
		data   []byte
		size   int64 // 0: len(data)
		tensor string
		want   string
	}{
		{"too short", []byte{1, 2, 3}, 0, "", "too short"},
		{"header past end", concat([]byte{100, 0, 0, 0, 0, 0, 0, 0}, []byte("{}")), 0, "", "header length 100 goes beyond the end of the file"},
		{"header length huge", []byte{0, 0, 0, 0, 0, 0, 0, 0x80}, 0, "", "goes beyond the end of the file"},
		{"header over limit", []byte{0, 0, 0, 0x10, 0, 0, 0, 0}, 1 << 30, "", "exceeds the"},
		{"not an object", file(`[1, 2]`, nil), 0, "", "does not start with '{'"},
		{"malformed JSON", file(`{"w":{"dtype":"F32",`, nil), 0, "w", "malformed JSON"},
		{"malformed JSON key", file(`{,}`, nil), 0, "", "malformed JSON"},
		{"trailing garbage", file(`{}x`, nil), 0, "", "unexpected bytes after the object"},
		{"invalid UTF-8", file("{\"w\xff\":1}", nil), 0, "", "not valid UTF-8"},
		{"duplicate key", file(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32x2), 0, "w", "appears twice"},
		{"unknown dtype", file(`{"w":{"dtype":"F128","shape":[2],"data_offsets":[0,8]}}`, f32x2), 0, "w", `unknown dtype "F128"`},
		{"unsupported dtype", file(`{"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}`, f32x2), 0, "w", "dtype U8 is not supported"},
		{"no dtype", file(`{"w":{"shape":[2],"data_offsets":[0,8]}}`, f32x2), 0, "w", "no dtype"},
		{"no shape", file(`{"w":{"dtype":"F32","data_offsets":[0,8]}}`, f32x2), 0, "w", "no shape"},
		{"no offsets", file(`{"w":{"dtype":"F32","shape":[2]}}`, f32x2), 0, "w", "no data_offsets"},
		{"entry not an object", file(`{"w":[1,2]}`, nil), 0, "w", "malformed entry"},
		{"negative dim", file(`{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, f32x2), 0, "w", "shape entry -2"},
		{"fractional dim", file(`{"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}}`, f32x2), 0, "w", "shape entry 2.5"},
		{"huge shape", file(`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, f32x2), 0, "w", "too large"},
		{"shape larger than data", file(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, f32x2), 0, "w", "more than the 8-byte data region"},
		{"size mismatch", file(`{"w":{"dtype":"F16","shape":[2],"data_offsets":[0,8]}}`, f32x2), 0, "w", "shape [2] of F16 needs 4 bytes, data_offsets [0, 8] hold 8"},
		{"three offsets", file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}}`, f32x2), 0, "w", "must be [begin, end]"},
		{"negative offset", file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}}`, f32x2), 0, "w", "not a non-negative integer"},
		{"reversed offsets", file(`{"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, f32x2), 0, "w", "end before they begin"},
		{"offsets out of range", file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, f32x2), 0, "w", "run past the 8-byte data region"},
		{"overlap", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32x2), 0, "b", `overlap those of tensor "a"`},
		{"gap", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 12)), 0, "b", "leave bytes [4, 8) that belong to no tensor"},
		{"trailing bytes", file(one, make([]byte, 12)), 0, "", "4 bytes after the last tensor"},
		{"missing data", file(one, make([]byte, 4)), 0, "w", "needs 8 bytes, more than the 4-byte data region"},
		{"metadata not strings", file(`{"__metadata__":{"epoch":3}}`, nil), 0, "", "__metadata__ must map strings to strings"},
		{"bad bool", file(`{"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}`, []byte{1, 2}), 0, "m", "BOOL element 1 holds byte 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size := tc.size
			if size == 0 {
				size = int64(len(tc.data))
			}
			got, _, err := readFile("bad.safetensors", hugeReader{tc.data}, size)
			require.Error(t, err)
			assert.Nil(t, got)
			assert.ErrorIs(t, err, ErrCorrupt)
			var fe *FileError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.tensor, fe.Tensor)
			assert.Contains(t, err.Error(), "bad.safetensors")
			if tc.tensor != "" {
				assert.Contains(t, err.Error(), `tensor "`+tc.tensor+`"`)
			}
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	// Valid edge cases: no tensors, null metadata, a zero-size tensor among others.
	for _, ok := range [][]byte{
		file(`{}`, nil),
		file(`{"__metadata__":null}`, nil),
		file(`{"e":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32x2),
		file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":"ignored"}}`, f32x2),
	} {
		_, _, err := readFile("ok", bytes.NewReader(ok), int64(len(ok)))
		assert.NoError(t, err, "%q", ok)
	}
}

func TestLoadFileMissing(t *testing.T) {
	_, _, err := LoadFile(filepath.Join(t.TempDir(), "nope.safetensors"))
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "nope.safetensors")
}

func TestSaveIsAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	good := map[string]*tensor.Tensor{"w": tensor.FromSlice([]float32{1, 2, 3}, nil)}
	require.NoError(t, SaveFile(path, good, nil))
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	released := tensor.FromSlice([]float32{4, 5}, nil)
	released.Release()
	for _, tc := range []struct {
		name    string
		tensors map[string]*tensor.Tensor
		want    string
	}{
		// "a" (float64) is written first, then reading the released tensor fails in
		// the middle of the write.
		{"fails mid-write", map[string]*tensor.Tensor{"a": tensor.FromSlice([]float64{1, 2}, nil), "z": released}, `tensor "z": cannot write the data`},
		{"nil tensor", map[string]*tensor.Tensor{"w": nil}, "nil tensor"},
		{"reserved name", map[string]*tensor.Tensor{"__metadata__": good["w"]}, "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := SaveFile(path, tc.tensors, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), path)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, before, after, "the previous file is intact")
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, entries, 1, "no temporary file is left behind")
		})
	}

	t.Run("missing directory", func(t *testing.T) {
		err := SaveFile(filepath.Join(dir, "no", "such", "dir.safetensors"), good, nil)
		require.Error(t, err)
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})

	t.Run("read-only directory", func(t *testing.T) {
		ro := filepath.Join(dir, "ro")
		require.NoError(t, os.Mkdir(ro, 0o755))
		p := filepath.Join(ro, "m.safetensors")
		require.NoError(t, SaveFile(p, good, nil))
		require.NoError(t, os.Chmod(ro, 0o555))
		defer os.Chmod(ro, 0o755)
		if f, err := os.CreateTemp(ro, "probe"); err == nil {
			f.Close()
			os.Remove(f.Name())
			t.Skip("permissions are not enforced for this user (root)")
		}
		err := SaveFile(p, map[string]*tensor.Tensor{"w": tensor.FromSlice([]float32{9}, nil)}, nil)
		require.Error(t, err)
		loaded, _, err := LoadFile(p)
		require.NoError(t, err)
		assert.Equal(t, []float32{1, 2, 3}, loaded["w"].Float32s())
	})

	t.Run("replaces and keeps mode", func(t *testing.T) {
		require.NoError(t, SaveFile(path, map[string]*tensor.Tensor{"v": tensor.FromSlice([]int32{1}, nil)}, nil))
		loaded, _, err := LoadFile(path)
		require.NoError(t, err)
		assert.Equal(t, []string{"v"}, keys(loaded))
		st, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o644), st.Mode().Perm())
	})
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func FuzzReadFile(f *testing.F) {
	f.Add(referenceFile)
	f.Add(file(`{}`, nil))
	f.Add(file(`{"w":{"dtype":"F16","shape":[2,1],"data_offsets":[0,4]},"m":{"dtype":"BOOL","shape":[1],"data_offsets":[4,5]}}`, []byte{0, 60, 0, 188, 1}))
	f.Add(file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)))
	f.Add([]byte{})
	// A file with checksums, as SaveState and amp.Save write them.
	sums := filepath.Join(f.TempDir(), "sums.safetensors")
	if err := SaveFileWith(sums, map[string]*tensor.Tensor{
		"w": tensor.FromSlice([]float32{1, -2, 3}, nil),
		"m": tensor.FromSlice([]bool{true, false}, nil),
	}, map[string]string{"format": "pt"}, SaveOptions{Checksums: true}); err != nil {
		f.Fatal(err)
	}
	if b, err := os.ReadFile(sums); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, meta, err := readFile("fuzz", bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "nn: fuzz: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		// A file that loads saves back to a file with the same tensors.
		path := filepath.Join(t.TempDir(), "again.safetensors")
		if err := SaveFile(path, got, meta); err != nil {
			t.Fatalf("re-saving a loaded file: %v", err)
		}
		again, meta2, err := LoadFile(path)
		if err != nil {
			t.Fatalf("re-loading: %v", err)
		}
		if len(again) != len(got) || len(meta2) != len(meta) {
			t.Fatalf("round trip changed the contents")
		}
		for name, x := range got {
			y := again[name]
			if y == nil || !x.Shape().Equal(y.Shape()) || x.DType() != y.DType() || !bytes.Equal(rawBytes(t, x), rawBytes(t, y)) {
				t.Fatalf("tensor %q changed in the round trip", name)
			}
			x.Release()
			y.Release()
		}
	})
}
