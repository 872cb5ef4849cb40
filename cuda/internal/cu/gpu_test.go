package cu

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/gamp-ml/gamp/internal/testenv"
)

// Tests against a real GPU. Without one they skip, saying why; GAMP_REQUIRE_GPU=1
// turns the skips into failures (for GPU CI machines).

func requireGPU(t *testing.T) {
	t.Helper()
	if os.Getenv(standInEnv) != "" {
		t.Skip("a stand-in child process: no real GPU here")
	}
	if err := Init(); err != nil {
		testenv.Skip(t, testenv.GPU, "no usable GPU: %v", err)
	}
}

// requireLib skips (or fails under GAMP_REQUIRE_GPU=1) when a toolkit library is missing.
func requireLib(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	testenv.Skip(t, testenv.GPU, "%s unavailable: %v", what, err)
}

func TestGPUDevice(t *testing.T) {
	requireGPU(t)
	for _, l := range Libraries() {
		t.Log(l)
	}
	n, err := DeviceCount()
	must(t, err)
	if n < 1 {
		t.Fatalf("DeviceCount = %d after a successful Init", n)
	}
	d, err := DeviceGet(0)
	must(t, err)
	major, err := d.Attribute(AttrComputeCapabilityMajor)
	must(t, err)
	minor, err := d.Attribute(AttrComputeCapabilityMinor)
	must(t, err)
	sms, err := d.Attribute(AttrMultiprocessorCount)
	must(t, err)
	name, err := d.Name()
	must(t, err)
	total, err := d.TotalMem()
	must(t, err)
	bus, err := d.PCIBusID()
	must(t, err)
	t.Logf("device 0: %s, sm_%d%d, %d SMs, %.1f GiB, PCI %s", name, major, minor, sms, float64(total)/(1<<30), bus)
	if major < 3 || sms < 1 || name == "" || total == 0 || !strings.Contains(bus, ":") {
		t.Error("implausible device properties")
	}
	defer onDevice(t)()
	free, tot, err := MemGetInfo()
	must(t, err)
	if tot != total || free > tot {
		t.Errorf("MemGetInfo = %d free of %d; TotalMem %d", free, tot, total)
	}
}

func TestGPUMemory(t *testing.T) {
	requireGPU(t)
	defer onDevice(t)()
	src := make([]byte, 1<<20+3)
	for i := range src {
		src[i] = byte(i*31 + i>>8)
	}
	p := upload(t, src)
	q, err := MemAlloc(uint64(len(src)))
	must(t, err)
	s, err := StreamCreate(StreamNonBlocking)
	must(t, err)
	defer func() { must(t, StreamDestroy(s)) }()
	must(t, MemcpyDtoDAsync(q, p, uint64(len(src)), s))
	must(t, MemsetD8Async(q, 0x77, 5, s))
	must(t, MemsetD32Async(q+8, 0x01020304, 2, s))
	got := make([]byte, len(src))
	must(t, MemcpyDtoHAsync(unsafe.Pointer(&got[0]), q, uint64(len(got)), s))
	must(t, StreamSynchronize(s))
	want := append([]byte(nil), src...)
	copy(want, []byte{0x77, 0x77, 0x77, 0x77, 0x77})
	copy(want[8:], []byte{4, 3, 2, 1, 4, 3, 2, 1})
	if !bytes.Equal(got, want) {
		t.Fatal("copy and memset round trip differs")
	}
	h, err := MemHostAlloc(4096, MemHostAllocPortable)
	must(t, err)
	must(t, MemcpyDtoHAsync(h, p, 4096, s))
	must(t, StreamSynchronize(s))
	if !bytes.Equal(unsafe.Slice((*byte)(h), 4096), src[:4096]) {
		t.Error("copy into pinned memory")
	}
	must(t, MemFreeHost(h))
	must(t, MemFree(p))
	must(t, MemFree(q))

	_, err = MemAlloc(1 << 50) // a pebibyte
	var e *Error
	if !errors.As(err, &e) || !e.OutOfMemory() || !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("MemAlloc(1 PiB) = %v, want CUDA_ERROR_OUT_OF_MEMORY", err)
	}
}

