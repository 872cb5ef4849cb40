package cu

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gamp-ml/gamp/backend"
)

// The tests in this file run against the stand-in libraries of testdata/, in child
// processes started by TestStandIn (standin_test.go), which sets the environment each
// one expects. Run directly, they skip.

func child(t *testing.T) {
	t.Helper()
	if os.Getenv(standInEnv) == "" {
		t.Skip("runs in a child process of TestStandIn, against the stand-in libraries")
	}
}

// asError returns err's *Error, failing the test if it has none.
func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *cu.Error", err, err)
	}
	return e
}

func TestFakeDriver(t *testing.T) {
	child(t)
	must(t, Init())
	must(t, Init()) // cached
	if v, err := DriverVersion(); err != nil || v != 13000 {
		t.Fatalf("DriverVersion = %d, %v", v, err)
	}
	if n, err := DeviceCount(); err != nil || n != 1 {
		t.Fatalf("DeviceCount = %d, %v", n, err)
	}
	d, err := DeviceGet(0)
	must(t, err)
	for attr, want := range map[int]int{AttrComputeCapabilityMajor: 9, AttrComputeCapabilityMinor: 0, AttrMultiprocessorCount: 132, AttrWarpSize: 32} {
		if v, err := d.Attribute(attr); err != nil || v != want {
			t.Errorf("Attribute(%d) = %d, %v; want %d", attr, v, err, want)
		}
	}
	if name, err := d.Name(); err != nil || name != "Fake CUDA Device" {
		t.Errorf("Name = %q, %v", name, err)
	}
	if n, err := d.TotalMem(); err != nil || n != 64<<20 {
		t.Errorf("TotalMem = %d, %v", n, err)
	}
	if id, err := d.PCIBusID(); err != nil || id != "0000:01:00.0" {
		t.Errorf("PCIBusID = %q, %v", id, err)
	}
	if _, err := DeviceGet(1); asError(t, err).Name != "CUDA_ERROR_INVALID_DEVICE" {
		t.Errorf("DeviceGet(1): %v", err)
	}
	defer onDevice(t)()
	ctx, err := CtxGetCurrent()
	must(t, err)
	if ctx == 0 {
		t.Fatal("no current context after CtxSetCurrent")
	}
	must(t, CtxSynchronize())
}

