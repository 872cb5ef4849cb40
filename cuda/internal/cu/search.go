package cu

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
	"github.com/gamp-ml/gamp/internal/dl"
)

// libSpec says how to find one library.
type libSpec struct {
	name    string   // what Libraries reports, e.g. "libcuda"
	env     string   // the per-library override, e.g. GAMP_LIBCUDA
	sonames []string // newest first
	driver  bool     // shipped with the driver (libcuda, NVML): driver dirs, no toolkit or wheels
	wheels  []string // python-wheel directories under site-packages
	hint    string   // what to do when it is missing
}

const toolkitHint = "install the CUDA toolkit (or NVIDIA's pip wheels) or point GAMP_CUDA_LIBDIR at its lib directory"

var (
	specCUDA = libSpec{name: "libcuda", env: "GAMP_LIBCUDA", sonames: []string{"libcuda.so.1"}, driver: true,
		hint: "is the NVIDIA driver installed (nvidia-smi)? Set GAMP_LIBCUDA to the path of libcuda.so.1 if it lives elsewhere"}
	specNVRTC = libSpec{name: "libnvrtc", env: "GAMP_LIBNVRTC", sonames: []string{"libnvrtc.so.13", "libnvrtc.so.12"},
		wheels: []string{"nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"}, hint: toolkitHint + ", or set GAMP_LIBNVRTC"}
	specCublas = libSpec{name: "libcublas", env: "GAMP_LIBCUBLAS", sonames: []string{"libcublas.so.13", "libcublas.so.12"},
		wheels: []string{"nvidia/cu13/lib", "nvidia/cublas/lib"}, hint: toolkitHint + ", or set GAMP_LIBCUBLAS"}
	specCublasLt = libSpec{name: "libcublasLt", env: "GAMP_LIBCUBLASLT", sonames: []string{"libcublasLt.so.13", "libcublasLt.so.12"},
		wheels: []string{"nvidia/cu13/lib", "nvidia/cublas/lib"}, hint: toolkitHint + ", or set GAMP_LIBCUBLASLT"}
	specNVML = libSpec{name: "libnvidia-ml", env: "GAMP_LIBNVML", sonames: []string{"libnvidia-ml.so.1"}, driver: true,
		hint: "NVML ships with the NVIDIA driver; set GAMP_LIBNVML to the path of libnvidia-ml.so.1 if it lives elsewhere"}
)

// searchEnv is everything candidates reads from the machine, so tests can replace it.
type searchEnv struct {
	getenv func(string) string
	glob   func(pattern string) ([]string, error)
	isDir  func(path string) bool
	arch   string // GOARCH
	home   string
}

func hostSearchEnv() searchEnv {
	home, _ := os.UserHomeDir()
	return searchEnv{
		getenv: os.Getenv,
		glob:   filepath.Glob,
		isDir:  func(p string) bool { fi, err := os.Stat(p); return err == nil && fi.IsDir() },
		arch:   runtime.GOARCH,
		home:   home,
	}
}

