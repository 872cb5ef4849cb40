package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExitStatus(t *testing.T) {
	require.Equal(t, 0, ExitStatus(nil))
	require.Equal(t, 1, ExitStatus(errors.New("disk full")))
	require.Equal(t, 2, ExitStatus(Usagef("-x must be ≥ 1, got %d", 0)))
	require.Equal(t, 2, ExitStatus(fmt.Errorf("wrapped: %w", Usagef("bad"))))
	require.Equal(t, 2, ExitStatus(errors.Join(Usagef("a"), Usagef("b"))))
}

func TestReport(t *testing.T) {
	var b strings.Builder
	require.Equal(t, 0, Report(&b, "cmd", nil))
	require.Equal(t, 0, Report(&b, "cmd", fmt.Errorf("parsing: %w", flag.ErrHelp)))
	require.Empty(t, b.String())
	require.Equal(t, 2, Report(&b, "cmd", Usagef("-x: bad")))
	require.Equal(t, 1, Report(&b, "cmd", errors.New("first\nsecond")))
	require.Equal(t, "cmd: -x: bad\ncmd: first\ncmd: second\n", b.String())
}

func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, CheckWritable(filepath.Join(dir, "new.svg")))
	ents, _ := os.ReadDir(dir)
	require.Empty(t, ents, "the check leaves nothing behind")
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	require.NoError(t, CheckWritable(file), "an existing file is replaced")
	require.ErrorContains(t, CheckWritable(dir), "is a directory")
	require.ErrorContains(t, CheckWritable(filepath.Join(file, "sub")), "cannot write there")
	require.ErrorContains(t, CheckWritable("/nonexistent-dir/x"), "cannot write there")
}

func TestCheckReadableFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	require.NoError(t, CheckReadableFile(file))
	require.ErrorContains(t, CheckReadableFile(dir), "not a regular file")
	require.ErrorIs(t, CheckReadableFile(filepath.Join(dir, "nope")), os.ErrNotExist)
}

func TestIsTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "log")
	require.NoError(t, err)
	defer f.Close()
	require.False(t, IsTerminal(f), "a file is not a terminal")
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.False(t, IsTerminal(w), "a pipe is not a terminal")
}