func TestFakeMemory(t *testing.T) {
	child(t)
	defer onDevice(t)()
	free0, total, err := MemGetInfo()
	must(t, err)
	if total != 64<<20 {
		t.Fatalf("total = %d", total)
	}
	const n = 1000
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i * 7)
	}
	p := upload(t, src)
	if free1, _, _ := MemGetInfo(); free0-free1 != 1024 {
		t.Errorf("a %d-byte allocation took %d bytes", n, free0-free1)
	}
	q, err := MemAlloc(n)
	must(t, err)
	must(t, MemcpyDtoD(q, p, n))
	if got := download(t, q, n); !bytes.Equal(got, src) {
		t.Fatal("HtoD, DtoD, DtoH round trip changed the bytes")
	}

	s, err := StreamCreate(StreamNonBlocking)
	must(t, err)
	defer func() { must(t, StreamDestroy(s)) }()
	src2 := bytes.Repeat([]byte{0x11, 0x22}, n/2)
	must(t, MemcpyHtoDAsync(p, unsafe.Pointer(&src2[0]), n, s))
	must(t, MemcpyDtoDAsync(q, p, n, s))
	got := make([]byte, n)
	must(t, MemcpyDtoHAsync(unsafe.Pointer(&got[0]), q, n, s))
	must(t, StreamSynchronize(s))
	if !bytes.Equal(got, src2) {
		t.Fatal("async round trip changed the bytes")
	}

	must(t, MemsetD8Async(p, 0x5a, 10, s))
	must(t, MemsetD32Async(p+12, 0xdeadbeef, 2, s))
	must(t, StreamSynchronize(s))
	got = download(t, p, 24)
	want := append(bytes.Repeat([]byte{0x5a}, 10), 0x11, 0x22, 0xef, 0xbe, 0xad, 0xde, 0xef, 0xbe, 0xad, 0xde, 0x11, 0x22, 0x11, 0x22)
	if !bytes.Equal(got, want) {
		t.Fatalf("memset: got % x\nwant % x", got, want)
	}

	// Pinned host memory: C memory, usable as a Go slice.
	h, err := MemHostAlloc(4096, MemHostAllocPortable)
	must(t, err)
	hb := unsafe.Slice((*byte)(h), 4096)
	for i := range hb {
		hb[i] = byte(i)
	}
	must(t, MemcpyHtoDAsync(q, h, 256, s))
	must(t, StreamSynchronize(s))
	if got := download(t, q, 256); !bytes.Equal(got, hb[:256]) {
		t.Fatal("copy from pinned memory")
	}
	must(t, MemFreeHost(h))

	// Peer copies and access within the one device.
	ctx, err := CtxGetCurrent()
	must(t, err)
	must(t, MemcpyPeerAsync(q, ctx, p, ctx, 10, s))
	must(t, StreamSynchronize(s))
	if got := download(t, q, 10); !bytes.Equal(got, bytes.Repeat([]byte{0x5a}, 10)) {
		t.Fatalf("peer copy: % x", got)
	}
	if ok, err := DeviceCanAccessPeer(0, 0); err != nil || ok {
		t.Errorf("DeviceCanAccessPeer = %v, %v", ok, err)
	}
	must(t, CtxEnablePeerAccess(ctx))
	must(t, CtxEnablePeerAccess(ctx)) // 704: already enabled is success

	must(t, MemFree(p))
	must(t, MemFree(q))
	if e := asError(t, MemFree(p)); e.Code != cudaErrorInvalidValue {
		t.Errorf("double free: %v", e)
	}
	if free2, _, _ := MemGetInfo(); free2 != free0 {
		t.Errorf("free memory %d after freeing everything, was %d", free2, free0)
	}
}

func TestFakeOutOfMemory(t *testing.T) {
	child(t)
	defer onDevice(t)()
	_, err := MemAlloc(128 << 20) // the stand-in device has 64 MiB
	if err == nil {
		t.Fatal("allocating twice the device succeeded")
	}
	e := asError(t, err)
	if !e.OutOfMemory() || e.Code != 2 || e.Name != "CUDA_ERROR_OUT_OF_MEMORY" || e.Text != "out of memory" || e.Lib != "cuda" || e.Func != "cuMemAlloc_v2" {
		t.Errorf("error %#v", e)
	}
	if got, want := err.Error(), "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrOutOfMemory) || !errors.Is(err, backend.ErrOutOfMemory) {
		t.Error("errors.Is(err, ErrOutOfMemory) is false")
	}
	if errors.Is(err, ErrUnavailable) {
		t.Error("out of memory wraps ErrUnavailable")
	}
	// The device still works.
	p, err := MemAlloc(1 << 20)
	must(t, err)
	must(t, MemFree(p))
}

func TestFakeErrors(t *testing.T) {
	child(t)
	must(t, Init())
	d, _ := DeviceGet(0)
	_, err := d.Attribute(12345)
	if e := asError(t, err); e.Error() != "cuda: cuDeviceGetAttribute: CUDA_ERROR_INVALID_VALUE (1): invalid argument" {
		t.Errorf("Error() = %q", e.Error())
	}
	// A thread without a current context: the driver's context is per OS thread.
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := CtxSetCurrent(0); err != nil {
			done <- err
			return
		}
		_, err := MemAlloc(16)
		done <- err
	}()
	e := asError(t, <-done)
	if e.Code != 201 || e.Name != "CUDA_ERROR_INVALID_CONTEXT" || e.Text != "invalid device context" {
		t.Errorf("MemAlloc without a context: %v", e)
	}
	// A code the driver cannot name.
	if e := driverError("cuX", 12345); e.Name != "CUDA_ERROR_12345" || e.Text != "" || e.Error() != "cuda: cuX: CUDA_ERROR_12345 (12345)" {
		t.Errorf("unknown code: %#v, %q", e, e.Error())
	}
}