// candidates lists where spec's library is looked for, in order; the first that loads
// wins. A set per-library override (GAMP_LIBCUDA, …) is final: a file path, a bare
// soname, or a directory searched for the sonames. Otherwise: the GAMP_CUDA_LIBDIR
// directories, the plain sonames (the dynamic loader's search: LD_LIBRARY_PATH, the
// ld.so cache), then for driver libraries the driver directories, for toolkit
// libraries $CUDA_HOME and /usr/local/cuda, then the python wheels. A stubs/ directory
// is never searched: its libcuda makes cuInit fail with 34.
func candidates(spec libSpec, env searchEnv) (paths []string, final bool) {
	inDirs := func(dirs ...string) {
		for _, d := range dirs {
			if d == "" || isStubsDir(d) {
				continue
			}
			for _, so := range spec.sonames {
				paths = append(paths, filepath.Join(d, so))
			}
		}
	}
	if o := env.getenv(spec.env); o != "" {
		if env.isDir(o) {
			for _, so := range spec.sonames {
				paths = append(paths, filepath.Join(o, so))
			}
		} else {
			paths = append(paths, o)
		}
		return paths, true
	}
	inDirs(filepath.SplitList(env.getenv("GAMP_CUDA_LIBDIR"))...)
	paths = append(paths, spec.sonames...)
	gnu, target := "x86_64-linux-gnu", "x86_64-linux"
	if env.arch == "arm64" {
		gnu, target = "aarch64-linux-gnu", "sbsa-linux"
	}
	if spec.driver {
		inDirs("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/"+gnu, "/usr/lib64", "/usr/lib/wsl/lib")
	} else {
		for _, h := range []string{env.getenv("CUDA_HOME"), env.getenv("CUDA_PATH"), "/usr/local/cuda"} {
			if h != "" {
				inDirs(filepath.Join(h, "lib64"), filepath.Join(h, "lib"), filepath.Join(h, "targets", target, "lib"))
			}
		}
		for _, site := range sitePackages(env) {
			for _, w := range spec.wheels {
				inDirs(filepath.Join(site, w))
			}
		}
	}
	return dedupe(paths), false
}

// sitePackages lists the python site-packages directories of the active virtual
// environment or conda prefix, the usual venvs in the home directory, the user site
// and the system pythons.
func sitePackages(env searchEnv) []string {
	roots := []string{env.getenv("VIRTUAL_ENV"), env.getenv("CONDA_PREFIX")}
	if env.home != "" {
		roots = append(roots, filepath.Join(env.home, ".venv"), filepath.Join(env.home, "venv"), filepath.Join(env.home, ".local"))
	}
	roots = append(roots, "/opt/conda", "/usr/local", "/usr")
	var sites []string
	for _, r := range roots {
		if r == "" {
			continue
		}
		for _, pat := range []string{"lib/python3*/site-packages", "lib64/python3*/site-packages", "lib/python3*/dist-packages"} {
			m, _ := env.glob(filepath.Join(r, pat))
			slices.SortFunc(m, func(a, b string) int { return pythonMinor(b) - pythonMinor(a) }) // newest first
			sites = append(sites, m...)
		}
	}
	return sites
}

// pythonMinor returns 12 for .../python3.12/site-packages (0 if there is none).
func pythonMinor(site string) int {
	_, v, _ := strings.Cut(filepath.Base(filepath.Dir(site)), "python3.")
	n, _ := strconv.Atoi(v)
	return n
}

func isStubsDir(dir string) bool {
	return slices.Contains(strings.Split(filepath.ToSlash(filepath.Clean(dir)), "/"), "stubs")
}

