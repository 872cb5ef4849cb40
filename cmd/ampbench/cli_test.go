package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The command itself, in a child process with GAMP_CPU_MEMORY_LIMIT: running out of
// memory while building the models is a message and exit status 1 (issue 16: exit 2
// with a stack trace from nn.NewLinear).
func TestOutOfMemoryCommand(t *testing.T) {
	if os.Getenv("AMPBENCH_TEST_MAIN") == "1" {
		os.Args = append([]string{"ampbench"}, strings.Fields(os.Getenv("AMPBENCH_TEST_ARGS"))...)
		main()
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutOfMemoryCommand$")
	cmd.Env = append(os.Environ(), "AMPBENCH_TEST_MAIN=1", "GAMP_CPU_MEMORY_LIMIT=16MiB",
		"AMPBENCH_TEST_ARGS=-model mlp -device cpu -steps 2 -warmup 0")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	require.Equal(t, 1, ee.ExitCode(), "%s", out)
	require.Contains(t, string(out), "ampbench: cpu")
	require.Contains(t, string(out), "out of memory")
	require.Contains(t, string(out), "raise GAMP_CPU_MEMORY_LIMIT (now 16MiB)")
	require.NotContains(t, string(out), "goroutine", "no stack trace")
	require.NotContains(t, string(out), "panic")
}

// An unwritable -plot fails before the benchmark runs, not after it.
func TestPlotPathCheckedUpFront(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	dir := filepath.Join(t.TempDir(), "a-directory.svg")
	require.NoError(t, os.Mkdir(dir, 0o755))
	for _, path := range []string{filepath.Join(file, "bench.svg"), "/nonexistent-dir/bench.png", dir} {
		o, err := parseArgs([]string{"-model", "mlp", "-device", "cpu", "-steps", "1000000", "-plot", path}, io.Discard)
		require.NoError(t, err)
		// A million steps would take hours: returning at all shows the check came first.
		err = run(o, io.Discard, io.Discard)
		require.Error(t, err, path)
		require.Contains(t, err.Error(), "-plot "+path+": ")
	}
}