func TestFakeEvents(t *testing.T) {
	child(t)
	defer onDevice(t)()
	s, err := StreamCreate(StreamDefault)
	must(t, err)
	defer func() { must(t, StreamDestroy(s)) }()
	start, err := EventCreate(EventDefault)
	must(t, err)
	end, err := EventCreate(EventBlockingSync)
	must(t, err)
	must(t, EventRecord(start, s))
	time.Sleep(20 * time.Millisecond)
	must(t, EventRecord(end, s))
	must(t, EventSynchronize(end))
	if done, err := EventQuery(end); err != nil || !done {
		t.Errorf("EventQuery = %v, %v", done, err)
	}
	ms, err := EventElapsedTime(start, end)
	must(t, err)
	if ms < 15 || ms > 5000 {
		t.Errorf("elapsed %v ms across a 20 ms sleep", ms)
	}
	must(t, StreamWaitEvent(s, end))
	if done, err := StreamQuery(s); err != nil || !done {
		t.Errorf("StreamQuery = %v, %v", done, err)
	}
	// Without timing, elapsed time is an error.
	nt, err := EventCreate(EventDisableTiming)
	must(t, err)
	must(t, EventRecord(nt, 0))
	if _, err := EventElapsedTime(start, nt); asError(t, err).Name != "CUDA_ERROR_INVALID_HANDLE" {
		t.Errorf("elapsed time to a no-timing event: %v", err)
	}
	for _, e := range []Event{start, end, nt} {
		must(t, EventDestroy(e))
	}
}

// The stand-in module's kernels (testdata/fakecuda.c) run on the host.
const fakeKernelSrc = `#include "fake.h"
extern "C" __global__ void fake_fill(unsigned* dst, unsigned value, unsigned n) {}
extern "C" __global__ void fake_record(unsigned* out) {}
`

