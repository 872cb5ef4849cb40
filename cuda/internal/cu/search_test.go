package cu

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// testEnv is a searchEnv over a map of variables and the real file system under temp
// directories.
func testEnv(vars map[string]string, home string) searchEnv {
	env := hostSearchEnv()
	env.getenv = func(k string) string { return vars[k] }
	env.home = home
	env.arch = "amd64"
	return env
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// before reports whether a comes before b in paths, both present.
func before(t *testing.T, paths []string, a, b string) {
	t.Helper()
	i, j := slices.Index(paths, a), slices.Index(paths, b)
	if i < 0 || j < 0 || i >= j {
		t.Errorf("want %s (at %d) before %s (at %d) in\n%s", a, i, b, j, strings.Join(paths, "\n"))
	}
}

func TestCandidatesOverrideIsFinal(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, value string
		want        []string
	}{
		{"file", "/opt/x/libcuda.so.1", []string{"/opt/x/libcuda.so.1"}},
		{"soname", "libcuda.so.1", []string{"libcuda.so.1"}},
		{"directory", dir, []string{filepath.Join(dir, "libcuda.so.1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, final := candidates(specCUDA, testEnv(map[string]string{"GAMP_LIBCUDA": tc.value, "GAMP_CUDA_LIBDIR": "/elsewhere"}, ""))
			if !final || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("candidates = %v, %v; want %v, final", got, final, tc.want)
			}
		})
	}
	got, final := candidates(specNVRTC, testEnv(map[string]string{"GAMP_LIBNVRTC": dir}, ""))
	if want := []string{filepath.Join(dir, "libnvrtc.so.13"), filepath.Join(dir, "libnvrtc.so.12")}; !final || !reflect.DeepEqual(got, want) {
		t.Errorf("NVRTC override directory: %v, want %v", got, want)
	}
}