// axpbSrc is a header-free kernel: y = a·x + b.
const axpbSrc = `
extern "C" __global__ void axpb(float* y, const float* x, float a, float b, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * x[i] + b;
}
`

func TestGPUKernel(t *testing.T) {
	requireGPU(t)
	_, _, err := NVRTCVersion()
	requireLib(t, "NVRTC", err)
	defer onDevice(t)()
	d, _ := DeviceGet(0)
	major, _ := d.Attribute(AttrComputeCapabilityMajor)
	minor, _ := d.Attribute(AttrComputeCapabilityMinor)
	img, log, err := Compile(axpbSrc, "axpb.cu", nil, []string{fmt.Sprintf("--gpu-architecture=sm_%d%d", major, minor), "-default-device", "-std=c++17"})
	must(t, err)
	if strings.TrimSpace(log) != "" {
		t.Logf("NVRTC log: %s", log)
	}
	if !bytes.HasPrefix(img, []byte("\x7fELF")) {
		t.Fatalf("the CUBIN is not an ELF image: % x", img[:min(len(img), 8)])
	}
	m, err := ModuleLoadData(img)
	must(t, err)
	defer func() { must(t, ModuleUnload(m)) }()
	f, err := ModuleGetFunction(m, "axpb")
	must(t, err)
	for i, want := range [][2]uint64{{0, 8}, {8, 8}, {16, 4}, {20, 4}, {24, 4}} {
		off, size, err := FuncGetParamInfo(f, i)
		if errors.Is(err, ErrNotSupported) {
			t.Logf("cuFuncGetParamInfo: %v", err)
			break
		}
		if err != nil || off != want[0] || size != want[1] {
			t.Errorf("parameter %d: offset %d size %d (%v), want %v", i, off, size, err, want)
		}
	}

	const n = 1000
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i) - 300
	}
	X := upload(t, unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*n))
	Y, err := MemAlloc(4 * n)
	must(t, err)
	defer func() { _, _ = MemFree(X), MemFree(Y) }()
	check := func(a, b float32) {
		t.Helper()
		y := make([]float32, n)
		must(t, MemcpyDtoH(unsafe.Pointer(&y[0]), Y, 4*n))
		for i := range y {
			if want := a*x[i] + b; y[i] != want {
				t.Fatalf("y[%d] = %v, want %v", i, y[i], want)
			}
		}
	}
	yp, xp, a, b, cnt := Y, X, float32(2), float32(0.5), int32(n)
	grid, block := [3]uint32{(n + 255) / 256, 1, 1}, [3]uint32{256, 1, 1}
	must(t, LaunchKernel(f, grid, block, 0, 0, []unsafe.Pointer{
		unsafe.Pointer(&yp), unsafe.Pointer(&xp), unsafe.Pointer(&a), unsafe.Pointer(&b), unsafe.Pointer(&cnt)}))
	must(t, CtxSynchronize())
	check(2, 0.5)

	s, err := StreamCreate(StreamNonBlocking)
	must(t, err)
	defer func() { must(t, StreamDestroy(s)) }()
	args := NewKernelArgs(5)
	defer args.Free()
	args.SetPtr(0, Y)
	args.SetPtr(1, X)
	args.SetF32(2, -3)
	args.SetF32(3, 1)
	args.SetI32(4, n)
	start, err := EventCreate(EventDefault)
	must(t, err)
	end, err := EventCreate(EventDefault)
	must(t, err)
	must(t, EventRecord(start, s))
	must(t, LaunchKernelArgs(f, grid, block, 0, s, args))
	must(t, EventRecord(end, s))
	must(t, EventSynchronize(end))
	ms, err := EventElapsedTime(start, end)
	must(t, err)
	if ms < 0 || ms > 1000 {
		t.Errorf("a 1000-element kernel took %v ms", ms)
	}
	check(-3, 1)
	must(t, EventDestroy(start))
	must(t, EventDestroy(end))
}