func TestFakeKernels(t *testing.T) {
	child(t)
	defer onDevice(t)()
	img, _, err := Compile(fakeKernelSrc, "fake.cu", map[string]string{"fake.h": "// empty"}, []string{"--gpu-architecture=sm_90"})
	must(t, err)
	m, err := ModuleLoadData(img)
	must(t, err)
	defer func() { must(t, ModuleUnload(m)) }()
	fill, err := ModuleGetFunction(m, "fake_fill")
	must(t, err)
	for i, want := range [][2]uint64{{0, 8}, {8, 4}, {12, 4}} {
		off, size, err := FuncGetParamInfo(fill, i)
		if err != nil || off != want[0] || size != want[1] {
			t.Errorf("FuncGetParamInfo(%d) = %d, %d, %v; want %v", i, off, size, err, want)
		}
	}
	if _, _, err := FuncGetParamInfo(fill, 3); asError(t, err).Code != cudaErrorInvalidValue {
		t.Errorf("FuncGetParamInfo(3): %v", err)
	}

	const n = 64
	buf, err := MemAlloc(n * 4)
	must(t, err)
	defer func() { must(t, MemFree(buf)) }()
	// Argument values may be fields of one struct: pinning a field pins the struct.
	var argv struct {
		dst          DevicePtr
		value, count uint32
	}
	argv.dst, argv.value, argv.count = buf, 0xC0FFEE, n
	must(t, LaunchKernel(fill, [3]uint32{1, 1, 1}, [3]uint32{n, 1, 1}, 0, 0,
		[]unsafe.Pointer{unsafe.Pointer(&argv.dst), unsafe.Pointer(&argv.value), unsafe.Pointer(&argv.count)}))
	dst := buf
	checkFill := func(want uint32, n int) {
		t.Helper()
		got := download(t, buf, n*4)
		for i := 0; i < n; i++ {
			if v := uint32(got[4*i]) | uint32(got[4*i+1])<<8 | uint32(got[4*i+2])<<16 | uint32(got[4*i+3])<<24; v != want {
				t.Fatalf("word %d = %#x, want %#x", i, v, want)
			}
		}
	}
	checkFill(0xC0FFEE, n)

	args := NewKernelArgs(3)
	defer args.Free()
	args.SetPtr(0, buf)
	args.SetU32(1, 0xBEEF)
	args.SetU32(2, 10)
	must(t, LaunchKernelArgs(fill, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, 0, args))
	checkFill(0xBEEF, 10)

	// Every launch argument arrives: fake_record writes them out.
	rec, err := ModuleGetFunction(m, "fake_record")
	must(t, err)
	s, err := StreamCreate(StreamNonBlocking)
	must(t, err)
	defer func() { must(t, StreamDestroy(s)) }()
	one := NewKernelArgs(1)
	defer one.Free()
	one.SetPtr(0, buf)
	must(t, LaunchKernelArgs(rec, [3]uint32{2, 3, 4}, [3]uint32{5, 6, 7}, 128, s, one))
	must(t, StreamSynchronize(s))
	got := download(t, buf, 32)
	for i, want := range []uint32{2, 3, 4, 5, 6, 7, 128} {
		if v := uint32(got[4*i]) | uint32(got[4*i+1])<<8; v != want {
			t.Errorf("launch argument %d arrived as %d, want %d", i, v, want)
		}
	}
	if id := uint32(got[28]) | uint32(got[29])<<8 | uint32(got[30])<<16 | uint32(got[31])<<24; id == 0 {
		t.Error("the stream did not arrive (default stream recorded)")
	}

	if err := LaunchKernel(fill, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, 0, []unsafe.Pointer{unsafe.Pointer(&dst), nil, nil}); err == nil {
		t.Error("LaunchKernel accepted a nil argument pointer")
	}
	_, err = ModuleGetFunction(m, "missing")
	if e := asError(t, err); e.Name != "CUDA_ERROR_NOT_FOUND" || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("missing kernel: %v", err)
	}
	if _, err := ModuleLoadData([]byte("not an image")); asError(t, err).Code != cudaErrorNotSupported {
		t.Errorf("ModuleLoadData(garbage): %v", err)
	}
}

