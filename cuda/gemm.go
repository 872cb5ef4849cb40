package cuda

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/cuda/internal/cu"
)

// benchmark turns on GEMM autotuning (see SetBenchmark).
var benchmark atomic.Bool

func init() {
	if v := os.Getenv("GAMP_CUDA_BENCHMARK"); v != "" && v != "0" {
		benchmark.Store(true)
	}
}

// SetBenchmark turns autotuning on or off, like torch.backends.cudnn.benchmark: when
// on, the first GEMM of each shape times every cuBLAS algorithm offered for it and later
// GEMMs of that shape use the fastest. Off (the default), cuBLAS's heuristic choice is
// used. GAMP_CUDA_BENCHMARK=1 turns it on at start.
func SetBenchmark(on bool) { benchmark.Store(on) }

// Benchmark reports whether autotuning is on.
func Benchmark() bool { return benchmark.Load() }

// gemmTypes returns the cuBLAS data type and compute type for a dtype.
func gemmTypes(dt backend.DType) (dataType, computeType int) {
	switch dt {
	case backend.Float32:
		return cu.R32F, cu.Compute32F
	case backend.Float16:
		return cu.R16F, cu.Compute32F
	case backend.BFloat16:
		return cu.R16BF, cu.Compute32F
	case backend.Float64:
		return cu.R64F, cu.Compute64F
	}
	panic(fmt.Sprintf("cuda: MatMul on %s", dt))
}

// MatMul implements backend.Backend with cuBLAS GemmEx / GemmStridedBatchedEx: half
// inputs run on tensor cores with FP32 accumulation (compute type 32F); float32 runs in
// full FP32 (no TF32); float64 in FP64. Row-major C = op(A)·op(B) is computed as the
// column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, so no operand is transposed in memory.
func (b *Backend) MatMul(a backend.MatMulArgs) {
	A, B, C := b.st(a.A), b.st(a.B), b.st(a.C)
	if A.dt != C.dt || B.dt != C.dt || !C.dt.IsFloat() {
		panic(fmt.Sprintf("cuda:%d: MatMul dtypes %s·%s→%s (want one floating dtype)", b.d.index, A.dt, B.dt, C.dt))
	}
	if err := a.CheckBounds(A.n, B.n, C.n); err != nil {
		panic(fmt.Sprintf("cuda:%d: %v", b.d.index, err))
	}
	if a.Bias != nil {
		panic(fmt.Sprintf("cuda:%d: MatMul with a Bias is not supported (the backend does not implement backend.GemmBias)", b.d.index))
	}
	// cuBLAS wants every leading dimension ≥ 1, also that of a packed operand without
	// columns (A when K = 0).
	lda, ldb, ldc := a.LeadingDims()
	lda, ldb, ldc = max(lda, 1), max(ldb, 1), max(ldc, 1)
	if a.M == 0 || a.N == 0 {
		return
	}
	// K = 0 is left to cuBLAS, which then scales C by Beta.
	dataType, computeType := gemmTypes(C.dt)
	opA, opB := cu.OpN, cu.OpN
	if a.TransA {
		opA = cu.OpT
	}
	if a.TransB {
		opB = cu.OpT
	}
	// Scalars by pointer (host pointer mode), in the compute type's precision.
	var alpha, beta unsafe.Pointer
	if C.dt == backend.Float64 {
		al, be := float64(a.Alpha), float64(a.Beta)
		alpha, beta = unsafe.Pointer(&al), unsafe.Pointer(&be)
	} else {
		al, be := a.Alpha, a.Beta
		alpha, beta = unsafe.Pointer(&al), unsafe.Pointer(&be)
	}
	// Addresses now: the storages may be freed (on this goroutine) before the worker
	// runs the GEMM.
	aPtr, bPtr, cPtr := A.at(a.OffA), B.at(a.OffB), C.at(a.OffC)
	cdt := C.dt
	run := func(c cu.DevicePtr, bp unsafe.Pointer) error {
		if a.Batch == 1 {
			return cu.GemmEx(b.d.blas, opB, opA, a.N, a.M, a.K, alpha,
				bPtr, dataType, ldb, aPtr, dataType, lda,
				bp, c, dataType, ldc, computeType, cu.GemmDefault)
		}
		return cu.GemmStridedBatchedEx(b.d.blas, opB, opA, a.N, a.M, a.K, alpha,
			bPtr, dataType, ldb, int64(a.StrideB), aPtr, dataType, lda, int64(a.StrideA),
			bp, c, dataType, ldc, int64(a.StrideC), a.Batch, computeType, cu.GemmDefault)
	}
	// Queued without waiting (post): alpha and beta are pinned while cuBLAS reads them.
	b.d.post(func() {
		var pin runtime.Pinner
		pin.Pin(alpha)
		pin.Pin(beta)
		defer pin.Unpin()
		if benchmark.Load() && cdt != backend.Float64 {
			spec := cu.LtMatmulSpec{
				TransA: a.TransA, TransB: a.TransB, M: a.M, N: a.N, K: a.K,
				AType: dataType, BType: dataType, CType: dataType, ComputeType: computeType,
				LDA: lda, LDB: ldb, LDC: ldc, Batch: a.Batch,
				StrideA: int64(a.StrideA), StrideB: int64(a.StrideB), StrideC: int64(a.StrideC),
				MaxWorkspace: blasWorkspace,
				MinAlignment: alignment(aPtr, bPtr, cPtr),
			}
			t := b.d.tune(spec, C, aPtr, bPtr, run)
			if t.plan != nil {
				b.d.must("cublasLtMatmul", t.plan.Run(t.algo, alpha, aPtr, bPtr, beta, cPtr, b.d.blasWS, blasWorkspace, b.d.compute))
				return
			}
		}
		b.d.must("cublasGemmEx", run(cPtr, beta))
	})
}