func dedupe(s []string) []string {
	seen := make(map[string]bool, len(s))
	out := s[:0]
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// library is one shared library, opened at most once per process.
type library struct {
	spec    libSpec
	once    sync.Once
	handle  uintptr
	path    string // the file loaded (resolved through /proc/self/maps for a bare soname)
	soname  string // the candidate that loaded
	version string
	err     error
}

// open loads the library once: the first candidate that dlopens, then bind. Its
// result is cached; every later call returns it.
func (l *library) open(bind func(l *library) error) error {
	l.once.Do(func() {
		l.err = l.dlopen()
		if l.err == nil {
			if l.err = bind(l); l.err != nil {
				l.handle = 0
			}
		}
	})
	return l.err
}

func (l *library) dlopen() error {
	paths, final := candidates(l.spec, hostSearchEnv())
	var tried []string
	var absent []string
	for _, p := range paths {
		if strings.ContainsRune(p, '/') {
			if _, err := os.Stat(p); err != nil {
				absent = append(absent, p)
				continue
			}
		}
		// RTLD_GLOBAL, as for NCCL: a library loaded later that looks symbols up
		// globally finds this copy. (Dependencies by soname, such as libcublas's on
		// libcublasLt, match an already loaded library either way.)
		h, err := dl.Open(p)
		if err == nil {
			l.handle, l.path, l.soname = h, p, p
			return nil
		}
		tried = append(tried, fmt.Sprintf("%s (%v)", p, err))
	}
	what := l.spec.sonames[0]
	if final {
		what += fmt.Sprintf(" (%s=%s)", l.spec.env, os.Getenv(l.spec.env))
	}
	var detail []string
	if len(tried) > 0 {
		detail = append(detail, "tried "+strings.Join(tried, ", "))
	}
	if len(absent) > 0 {
		detail = append(detail, "absent: "+strings.Join(absent, ", "))
	}
	return fmt.Errorf("%w: cannot load %s: %s; %s", ErrUnavailable, what, strings.Join(detail, "; "), l.spec.hint)
}

// symbol is one C function to bind: fptr is a pointer to a func variable (RegisterFunc)
// or to a uintptr (the raw address, for purego.SyscallN on the hot path).
type symbol struct {
	fptr     any
	name     string
	optional bool // missing in older libraries: left nil/0
}

// bindAll resolves syms in l. A missing required symbol is an ErrUnavailable error
// naming the library and the symbol.
func (l *library) bindAll(syms []symbol) error {
	for _, s := range syms {
		addr, err := dl.Sym(l.handle, s.name)
		if err != nil || addr == 0 {
			if s.optional {
				continue
			}
			return fmt.Errorf("%w: %s has no symbol %s (gamp needs CUDA 12 or newer): %s", ErrUnavailable, l.path, s.name, l.spec.hint)
		}
		if p, ok := s.fptr.(*uintptr); ok {
			*p = addr
		} else {
			purego.RegisterFunc(s.fptr, addr)
		}
		if !strings.ContainsRune(l.path, '/') {
			if f := mappedFile(addr); f != "" {
				l.path = f
			}
		}
	}
	return nil
}

// mappedFile returns the file mapped at addr in this process (/proc/self/maps), or "".
// It turns a library loaded by soname into the path the dynamic loader picked.
func mappedFile(addr uintptr) string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && uint64(addr) >= start && uint64(addr) < end {
			return strings.Join(fields[5:], " ")
		}
	}
	return ""
}

// LibInfo is one library gamp binds: where it was loaded from and its version, or why
// it could not be loaded.
type LibInfo struct {
	Name    string // libcuda, libnvrtc, libnvrtc-builtins, libcublas, libcublasLt, libnvidia-ml
	Path    string // the file loaded
	Version string // e.g. "13.0" (the driver's CUDA version for libcuda)
	Err     error  // why it is not usable; nil when loaded
}

func (l LibInfo) String() string {
	if l.Err != nil {
		return fmt.Sprintf("%s: %v", l.Name, l.Err)
	}
	if l.Version != "" {
		return fmt.Sprintf("%s %s: %s", l.Name, l.Version, l.Path)
	}
	return fmt.Sprintf("%s: %s", l.Name, l.Path)
}

// Libraries reports every library gamp binds, loading each that was not tried yet
// (libcuda through Init and NVML through NVMLInit, so a driver without a device is
// reported as such). A missing library never hides the others.
func Libraries() []LibInfo {
	initErr := Init()
	_ = loadNVRTC()
	_ = loadCublas()
	_ = loadCublasLt()
	nvmlErr := NVMLInit()
	info := func(l *library, err error) LibInfo {
		li := LibInfo{Name: l.spec.name, Err: err}
		if l.handle != 0 {
			li.Path, li.Version = l.path, l.version
		}
		return li
	}
	bi := LibInfo{Name: "libnvrtc-builtins", Path: builtins.path, Err: builtins.err}
	if bi.Path == "" && bi.Err == nil {
		bi.Err = fmt.Errorf("%w: not looked for, libnvrtc is not loaded", ErrUnavailable)
	}
	return []LibInfo{
		info(&cudaLib, initErr),
		info(&nvrtcLib, nvrtcLib.err),
		bi,
		info(&cublasLib, cublasLib.err),
		info(&cublasLtLib, cublasLtLib.err),
		info(&nvmlLib, nvmlErr),
	}
}
