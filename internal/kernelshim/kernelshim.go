// Package kernelshim builds gamp's CUDA kernels (package kernels) for the CPU with g++,
// for tests on machines without a GPU. Build writes every kernel source, the prelude
// and shim.h (the CUDA keywords as plain C++; a launch runs every block and thread in
// turn, kernels with __syncthreads as coroutines) into a directory, with one generated
// translation unit per source, and links them into one shared library that exports,
// per kernel NAME of the Go table:
//
//	int call_NAME(void** params, int grid, int block)
//	int info_NAME(unsigned long long i, unsigned long long* offset, unsigned long long* size)
//
// call_NAME runs the kernel as a launch of grid×block threads (x dimension only, no
// dynamic shared memory) on the cuLaunchKernel parameter array params (each entry
// points at one argument's value, as kernels.Args.Pointers builds it) and returns OK
// or one of the Status codes. info_NAME reports parameter i's offset and size in a
// CUDA parameter buffer, derived by the C++ compiler from the kernel's declaration
// (what cuFuncGetParamInfo reads from a real image); it returns nonzero past the last
// parameter. A static_assert per kernel makes a Go table that disagrees with the
// source a compile error, and the struct layouts are asserted against the Go mirrors.
//
// The kernels tests call the wrappers directly; the CUDA backend's emulation tests load
// the library into the stand-in driver (GAMP_FAKE_KERNELS).
package kernelshim

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/gamp-ml/gamp/kernels"
)

//go:embed shim.h
var header string

// LibName is the name of the library Build links in its directory.
const LibName = "libshim.so"

// Status codes call_NAME returns.
const (
	OK                  = 0
	BarrierInGridStride = 2 // __syncthreads in a kernel launched without coroutines (a grid-stride kernel)
	DivergentBarrier    = 3 // some threads of a block returned while others wait at a barrier
	NoMemory            = 4 // the coroutine stacks could not be allocated
)

// Compiler returns the path of g++ on PATH.
func Compiler() (string, error) { return exec.LookPath("g++") }

// BuildWith writes the shim's sources into dir (which must exist), compiles one
// translation unit per kernel source with the C++ compiler cxx (in parallel) and links
// them into dir/LibName, whose path it returns.
func BuildWith(cxx, dir string) (string, error) {
	files := map[string]string{"shim.h": header, kernels.HeaderName: kernels.Header()}
	srcs := kernels.Sources()
	names := make([]string, 0, len(srcs))
	for n, text := range srcs {
		files[n] = text
		names = append(names, n)
	}
	sort.Strings(names)
	for n, text := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(text), 0o644); err != nil {
			return "", fmt.Errorf("kernelshim: %w", err)
		}
	}
	objs := make([]string, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	sem := make(chan struct{}, min(runtime.NumCPU(), 4))
	for i, f := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			base := strings.TrimSuffix(f, ".cu")
			src := filepath.Join(dir, "shim_"+base+".cpp")
			if err := os.WriteFile(src, []byte(Source(f, i == 0)), 0o644); err != nil {
				errs[i] = fmt.Errorf("kernelshim: %w", err)
				return
			}
			objs[i] = filepath.Join(dir, "shim_"+base+".o")
			// _FORTIFY_SOURCE would check the coroutines' _longjmp between stacks as an error.
			cmd := exec.Command(cxx, "-std=c++17", "-O1", "-ffp-contract=off", "-fno-strict-aliasing", "-fPIC", "-U_FORTIFY_SOURCE", "-c",
				"-I", dir, "-o", objs[i], src)
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("kernelshim: building the shim for %s (%s): %v\n%s", f, src, err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return "", err
		}
	}
	lib := filepath.Join(dir, LibName)
	if out, err := exec.Command(cxx, append([]string{"-shared", "-o", lib}, objs...)...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("kernelshim: linking the shim: %v\n%s", err, out)
	}
	return lib, nil
}

// Source returns the translation unit for one kernel source (a name kernels.Sources
// returns, written next to it): the source, the two wrappers per kernel it defines
// and, when structs is set (in one unit of the library), the struct layout assertions.
func Source(file string, structs bool) string {
	var b strings.Builder
	b.WriteString("#include \"shim.h\"\n")
	fmt.Fprintf(&b, "#include %q\n", file)
	for _, s := range []struct {
		name string
		v    any
	}{{"Layout", kernels.Layout{}}, {"Conv2d", kernels.Conv2d{}}, {"Pool2d", kernels.Pool2d{}}} {
		if !structs {
			break
		}
		typ := reflect.TypeOf(s.v)
		fmt.Fprintf(&b, "static_assert(sizeof(%s) == %d && alignof(%s) == %d, \"%s: size or alignment differs from the Go mirror\");\n",
			s.name, typ.Size(), s.name, typ.Align(), s.name)
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if c := f.Tag.Get("c"); c != "" {
				fmt.Fprintf(&b, "static_assert(offsetof(%s, %s) == %d, \"%s.%s: offset differs from the Go mirror\");\n",
					s.name, c, f.Offset, s.name, c)
			}
		}
	}
	for _, k := range kernels.Kernels() {
		if k.File != file {
			continue
		}
		types := make([]string, len(k.Params))
		args := make([]string, len(k.Params))
		for i, p := range k.Params {
			types[i] = p.CType
			args[i] = fmt.Sprintf("*(%s*)p[%d]", p.CType, i)
		}
		fmt.Fprintf(&b, `extern "C" int call_%[1]s(void** p, int grid, int block) {
  static_assert(std::is_same<decltype(&%[1]s), void (*)(%[2]s)>::value, "%[1]s: the Go table's signature differs from the source");
  return shim::launch(grid, block, %[3]v, [&] { %[1]s(%[4]s); });
}
extern "C" int info_%[1]s(unsigned long long i, unsigned long long* off, unsigned long long* size) {
  return shim::params<decltype(&%[1]s)>::info(i, off, size);
}
`, k.Name, strings.Join(types, ", "), k.Launch == kernels.PerRow, strings.Join(args, ", "))
	}
	return b.String()
}