func TestCandidatesOrder(t *testing.T) {
	tmp := t.TempDir()
	libdir1, libdir2 := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	stubs := filepath.Join(tmp, "cuda", "lib64", "stubs")
	cudaHome := filepath.Join(tmp, "cuda")
	venv := filepath.Join(tmp, "venv")
	site312 := filepath.Join(venv, "lib", "python3.12", "site-packages")
	site39 := filepath.Join(venv, "lib", "python3.9", "site-packages")
	home := filepath.Join(tmp, "home")
	homeSite := filepath.Join(home, ".venv", "lib", "python3.10", "site-packages")
	mkdirs(t, site312, site39, homeSite)
	vars := map[string]string{
		"GAMP_CUDA_LIBDIR": libdir1 + ":" + stubs + "::" + libdir2,
		"CUDA_HOME":        cudaHome,
		"VIRTUAL_ENV":      venv,
	}
	env := testEnv(vars, home)

	t.Run("toolkit", func(t *testing.T) {
		got, final := candidates(specNVRTC, env)
		if final {
			t.Error("final without an override")
		}
		if got[0] != filepath.Join(libdir1, "libnvrtc.so.13") || got[1] != filepath.Join(libdir1, "libnvrtc.so.12") || got[2] != filepath.Join(libdir2, "libnvrtc.so.13") {
			t.Errorf("GAMP_CUDA_LIBDIR does not come first, in order, newest soname first: %v", got[:4])
		}
		before(t, got, filepath.Join(libdir2, "libnvrtc.so.12"), "libnvrtc.so.13")
		before(t, got, "libnvrtc.so.13", "libnvrtc.so.12")
		before(t, got, "libnvrtc.so.12", filepath.Join(cudaHome, "lib64", "libnvrtc.so.13"))
		before(t, got, filepath.Join(cudaHome, "lib64", "libnvrtc.so.12"), filepath.Join(cudaHome, "lib", "libnvrtc.so.13"))
		before(t, got, filepath.Join(cudaHome, "targets", "x86_64-linux", "lib", "libnvrtc.so.13"), "/usr/local/cuda/lib64/libnvrtc.so.13")
		before(t, got, "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.12", filepath.Join(site312, "nvidia", "cu13", "lib", "libnvrtc.so.13"))
		before(t, got, filepath.Join(site312, "nvidia", "cu13", "lib", "libnvrtc.so.13"), filepath.Join(site312, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.12"))
		before(t, got, filepath.Join(site312, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.12"), filepath.Join(site39, "nvidia", "cu13", "lib", "libnvrtc.so.13"))
		before(t, got, filepath.Join(site39, "nvidia", "cu13", "lib", "libnvrtc.so.13"), filepath.Join(homeSite, "nvidia", "cu13", "lib", "libnvrtc.so.13"))
		for _, p := range got {
			if strings.Contains(p, "stubs") {
				t.Errorf("a stubs directory is searched: %s", p)
			}
			if strings.Contains(p, "nvidia/cublas/lib") || strings.Contains(p, "/usr/local/nvidia") {
				t.Errorf("NVRTC searched in %s", p)
			}
		}
		if len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Error("duplicates")
		}
	})
	t.Run("cublas", func(t *testing.T) {
		got, _ := candidates(specCublasLt, env)
		before(t, got, filepath.Join(site312, "nvidia", "cu13", "lib", "libcublasLt.so.13"), filepath.Join(site312, "nvidia", "cublas", "lib", "libcublasLt.so.12"))
		for _, p := range got {
			if strings.Contains(p, "cuda_nvrtc") {
				t.Errorf("cuBLASLt searched in %s", p)
			}
		}
	})
	t.Run("driver", func(t *testing.T) {
		got, _ := candidates(specCUDA, env)
		want := []string{
			filepath.Join(libdir1, "libcuda.so.1"), filepath.Join(libdir2, "libcuda.so.1"), "libcuda.so.1",
			"/usr/local/nvidia/lib64/libcuda.so.1", "/usr/local/nvidia/lib/libcuda.so.1",
			"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1",
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("libcuda candidates:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("arm64", func(t *testing.T) {
		e := env
		e.arch = "arm64"
		got, _ := candidates(specCublas, e)
		if !slices.Contains(got, filepath.Join(cudaHome, "targets", "sbsa-linux", "lib", "libcublas.so.13")) {
			t.Error("no sbsa-linux target directory on arm64")
		}
		drv, _ := candidates(specNVML, e)
		if !slices.Contains(drv, "/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1") {
			t.Errorf("no aarch64 driver directory: %v", drv)
		}
	})
}

func TestCandidatesDefaultNoDuplicates(t *testing.T) {
	got, _ := candidates(specCublas, testEnv(map[string]string{"CUDA_HOME": "/usr/local/cuda"}, ""))
	if len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("CUDA_HOME=/usr/local/cuda duplicates candidates: %v", got)
	}
	seen := map[string]bool{}
	for _, p := range got {
		if seen[p] {
			t.Errorf("%s twice", p)
		}
		seen[p] = true
	}
}

func TestIsStubsDir(t *testing.T) {
	for dir, want := range map[string]bool{
		"/usr/local/cuda/lib64/stubs":  true,
		"/usr/local/cuda/lib64/stubs/": true,
		"/opt/stubs/lib":               true,
		"/usr/local/cuda/lib64":        false,
		"/opt/mystubs":                 false,
	} {
		if got := isStubsDir(dir); got != want {
			t.Errorf("isStubsDir(%q) = %v", dir, got)
		}
	}
}

func TestMappedFile(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	got := mappedFile(reflect.ValueOf(TestMappedFile).Pointer())
	if got != exe {
		t.Errorf("mappedFile(a function of this test binary) = %q, want %q", got, exe)
	}
	if got := mappedFile(1); got != "" {
		t.Errorf("mappedFile(1) = %q", got)
	}
}

// TestUnavailableHere checks the error on a machine without the driver (this one, or
// any CI machine); on a GPU machine it has nothing to check.
func TestUnavailableHere(t *testing.T) {
	if os.Getenv("GAMP_LIBCUDA") != "" || os.Getenv("GAMP_CUDA_LIBDIR") != "" {
		t.Skip("library overrides are set")
	}
	err := Init()
	if err == nil {
		t.Skip("a CUDA driver and device are present")
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Init() = %v, want an error wrapping ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "libcuda.so.1") {
		t.Errorf("Init() = %q, want the paths tried", err)
	}
	for _, l := range Libraries() {
		if l.Err == nil && l.Path == "" {
			t.Errorf("%s: no path and no error", l.Name)
		}
	}
	t.Logf("as expected: %v", err)
}
