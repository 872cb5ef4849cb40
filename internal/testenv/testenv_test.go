package testenv

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeT records what Skip and Fallback do to a test instead of ending it.
type fakeT struct {
	testing.TB
	name          string
	fatal, skip   string
	failed, skips bool
}

func (f *fakeT) Helper()      {}
func (f *fakeT) Name() string { return f.name }
func (f *fakeT) Fatal(args ...any) {
	f.failed, f.fatal = true, fmt.Sprint(args...)
}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed, f.fatal = true, fmt.Sprintf(format, args...)
}
func (f *fakeT) Skipf(format string, args ...any) {
	f.skips, f.skip = true, fmt.Sprintf(format, args...)
}
func (f *fakeT) Logf(string, ...any) {}

func clearRequire(t *testing.T) {
	for _, v := range []string{"GAMP_REQUIRE_ALL", "GAMP_REQUIRE_TEST_TOOL", "GAMP_REQUIRE_GPU"} {
		t.Setenv(v, "")
	}
}

var (
	absent  = Need{Name: "the test tool", Require: "GAMP_REQUIRE_TEST_TOOL", Install: "apt-get install test-tool", Present: func() bool { return false }}
	present = Need{Name: "the test tool", Require: "GAMP_REQUIRE_TEST_TOOL", Install: "apt-get install test-tool", Present: func() bool { return true }}
	gpu     = Need{Name: "a test GPU", Require: "GAMP_REQUIRE_GPU", Install: "a GPU machine", Expected: true}
)

func TestSkipRecordsAndSkips(t *testing.T) {
	clearRequire(t)
	log := filepath.Join(t.TempDir(), "skips")
	t.Setenv(SkipLogEnv, log)
	f := &fakeT{name: "TestThing/sub"}
	Skip(f, absent, "test-tool not found on PATH")
	require.False(t, f.failed)
	require.True(t, f.skips)
	require.Contains(t, f.skip, "test-tool not found on PATH")
	require.Contains(t, f.skip, "apt-get install test-tool", "the skip says what to install")
	require.Contains(t, f.skip, "GAMP_REQUIRE_TEST_TOOL=1")

	g := &fakeT{name: "TestGPU"}
	Skip(g, gpu, "no driver")
	require.True(t, g.skips)
	h := &fakeT{name: "TestReal"}
	Fallback(h, absent, "used synthetic data")
	require.False(t, h.skips, "a fallback runs the test")
	require.False(t, h.failed)

	entries, err := ReadLog(log)
	require.NoError(t, err)
	require.Len(t, entries, 3)
	require.Equal(t, Entry{Package: "./internal/testenv", Test: "TestThing/sub", Need: "the test tool", Install: "apt-get install test-tool",
		What: "skipped", Reason: "test-tool not found on PATH"}, entries[0])
	require.True(t, entries[1].Expected)
	require.Equal(t, "ran without it", entries[2].What)
}

func TestSkipFailsWhenRequiredOrPresent(t *testing.T) {
	clearRequire(t)
	t.Setenv(SkipLogEnv, filepath.Join(t.TempDir(), "skips"))
	for _, c := range []struct {
		env  string
		need Need
		want string
	}{
		{"GAMP_REQUIRE_TEST_TOOL", absent, "GAMP_REQUIRE_TEST_TOOL=1"},
		{"GAMP_REQUIRE_ALL", absent, "GAMP_REQUIRE_ALL=1"},
		{"", present, "although the test tool is installed"},
		{"GAMP_REQUIRE_GPU", gpu, "GAMP_REQUIRE_GPU=1"},
	} {
		clearRequire(t)
		if c.env != "" {
			t.Setenv(c.env, "1")
		}
		for _, call := range []func(testing.TB, Need, string, ...any){Skip, Fallback} {
			f := &fakeT{name: "TestX"}
			call(f, c.need, "tool not found")
			require.True(t, f.failed, "%s %s", c.env, c.need.Name)
			require.False(t, f.skips)
			require.Contains(t, f.fatal, c.want)
			require.Contains(t, f.fatal, "tool not found")
		}
	}
	// GAMP_REQUIRE_ALL leaves a GPU optional: CI machines have none.
	clearRequire(t)
	t.Setenv("GAMP_REQUIRE_ALL", "1")
	require.False(t, Required(gpu))
	require.True(t, Required(absent))
	entries, err := ReadLog(os.Getenv(SkipLogEnv))
	require.NoError(t, err)
	require.Empty(t, entries, "failures are not skips")
}

func TestProgramsAndPython(t *testing.T) {
	clearRequire(t)
	t.Setenv(SkipLogEnv, "")
	f := &fakeT{name: "TestP"}
	paths := Programs(f, absent, "go")
	require.False(t, f.skips)
	require.NotEmpty(t, paths[0])
	f = &fakeT{name: "TestP"}
	Programs(f, absent, "go", "no-such-program-gamp-1", "no-such-program-gamp-2")
	require.True(t, f.skips)
	require.Contains(t, f.skip, "no-such-program-gamp-1 and no-such-program-gamp-2 not found")
	f = &fakeT{name: "TestPy"}
	require.Empty(t, Python(f, absent, "no_such_module_gamp"))
	require.True(t, f.skips)
}

func TestReport(t *testing.T) {
	var b bytes.Buffer
	Report(&b, nil)
	require.Equal(t, "make test: no check was skipped.\n", b.String())

	entries := []Entry{
		{Package: "./cuda", Test: "TestGPUConformance", Need: "a GPU", Install: "a GPU machine", What: "skipped", Reason: "no driver\nlibcuda.so.1: not found", Expected: true},
		{Package: "./nn", Test: "TestSafetensorsPython", Need: "Python safetensors", Install: "pip install safetensors", What: "skipped", Reason: "no python3 imports safetensors"},
		{Package: "./dist", Test: "TestMPI", Need: "Open MPI", Install: "apt-get install openmpi-bin", What: "skipped", Reason: "mpirun not found"},
		{Package: "./dist", Test: "TestMPI", Need: "Open MPI", Install: "apt-get install openmpi-bin", What: "skipped", Reason: "mpirun not found"},
		{Package: "./cuda", Test: "TestConformance", Need: "a GPU", Install: "a GPU machine", What: "skipped", Reason: "no driver", Expected: true},
	}
	b.Reset()
	Report(&b, entries)
	out := b.String()
	require.Contains(t, out, "4 checks skipped or ran without what they need (2 of them expected on a machine without a GPU)")
	require.Equal(t, 1, strings.Count(out, "TestMPI"), "duplicates listed once")
	require.Contains(t, out, "missing a GPU [expected without a GPU] — a GPU machine")
	require.Contains(t, out, "    ./cuda TestConformance, TestGPUConformance skipped: no driver\n", "one line per package and reason, the reason's first line")
	require.Less(t, strings.Index(out, "Open MPI"), strings.Index(out, "Python safetensors"), "needs sorted by name")
	require.Less(t, strings.Index(out, "Python safetensors"), strings.Index(out, "missing a GPU"), "expected skips last")

	// A torn log is an error, not an empty report.
	p := filepath.Join(t.TempDir(), "log")
	require.NoError(t, os.WriteFile(p, append(entries[0].marshal(), "{torn"...), 0o644))
	_, err := ReadLog(p)
	require.ErrorContains(t, err, "line 2")
	got, err := ReadLog(filepath.Join(t.TempDir(), "none"))
	require.NoError(t, err)
	require.Empty(t, got)
}
