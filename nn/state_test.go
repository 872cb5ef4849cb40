package nn

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/tensor"
)

// snapshot returns the raw bytes of every parameter and buffer by name.
func snapshot(t *testing.T, m Module) map[string][]byte {
	out := map[string][]byte{}
	for name, p := range State(m) {
		out[name] = rawBytes(t, p.T)
	}
	return out
}

func TestStateRoundTrip(t *testing.T) {
	src := smallModel(1)
	step(t, src, tensor.Float32, tensor.CPU) // moves the BatchNorm statistics off their defaults
	path := filepath.Join(t.TempDir(), "model.safetensors")
	require.NoError(t, SaveState(src, path))

	tensors, meta, err := LoadFile(path)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"format": "pt"}, meta)
	assert.ElementsMatch(t, []string{"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
		"1.num_batches_tracked", "3.weight", "3.bias"}, keys(tensors))
	assert.Equal(t, []int64{1}, tensors["1.num_batches_tracked"].Int64s())

	dst := smallModel(2)
	require.NotEqual(t, snapshot(t, src), snapshot(t, dst))
	w := dst.At(0).(*Linear).Weight
	wt := w.T
	require.NoError(t, LoadState(dst, path, true))
	assert.Equal(t, snapshot(t, src), snapshot(t, dst), "bit-exact")
	assert.Same(t, wt, w.T, "loading copies in place")
	assert.True(t, w.T.RequiresGrad())

	// Same outputs in evaluation mode.
	Eval(src)
	Eval(dst)
	ctx := tensor.NewContext()
	defer ctx.Close()
	x := input(ctx, wave(20, 1), 5, 4)
	assert.Equal(t, src.Forward(x).Float32s(), dst.Forward(x).Float32s())
}

func TestStateDTypeConversion(t *testing.T) {
	dir := t.TempDir()
	src := smallModel(3)
	step(t, src, tensor.Float32, tensor.CPU)
	f32 := filepath.Join(dir, "f32.safetensors")
	require.NoError(t, SaveState(src, f32))

	for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
		t.Run("float32 file into "+dt.String()+" model", func(t *testing.T) {
			dst := smallModel(4)
			Cast(dst, dt)
			require.NoError(t, LoadState(dst, f32, true))
			want := State(src)
			for name, p := range State(dst) {
				w := want[name].T
				if p.KeepFP32 || !p.T.DType().IsFloat() {
					assert.Equal(t, rawBytes(t, w), rawBytes(t, p.T), "%s loads unchanged", name)
					continue
				}
				require.Equal(t, dt, p.T.DType(), name)
				assert.Equal(t, w.Detach().Cast(dt).Uint16s(), p.T.Uint16s(), "%s is rounded to nearest even", name)
			}

			// And back: a half checkpoint widens exactly into a float32 model.
			half := filepath.Join(dir, dt.String()+".safetensors")
			require.NoError(t, SaveState(dst, half))
			back := smallModel(5)
			require.NoError(t, LoadState(back, half, true))
			for name, p := range State(back) {
				assert.Equal(t, State(dst)[name].T.Float64s(), p.T.Float64s(), name)
				assert.Equal(t, State(src)[name].T.DType(), p.T.DType(), name)
			}
		})
	}
}

func TestStateStrictAndMismatches(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	require.NoError(t, SaveState(smallModel(1), path))

	t.Run("missing and unexpected keys reported together", func(t *testing.T) {
		// A model with an extra layer and without the BatchNorm.
		g := tensor.NewGenerator(9)
		m := NewSequential(NewLinear(4, 6, Init{Gen: g}), NewReLU(), NewReLU(), NewLinear(6, 3, Init{Gen: g}), NewLinear(3, 2, Init{Gen: g}))
		before := snapshot(t, m)
		err := LoadState(m, path, true)
		require.Error(t, err)
		var se *StateError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, []string{"4.bias", "4.weight"}, se.Missing)
		assert.Equal(t, []string{"1.bias", "1.num_batches_tracked", "1.running_mean", "1.running_var", "1.weight"}, se.Unexpected)
		assert.Empty(t, se.Mismatched)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), "missing keys (in the model, not in the file): 4.bias, 4.weight")
		assert.Contains(t, err.Error(), "unexpected keys (in the file, not in the model): 1.bias, 1.num_batches_tracked")
		assert.Equal(t, before, snapshot(t, m), "a refused load changes nothing")

		// Non-strict loading takes what matches and ignores the rest.
		require.NoError(t, LoadState(m, path, false))
		file, _, err := LoadFile(path)
		require.NoError(t, err)
		assert.Equal(t, rawBytes(t, file["0.weight"]), rawBytes(t, m.At(0).(*Linear).Weight.T))
		assert.Equal(t, rawBytes(t, file["3.bias"]), rawBytes(t, m.At(3).(*Linear).Bias.T))
		assert.Equal(t, before["4.weight"], rawBytes(t, m.At(4).(*Linear).Weight.T))
	})

	t.Run("shape mismatch names the tensor and both shapes", func(t *testing.T) {
		g := tensor.NewGenerator(10)
		m := NewSequential(NewLinear(4, 5, Init{Gen: g}), NewBatchNorm1d(5), NewReLU(), NewLinear(5, 3, Init{Gen: g}))
		before := snapshot(t, m)
		for _, strict := range []bool{true, false} {
			err := LoadState(m, path, strict)
			require.Error(t, err)
			var se *StateError
			require.ErrorAs(t, err, &se)
			assert.Contains(t, err.Error(), `tensor "0.weight" has shape [6 4] in the file but [5 4] in the model`)
			assert.Contains(t, err.Error(), `tensor "3.weight" has shape [3 6] in the file but [3 5] in the model`)
			assert.Len(t, se.Mismatched, 7) // 0.weight, 0.bias, the four BatchNorm vectors, 3.weight
			assert.Equal(t, before, snapshot(t, m))
		}
	})

	t.Run("float data for an integer buffer", func(t *testing.T) {
		m := smallModel(1)
		file, meta, err := LoadFile(path)
		require.NoError(t, err)
		file["1.num_batches_tracked"] = tensor.Scalar(1)
		bad := filepath.Join(dir, "bad.safetensors")
		require.NoError(t, SaveFile(bad, file, meta))
		err = LoadState(m, bad, true)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `tensor "1.num_batches_tracked" is float32 in the file but int64 in the model`)
	})

	t.Run("corrupt or missing file", func(t *testing.T) {
		err := LoadState(smallModel(1), filepath.Join(dir, "none.safetensors"), true)
		require.Error(t, err)
		var fe *FileError
		assert.True(t, errors.As(err, &fe))
	})
}

func TestLoadStateOntoAnotherDevice(t *testing.T) {
	src := smallModel(6)
	path := filepath.Join(t.TempDir(), "m.safetensors")
	require.NoError(t, SaveState(src, path))
	dst := smallModel(7)
	dev := tensor.CPUDevice(1)
	To(dst, dev)
	require.NoError(t, LoadState(dst, path, true))
	for name, p := range State(dst) {
		assert.Equal(t, dev, p.T.Device(), name)
	}
	assert.Equal(t, snapshot(t, src), snapshot(t, dst))
}
