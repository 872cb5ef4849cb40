package cuda

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/backend/backendtest"
	"github.com/gamp-ml/gamp/backend/cpu"
	"github.com/gamp-ml/gamp/internal/testenv"
)

// needGPU returns the backend of cuda:0, or skips with the reason CUDA is unavailable.
// With GAMP_REQUIRE_GPU=1 the skip is a failure, so a GPU run cannot pass by skipping.
func needGPU(t *testing.T) *Backend {
	t.Helper()
	b, err := Open(0)
	if err != nil {
		testenv.Skip(t, testenv.GPU, "no CUDA device: %v", err)
	}
	return b
}

func TestUnavailableIsExplained(t *testing.T) {
	if Available() {
		t.Skip("CUDA is available here")
	}
	if testenv.Required(testenv.GPU) {
		t.Fatalf("GAMP_REQUIRE_GPU=1 but CUDA is unavailable: %v", Reason())
	}
	err := Reason()
	if err == nil || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Reason() = %v, want an error wrapping ErrUnavailable", err)
	}
	_, err = Open(0)
	if !errors.Is(err, backend.ErrNoDevice) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open(0) = %v, want ErrNoDevice and ErrUnavailable", err)
	}
	if _, err := backend.Get(backend.CUDA(0)); !errors.Is(err, backend.ErrNoDevice) {
		t.Fatalf("backend.Get(cuda:0) = %v, want ErrNoDevice", err)
	}
	if DeviceCount() != 0 {
		t.Fatalf("DeviceCount() = %d without CUDA", DeviceCount())
	}
	if s := ShowUtilization(); s == "" {
		t.Fatal("ShowUtilization says nothing without CUDA")
	}
	t.Logf("CUDA unavailable, as expected here: %v", err)
}

func TestConformance(t *testing.T) {
	b := needGPU(t)
	t.Logf("%s", b.Name())
	backendtest.Run(t, b)
}

func TestOpenBadIndex(t *testing.T) {
	needGPU(t)
	if _, err := Open(DeviceCount()); !errors.Is(err, backend.ErrNoDevice) {
		t.Fatalf("Open(%d) = %v, want ErrNoDevice", DeviceCount(), err)
	}
}