func TestFakeNVRTC(t *testing.T) {
	child(t)
	if major, minor, err := NVRTCVersion(); err != nil || major != 13 || minor != 0 {
		t.Fatalf("NVRTCVersion = %d.%d, %v", major, minor, err)
	}
	src := "#include \"a.h\"\n#include \"b.h\"\nextern \"C\" __global__ void k() {}\n"
	headers := map[string]string{"b.h": "#define B 2", "a.h": "#define A 1"}
	img, log, err := Compile(src, "k.cu", headers, []string{"--gpu-architecture=sm_90", "-default-device", "-std=c++17"})
	must(t, err)
	if !bytes.HasPrefix(img, []byte("\x7fELFFAKECUBIN sm_90 k.cu")) {
		t.Errorf("CUBIN %q", img)
	}
	for _, want := range []string{"header a.h: #define A 1", "header b.h: #define B 2", "option -default-device", "option -std=c++17"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	ptx, _, err := CompilePTX(src, "k.cu", headers, []string{"-arch=compute_90"})
	must(t, err)
	if !bytes.HasPrefix(ptx, []byte("// fake PTX\n.target compute_90\n")) || bytes.IndexByte(ptx, 0) >= 0 {
		t.Errorf("PTX %q", ptx)
	}
	if _, _, err := Compile(src, "k.cu", headers, []string{"-arch=compute_90"}); err == nil || !strings.Contains(err.Error(), "sm_XY") {
		t.Errorf("Compile for a virtual architecture: %v", err)
	}
	_, log, err = Compile(src, "k.cu", map[string]string{"a.h": ""}, []string{"-arch=sm_80"})
	if e := asError(t, err); e.Name != "NVRTC_ERROR_COMPILATION" || e.Code != 6 || !strings.Contains(err.Error(), `cannot open source file "b.h"`) || !strings.Contains(log, "b.h") {
		t.Errorf("missing header: %v\nlog: %s", err, log)
	}
	_, _, err = Compile("#error boom\n", "bad.cu", nil, []string{"-arch=sm_80"})
	if !strings.Contains(err.Error(), "bad.cu(1): error") {
		t.Errorf("compile error without the log: %v", err)
	}
	if _, _, err := Compile("", "x.cu", nil, []string{"-arch=sm_80", "bogus"}); asError(t, err).Name != "NVRTC_ERROR_INVALID_OPTION" {
		t.Errorf("bad option: %v", err)
	}
}

func TestFakeBlas(t *testing.T) {
	child(t)
	defer onDevice(t)()
	h, err := BlasCreate()
	must(t, err)
	defer func() { must(t, BlasDestroy(h)) }()
	s, err := StreamCreate(StreamNonBlocking)
	must(t, err)
	defer func() { must(t, StreamDestroy(s)) }()
	must(t, BlasSetStream(h, s))
	must(t, BlasSetMathMode(h, MathDefault|MathDisallowReducedPrecisionReduction))
	ws, err := MemAlloc(4 << 20)
	must(t, err)
	must(t, BlasSetWorkspace(h, ws, 4<<20))
	for _, c := range []gemmCase{
		{name: "f32 NN", dt: R32F, m: 5, n: 7, k: 3, alpha: 1},
		{name: "f32 TN padded", dt: R32F, transA: true, m: 6, n: 4, k: 9, padA: 2, padB: 1, padC: 3, alpha: 0.5, beta: 2},
		{name: "f32 NT", dt: R32F, transB: true, m: 3, n: 8, k: 5, alpha: 1, beta: 1},
		{name: "f32 TT", dt: R32F, transA: true, transB: true, m: 4, n: 4, k: 4, padC: 1, alpha: -1, beta: 0.25},
		{name: "f16", dt: R16F, m: 9, n: 5, k: 17, alpha: 1},
		{name: "bf16 TN", dt: R16BF, transA: true, m: 6, n: 6, k: 11, alpha: 1, beta: 1},
		{name: "f64", dt: R64F, transB: true, m: 3, n: 5, k: 7, alpha: 2, beta: -1},
		{name: "f32 batched", dt: R32F, m: 4, n: 3, k: 5, batch: 3, padC: 1, alpha: 1, beta: 1},
		{name: "f16 batched NT", dt: R16F, transB: true, m: 2, n: 6, k: 8, batch: 4, alpha: 1},
	} {
		// A subtest is another goroutine, so another OS thread: make the context current there.
		t.Run(c.name, func(t *testing.T) { defer onDevice(t)(); runGemmEx(t, h, c, s) })
	}
	// Status codes become *Error with cuBLAS's names.
	one := float32(1)
	err = GemmEx(h, OpN, OpN, 4, 4, 4, unsafe.Pointer(&one), ws, R32F, 2, ws, R32F, 4, unsafe.Pointer(&one), ws, R32F, 4, Compute32F, GemmDefault)
	e := asError(t, err)
	if e.Lib != "cublas" || e.Code != 7 || e.Error() != "cublas: cublasGemmEx: CUBLAS_STATUS_INVALID_VALUE (7): an invalid numeric value was used as an argument" {
		t.Errorf("lda < m: %v", err)
	}
	if err := GemmEx(h, OpN, OpN, 1<<40, 1, 1, nil, 0, R32F, 1, 0, R32F, 1, nil, 0, R32F, 1, Compute32F, GemmDefault); err == nil || !strings.Contains(err.Error(), "C int") {
		t.Errorf("m = 2^40: %v", err)
	}
	must(t, MemFree(ws))
}

func TestFakeBlasOutOfMemory(t *testing.T) {
	child(t)
	defer onDevice(t)()
	h, err := BlasCreate()
	must(t, err)
	p, err := MemAlloc(64)
	must(t, err)
	one := float32(1)
	err = GemmEx(h, OpN, OpN, 2, 2, 2, unsafe.Pointer(&one), p, R32F, 2, p, R32F, 2, unsafe.Pointer(&one), p, R32F, 2, Compute32F, GemmDefault)
	if e := asError(t, err); !e.OutOfMemory() || e.Name != "CUBLAS_STATUS_ALLOC_FAILED" || !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("alloc failed: %v", err)
	}
}

