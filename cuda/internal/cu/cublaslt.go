package cu

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// cuBLASLt, for autotuning: a LtMatmulPlan describes one row-major GEMM shape, asks
// cublasLtMatmulAlgoGetHeuristic for candidate algorithms, and runs any of them, so
// the caller can time each once and keep the fastest.

// LtHandle is a cublasLtHandle_t.
type LtHandle uintptr

// cublasLt.h enum values used here.
const (
	ltMatmulDescTransA         = 3 // CUBLASLT_MATMUL_DESC_TRANSA, int32
	ltMatmulDescTransB         = 4 // CUBLASLT_MATMUL_DESC_TRANSB, int32
	ltLayoutBatchCount         = 5 // CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, int32
	ltLayoutStridedBatchOffset = 6 // CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, int64
	ltPrefMaxWorkspaceBytes    = 1 // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64
	ltPrefMinAlignmentA        = 5 // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES … D_BYTES = 8, uint32
)

// ltHeuristicResult is cublasLtMatmulHeuristicResult_t (96 bytes).
type ltHeuristicResult struct {
	algo          [8]uint64 // cublasLtMatmulAlgo_t
	workspaceSize uint64    // size_t
	state         int32     // cublasStatus_t
	wavesCount    float32
	reserved      [4]int32
}

var cublasLtLib = library{spec: specCublasLt}

var lt struct {
	create, destroy                                     uintptr
	descCreate, descDestroy, descSet                    uintptr
	layoutCreate, layoutDestroy, layoutSet              uintptr
	prefCreate, prefDestroy, prefSet, heuristic, matmul uintptr
	getVersion                                          func() uint64
	statusName, statusString                            func(rc int32) string
}

func loadCublasLt() error {
	return cublasLtLib.open(func(l *library) error {
		err := l.bindAll([]symbol{
			{fptr: &lt.create, name: "cublasLtCreate"},
			{fptr: &lt.destroy, name: "cublasLtDestroy"},
			{fptr: &lt.getVersion, name: "cublasLtGetVersion"},
			{fptr: &lt.statusName, name: "cublasLtGetStatusName", optional: true},
			{fptr: &lt.statusString, name: "cublasLtGetStatusString", optional: true},
			{fptr: &lt.descCreate, name: "cublasLtMatmulDescCreate"},
			{fptr: &lt.descDestroy, name: "cublasLtMatmulDescDestroy"},
			{fptr: &lt.descSet, name: "cublasLtMatmulDescSetAttribute"},
			{fptr: &lt.layoutCreate, name: "cublasLtMatrixLayoutCreate"},
			{fptr: &lt.layoutDestroy, name: "cublasLtMatrixLayoutDestroy"},
			{fptr: &lt.layoutSet, name: "cublasLtMatrixLayoutSetAttribute"},
			{fptr: &lt.prefCreate, name: "cublasLtMatmulPreferenceCreate"},
			{fptr: &lt.prefDestroy, name: "cublasLtMatmulPreferenceDestroy"},
			{fptr: &lt.prefSet, name: "cublasLtMatmulPreferenceSetAttribute"},
			{fptr: &lt.heuristic, name: "cublasLtMatmulAlgoGetHeuristic"},
			{fptr: &lt.matmul, name: "cublasLtMatmul"},
		})
		if err != nil {
			return err
		}
		v := lt.getVersion() // major·10000 + minor·100 + patch
		l.version = fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
		return nil
	})
}

func ltCheck(fn string, r1 uintptr) error {
	rc := int32(r1)
	if rc == cublasStatusSuccess {
		return nil
	}
	return blasError(libCublasLt, fn, rc, lt.statusName, lt.statusString)
}

// LtCreate creates a cuBLASLt handle. It loads the driver first (Init).
func LtCreate() (LtHandle, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if err := loadCublasLt(); err != nil {
		return 0, err
	}
	var h LtHandle
	r, _, _ := purego.SyscallN(lt.create, uintptr(unsafe.Pointer(&h)))
	return h, ltCheck("cublasLtCreate", r)
}