func TestGPUGemm(t *testing.T) {
	requireGPU(t)
	defer onDevice(t)()
	h, err := BlasCreate()
	requireLib(t, "cuBLAS", err)
	defer func() { must(t, BlasDestroy(h)) }()
	s, err := StreamCreate(StreamNonBlocking)
	must(t, err)
	defer func() { must(t, StreamDestroy(s)) }()
	must(t, BlasSetStream(h, s))
	must(t, BlasSetMathMode(h, MathDefault))
	ws, err := MemAlloc(32 << 20)
	must(t, err)
	defer func() { _ = MemFree(ws) }()
	must(t, BlasSetWorkspace(h, ws, 32<<20))
	d, _ := DeviceGet(0)
	major, _ := d.Attribute(AttrComputeCapabilityMajor)
	cases := []gemmCase{
		{name: "f16 fp32-accumulate", dt: R16F, m: 33, n: 17, k: 29, alpha: 1},
		{name: "f16 TN", dt: R16F, transA: true, m: 64, n: 48, k: 80, padA: 8, alpha: 0.5, beta: 1},
		{name: "f32", dt: R32F, transB: true, m: 31, n: 20, k: 45, padC: 3, alpha: 1, beta: -1},
		{name: "f16 batched", dt: R16F, m: 16, n: 24, k: 32, batch: 3, alpha: 1},
	}
	if major >= 8 {
		cases = append(cases, gemmCase{name: "bf16", dt: R16BF, m: 40, n: 24, k: 64, alpha: 1})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { defer onDevice(t)(); runGemmEx(t, h, c, s) })
	}
}

func TestGPULt(t *testing.T) {
	requireGPU(t)
	defer onDevice(t)()
	h, err := LtCreate()
	requireLib(t, "cuBLASLt", err)
	defer func() { must(t, LtDestroy(h)) }()
	s, err := StreamCreate(StreamNonBlocking)
	must(t, err)
	defer func() { must(t, StreamDestroy(s)) }()
	for _, c := range []gemmCase{
		{name: "f16", dt: R16F, m: 64, n: 32, k: 48, alpha: 1},
		{name: "f16 NT batched", dt: R16F, transB: true, m: 32, n: 16, k: 64, batch: 2, alpha: 1, beta: 1},
		{name: "f32 TN", dt: R32F, transA: true, m: 24, n: 40, k: 16, alpha: 1},
	} {
		t.Run(c.name, func(t *testing.T) { defer onDevice(t)(); runLt(t, h, c, s) })
	}
}

func TestGPUNVML(t *testing.T) {
	requireGPU(t)
	requireLib(t, "NVML", NVMLInit())
	d, err := DeviceGet(0)
	must(t, err)
	bus, err := d.PCIBusID()
	must(t, err)
	nd, err := NVMLDeviceByPCIBusID(bus)
	must(t, err)
	total, free, used, err := nd.MemoryInfo()
	must(t, err)
	cudaTotal, err := d.TotalMem()
	must(t, err)
	t.Logf("NVML %s: %d total, %d free, %d used; driver total %d", bus, total, free, used, cudaTotal)
	if total == 0 || free > total || used > total || math.Abs(float64(total)-float64(cudaTotal)) > 0.1*float64(total) {
		t.Errorf("NVML memory %d/%d/%d against the driver's total %d", total, free, used, cudaTotal)
	}
	gpu, mem, err := nd.Utilization()
	must(t, err)
	if gpu > 100 || mem > 100 {
		t.Errorf("utilization %d%% / %d%%", gpu, mem)
	}
	name, err := nd.Name()
	must(t, err)
	if cudaName, _ := d.Name(); name != cudaName {
		t.Logf("NVML calls the device %q, the driver %q", name, cudaName)
	}
}
