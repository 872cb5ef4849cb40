//go:build unix

package nn

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/tensor"
)

// A save removes the temporary files that killed saves of the same target left, and
// only those: not a save in progress (locked), not a fresh one, not another target's.
func TestSaveRemovesStaleTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	old := time.Now().Add(-time.Hour)
	mk := func(name string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, make([]byte, 100), 0o644))
		require.NoError(t, os.Chtimes(p, old, old))
		return p
	}
	stale := mk(".m.safetensors.tmp-123")
	otherTarget := mk(".n.safetensors.tmp-456")
	fresh := filepath.Join(dir, ".m.safetensors.tmp-789")
	require.NoError(t, os.WriteFile(fresh, nil, 0o644))
	live := mk(".m.safetensors.tmp-live")
	lf, err := os.OpenFile(live, os.O_RDWR, 0)
	require.NoError(t, err)
	defer lf.Close()
	require.NoError(t, syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))

	require.NoError(t, SaveFile(path, map[string]*tensor.Tensor{"w": tensor.FromSlice([]float32{1}, nil)}, nil))
	_, err = os.Stat(stale)
	assert.True(t, errors.Is(err, os.ErrNotExist), "the killed save's file is removed")
	for _, p := range []string{otherTarget, fresh, live} {
		_, err := os.Stat(p)
		assert.NoError(t, err, "%s is kept", filepath.Base(p))
	}
}

// A FIFO (or any non-regular file) is refused at once instead of blocking the open
// until something writes to it.
func TestLoadRefusesFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(p, 0o644))
	_, _, err := LoadFile(p)
	assert.ErrorIs(t, err, ErrCorrupt)
	assert.ErrorContains(t, err, "not a regular file")
	_, err = ReadMetadata(p)
	assert.ErrorIs(t, err, ErrCorrupt)
	_, err = OpenTensorFile(p)
	assert.ErrorIs(t, err, ErrCorrupt)
}
