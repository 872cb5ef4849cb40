// Package standin builds the stand-in CUDA libraries (cuda/internal/cu/testdata/fake*.c:
// device memory is host memory, cuBLAS runs host GEMMs, and the driver launches the
// kernel shim of internal/kernelshim when GAMP_FAKE_KERNELS names it) and runs the
// tests that load them in child processes of the test binary. Libraries load once per
// process, so a child never mixes a stand-in with a GPU machine's real driver. Both
// cuda/internal/cu (the bindings) and cuda (the emulated device) use it.
package standin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// Lib is one stand-in to build: a source in the stand-ins' directory, the file to
// write, its soname and extra compiler flags.
type Lib struct {
	Src, Out, Soname string
	Defs             []string
}

// Sonames of the full set Libs builds, in LibEnv's order.
const (
	Cuda     = "libcuda.so.1"
	NVML     = "libnvidia-ml.so.1"
	NVRTC    = "libnvrtc.so.13"
	Builtins = "libnvrtc-builtins.so.13.0"
	Cublas   = "libcublas.so.13"
	CublasLt = "libcublasLt.so.13"
)

// Libs is every stand-in, written into dir.
func Libs(dir string) []Lib {
	lib := func(src, soname string, defs ...string) Lib {
		return Lib{Src: src, Out: filepath.Join(dir, soname), Soname: soname, Defs: defs}
	}
	return []Lib{
		lib("fakecuda.c", Cuda),
		lib("fakenvml.c", NVML),
		lib("fakenvrtc.c", NVRTC),
		lib("fakenvrtc.c", Builtins, "-DFAKE_BUILTINS"),
		lib("fakecublas.c", Cublas),
		lib("fakecublas.c", CublasLt),
	}
}

// Build compiles libs from the sources in srcDir with gcc, in parallel.
func Build(gcc, srcDir string, libs []Lib) error {
	var wg sync.WaitGroup
	errs := make([]error, len(libs))
	for i, b := range libs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append([]string{"-shared", "-fPIC", "-O1", "-Wall", "-Wl,-soname," + b.Soname, "-o", b.Out}, b.Defs...)
			args = append(args, filepath.Join(srcDir, b.Src))
			if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// LibEnv points the per-library overrides at the stand-ins in dir.
func LibEnv(dir string) []string {
	return []string{
		"GAMP_LIBCUDA=" + filepath.Join(dir, Cuda),
		"GAMP_LIBNVML=" + filepath.Join(dir, NVML),
		"GAMP_LIBNVRTC=" + filepath.Join(dir, NVRTC),
		"GAMP_LIBCUBLAS=" + filepath.Join(dir, Cublas),
		"GAMP_LIBCUBLASLT=" + filepath.Join(dir, CublasLt),
	}
}

// ChildEnv is this process's environment without anything that steers library loading
// or the stand-ins (and without the keys drop names), followed by extra.
func ChildEnv(drop []string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "GAMP_LIB"), strings.HasPrefix(k, "FAKECUDA_"), strings.HasPrefix(k, "FAKECUBLAS_"),
			k == "GAMP_CUDA_LIBDIR", k == "GAMP_FAKE_KERNELS",
			k == "LD_LIBRARY_PATH", k == "CUDA_HOME", k == "CUDA_PATH", k == "VIRTUAL_ENV", k == "CONDA_PREFIX":
			continue
		}
		skip := false
		for _, d := range drop {
			if k == d || (strings.HasSuffix(d, "*") && strings.HasPrefix(k, strings.TrimSuffix(d, "*"))) {
				skip = true
			}
		}
		if !skip {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// RunChild runs the tests named in tests (exact names) in a child process of the test
// binary with env, and fails t unless each of them passed (a skip is a failure). It
// returns the child's output.
func RunChild(t testing.TB, tests []string, env []string, timeout string, extraArgs ...string) string {
	t.Helper()
	args := append([]string{"-test.run=^(" + strings.Join(tests, "|") + ")$", "-test.v", "-test.count=1", "-test.timeout=" + timeout}, extraArgs...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %v failed: %v\n%s", tests, err, out)
	}
	for _, name := range tests {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + name + ` `).Match(out) {
			t.Fatalf("child did not pass %s:\n%s", name, out)
		}
	}
	if testing.Verbose() {
		t.Logf("child output:\n%s", out)
	}
	return string(out)
}
