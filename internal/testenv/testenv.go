// Package testenv decides, in one place, what a test does when an optional tool, library,
// data set or device it needs is missing: skip saying why and what to install, or fail.
//
//	gxx := testenv.Programs(t, testenv.GCC, "g++")[0] // skips, or fails, without it
//
// A missing need is a failure, not a skip, when
//   - its GAMP_REQUIRE_* variable is 1 (CI sets them after installing the tools; GPU
//     machines set GAMP_REQUIRE_GPU=1), or GAMP_REQUIRE_ALL=1 (every need but a GPU);
//   - or the need is in fact present here (its Present check finds it): a test that
//     skips although the tool is installed is hiding a broken install or a broken test.
//
// Every skip is appended to the file $GAMP_SKIP_LOG names (when set), one line per
// skip, so that `make test` can list, at the end of the run, each check it skipped and
// why (see Report); skips a machine without a GPU is expected to make are marked so.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// A Need is something optional that some tests use.
type Need struct {
	// Name says what it is, for messages and the report.
	Name string
	// Require is the variable that makes its absence a failure ("" for none but
	// GAMP_REQUIRE_ALL).
	Require string
	// Install says how to get it.
	Install string
	// Expected marks needs a CI machine lacks by design (a GPU): GAMP_REQUIRE_ALL does
	// not cover them and the report lists their skips as expected.
	Expected bool
	// Present, when set, detects the need independently of the test; a skip while it
	// reports true is a failure.
	Present func() bool
}

// The needs of gamp's tests.
var (
	MPI = Need{Name: "Open MPI (mpirun and libmpi.so.40)", Require: "GAMP_REQUIRE_MPI",
		Install: "apt-get install -y openmpi-bin", Present: havePrograms("mpirun")}
	KernelTools = Need{Name: "clang-16 and g++ (the CUDA kernels' PTX and their CPU shim)", Require: "GAMP_REQUIRE_KERNEL_TOOLS",
		Install: "apt-get install -y clang-16 g++", Present: havePrograms("clang-16", "g++")}
	GCC = Need{Name: "gcc and g++ (the stand-in CUDA libraries and the emulated device)", Require: "GAMP_REQUIRE_GCC",
		Install: "apt-get install -y gcc g++", Present: havePrograms("gcc", "g++")}
	Binutils = Need{Name: "GNU as and objdump (the BF16 assembly generator)", Require: "GAMP_REQUIRE_BINUTILS",
		Install: "apt-get install -y binutils", Present: havePrograms("as", "objdump")}
	FashionMNIST = Need{Name: "Fashion-MNIST in " + FashionMNISTDir, Require: "GAMP_REQUIRE_DATA",
		Install: "apt-get install -y dataset-fashion-mnist", Present: haveFile(filepath.Join(FashionMNISTDir, "train-images-idx3-ubyte.gz"))}
	PythonSafetensors = Need{Name: "Python 3 with numpy and safetensors (the reference safetensors implementation)", Require: "GAMP_REQUIRE_PYTHON_SAFETENSORS",
		Install: "pip install numpy safetensors (Debian 12 packages numpy but not safetensors)", Present: havePython("numpy", "safetensors.numpy")}
	PythonTorch = Need{Name: "Python 3 with PyTorch (runs the same training in PyTorch to compare)", Require: "GAMP_REQUIRE_TORCH",
		Install: "apt-get install -y python3-torch (Debian 12: PyTorch 1.13.1)", Present: havePython("torch")}
	Fortunes = Need{Name: "the fortunes corpus in /usr/share/games/fortunes", Require: "GAMP_REQUIRE_DATA",
		Install: "apt-get install -y fortunes", Present: haveFile("/usr/share/games/fortunes/fortunes")}
	Bash = Need{Name: "bash (the repository's scripts)", Install: "apt-get install -y bash", Present: havePrograms("bash")}
	GPU  = Need{Name: "an NVIDIA GPU and driver", Require: "GAMP_REQUIRE_GPU",
		Install: "run on a GPU machine: make gpu-tests here, .gpu/run.sh there", Expected: true}
	TwoGPUs = Need{Name: "two NVIDIA GPUs", Require: "GAMP_REQUIRE_TWO_GPUS",
		Install: "run on a machine with two GPUs", Expected: true}
	GoTool = Need{Name: "the go command (the assembly generators)", Install: "Go 1.26 on PATH (https://go.dev/dl)", Present: havePrograms("go")}
	Libc   = Need{Name: "glibc's libc.so.6", Install: "a glibc-based Linux"}
	ProcFS = Need{Name: "Linux /proc", Install: "run on Linux"}
)

// FashionMNISTDir is where Debian's dataset-fashion-mnist installs the files.
const FashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// SkipLogEnv names the variable holding the file skips are appended to.
const SkipLogEnv = "GAMP_SKIP_LOG"

// Required reports whether n's absence fails a test here.
func Required(n Need) bool {
	if n.Require != "" && os.Getenv(n.Require) == "1" {
		return true
	}
	return !n.Expected && os.Getenv("GAMP_REQUIRE_ALL") == "1"
}