// alignment is the largest power of two up to 256 dividing every address.
func alignment(ps ...cu.DevicePtr) uint32 {
	al := uint32(256)
	for _, p := range ps {
		for al > 1 && uint64(p)%uint64(al) != 0 {
			al /= 2
		}
	}
	return al
}

// tuned is the autotuning result for one GEMM shape: a cuBLASLt plan and the index of
// its fastest algorithm, or no plan when GemmEx was as fast or cuBLASLt had nothing.
type tuned struct {
	plan *cu.LtMatmulPlan
	algo int
}

// tune returns the fastest way to run spec, timing cuBLASLt's candidates and GemmEx on
// a scratch output the first time a shape is seen. Runs on the worker.
func (d *device) tune(spec cu.LtMatmulSpec, C *Storage, aPtr, bPtr cu.DevicePtr, gemmEx func(cu.DevicePtr, unsafe.Pointer) error) tuned {
	d.tuneMu.Lock()
	t, ok := d.tuned[spec]
	d.tuneMu.Unlock()
	if ok {
		return t
	}
	defer func() {
		d.tuneMu.Lock()
		d.tuned[spec] = t
		d.tuneMu.Unlock()
	}()
	if d.lt == 0 {
		h, err := cu.LtCreate()
		if err != nil {
			return t // no cuBLASLt: GemmEx from now on
		}
		d.lt = h
	}
	plan, err := cu.NewLtMatmulPlan(d.lt, spec, 16)
	if err != nil {
		return t
	}
	// Scratch output as large as C's span, so timing never touches C.
	ldc := spec.LDC
	if ldc == 0 {
		ldc = spec.N
	}
	span := int64(max(spec.Batch, 1)-1)*spec.StrideC + int64((spec.M-1)*ldc+spec.N)
	blk, err := d.alloc.alloc(span*int64(C.dt.Size()), C.dt, uintptr(d.compute))
	if err != nil {
		_ = plan.Destroy()
		return t // no room to tune: use the heuristic
	}
	defer d.alloc.free(blk)
	scratch := cu.DevicePtr(blk.addr)
	start, err1 := cu.EventCreate(eventDefault)
	end, err2 := cu.EventCreate(eventDefault)
	if err1 != nil || err2 != nil {
		_ = plan.Destroy()
		return t
	}
	defer cu.EventDestroy(start)
	defer cu.EventDestroy(end)
	var one, zero [2]float64 // the same bits serve float32 (first word) and float64
	*(*float32)(unsafe.Pointer(&one)) = 1
	var pin runtime.Pinner
	pin.Pin(&one)
	pin.Pin(&zero)
	defer pin.Unpin()
	timeIt := func(f func() error) (float32, bool) {
		if f() != nil { // warm-up, and "not supported for this shape"
			return 0, false
		}
		const reps = 3
		_ = cu.EventRecord(start, d.compute)
		for r := 0; r < reps; r++ {
			if f() != nil {
				return 0, false
			}
		}
		_ = cu.EventRecord(end, d.compute)
		if cu.EventSynchronize(end) != nil {
			return 0, false
		}
		ms, err := cu.EventElapsedTime(start, end)
		return ms, err == nil
	}
	bestMs, ok := timeIt(func() error { return gemmEx(scratch, unsafe.Pointer(&zero)) })
	if !ok {
		bestMs = -1
	}
	best := -1
	for i := range plan.Algos() {
		ms, ok := timeIt(func() error {
			return plan.Run(i, unsafe.Pointer(&one), aPtr, bPtr, unsafe.Pointer(&zero), scratch, d.blasWS, blasWorkspace, d.compute)
		})
		if ok && (bestMs < 0 || ms < bestMs) {
			best, bestMs = i, ms
		}
	}
	if best < 0 {
		_ = plan.Destroy()
		return t
	}
	t = tuned{plan: plan, algo: best}
	return t
}