func TestFakeLt(t *testing.T) {
	child(t)
	defer onDevice(t)()
	h, err := LtCreate()
	must(t, err)
	defer func() { must(t, LtDestroy(h)) }()
	s, err := StreamCreate(StreamNonBlocking)
	must(t, err)
	for _, c := range []gemmCase{
		{name: "f32 NN", dt: R32F, m: 5, n: 7, k: 3, alpha: 1},
		{name: "f32 TN padded", dt: R32F, transA: true, m: 6, n: 4, k: 9, padA: 2, padB: 1, padC: 3, alpha: 0.5, beta: 2},
		{name: "f16 NT", dt: R16F, transB: true, m: 8, n: 3, k: 16, alpha: 1},
		{name: "bf16 TT batched", dt: R16BF, transA: true, transB: true, m: 3, n: 5, k: 6, batch: 3, alpha: 1, beta: 1},
		{name: "f64", dt: R64F, m: 4, n: 4, k: 4, alpha: 1, beta: 0.5},
	} {
		t.Run(c.name, func(t *testing.T) { defer onDevice(t)(); runLt(t, h, c, s) })
	}
	spec := LtMatmulSpec{M: 4, N: 4, K: 4, AType: R32F, BType: R32F, CType: R32F, ComputeType: Compute32F, MaxWorkspace: 4096}
	p, err := NewLtMatmulPlan(h, spec, 8)
	must(t, err)
	algos := p.Algos()
	if len(algos) != 2 || algos[0].Workspace != 0 || algos[1].Workspace != 4096 || algos[1].Waves != 1 {
		t.Errorf("algorithms within 4096 bytes of workspace: %+v", algos)
	}
	one := float32(1)
	if err := p.Run(1, unsafe.Pointer(&one), 0, 0, unsafe.Pointer(&one), 0, 0, 100, s); err == nil || !strings.Contains(err.Error(), "workspace") {
		t.Errorf("Run with too little workspace: %v", err)
	}
	if err := p.Run(2, unsafe.Pointer(&one), 0, 0, unsafe.Pointer(&one), 0, 0, 0, s); err == nil {
		t.Error("Run with algorithm index out of range succeeded")
	}
	must(t, p.Destroy())
	must(t, p.Destroy()) // idempotent
	if _, err := NewLtMatmulPlan(h, LtMatmulSpec{M: 4, N: 4, K: 4, LDA: 2, ComputeType: Compute32F}, 1); err == nil {
		t.Error("a leading dimension below the row length was accepted")
	}
}

func TestFakeNVML(t *testing.T) {
	child(t)
	must(t, NVMLInit())
	d, err := DeviceGet(0)
	must(t, err)
	bus, err := d.PCIBusID()
	must(t, err)
	nd, err := NVMLDeviceByPCIBusID(bus)
	must(t, err)
	if gpu, mem, err := nd.Utilization(); err != nil || gpu != 42 || mem != 7 {
		t.Errorf("Utilization = %d, %d, %v", gpu, mem, err)
	}
	if total, free, used, err := nd.MemoryInfo(); err != nil || total != 80<<30 || used != 1<<30 || free != total-used {
		t.Errorf("MemoryInfo = %d, %d, %d, %v", total, free, used, err)
	}
	if name, err := nd.Name(); err != nil || name != "Fake CUDA Device" {
		t.Errorf("Name = %q, %v", name, err)
	}
	_, err = NVMLDeviceByPCIBusID("0000:99:00.0")
	if e := asError(t, err); e.Lib != "nvml" || e.Name != "NVML_ERROR_NOT_FOUND" || e.Text != "Not Found" || !strings.Contains(err.Error(), "0000:99:00.0") {
		t.Errorf("unknown bus id: %v", err)
	}
}

