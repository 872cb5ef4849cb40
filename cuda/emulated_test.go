package cuda

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/backend/backendtest"
	"github.com/gamp-ml/gamp/backend/cpu"
	"github.com/gamp-ml/gamp/cuda/internal/cu"
	"github.com/gamp-ml/gamp/half"
	"github.com/gamp-ml/gamp/kernels"
)

// TestEmulatedDevice runs the CUDA backend end to end without a GPU: in a child process
// whose CUDA libraries are the stand-ins and whose kernels run on the CPU (see
// emulated_libs_test.go), the conformance suite, bit-for-bit comparisons with the CPU
// backend, the GPU tests that make sense there and a few AMP training steps.
func TestEmulatedDevice(t *testing.T) {
	if os.Getenv(emulatedEnv) != "" {
		t.Skip("already in the child")
	}
	e := buildEmulation(t)
	tests := []string{
		"TestEmulatedKernels",
		"TestEmulatedMatchesCPU",
		"TestEmulatedAttentionMatchesCPU",
		"TestEmulatedTraining",
		"TestEmulatedLinearReLU",
		"TestEmulatedMatMul",
		"TestEmulatedStreams",
		"TestEmulatedConcurrent",
		// The GPU tests of gpu_test.go that mean something here. Left out: a 4096³ GEMM
		// timed by events (TestEventsTimeAndOrder: the stand-in cuBLAS is a naive host
		// loop), peer copies (one device), and the no-GPU test.
		"TestConformance",
		"TestOpenBadIndex",
		"TestMatMulMatchesCPU",
		"TestAutotunedMatMul",
		"TestOutOfMemoryIsTyped",
		"TestPinnedAsyncCopies",
		"TestUtilization",
		"TestMemoryStatsAndSummary",
	}
	if testing.Short() {
		// The conformance suite is most of the time (per-row kernels run their 256
		// threads as coroutines, one after another).
		tests = slices.DeleteFunc(tests, func(s string) bool { return s == "TestConformance" })
	}
	e.runChild(t, tests)
}

// TestEmulatedKernels loads every kernel of the table through the backend's loader
// (NVRTC, the disk cache, cuModuleLoadData, cuModuleGetFunction) and checks the
// parameter offsets and sizes the image reports against the Go table.
func TestEmulatedKernels(t *testing.T) {
	b := needEmulated(t)
	t.Logf("%s", b.Name())
	b.d.do(func() {
		for _, k := range kernels.Kernels() {
			if _, err := b.d.function(k); err != nil {
				t.Error(err)
			}
		}
		// A table that lost a parameter, gained one, or has one of another size is refused.
		k, _ := kernels.Lookup("fill_f32")
		f, err := b.d.function(k)
		if err != nil {
			t.Error(err) // not Fatal: this runs on the device worker
			return
		}
		short, long, wide := k, k, k
		short.Params = k.Params[:len(k.Params)-1]
		long.Params = append(append([]kernels.Param(nil), k.Params...), kernels.Param{Name: "x", Kind: kernels.I32, CType: "int", Size: 4, Align: 4})
		wide.Params = append([]kernels.Param(nil), k.Params...)
		wide.Params[1] = kernels.Param{Name: "n", Kind: kernels.I32, CType: "int", Size: 4, Align: 4}
		for _, bad := range []kernels.Kernel{short, long, wide} {
			if err := checkParamInfo(f, bad); err == nil {
				t.Errorf("checkParamInfo accepted a table of %d parameters for %s", len(bad.Params), k)
			} else {
				t.Logf("refused as expected: %v", err)
			}
		}
	})
}

// TestEmulatedMatMul compares MatMul with the CPU backend on submatrices (leading
// dimensions past the row length, offsets), Beta ≠ 0, K = 0 and empty products, with
// cuBLAS's heuristic and with autotuning (cuBLASLt plans).
func TestEmulatedMatMul(t *testing.T) {
	g := needEmulated(t)
	c, err := cpu.New(0)
	if err != nil {
		t.Fatal(err)
	}
	cases := []backend.MatMulArgs{
		{Batch: 1, M: 5, N: 7, K: 3, Alpha: 1},
		{Batch: 1, M: 5, N: 7, K: 3, LDA: 6, LDB: 9, LDC: 8, OffA: 2, OffB: 1, OffC: 3, Alpha: 0.5, Beta: -1},
		{Batch: 1, M: 5, N: 7, K: 3, TransA: true, TransB: true, LDA: 8, LDB: 4, LDC: 7, OffA: 1, OffC: 2, Alpha: 1, Beta: 0.25},
		{Batch: 3, M: 4, N: 6, K: 5, TransB: true, LDA: 7, LDB: 5, LDC: 9, StrideA: 30, StrideB: 31, StrideC: 40, OffB: 3, Alpha: 2},
		{Batch: 2, M: 4, N: 6, K: 0, StrideC: 24, Alpha: 1, Beta: 0.5}, // K = 0: C = Beta·C
		{Batch: 1, M: 0, N: 6, K: 4, Alpha: 1},
	}
	span := func(off, batch, stride, rows, ld int) int { return off + (batch-1)*stride + rows*ld + 16 }
	for _, tune := range []bool{false, true} {
		SetBenchmark(tune)
		for _, dt := range floatDTypes {
			for ci, tc := range cases {
				lda, ldb, ldc := tc.LeadingDims()
				rowsA, rowsB := tc.M, tc.K
				if tc.TransA {
					rowsA = tc.K
				}
				if tc.TransB {
					rowsB = tc.N
				}
				av := backendtest.RandVals(1, span(tc.OffA, tc.Batch, tc.StrideA, rowsA, lda), -1, 1)
				bv := backendtest.RandVals(2, span(tc.OffB, tc.Batch, tc.StrideB, rowsB, ldb), -1, 1)
				cv := backendtest.RandVals(3, span(tc.OffC, tc.Batch, tc.StrideC, tc.M, ldc), -1, 1)
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
				backendtest.ExpectClose(t, fmt.Sprintf("%s matmul %d (autotuning %v)", dt, ci, tune), got, want, backendtest.Tol(dt)*float64(max(tc.K, 1)), 1)
			}
		}
	}
	SetBenchmark(false)
	g.d.tuneMu.Lock()
	tunedShapes := len(g.d.tuned)
	g.d.tuneMu.Unlock()
	if tunedShapes == 0 {
		t.Error("autotuning recorded nothing")
	}
}