// TestMatMulMatchesCPU compares cuBLAS with the CPU backend on transposed, strided,
// batched and broadcast products in every float dtype.
func TestMatMulMatchesCPU(t *testing.T) {
	g := needGPU(t)
	c, err := cpu.New(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, dt := range []backend.DType{backend.Float32, backend.Float16, backend.BFloat16, backend.Float64} {
		for _, tc := range []backend.MatMulArgs{
			{Batch: 1, M: 33, N: 65, K: 17, Alpha: 1},
			{Batch: 1, M: 64, N: 48, K: 80, TransA: true, Alpha: 1},
			{Batch: 1, M: 20, N: 30, K: 40, TransB: true, Alpha: 0.5, Beta: 1},
			{Batch: 3, M: 8, N: 9, K: 10, TransA: true, TransB: true, StrideA: 80, StrideB: 90, StrideC: 72, Alpha: 1},
			{Batch: 4, M: 8, N: 9, K: 10, StrideA: 80, StrideB: 0, StrideC: 72, Alpha: 1}, // B broadcast
		} {
			na := max(tc.Batch-1, 0)*tc.StrideA + tc.M*tc.K
			nb := max(tc.Batch-1, 0)*tc.StrideB + tc.K*tc.N
			nc := max(tc.Batch-1, 0)*tc.StrideC + tc.M*tc.N
			av := backendtest.RandVals(1, na, -1, 1)
			bv := backendtest.RandVals(2, nb, -1, 1)
			cv := backendtest.RandVals(3, nc, -1, 1)
			run := func(be backend.Backend) []float64 {
				a := tc
				a.A = backendtest.Upload(t, be, dt, av)
				a.B = backendtest.Upload(t, be, dt, bv)
				a.C = backendtest.Upload(t, be, dt, cv)
				defer backendtest.Free(be, a.A, a.B, a.C)
				be.MatMul(a)
				return backendtest.Download(t, be, a.C)
			}
			want, got := run(c), run(g)
			backendtest.ExpectClose(t, dt.String()+" matmul", got, want, backendtest.Tol(dt)*float64(tc.K), 1)
		}
	}
}

func TestAutotunedMatMul(t *testing.T) {
	g := needGPU(t)
	SetBenchmark(true)
	defer SetBenchmark(false)
	a := backendtest.Upload(t, g, backend.Float16, backendtest.RandVals(1, 256*128, -1, 1))
	bm := backendtest.Upload(t, g, backend.Float16, backendtest.RandVals(2, 128*64, -1, 1))
	c1, _ := g.Alloc(backend.Float16, 256*64)
	c2, _ := g.Alloc(backend.Float16, 256*64)
	defer backendtest.Free(g, a, bm, c1, c2)
	g.MatMul(backend.MatMulArgs{A: a, B: bm, C: c1, Batch: 1, M: 256, N: 64, K: 128, Alpha: 1})
	g.MatMul(backend.MatMulArgs{A: a, B: bm, C: c2, Batch: 1, M: 256, N: 64, K: 128, Alpha: 1})
	if err := g.Synchronize(); err != nil { // the GEMMs are queued: wait for them
		t.Fatal(err)
	}
	g.d.tuneMu.Lock()
	tunedShapes := len(g.d.tuned)
	g.d.tuneMu.Unlock()
	if tunedShapes == 0 {
		t.Fatal("autotuning recorded no algorithm")
	}
	x, y := backendtest.Download(t, g, c1), backendtest.Download(t, g, c2)
	backendtest.ExpectClose(t, "tuned vs cached algorithm", x, y, 1e-2, 1)
}

func TestOutOfMemoryIsTyped(t *testing.T) {
	g := needGPU(t)
	free, total, err := g.MemGetInfo()
	if err != nil || total <= 0 || free > total {
		t.Fatalf("MemGetInfo = %d, %d, %v", free, total, err)
	}
	_, err = g.Alloc(backend.Float32, int(total)) // 4× the device
	var oom *backend.OOMError
	if !errors.Is(err, backend.ErrOutOfMemory) || !errors.As(err, &oom) {
		t.Fatalf("allocating 4× the device: %v, want *OOMError", err)
	}
	// The limit makes a small allocation fail the same way, and lifting it recovers.
	g.SetMemoryLimit(1 << 20)
	_, err = g.Alloc(backend.Float32, 1<<20)
	g.SetMemoryLimit(0)
	if !errors.Is(err, backend.ErrOutOfMemory) {
		t.Fatalf("allocation past the limit: %v", err)
	}
	s, err := g.Alloc(backend.Float32, 1<<20)
	if err != nil {
		t.Fatalf("after lifting the limit: %v", err)
	}
	g.Free(s)
	if g.MemoryStats().NumOOMs < 2 {
		t.Fatalf("NumOOMs = %d, want ≥ 2", g.MemoryStats().NumOOMs)
	}
}

func TestEventsTimeAndOrder(t *testing.T) {
	g := needGPU(t)
	start, err := g.NewEvent(true)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := g.NewEvent(true)
	defer start.Close()
	defer end.Close()
	n := 4096
	a := backendtest.Upload(t, g, backend.Float32, backendtest.RandVals(1, n*n, -1, 1))
	c, _ := g.Alloc(backend.Float32, n*n)
	defer backendtest.Free(g, a, c)
	if err := start.Record(nil); err != nil {
		t.Fatal(err)
	}
	g.MatMul(backend.MatMulArgs{A: a, B: a, C: c, Batch: 1, M: n, N: n, K: n, Alpha: 1})
	if err := end.Record(nil); err != nil {
		t.Fatal(err)
	}
	d, err := Elapsed(start, end)
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 || d > time.Minute {
		t.Fatalf("a 4096³ GEMM took %v by the events", d)
	}
	t.Logf("4096³ FP32 GEMM: %v (%.1f TFLOP/s)", d, 2*math.Pow(float64(n), 3)/d.Seconds()/1e12)
	if done, err := end.Query(); err != nil || !done {
		t.Fatalf("Query after Elapsed = %v, %v", done, err)
	}
}

// TestPinnedAsyncCopies round-trips data through pinned buffers on a side stream
// ordered with the compute stream by events.
func TestPinnedAsyncCopies(t *testing.T) {
	g := needGPU(t)
	const n = 1 << 20
	in, err := g.NewPinned(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := g.NewPinned(4 * n)
	defer in.Free()
	defer out.Free()
	for i, v := range in.Float32s() {
		_ = v
		in.Float32s()[i] = float32(i % 1000)
	}
	side, err := g.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close()
	dst, _ := g.Alloc(backend.Float32, n)
	dbl, _ := g.Alloc(backend.Float32, n)
	defer backendtest.Free(g, dst, dbl)
	g.RecordStream(dst, side)
	if err := g.CopyToDeviceAsync(dst, 0, in, 0, n, side); err != nil {
		t.Fatal(err)
	}
	if err := g.ComputeStream().WaitStream(side); err != nil {
		t.Fatal(err)
	}
	g.Unary(backend.MulScalar, dbl, dst, n, 2, 0)
	if err := side.WaitStream(g.ComputeStream()); err != nil {
		t.Fatal(err)
	}
	if err := g.CopyToHostAsync(out, 0, dbl, 0, n, side); err != nil {
		t.Fatal(err)
	}
	if err := side.Synchronize(); err != nil {
		t.Fatal(err)
	}
	for i, v := range out.Float32s() {
		if v != 2*float32(i%1000) {
			t.Fatalf("element %d: %v, want %v", i, v, 2*float32(i%1000))
		}
	}
}

func TestPeerCopy(t *testing.T) {
	needGPU(t)
	if DeviceCount() < 2 {
		testenv.Skip(t, testenv.TwoGPUs, "one CUDA device: peer copies need two")
	}
	g0, _ := Open(0)
	g1, _ := Open(1)
	vals := backendtest.RandVals(1, 1000, -1, 1)
	s0 := backendtest.Upload(t, g0, backend.Float32, vals)
	s1, _ := g1.Alloc(backend.Float32, 1000)
	defer backendtest.Free(g0, s0)
	defer backendtest.Free(g1, s1)
	if err := g1.CopyFromDevice(s1, 0, s0, 0, 1000); err != nil {
		t.Fatal(err)
	}
	backendtest.ExpectClose(t, "peer copy", backendtest.Download(t, g1, s1), backendtest.Rounded(backend.Float32, vals), 0, 1)
}

func TestUtilization(t *testing.T) {
	g := needGPU(t)
	busy, used, total := g.Utilization()
	if busy < 0 || busy > 1 || used <= 0 || used > total {
		t.Fatalf("Utilization() = %v, %d, %d", busy, used, total)
	}
	u, err := g.DeviceUtilization()
	if err != nil {
		t.Fatal(err)
	}
	if u.Total <= 0 || u.Used > u.Total || u.GPU > 100 || u.Memory > 100 {
		t.Fatalf("implausible NVML figures: %+v", u)
	}
	t.Logf("\n%s", ShowUtilization())
}

func TestMemoryStatsAndSummary(t *testing.T) {
	g := needGPU(t)
	g.EmptyCache()
	g.ResetPeak()
	before := g.MemoryStats()
	s, err := g.Alloc(backend.Float16, 3<<20)
	if err != nil {
		t.Fatal(err)
	}
	mid := g.MemoryStats()
	if mid.Allocated-before.Allocated < 6<<20 || mid.Reserved < mid.Allocated {
		t.Fatalf("stats after a 6 MiB allocation: %+v", mid)
	}
	g.Free(s)
	after := g.MemoryStats()
	if after.Allocated != before.Allocated || after.PeakAllocated < mid.Allocated {
		t.Fatalf("stats after free: %+v (before %+v)", after, before)
	}
	g.EmptyCache()
	if r := g.MemoryStats().Reserved; r != before.Reserved {
		t.Logf("reserved after EmptyCache %d, before %d", r, before.Reserved)
	}
	t.Logf("\n%s", backend.MemorySummary(g))
}

// The CUDA backend feeds memory.ShowUtilization's GPU rows.
var _ interface {
	Utilization() (busy float64, memUsed, memTotal int64)
} = (*Backend)(nil)

// TestLaunchCost times a tiny kernel launched many times in a row (one float32 element,
// backend.Unary, no synchronisation between launches), as the host sees it and as the
// GPU's events see it, and the same through the tensor API (allocation and dispatch
// included). It checks the result and logs µs per launch; it asserts no time.
func TestLaunchCost(t *testing.T) {
	g := needGPU(t)
	const launches = 20000
	x := backendtest.Upload(t, g, backend.Float32, []float64{1.5})
	defer backendtest.Free(g, x)
	g.Unary(backend.AddScalar, x, x, 1, 0, 0) // compile and load the module first
	if err := g.Synchronize(); err != nil {
		t.Fatal(err)
	}
	start, _ := g.NewEvent(true)
	end, _ := g.NewEvent(true)
	defer start.Close()
	defer end.Close()
	if err := start.Record(nil); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for range launches {
		g.Unary(backend.AddScalar, x, x, 1, 1, 0)
	}
	host := time.Since(t0)
	if err := end.Record(nil); err != nil {
		t.Fatal(err)
	}
	gpu, err := Elapsed(start, end)
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(t0)
	if got := backendtest.Download(t, g, x)[0]; got != 1.5+launches {
		t.Fatalf("after %d launches of x += 1: %v, want %v", launches, got, 1.5+launches)
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / launches }
	t.Logf("backend.Unary on 1 element, %d launches: host %.2f µs each to enqueue, GPU %.2f µs each between events, %.2f µs each until done",
		launches, us(host), us(gpu), us(wall))
}