// Skip ends t because n is missing; format and args say what was looked for and what
// went wrong. It fails t instead when n is required (see Required) or present after
// all, and otherwise records the skip in $GAMP_SKIP_LOG.
func Skip(t testing.TB, n Need, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if msg, fail := failure(n, reason); fail {
		t.Fatal(msg)
		return
	}
	record(t, n, "skipped", reason)
	t.Skipf("%s (needs %s: %s; %s)", reason, n.Name, n.Install, howToFail(n))
}

// Fallback records that t runs with a stand-in because n is missing (real data
// replaced by synthetic data, say); it fails t when n is required or present.
func Fallback(t testing.TB, n Need, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if msg, fail := failure(n, reason); fail {
		t.Fatal(msg)
		return
	}
	record(t, n, "ran without it", reason)
	t.Logf("%s (%s: %s)", reason, n.Name, n.Install)
}

// Programs returns the paths of the named programs, looked up on PATH; when any is
// missing it calls Skip for n, naming every missing one.
func Programs(t testing.TB, n Need, names ...string) []string {
	t.Helper()
	paths := make([]string, len(names))
	var missing []string
	for i, name := range names {
		p, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, name)
		}
		paths[i] = p
	}
	if len(missing) > 0 {
		Skip(t, n, "%s not found on PATH", strings.Join(missing, " and "))
	}
	return paths
}

// Python returns a Python 3 interpreter that imports every module named: python3 on
// PATH, else the system's /usr/bin/python3 (a virtual environment or pyenv first on
// PATH often lacks the system's packages). Without one it calls Skip for n.
func Python(t testing.TB, n Need, modules ...string) string {
	t.Helper()
	if p := findPython(modules...); p != "" {
		return p
	}
	Skip(t, n, "no python3 imports %s", strings.Join(modules, ", "))
	return ""
}

// findPython is Python without a test.
func findPython(modules ...string) string {
	code := "import " + strings.Join(modules, ", ")
	for _, cand := range []string{"python3", "/usr/bin/python3"} {
		p, err := exec.LookPath(cand)
		if err != nil {
			continue
		}
		if exec.Command(p, "-c", code).Run() == nil {
			return p
		}
	}
	return ""
}

func failure(n Need, reason string) (string, bool) {
	switch {
	case Required(n):
		v := n.Require
		if v == "" || os.Getenv(v) != "1" {
			v = "GAMP_REQUIRE_ALL"
		}
		return fmt.Sprintf("%s, and %s=1 makes a missing %s a failure: %s", reason, v, n.Name, n.Install), true
	case n.Present != nil && n.Present():
		return fmt.Sprintf("%s, although %s is installed: this check must run wherever its tools are (fix the install or the test)", reason, n.Name), true
	}
	return "", false
}

func howToFail(n Need) string {
	if n.Require == "" {
		return "GAMP_REQUIRE_ALL=1 makes this a failure"
	}
	return n.Require + "=1 makes this a failure"
}

// logMu orders this process's appends; appends from the several test processes of one
// run are whole lines because each is one write to a file opened with O_APPEND.
var logMu sync.Mutex

// record appends one skip to $GAMP_SKIP_LOG. A log that cannot be written fails the
// test: the report would otherwise hide the skip.
func record(t testing.TB, n Need, what, reason string) {
	t.Helper()
	path := os.Getenv(SkipLogEnv)
	if path == "" {
		return
	}
	e := Entry{Package: packageDir(), Test: t.Name(), Need: n.Name, Install: n.Install, What: what, Reason: reason, Expected: n.Expected}
	logMu.Lock()
	defer logMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.Write(e.marshal())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("testenv: recording a skip in %s=%s: %v", SkipLogEnv, path, err)
	}
}

// packageDir is the test's package directory relative to the module root (go test runs
// a test binary in its package's directory).
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return wd
		}
		dir = parent
	}
}

func havePrograms(names ...string) func() bool {
	return func() bool {
		for _, n := range names {
			if _, err := exec.LookPath(n); err != nil {
				return false
			}
		}
		return true
	}
}

func haveFile(path string) func() bool {
	return func() bool {
		_, err := os.Stat(path)
		return err == nil
	}
}

func havePython(modules ...string) func() bool {
	return func() bool { return findPython(modules...) != "" }
}

// PrivateTMPDIR points TMPDIR at a fresh short directory for the rest of the test
// process (and the processes it starts) and returns a function that removes it. Test
// packages that run mpirun call it from TestMain: Open MPI keeps its session directory
// under TMPDIR, named after the host and user only, and two packages' mpiruns racing to
// create it fail with "File exists" when go test runs them in parallel. Short, because
// Open MPI puts Unix sockets there (108-byte path limit).
func PrivateTMPDIR() (remove func()) {
	dir, err := os.MkdirTemp("", "gamp")
	if err != nil {
		return func() {}
	}
	old, had := os.LookupEnv("TMPDIR")
	os.Setenv("TMPDIR", dir)
	return func() {
		if had {
			os.Setenv("TMPDIR", old)
		} else {
			os.Unsetenv("TMPDIR")
		}
		os.RemoveAll(dir)
	}
}