// LtDestroy destroys h.
func LtDestroy(h LtHandle) error {
	if err := loadCublasLt(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(lt.destroy, uintptr(h))
	return ltCheck("cublasLtDestroy", r)
}

// LtMatmulSpec is one row-major GEMM, C = alpha·op(A)·op(B) + beta·C, with op(A) M×K,
// op(B) K×N and C M×N, repeated Batch times at the given strides.
type LtMatmulSpec struct {
	TransA, TransB      bool // op(A) = Aᵀ: A is stored K×M (row-major)
	M, N, K             int
	AType, BType, CType int   // cudaDataType: R16F, R16BF, R32F, R64F
	ComputeType         int   // Compute32F, …
	LDA, LDB, LDC       int   // row strides in elements; 0: packed
	Batch               int   // 0 or 1: a single GEMM
	StrideA, StrideB    int64 // elements between batch entries
	StrideC             int64
	MaxWorkspace        uint64 // the largest workspace an algorithm may ask for
	MinAlignment        uint32 // the smallest alignment (bytes) of the A, B, C addresses; 0: 256
}

// scaleType is the data type of alpha and beta for a compute type.
func scaleType(compute int) int {
	switch compute {
	case Compute64F:
		return R64F
	case Compute16F:
		return R16F
	}
	return R32F
}

// ltLayout is one cublasLtMatrixLayout (column-major).
type ltLayout struct {
	typ        int
	rows, cols uint64
	ld         int64
	stride     int64
}

// ltProblem is the column-major cublasLtMatmul call a LtMatmulSpec becomes: the
// row-major C = op(A)·op(B) is the column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, so cuBLASLt's A is
// the spec's B and its B the spec's A, and nothing is transposed in memory.
type ltProblem struct {
	transA, transB int32 // of cuBLASLt's A (the spec's B) and B (the spec's A)
	a, b, c        ltLayout
	batch          int32
}

func ltColumnMajor(s LtMatmulSpec) (ltProblem, error) {
	if s.M <= 0 || s.N <= 0 || s.K <= 0 {
		return ltProblem{}, fmt.Errorf("cu: LtMatmulSpec: M, N, K = %d, %d, %d must be positive", s.M, s.N, s.K)
	}
	op := func(t bool) int32 {
		if t {
			return OpT
		}
		return OpN
	}
	// Row-major storage: A is M×K (K×M when TransA), B is K×N (N×K when TransB).
	aCols, aRows := s.K, s.M
	if s.TransA {
		aCols, aRows = s.M, s.K
	}
	bCols, bRows := s.N, s.K
	if s.TransB {
		bCols, bRows = s.K, s.N
	}
	lda, ldb, ldc := s.LDA, s.LDB, s.LDC
	if lda == 0 {
		lda = aCols
	}
	if ldb == 0 {
		ldb = bCols
	}
	if ldc == 0 {
		ldc = s.N
	}
	if lda < aCols || ldb < bCols || ldc < s.N {
		return ltProblem{}, fmt.Errorf("cu: LtMatmulSpec: leading dimensions %d, %d, %d are below the row lengths %d, %d, %d", lda, ldb, ldc, aCols, bCols, s.N)
	}
	batch := max(s.Batch, 1)
	if batch > 1<<31-1 {
		return ltProblem{}, fmt.Errorf("cu: LtMatmulSpec: batch %d too large", batch)
	}
	// A row-major r×c matrix with row stride ld is the column-major c×r matrix with
	// leading dimension ld.
	return ltProblem{
		transA: op(s.TransB),
		transB: op(s.TransA),
		a:      ltLayout{typ: s.BType, rows: uint64(bCols), cols: uint64(bRows), ld: int64(ldb), stride: s.StrideB},
		b:      ltLayout{typ: s.AType, rows: uint64(aCols), cols: uint64(aRows), ld: int64(lda), stride: s.StrideA},
		c:      ltLayout{typ: s.CType, rows: uint64(s.N), cols: uint64(s.M), ld: int64(ldc), stride: s.StrideC},
		batch:  int32(batch),
	}, nil
}

// LtAlgo is one algorithm the heuristic offered for a plan.
type LtAlgo struct {
	algo      [8]uint64 // cublasLtMatmulAlgo_t, opaque
	Workspace uint64    // bytes of workspace it needs
	Waves     float32   // estimated device utilization: 1 fills the GPU once
}

// LtMatmulPlan is a GEMM shape described to cuBLASLt with the algorithms its heuristic
// proposes, best estimate first. Create it on the device's worker thread.
type LtMatmulPlan struct {
	h          LtHandle
	spec       LtMatmulSpec
	desc, pref uintptr
	la, lb, lc uintptr
	algos      []LtAlgo
}

// NewLtMatmulPlan describes spec to cuBLASLt and asks its heuristic for up to maxAlgos
// algorithms (0: 8) that fit in spec.MaxWorkspace. No algorithm at all is an error
// wrapping ErrNotSupported.
func NewLtMatmulPlan(h LtHandle, spec LtMatmulSpec, maxAlgos int) (*LtMatmulPlan, error) {
	if err := loadCublasLt(); err != nil {
		return nil, err
	}
	pr, err := ltColumnMajor(spec)
	if err != nil {
		return nil, err
	}
	p := &LtMatmulPlan{h: h, spec: spec}
	if err := p.describe(pr); err != nil {
		p.Destroy()
		return nil, err
	}
	n := maxAlgos
	if n <= 0 {
		n = 8
	}
	res := make([]ltHeuristicResult, n)
	var got int32
	r, _, _ := purego.SyscallN(lt.heuristic, uintptr(h), p.desc, p.la, p.lb, p.lc, p.lc, p.pref,
		uintptr(n), uintptr(unsafe.Pointer(&res[0])), uintptr(unsafe.Pointer(&got)))
	if err := ltCheck("cublasLtMatmulAlgoGetHeuristic", r); err != nil {
		p.Destroy()
		return nil, err
	}
	for _, x := range res[:min(int(got), n)] {
		if x.state == cublasStatusSuccess {
			p.algos = append(p.algos, LtAlgo{algo: x.algo, Workspace: x.workspaceSize, Waves: x.wavesCount})
		}
	}
	if len(p.algos) == 0 {
		p.Destroy()
		return nil, fmt.Errorf("cu: cuBLASLt has no algorithm for %+v: %w", spec, ErrNotSupported)
	}
	return p, nil
}

// describe creates the operation, layout and preference descriptors.
func (p *LtMatmulPlan) describe(pr ltProblem) error {
	s := p.spec
	r, _, _ := purego.SyscallN(lt.descCreate, uintptr(unsafe.Pointer(&p.desc)), uintptr(s.ComputeType), uintptr(scaleType(s.ComputeType)))
	if err := ltCheck("cublasLtMatmulDescCreate", r); err != nil {
		return err
	}
	for _, a := range []struct {
		attr int
		v    int32
	}{{ltMatmulDescTransA, pr.transA}, {ltMatmulDescTransB, pr.transB}} {
		r, _, _ := purego.SyscallN(lt.descSet, p.desc, uintptr(a.attr), uintptr(unsafe.Pointer(&a.v)), 4)
		if err := ltCheck("cublasLtMatmulDescSetAttribute", r); err != nil {
			return err
		}
	}
	for _, l := range []struct {
		dst *uintptr
		l   ltLayout
	}{{&p.la, pr.a}, {&p.lb, pr.b}, {&p.lc, pr.c}} {
		r, _, _ := purego.SyscallN(lt.layoutCreate, uintptr(unsafe.Pointer(l.dst)), uintptr(l.l.typ), uintptr(l.l.rows), uintptr(l.l.cols), uintptr(l.l.ld))
		if err := ltCheck("cublasLtMatrixLayoutCreate", r); err != nil {
			return err
		}
		if pr.batch > 1 {
			batch, stride := pr.batch, l.l.stride
			r, _, _ := purego.SyscallN(lt.layoutSet, *l.dst, ltLayoutBatchCount, uintptr(unsafe.Pointer(&batch)), 4)
			if err := ltCheck("cublasLtMatrixLayoutSetAttribute", r); err != nil {
				return err
			}
			r, _, _ = purego.SyscallN(lt.layoutSet, *l.dst, ltLayoutStridedBatchOffset, uintptr(unsafe.Pointer(&stride)), 8)
			if err := ltCheck("cublasLtMatrixLayoutSetAttribute", r); err != nil {
				return err
			}
		}
	}
	r, _, _ = purego.SyscallN(lt.prefCreate, uintptr(unsafe.Pointer(&p.pref)))
	if err := ltCheck("cublasLtMatmulPreferenceCreate", r); err != nil {
		return err
	}
	ws := s.MaxWorkspace
	r, _, _ = purego.SyscallN(lt.prefSet, p.pref, ltPrefMaxWorkspaceBytes, uintptr(unsafe.Pointer(&ws)), 8)
	if err := ltCheck("cublasLtMatmulPreferenceSetAttribute", r); err != nil {
		return err
	}
	if s.MinAlignment != 0 {
		for i := 0; i < 4; i++ { // A, B, C, D
			align := s.MinAlignment
			r, _, _ = purego.SyscallN(lt.prefSet, p.pref, uintptr(ltPrefMinAlignmentA+i), uintptr(unsafe.Pointer(&align)), 4)
			if err := ltCheck("cublasLtMatmulPreferenceSetAttribute", r); err != nil {
				return err
			}
		}
	}
	return nil
}

// Algos returns the algorithms the heuristic proposed, best estimate first.
func (p *LtMatmulPlan) Algos() []LtAlgo { return p.algos }

// Run queues the plan's GEMM on s with algorithm Algos()[algo] (-1: let cuBLASLt choose)
// and a workspace of wsBytes at ws, which must cover the algorithm's Workspace. alpha
// and beta point at host values of the scale type (float32 for the 32F compute types,
// float64 for Compute64F). A, B and C are the row-major matrices of the spec.
func (p *LtMatmulPlan) Run(algo int, alpha unsafe.Pointer, A, B DevicePtr, beta unsafe.Pointer, C DevicePtr, ws DevicePtr, wsBytes uint64, s Stream) error {
	var ap unsafe.Pointer
	if algo >= 0 {
		if algo >= len(p.algos) {
			return fmt.Errorf("cu: LtMatmulPlan.Run: algorithm %d of %d", algo, len(p.algos))
		}
		if need := p.algos[algo].Workspace; need > wsBytes {
			return fmt.Errorf("cu: LtMatmulPlan.Run: algorithm %d needs %d bytes of workspace, got %d", algo, need, wsBytes)
		}
		ap = unsafe.Pointer(&p.algos[algo].algo)
	}
	// cuBLASLt's A is the spec's B and its B the spec's A; D is C, in place.
	r, _, _ := purego.SyscallN(lt.matmul, uintptr(p.h), p.desc, uintptr(alpha),
		uintptr(B), p.la, uintptr(A), p.lb, uintptr(beta),
		uintptr(C), p.lc, uintptr(C), p.lc,
		uintptr(ap), uintptr(ws), uintptr(wsBytes), uintptr(s))
	return ltCheck("cublasLtMatmul", r)
}

// Destroy frees the plan's descriptors.
func (p *LtMatmulPlan) Destroy() error {
	var first error
	keep := func(fn string, r uintptr) {
		if err := ltCheck(fn, r); err != nil && first == nil {
			first = err
		}
	}
	for _, l := range []*uintptr{&p.la, &p.lb, &p.lc} {
		if *l != 0 {
			r, _, _ := purego.SyscallN(lt.layoutDestroy, *l)
			keep("cublasLtMatrixLayoutDestroy", r)
			*l = 0
		}
	}
	if p.desc != 0 {
		r, _, _ := purego.SyscallN(lt.descDestroy, p.desc)
		keep("cublasLtMatmulDescDestroy", r)
		p.desc = 0
	}
	if p.pref != 0 {
		r, _, _ := purego.SyscallN(lt.prefDestroy, p.pref)
		keep("cublasLtMatmulPreferenceDestroy", r)
		p.pref = 0
	}
	return first
}
