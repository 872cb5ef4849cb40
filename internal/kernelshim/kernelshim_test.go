package kernelshim

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gamp-ml/gamp/internal/testenv"
	"github.com/gamp-ml/gamp/kernels"
)

// TestSource checks that every kernel of the table gets its two wrappers, in the unit
// of its own source, and that one unit asserts the struct layouts.
func TestSource(t *testing.T) {
	units := map[string]string{}
	for f := range kernels.Sources() {
		units[f] = Source(f, f == "conv.cu")
	}
	for _, k := range kernels.Kernels() {
		for f, u := range units {
			has := strings.Contains(u, " call_"+k.Name+"(") && strings.Contains(u, " info_"+k.Name+"(")
			if has != (f == k.File) {
				t.Errorf("%s: wrappers in %s: %v (the kernel is in %s)", k.Name, f, has, k.File)
			}
		}
	}
	if !strings.Contains(units["conv.cu"], "offsetof(Layout, stride)") || strings.Contains(units["reduce.cu"], "offsetof") {
		t.Error("the struct assertions are not in exactly the unit asked for")
	}
}

// The scheduler's own test: kernels written for it, run through shim::launch.
const schedulerTest = `#include "shim.h"
// Per block: out[b] = sum of the block's x, by a tree of barriers; 2 shared arrays.
__global__ void block_sum(const int* x, int* out) {
  __shared__ int sh[1024];
  __shared__ int twice[1024];
  unsigned t = threadIdx.x;
  sh[t] = x[blockIdx.x * blockDim.x + t];
  twice[t] = 2 * sh[t];
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) { sh[t] += sh[t + s]; twice[t] += twice[t + s]; }
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = sh[0] == twice[0] / 2 ? sh[0] : -1;
}
// Thread 0 leaves before the barrier the others wait at.
__global__ void divergent(int* out) {
  if (threadIdx.x == 0) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}
extern "C" int run_block_sum(const int* x, int* out, int grid, int block) {
  return shim::launch(grid, block, true, [&] { block_sum(x, out); });
}
extern "C" int run_divergent(int* out, int grid, int block, int coop) {
  return shim::launch(grid, block, coop != 0, [&] { divergent(out); });
}
`

func TestScheduler(t *testing.T) {
	cxx, err := Compiler()
	if err != nil {
		testenv.Skip(t, testenv.GCC, "g++ not found: %v", err)
	}
	dir := t.TempDir()
	for name, text := range map[string]string{"shim.h": header, "sched.cpp": schedulerTest} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lib := filepath.Join(dir, "libsched.so")
	if out, err := exec.Command(cxx, "-std=c++17", "-O1", "-U_FORTIFY_SOURCE", "-fPIC", "-shared", "-I", dir,
		"-o", lib, filepath.Join(dir, "sched.cpp")).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := purego.Dlsym(h, "run_block_sum")
	if err != nil {
		t.Fatal(err)
	}
	div, err := purego.Dlsym(h, "run_divergent")
	if err != nil {
		t.Fatal(err)
	}
	call := func(fn uintptr, args ...uintptr) int32 {
		r, _, _ := purego.SyscallN(fn, args...)
		return int32(r)
	}
	blockSum := func(grid, block int) {
		t.Helper()
		x := make([]int32, grid*block)
		want := make([]int32, grid)
		for i := range x {
			x[i] = int32(i%13 - 5)
			want[i/block] += x[i]
		}
		out := make([]int32, grid)
		var pin runtime.Pinner
		pin.Pin(&x[0])
		pin.Pin(&out[0])
		defer pin.Unpin()
		if rc := call(sum, uintptr(unsafe.Pointer(&x[0])), uintptr(unsafe.Pointer(&out[0])), uintptr(grid), uintptr(block)); rc != OK {
			t.Fatalf("block_sum<<<%d, %d>>>: status %d", grid, block, rc)
		}
		for b := range want {
			if out[b] != want[b] {
				t.Fatalf("block_sum<<<%d, %d>>>: block %d sums to %d, want %d", grid, block, b, out[b], want[b])
			}
		}
	}
	blockSum(1, 1)
	blockSum(5, 256)
	blockSum(3, 1024)
	out := make([]int32, 64)
	var pin runtime.Pinner
	pin.Pin(&out[0])
	defer pin.Unpin()
	if rc := call(div, uintptr(unsafe.Pointer(&out[0])), 2, 64, 1); rc != DivergentBarrier {
		t.Errorf("a barrier thread 0 skips: status %d, want %d", rc, DivergentBarrier)
	}
	if rc := call(div, uintptr(unsafe.Pointer(&out[0])), 1, 64, 0); rc != BarrierInGridStride {
		t.Errorf("a barrier in a grid-stride launch: status %d, want %d", rc, BarrierInGridStride)
	}
	blockSum(4, 128) // the scheduler recovers after an error
}
