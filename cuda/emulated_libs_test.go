package cuda

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/gamp-ml/gamp/internal/kernelshim"
)

// The emulated device: the stand-in CUDA libraries of package cu
// (internal/cu/testdata/fake*.c: device memory is host memory, cuBLAS runs host GEMMs)
// and the g++ build of every kernel (internal/kernelshim), which the stand-in driver
// runs at cuLaunchKernel when GAMP_FAKE_KERNELS names it. The libraries load once per
// process, so the backend runs on them in a child process of the test binary.

// emulatedEnv is set in the child; the tests that need the emulated device skip
// without it.
const emulatedEnv = "GAMP_CUDA_EMULATED"

// emulation is what the child needs: the stand-in libraries and the kernel shim.
type emulation struct {
	lib  string // directory of libcuda.so.1, libnvrtc.so.13, libcublas.so.13, …
	shim string // the kernel library
}

// needCompilers returns the paths of gcc and g++, or skips (fails with
// GAMP_REQUIRE_GCC=1, as CI sets it).
func needCompilers(t *testing.T) (gcc, gxx string) {
	t.Helper()
	var missing []string
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		missing = append(missing, "gcc")
	}
	gxx, err = kernelshim.Compiler()
	if err != nil {
		missing = append(missing, "g++")
	}
	if len(missing) > 0 {
		what := strings.Join(missing, " and ")
		if os.Getenv("GAMP_REQUIRE_GCC") == "1" {
			t.Fatalf("%s not found and GAMP_REQUIRE_GCC=1: the emulated CUDA device needs gcc (stand-in libraries) and g++ (kernels)", what)
		}
		t.Skipf("%s not found: the emulated CUDA device needs gcc (the stand-in libraries in internal/cu/testdata) and g++ (the kernels); install them to run this test (GAMP_REQUIRE_GCC=1 makes this a failure)", what)
	}
	return gcc, gxx
}

// buildEmulation builds the stand-in libraries and the kernel shim into t.TempDir(),
// in parallel.
func buildEmulation(t *testing.T) emulation {
	t.Helper()
	gcc, gxx := needCompilers(t)
	root := t.TempDir()
	e := emulation{lib: filepath.Join(root, "lib")}
	shimDir := filepath.Join(root, "shim")
	for _, d := range []string{e.lib, shimDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	builds := []struct {
		src, soname string
		defs        []string
	}{
		{"fakecuda.c", "libcuda.so.1", nil},
		{"fakenvml.c", "libnvidia-ml.so.1", nil},
		{"fakenvrtc.c", "libnvrtc.so.13", nil},
		{"fakenvrtc.c", "libnvrtc-builtins.so.13.0", []string{"-DFAKE_BUILTINS"}},
		{"fakecublas.c", "libcublas.so.13", nil},
		{"fakecublas.c", "libcublasLt.so.13", nil},
	}
	var wg sync.WaitGroup
	errs := make([]error, len(builds)+1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.shim, errs[len(builds)] = kernelshim.BuildWith(gxx, shimDir)
	}()
	for i, b := range builds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append([]string{"-shared", "-fPIC", "-O1", "-Wall", "-Wl,-soname," + b.soname,
				"-o", filepath.Join(e.lib, b.soname)}, b.defs...)
			args = append(args, filepath.Join("internal", "cu", "testdata", b.src))
			if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// env is the child's environment: this process's without anything that steers library
// loading or the CUDA tests, plus the emulation's.
func (e emulation) env(cache string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "GAMP_LIB"), strings.HasPrefix(k, "FAKECUDA_"), strings.HasPrefix(k, "FAKECUBLAS_"),
			k == "GAMP_CUDA_LIBDIR", k == "GAMP_DISABLE_CUDA", k == "GAMP_REQUIRE_GPU", k == "GAMP_CUDA_BENCHMARK",
			k == "GAMP_FAKE_KERNELS", k == "GAMP_KERNEL_CACHE", k == emulatedEnv,
			k == "LD_LIBRARY_PATH", k == "CUDA_HOME", k == "CUDA_PATH", k == "VIRTUAL_ENV", k == "CONDA_PREFIX":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		emulatedEnv+"=1",
		"GAMP_LIBCUDA="+filepath.Join(e.lib, "libcuda.so.1"),
		"GAMP_LIBNVML="+filepath.Join(e.lib, "libnvidia-ml.so.1"),
		"GAMP_LIBNVRTC="+filepath.Join(e.lib, "libnvrtc.so.13"),
		"GAMP_LIBCUBLAS="+filepath.Join(e.lib, "libcublas.so.13"),
		"GAMP_LIBCUBLASLT="+filepath.Join(e.lib, "libcublasLt.so.13"),
		"GAMP_FAKE_KERNELS="+e.shim,
		"GAMP_KERNEL_CACHE="+cache,
	)
}

// runChild runs the tests named in tests (exact names) in a child process on the
// emulated device and checks that each passed (a skip is a failure).
func (e emulation) runChild(t *testing.T, tests []string) {
	t.Helper()
	args := []string{"-test.run=^(" + strings.Join(tests, "|") + ")$", "-test.v", "-test.count=1", "-test.timeout=8m"}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = e.env(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child on the emulated device failed: %v\n%s", err, out)
	}
	for _, name := range tests {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + name + ` `).Match(out) {
			t.Fatalf("the child did not pass %s:\n%s", name, out)
		}
	}
	if testing.Verbose() {
		t.Logf("child output:\n%s", out)
	}
}

// NeedEmulated returns the backend of the emulated cuda:0 in the child, or skips (for
// the tests in package cuda_test, which may import tensor).
func NeedEmulated(t *testing.T) *Backend { t.Helper(); return needEmulated(t) }

// needEmulated returns the backend of the emulated cuda:0 in the child, or skips.
func needEmulated(t *testing.T) *Backend {
	t.Helper()
	if os.Getenv(emulatedEnv) != "1" {
		t.Skip("runs on the emulated device, in TestEmulatedDevice's child process")
	}
	b, err := Open(0)
	if err != nil {
		t.Fatalf("cuda.Open(0) on the emulated device: %v", err)
	}
	return b
}