// TestEmulatedStreams drives side streams, events, RecordStream, same-device copies,
// Run and the device queries, which the backend's kernels never call.
func TestEmulatedStreams(t *testing.T) {
	g := needEmulated(t)
	p := g.Properties()
	if p.Major != 9 || p.NVRTCMajor == 0 || p.PCIBusID == "" || p.DriverVersion == 0 {
		t.Errorf("Properties() = %+v", p)
	}
	if free, total, err := g.MemGetInfo(); err != nil || total <= 0 || free > total {
		t.Errorf("MemGetInfo() = %d, %d, %v", free, total, err)
	}
	side, err := g.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	start, _ := g.NewEvent(true)
	end, _ := g.NewEvent(true)
	plain, _ := g.NewEvent(false)
	vals := backendtest.RandVals(1, 1000, -1, 1)
	src := backendtest.Upload(t, g, backend.Float32, vals)
	dst, _ := g.Alloc(backend.Float32, 1000)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("Record", start.Record(nil))
	must("CopyFromDevice", g.CopyFromDevice(dst, 10, src, 20, 900))
	must("Record", plain.Record(nil))
	must("WaitEvent", side.WaitEvent(plain))
	must("Record", end.Record(side))
	d, err := Elapsed(start, end)
	must("Elapsed", err)
	if d < 0 {
		t.Errorf("Elapsed = %v", d)
	}
	if _, err := Elapsed(start, plain); err == nil {
		t.Error("Elapsed with a non-timing event did not fail")
	}
	done, err := side.Query()
	must("Query", err)
	if !done {
		t.Error("side stream not done after its work was waited for")
	}
	if done, err := plain.Query(); err != nil || !done {
		t.Errorf("event Query = %v, %v", done, err)
	}
	must("WaitStream", g.ComputeStream().WaitStream(side))
	must("Synchronize", side.Synchronize())
	must("Synchronize", plain.Synchronize())
	got := backendtest.Download(t, g, dst)
	want := make([]float64, 1000)
	copy(want[10:910], backendtest.Rounded(backend.Float32, vals)[20:920])
	backendtest.ExpectClose(t, "CopyFromDevice", got, want, 0, 1)

	// A storage used on the side stream is reused only after that stream passes its
	// free: the allocator records an event there and settles it on later allocations.
	g.RecordStream(dst, side)
	g.Free(dst)
	g.Free(src)
	again, err := g.Alloc(backend.Float32, 1000)
	must("Alloc after RecordStream", err)
	g.Free(again)
	g.EmptyCache()
	if r := g.MemoryStats().Reserved; r != 0 {
		// Other tests of this process may hold memory; only a pending block would stay here.
		t.Logf("reserved after EmptyCache: %s", backend.FormatBytes(r))
	}
	ran := false
	must("Run", g.Run(func() error {
		ran = true
		_, err := cu.CtxGetCurrent()
		return err
	}))
	if !ran {
		t.Error("Run did not run its function")
	}
	for _, c := range []interface{ Close() error }{start, end, plain, side} {
		must("Close", c.Close())
		must("second Close", c.Close())
	}
	if err := g.ComputeStream().Close(); err != nil {
		t.Errorf("closing the compute stream: %v", err)
	}
	if err := g.Synchronize(); err != nil {
		t.Fatalf("the compute stream after closing its handle: %v", err)
	}
	if s := ShowUtilization(); !strings.Contains(s, "Fake CUDA Device") {
		t.Errorf("ShowUtilization:\n%s", s)
	}
}

// TestEmulatedConcurrent uses the backend from several goroutines at once (each op is
// handed to the one device worker), with results checked per goroutine.
func TestEmulatedConcurrent(t *testing.T) {
	g := needEmulated(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 1000 + 100*w
			in := make([]float32, n)
			for i := range in {
				in[i] = float32(i - w)
			}
			for it := range 30 {
				s, err := g.Alloc(backend.Float32, n)
				if err != nil {
					errs <- err
					return
				}
				d, _ := g.Alloc(backend.Float16, n)
				g.Upload(s, 0, in)
				g.Unary(backend.MulScalar, d, s, n, float64(it%4), 0)
				out := make([]uint16, n)
				g.Download(out, d, 0)
				g.Free(s)
				g.Free(d)
				for i, v := range out {
					if want := uint16(half.Float16FromFloat64(float64(in[i]) * float64(it%4))); v != want {
						errs <- fmt.Errorf("goroutine %d, iteration %d, element %d: %#x, want %#x", w, it, i, v, want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
