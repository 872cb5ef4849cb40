package nn

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/tensor"
)

// dataOffset returns where the data of tensor name starts in the file at path.
func dataOffset(t *testing.T, path, name string) int64 {
	t.Helper()
	f, err := OpenTensorFile(path)
	require.NoError(t, err)
	defer f.Close()
	e := f.entries[f.index[name]]
	return f.dataStart + e.begin
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[off] ^= 0x10
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// A byte flipped in a tensor's data is found by its checksum: the error names the
// tensor, the model is left alone, and the checksums keep the file a valid
// safetensors file with the same bytes otherwise.
func TestChecksumFindsFlippedByte(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	m := NewSequential(NewLinear(4, 3, Seeded(1)), NewReLU(), NewLinear(3, 2, Seeded(2)))
	require.NoError(t, SaveState(m, path))

	f, err := OpenTensorFile(path)
	require.NoError(t, err)
	require.True(t, f.HasChecksums())
	require.Equal(t, map[string]string{"format": "pt"}, f.Metadata(), "the checksums are not caller metadata")
	f.Close()

	flipByte(t, path, dataOffset(t, path, "2.weight")+5)
	other := NewSequential(NewLinear(4, 3, Seeded(9)), NewReLU(), NewLinear(3, 2, Seeded(9)))
	before := stateValues(other)
	err = LoadState(other, path, true)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), `tensor "2.weight"`)
	assert.Contains(t, err.Error(), "checksum")
	assert.Equal(t, before, stateValues(other), "nothing was loaded")
	_, _, err = LoadFile(path)
	assert.ErrorIs(t, err, ErrCorrupt)
}

// A plain file (SaveFile, another writer, or a save from before checksums) still loads.
func TestFileWithoutChecksumsLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain.safetensors")
	require.NoError(t, SaveFile(path, map[string]*tensor.Tensor{"w": tensor.FromSlice([]float32{1, 2}, nil)}, nil))
	f, err := OpenTensorFile(path)
	require.NoError(t, err)
	defer f.Close()
	require.False(t, f.HasChecksums())
	require.NoError(t, f.Verify(nil))
	got, _, err := LoadFile(path)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2}, got["w"].Float32s())

	err = SaveFileWith(path, nil, map[string]string{checksumKey: "{}"}, SaveOptions{})
	assert.ErrorContains(t, err, "reserved", "the checksum key is not caller metadata")
}

// Verify with a finiteness check names the tensor holding NaN or Inf, in every
// floating dtype.
func TestVerifyFindsNonFinite(t *testing.T) {
	dir := t.TempDir()
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16} {
		for _, bad := range []float64{math.NaN(), math.Inf(-1)} {
			path := filepath.Join(dir, dt.String()+".safetensors")
			require.NoError(t, SaveFileWith(path, map[string]*tensor.Tensor{
				"good": tensor.FromSlice([]float64{1, 2, 3}, nil, tensor.WithDType(dt)),
				"bad":  tensor.FromSlice([]float64{1, bad, 3}, nil, tensor.WithDType(dt)),
			}, nil, SaveOptions{Checksums: true}))
			f, err := OpenTensorFile(path)
			require.NoError(t, err)
			require.NoError(t, f.Verify(nil), "no finiteness check asked for")
			require.NoError(t, f.Verify(func(name string) bool { return name == "good" }))
			err = f.Verify(func(string) bool { return true })
			require.ErrorIs(t, err, ErrNonFinite, "%s %g", dt, bad)
			assert.Contains(t, err.Error(), `tensor "bad": element 1`)
			f.Close()
		}
	}
}

// ReadMetadata reads the header alone: a file whose data was cut short still gives its
// metadata, while a load refuses it.
func TestReadMetadataReadsOnlyTheHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cut.safetensors")
	require.NoError(t, SaveFileWith(path, map[string]*tensor.Tensor{"w": tensor.Zeros(tensor.Shape{1000})}, map[string]string{"k": "v"}, SaveOptions{Checksums: true}))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, st.Size()-3000))
	meta, err := ReadMetadata(path)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"k": "v"}, meta)
	_, _, err = LoadFile(path)
	assert.ErrorIs(t, err, ErrCorrupt)

	require.NoError(t, os.WriteFile(path, []byte{1, 2}, 0o644))
	_, err = ReadMetadata(path)
	assert.ErrorIs(t, err, ErrCorrupt)
}

// LoadState reads the file a tensor at a time into the parameters: the Go heap grows
// by about one tensor, not by the file.
func TestLoadStateStreams(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.safetensors")
	m := NewSequential(NewLinear(512, 512, Seeded(1)), NewReLU(), NewLinear(512, 512, Seeded(2)), NewReLU(), NewLinear(512, 512, Seeded(3)))
	require.NoError(t, SaveState(m, path))
	st, err := os.Stat(path)
	require.NoError(t, err)
	largest := int64(512 * 512 * 4)
	require.Greater(t, st.Size(), 3*largest)

	dst := NewSequential(NewLinear(512, 512, Seeded(4)), NewReLU(), NewLinear(512, 512, Seeded(5)), NewReLU(), NewLinear(512, 512, Seeded(6)))
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	require.NoError(t, LoadState(dst, path, true))
	runtime.ReadMemStats(&b)
	grew := int64(b.TotalAlloc - a.TotalAlloc)
	t.Logf("file %d bytes, largest tensor %d, heap allocated during the load %d", st.Size(), largest, grew)
	assert.Less(t, grew, largest+largest/4, "the load allocated more than one tensor's worth")
	assert.Equal(t, stateValues(m), stateValues(dst))
}

func stateValues(m Module) map[string][]float64 {
	out := map[string][]float64{}
	for name, p := range State(m) {
		out[name] = p.T.Float64s()
	}
	return out
}

// The checksum JSON has the same length whatever the sums, so the header can be
// rewritten in place.
func TestChecksumEncodingHasFixedWidth(t *testing.T) {
	es := []saveEntry{{name: "a"}, {name: "b\"q"}}
	zero := encodeChecksums(es, map[string]uint32{})
	full := encodeChecksums(es, map[string]uint32{"a": math.MaxUint32, "b\"q": 0x12345678})
	assert.Equal(t, len(zero), len(full))
	assert.Contains(t, full, `"12345678"`)
}
