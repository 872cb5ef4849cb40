package cu

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gamp-ml/gamp/internal/standin"
	"github.com/gamp-ml/gamp/internal/testenv"
)

// The stand-in libraries (testdata/fake*.c) let the bindings run without a GPU: gcc
// builds them into a temporary directory, and the tests that load them (TestFake*,
// standin_child_test.go) run in child processes of the test binary. Loading happens
// once per process, so a child never mixes a stand-in with the real driver of a GPU
// machine, and each child can start from a different environment (no device, a stub
// driver, an old driver, libraries found by directory or by LD_LIBRARY_PATH).

// standInEnv is set in the children; TestFake* tests skip without it.
const standInEnv = "GAMP_CU_STANDIN"

// fakeLibs are the built stand-ins.
type fakeLibs struct {
	dir   string // libcuda.so.1, libnvidia-ml.so.1, libnvrtc.so.13, libnvrtc-builtins.so.13.0, libcublas.so.13, libcublasLt.so.13
	old   string // libcuda.so.1 of a CUDA 12.2 driver (no cuEventElapsedTime_v2, no cuFuncGetParamInfo)
	empty string // an empty directory
}

func buildFakes(t *testing.T) fakeLibs {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		testenv.Skip(t, testenv.GCC, "gcc not found: cannot build the stand-in CUDA libraries (testdata/fake*.c)")
	}
	root := t.TempDir()
	f := fakeLibs{dir: filepath.Join(root, "lib"), old: filepath.Join(root, "old"), empty: filepath.Join(root, "empty")}
	for _, d := range []string{f.dir, f.old, f.empty} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	libs := append(standin.Libs(f.dir), standin.Lib{Src: "fakecuda.c", Out: filepath.Join(f.old, standin.Cuda), Soname: standin.Cuda, Defs: []string{"-DFAKE_OLD_DRIVER"}})
	if err := standin.Build(gcc, "testdata", libs); err != nil {
		t.Fatal(err)
	}
	return f
}

// childEnv is the environment of a child: this process's, without anything that
// steers library loading, plus extra.
func childEnv(extra ...string) []string {
	return standin.ChildEnv([]string{standInEnv, "GAMP_CU_*"}, append([]string{standInEnv + "=1"}, extra...)...)
}

// runChild runs the tests named in tests (exact names) in a child process and checks
// that each passed.
func runChild(t *testing.T, tests []string, env []string, extraArgs ...string) string {
	t.Helper()
	return standin.RunChild(t, tests, env, "5m", extraArgs...)
}

func libEnv(dir string) []string { return standin.LibEnv(dir) }

// TestStandIn runs the bindings against the stand-in libraries, each scenario in its
// own process.
func TestStandIn(t *testing.T) {
	if os.Getenv(standInEnv) != "" {
		t.Skip("already in a child")
	}
	f := buildFakes(t)
	t.Run("driver", func(t *testing.T) {
		runChild(t, []string{"TestFakeDriver", "TestFakeMemory", "TestFakeOutOfMemory", "TestFakeErrors", "TestFakeEvents",
			"TestFakeKernels", "TestFakeNVRTC", "TestFakeBlas", "TestFakeLt", "TestFakeNVML", "TestFakeLibraries"},
			childEnv(append(libEnv(f.dir), "FAKECUDA_MEM_LIMIT=67108864", "GAMP_CU_WANT_DIR="+f.dir)...))
	})
	t.Run("old-driver", func(t *testing.T) {
		runChild(t, []string{"TestFakeOldDriver"}, childEnv("GAMP_LIBCUDA="+filepath.Join(f.old, "libcuda.so.1")))
	})
	t.Run("no-device", func(t *testing.T) {
		runChild(t, []string{"TestFakeInitFails"}, childEnv(append(libEnv(f.dir), "FAKECUDA_INIT_RESULT=100", "GAMP_CU_WANT_CODE=100")...))
	})
	t.Run("stub", func(t *testing.T) {
		runChild(t, []string{"TestFakeInitFails"}, childEnv(append(libEnv(f.dir), "FAKECUDA_INIT_RESULT=34", "GAMP_CU_WANT_CODE=34")...))
	})
	t.Run("blas-alloc-failed", func(t *testing.T) {
		runChild(t, []string{"TestFakeBlasOutOfMemory"}, childEnv(append(libEnv(f.dir), "FAKECUBLAS_ALLOC_FAILED=1")...))
	})
	t.Run("missing", func(t *testing.T) {
		runChild(t, []string{"TestFakeNoLibrary"}, childEnv(
			"GAMP_LIBCUDA="+filepath.Join(f.empty, "libcuda.so.1"), "GAMP_LIBNVML="+f.empty, "GAMP_CU_WANT_DIR="+f.empty))
	})
	t.Run("libdir", func(t *testing.T) {
		runChild(t, []string{"TestFakeSearch"}, childEnv("GAMP_CUDA_LIBDIR="+f.empty+":"+f.dir, "GAMP_CU_WANT_DIR="+f.dir))
	})
	t.Run("ld-library-path", func(t *testing.T) {
		runChild(t, []string{"TestFakeSearch"}, childEnv("LD_LIBRARY_PATH="+f.dir, "GAMP_CU_WANT_DIR="+f.dir, "GAMP_CU_WANT_RESOLVED=1"))
	})
	if os.Getenv("GAMP_CU_BENCH") == "1" {
		t.Run("bench", func(t *testing.T) {
			out := runChild(t, nil, childEnv(append(libEnv(f.dir), "FAKECUDA_MEM_LIMIT=67108864")...), "-test.bench=Fake", "-test.benchmem")
			if !testing.Verbose() {
				t.Logf("stand-in benchmarks:\n%s", out)
			}
		})
	}
}
