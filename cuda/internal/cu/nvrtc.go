package cu

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unsafe"

	"github.com/gamp-ml/gamp/internal/dl"
)

var nvrtcLib = library{spec: specNVRTC}

// builtins is libnvrtc-builtins, preloaded from libnvrtc's directory.
var builtins struct {
	path string
	err  error
}

var nvrtc struct {
	version      func(major, minor *int32) int32
	create       func(prog *uintptr, src, name string, n int32, headers, includeNames unsafe.Pointer) int32
	compile      func(prog uintptr, n int32, opts unsafe.Pointer) int32
	logSize      func(prog uintptr, n *uint64) int32
	log          func(prog uintptr, buf *byte) int32
	cubinSize    func(prog uintptr, n *uint64) int32
	cubin        func(prog uintptr, buf *byte) int32
	ptxSize      func(prog uintptr, n *uint64) int32
	ptx          func(prog uintptr, buf *byte) int32
	destroy      func(prog *uintptr) int32
	errorString  func(rc int32) string
	major, minor int32
}

func loadNVRTC() error {
	return nvrtcLib.open(func(l *library) error {
		n := &nvrtc
		err := l.bindAll([]symbol{
			{fptr: &n.version, name: "nvrtcVersion"},
			{fptr: &n.errorString, name: "nvrtcGetErrorString"},
			{fptr: &n.create, name: "nvrtcCreateProgram"},
			{fptr: &n.compile, name: "nvrtcCompileProgram"},
			{fptr: &n.logSize, name: "nvrtcGetProgramLogSize"},
			{fptr: &n.log, name: "nvrtcGetProgramLog"},
			{fptr: &n.cubinSize, name: "nvrtcGetCUBINSize"},
			{fptr: &n.cubin, name: "nvrtcGetCUBIN"},
			{fptr: &n.ptxSize, name: "nvrtcGetPTXSize"},
			{fptr: &n.ptx, name: "nvrtcGetPTX"},
			{fptr: &n.destroy, name: "nvrtcDestroyProgram"},
		})
		if err != nil {
			return err
		}
		if rc := n.version(&n.major, &n.minor); rc != nvrtcSuccess {
			return nvrtcError("nvrtcVersion", rc)
		}
		l.version = fmt.Sprintf("%d.%d", n.major, n.minor)
		builtins.path, builtins.err = preloadBuiltins(l.path, int(n.major))
		return nil
	})
}

// preloadBuiltins loads libnvrtc-builtins from libnvrtc's directory, RTLD_GLOBAL, so
// that NVRTC's own dlopen of it by soname at compile time finds this copy even when
// the directory is on no search path (a pip wheel, GAMP_CUDA_LIBDIR).
func preloadBuiltins(nvrtcPath string, major int) (string, error) {
	if !strings.ContainsRune(nvrtcPath, '/') {
		return "", fmt.Errorf("libnvrtc was loaded by soname from an unknown directory; NVRTC finds its builtins itself")
	}
	dir := filepath.Dir(nvrtcPath)
	m, _ := filepath.Glob(filepath.Join(dir, "libnvrtc-builtins.so.*"))
	if len(m) == 0 {
		return "", fmt.Errorf("no libnvrtc-builtins.so.* next to %s; NVRTC looks for it itself at compile time", nvrtcPath)
	}
	slices.Sort(m)
	slices.Reverse(m)
	// Same major version as libnvrtc first, newest first.
	prefix := filepath.Join(dir, fmt.Sprintf("libnvrtc-builtins.so.%d", major))
	slices.SortStableFunc(m, func(a, b string) int {
		pa, pb := strings.HasPrefix(a, prefix), strings.HasPrefix(b, prefix)
		switch {
		case pa && !pb:
			return -1
		case pb && !pa:
			return 1
		}
		return 0
	})
	var errs []string
	for _, p := range m {
		if _, err := dl.Open(p); err == nil {
			return p, nil
		} else {
			errs = append(errs, fmt.Sprintf("%s (%v)", p, err))
		}
	}
	return "", fmt.Errorf("cannot preload %s", strings.Join(errs, ", "))
}

func nvrtcError(fn string, rc int32) *Error {
	name := fmt.Sprintf("NVRTC_ERROR_%d", rc)
	if nvrtc.errorString != nil {
		if s := nvrtc.errorString(rc); s != "" {
			name = s
		}
	}
	return &Error{Lib: libNVRTC, Func: fn, Code: int(rc), Name: name}
}

func nvrtcCheck(fn string, rc int32) error {
	if rc == nvrtcSuccess {
		return nil
	}
	return nvrtcError(fn, rc)
}

// NVRTCVersion returns the version of the loaded NVRTC.
func NVRTCVersion() (major, minor int, err error) {
	if err := loadNVRTC(); err != nil {
		return 0, 0, err
	}
	return int(nvrtc.major), int(nvrtc.minor), nil
}

