package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gamp-ml/gamp/internal/kernelshim"
	"github.com/gamp-ml/gamp/internal/standin"
	"github.com/gamp-ml/gamp/internal/testenv"
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
		testenv.Skip(t, testenv.GCC, "%s not found: the emulated CUDA device needs gcc (the stand-in libraries in internal/cu/testdata) and g++ (the kernels)", strings.Join(missing, " and "))
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
	var wg sync.WaitGroup
	var shimErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.shim, shimErr = kernelshim.BuildWith(gxx, shimDir)
	}()
	libErr := standin.Build(gcc, filepath.Join("internal", "cu", "testdata"), standin.Libs(e.lib))
	wg.Wait()
	for _, err := range []error{libErr, shimErr} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// env is the child's environment: this process's without anything that steers library
// loading or the CUDA tests, plus the emulation's.
func (e emulation) env(cache string) []string {
	drop := []string{"GAMP_DISABLE_CUDA", "GAMP_REQUIRE_GPU", "GAMP_CUDA_BENCHMARK", "GAMP_KERNEL_CACHE", emulatedEnv}
	extra := append([]string{emulatedEnv + "=1"}, standin.LibEnv(e.lib)...)
	return standin.ChildEnv(drop, append(extra, "GAMP_FAKE_KERNELS="+e.shim, "GAMP_KERNEL_CACHE="+cache)...)
}

// runChild runs the tests named in tests (exact names) in a child process on the
// emulated device and checks that each passed (a skip is a failure).
func (e emulation) runChild(t *testing.T, tests []string) {
	t.Helper()
	env := e.env(t.TempDir())
	standin.RunChild(t, tests, env, "8m")
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