func TestFakeLibraries(t *testing.T) {
	child(t)
	dir := os.Getenv("GAMP_CU_WANT_DIR")
	want := map[string][2]string{
		"libcuda":           {"libcuda.so.1", "13.0"},
		"libnvrtc":          {"libnvrtc.so.13", "13.0"},
		"libnvrtc-builtins": {"libnvrtc-builtins.so.13.0", ""},
		"libcublas":         {"libcublas.so.13", "13.0.1"},
		"libcublasLt":       {"libcublasLt.so.13", "13.0.1"},
		"libnvidia-ml":      {"libnvidia-ml.so.1", "999.99"},
	}
	libs := Libraries()
	if len(libs) != len(want) {
		t.Fatalf("Libraries() = %v", libs)
	}
	for _, l := range libs {
		w, ok := want[l.Name]
		if !ok || l.Err != nil || l.Path != filepath.Join(dir, w[0]) || l.Version != w[1] {
			t.Errorf("%s: got %+v (%s), want %s version %q", l.Name, l, l, filepath.Join(dir, w[0]), w[1])
		}
	}
}

func TestFakeOldDriver(t *testing.T) {
	child(t)
	if v, err := DriverVersion(); err != nil || v != 12020 {
		t.Fatalf("DriverVersion = %d, %v", v, err)
	}
	defer onDevice(t)()
	if _, _, err := FuncGetParamInfo(0xf00d, 0); !errors.Is(err, ErrNotSupported) {
		t.Errorf("FuncGetParamInfo on a 12.2 driver: %v", err)
	}
	start, err := EventCreate(EventDefault)
	must(t, err)
	end, err := EventCreate(EventDefault)
	must(t, err)
	must(t, EventRecord(start, 0))
	time.Sleep(5 * time.Millisecond)
	must(t, EventRecord(end, 0))
	if ms, err := EventElapsedTime(start, end); err != nil || ms < 4 {
		t.Errorf("EventElapsedTime without _v2 = %v, %v", ms, err)
	}
}

func TestFakeInitFails(t *testing.T) {
	child(t)
	code, _ := strconv.Atoi(os.Getenv("GAMP_CU_WANT_CODE"))
	err := Init()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Init() = %v, want an error wrapping ErrUnavailable", err)
	}
	if e := asError(t, err); e.Code != code || e.Func != "cuInit" {
		t.Errorf("cuInit error %#v, want code %d", e, code)
	}
	want := map[int]string{100: "no CUDA device", 34: "stub"}[code]
	if !strings.Contains(err.Error(), want) {
		t.Errorf("Init() = %q, want it to say %q", err, want)
	}
	if err2 := Init(); err2 != err {
		t.Errorf("second Init() = %v, want the cached %v", err2, err)
	}
	if _, err2 := MemAlloc(16); err2 != err {
		t.Errorf("MemAlloc before a working Init: %v", err2)
	}
	if _, err := DeviceCount(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("DeviceCount: %v", err)
	}
	// The other libraries load on their own.
	if _, _, err := NVRTCVersion(); err != nil {
		t.Errorf("NVRTC behind a failed driver: %v", err)
	}
	if err := NVMLInit(); err != nil {
		t.Errorf("NVML behind a failed driver: %v", err)
	}
	if _, err := BlasCreate(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("BlasCreate without a driver: %v", err)
	}
}