// Compile compiles CUDA C++ src (named name in messages) with NVRTC to a CUBIN for the
// real architecture that opts names (--gpu-architecture=sm_XY or -arch=sm_XY; the
// device's compute capability, attributes 75/76). headers maps include names to their
// text. log is NVRTC's log, warnings included; a failed compilation returns an *Error
// (NVRTC_ERROR_COMPILATION) with the log in the error text. Needs no GPU.
func Compile(src, name string, headers map[string]string, opts []string) (image []byte, log string, err error) {
	arch := gpuArch(opts)
	if !strings.HasPrefix(arch, "sm_") {
		return nil, "", fmt.Errorf("cu: Compile %s: a CUBIN needs a real architecture option (--gpu-architecture=sm_XY), got %q; CompilePTX compiles for virtual ones", name, arch)
	}
	return compile(src, name, headers, opts, true)
}

// CompilePTX is Compile producing PTX text (for compute_XY or sm_XY). Prefer CUBIN: a
// driver older than the NVRTC rejects its PTX (CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222).
func CompilePTX(src, name string, headers map[string]string, opts []string) (ptx []byte, log string, err error) {
	return compile(src, name, headers, opts, false)
}

// gpuArch returns the value of the architecture option in opts, or "".
func gpuArch(opts []string) string {
	for i, o := range opts {
		for _, flag := range []string{"--gpu-architecture", "-arch"} {
			if v, ok := strings.CutPrefix(o, flag+"="); ok {
				return v
			}
			if o == flag && i+1 < len(opts) {
				return opts[i+1]
			}
		}
	}
	return ""
}

// cStrings is a C array of C strings kept in Go memory, pinned while C reads it.
type cStrings struct {
	bufs [][]byte
	ptrs []*byte
}

func newCStrings(ss []string) *cStrings {
	c := &cStrings{}
	for _, s := range ss {
		b := cString(s)
		c.bufs = append(c.bufs, b)
		c.ptrs = append(c.ptrs, &b[0])
	}
	return c
}

// ptr returns the char** (nil for an empty array), pinning the array and the strings.
func (c *cStrings) ptr(pin *runtime.Pinner) unsafe.Pointer {
	if len(c.ptrs) == 0 {
		return nil
	}
	pin.Pin(&c.ptrs[0])
	for _, p := range c.ptrs {
		pin.Pin(p)
	}
	return unsafe.Pointer(&c.ptrs[0])
}

func compile(src, name string, headers map[string]string, opts []string, cubin bool) (out []byte, log string, err error) {
	if err := loadNVRTC(); err != nil {
		return nil, "", err
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	slices.Sort(names)
	texts := make([]string, len(names))
	for i, k := range names {
		texts[i] = headers[k]
	}
	hdr, inc, opt := newCStrings(texts), newCStrings(names), newCStrings(opts)
	var pin runtime.Pinner
	defer pin.Unpin()

	var prog uintptr
	if err := nvrtcCheck("nvrtcCreateProgram", nvrtc.create(&prog, src, name, int32(len(names)), hdr.ptr(&pin), inc.ptr(&pin))); err != nil {
		return nil, "", err
	}
	defer nvrtc.destroy(&prog)

	rc := nvrtc.compile(prog, int32(len(opts)), opt.ptr(&pin))
	log = programLog(prog)
	if rc != nvrtcSuccess {
		e := nvrtcError("nvrtcCompileProgram", rc)
		if strings.TrimSpace(log) != "" {
			return nil, log, fmt.Errorf("compiling %s: %w\n%s", name, e, strings.TrimSpace(log))
		}
		return nil, log, fmt.Errorf("compiling %s: %w", name, e)
	}
	sizeFn, getFn, what := nvrtc.ptxSize, nvrtc.ptx, "nvrtcGetPTX"
	if cubin {
		sizeFn, getFn, what = nvrtc.cubinSize, nvrtc.cubin, "nvrtcGetCUBIN"
	}
	var n uint64
	if err := nvrtcCheck(what+"Size", sizeFn(prog, &n)); err != nil {
		return nil, log, err
	}
	if n == 0 {
		return nil, log, fmt.Errorf("cu: %s: %s produced an empty image", what, name)
	}
	out = make([]byte, n)
	if err := nvrtcCheck(what, getFn(prog, &out[0])); err != nil {
		return nil, log, err
	}
	if !cubin {
		out = []byte(cBuf(out)) // PTX size counts the NUL
	}
	return out, log, nil
}

func programLog(prog uintptr) string {
	var n uint64
	if nvrtc.logSize(prog, &n) != nvrtcSuccess || n <= 1 {
		return ""
	}
	buf := make([]byte, n)
	if nvrtc.log(prog, &buf[0]) != nvrtcSuccess {
		return ""
	}
	return cBuf(buf)
}