func TestFakeNoLibrary(t *testing.T) {
	child(t)
	dir := os.Getenv("GAMP_CU_WANT_DIR")
	err := Init()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Init() = %v, want an error wrapping ErrUnavailable", err)
	}
	var e *Error
	if errors.As(err, &e) {
		t.Errorf("a missing library is a *Error: %v", err)
	}
	for _, want := range []string{"cuda unavailable", filepath.Join(dir, "libcuda.so.1"), "GAMP_LIBCUDA"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Init() = %q, want it to mention %q", err, want)
		}
	}
	if _, err := NVMLDeviceByPCIBusID("0000:01:00.0"); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), filepath.Join(dir, "libnvidia-ml.so.1")) {
		t.Errorf("NVML from an empty directory: %v", err)
	}
	for _, l := range Libraries() {
		if l.Name == "libcuda" && (l.Err == nil || l.Path != "") {
			t.Errorf("Libraries() reports %+v", l)
		}
	}
}

func TestFakeSearch(t *testing.T) {
	child(t)
	dir := os.Getenv("GAMP_CU_WANT_DIR")
	must(t, Init())
	for _, l := range Libraries() {
		if l.Err != nil {
			t.Errorf("%s: %v", l.Name, l.Err)
			continue
		}
		if filepath.Dir(l.Path) != dir {
			t.Errorf("%s loaded from %s, want %s", l.Name, l.Path, dir)
		}
	}
	if os.Getenv("GAMP_CU_WANT_RESOLVED") == "1" && cudaLib.soname != "libcuda.so.1" {
		t.Errorf("libcuda was loaded as %q, want the bare soname", cudaLib.soname)
	}
}

// Benchmarks of the call overhead against the stand-in; run them with
// GAMP_CU_BENCH=1 go test -run TestStandIn -v ./cuda/internal/cu/

func BenchmarkFakeLaunchParams(b *testing.B) {
	buf, fill, release := benchSetup(b)
	defer release()
	dst, value, n := buf, uint32(1), uint32(1)
	params := []unsafe.Pointer{unsafe.Pointer(&dst), unsafe.Pointer(&value), unsafe.Pointer(&n)}
	for b.Loop() {
		if err := LaunchKernel(fill, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, 0, params); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFakeLaunchArgs(b *testing.B) {
	buf, fill, release := benchSetup(b)
	defer release()
	a := NewKernelArgs(3)
	defer a.Free()
	a.SetPtr(0, buf)
	a.SetU32(1, 1)
	a.SetU32(2, 1)
	for b.Loop() {
		if err := LaunchKernelArgs(fill, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, 0, a); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFakeMemsetAsync(b *testing.B) {
	buf, _, release := benchSetup(b)
	defer release()
	for b.Loop() {
		if err := MemsetD32Async(buf, 0, 1, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFakeMemAllocFree(b *testing.B) {
	_, _, release := benchSetup(b)
	defer release()
	for b.Loop() {
		p, err := MemAlloc(256)
		if err != nil {
			b.Fatal(err)
		}
		if err := MemFree(p); err != nil {
			b.Fatal(err)
		}
	}
}

func benchSetup(b *testing.B) (DevicePtr, Function, func()) {
	if os.Getenv(standInEnv) == "" {
		b.Skip("runs in a child process of TestStandIn (GAMP_CU_BENCH=1)")
	}
	runtime.LockOSThread()
	fail := func(err error) {
		if err != nil {
			runtime.UnlockOSThread()
			b.Fatal(err)
		}
	}
	d, err := DeviceGet(0)
	fail(err)
	ctx, err := PrimaryCtxRetain(d)
	fail(err)
	fail(CtxSetCurrent(ctx))
	img, _, err := Compile(fakeKernelSrc, "fake.cu", map[string]string{"fake.h": ""}, []string{"-arch=sm_90"})
	fail(err)
	m, err := ModuleLoadData(img)
	fail(err)
	fill, err := ModuleGetFunction(m, "fake_fill")
	fail(err)
	buf, err := MemAlloc(256)
	fail(err)
	return buf, fill, func() {
		_ = MemFree(buf)
		_ = ModuleUnload(m)
		_ = PrimaryCtxRelease(d)
		runtime.UnlockOSThread()
	}
}
