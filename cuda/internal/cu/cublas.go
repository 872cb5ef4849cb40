package cu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/ebitengine/purego"
)

// BlasHandle is a cublasHandle_t. It binds to the context current on the calling OS
// thread at BlasCreate: create it, and use it, on the device's worker thread.
type BlasHandle uintptr

// cudaDataType values (library_types.h) for the matrix types of GemmEx and cuBLASLt.
const (
	R32F  = 0  // CUDA_R_32F
	R64F  = 1  // CUDA_R_64F
	R16F  = 2  // CUDA_R_16F
	R16BF = 14 // CUDA_R_16BF
)

// cublasComputeType_t values (cublas_api.h): how GemmEx multiplies and accumulates.
// Half inputs with Compute32F run on tensor cores and accumulate in FP32.
const (
	Compute16F         = 64 // CUBLAS_COMPUTE_16F
	Compute32F         = 68 // CUBLAS_COMPUTE_32F
	Compute32FPedantic = 69 // CUBLAS_COMPUTE_32F_PEDANTIC
	Compute64F         = 70 // CUBLAS_COMPUTE_64F
	Compute32FFast16F  = 74 // CUBLAS_COMPUTE_32F_FAST_16F
	Compute32FFast16BF = 75 // CUBLAS_COMPUTE_32F_FAST_16BF
	Compute32FFastTF32 = 77 // CUBLAS_COMPUTE_32F_FAST_TF32: float32 GEMM on TF32 tensor cores
)

// cublasOperation_t values.
const (
	OpN = 0 // CUBLAS_OP_N
	OpT = 1 // CUBLAS_OP_T
)

// cublasGemmAlgo_t values. Since cuBLAS 11 the explicit algorithms are hints that
// newer versions may ignore.
const (
	GemmDefault         = -1  // CUBLAS_GEMM_DEFAULT
	GemmAlgo0           = 0   // CUBLAS_GEMM_ALGO0 … ALGO23 = 23
	GemmDefaultTensorOp = 99  // CUBLAS_GEMM_DEFAULT_TENSOR_OP
	GemmAlgo0TensorOp   = 100 // CUBLAS_GEMM_ALGO0_TENSOR_OP … ALGO15_TENSOR_OP = 115
)

// cublasMath_t values for BlasSetMathMode.
const (
	MathDefault      = 0 // CUBLAS_DEFAULT_MATH: no TF32 for float32
	MathTensorOp     = 1 // CUBLAS_TENSOR_OP_MATH (deprecated)
	MathPedantic     = 2 // CUBLAS_PEDANTIC_MATH
	MathTF32TensorOp = 3 // CUBLAS_TF32_TENSOR_OP_MATH: float32 GEMMs may use TF32
	// MathDisallowReducedPrecisionReduction (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
	// is or-ed into a mode: half GEMMs never reduce in half precision.
	MathDisallowReducedPrecisionReduction = 16
)

var cublasLib = library{spec: specCublas}

var cublas struct {
	create       func(h *BlasHandle) int32
	destroy      func(h BlasHandle) int32
	setStream    func(h BlasHandle, s Stream) int32
	setMathMode  func(h BlasHandle, mode int32) int32
	setWorkspace func(h BlasHandle, ws DevicePtr, bytes uint64) int32
	getProperty  func(typ int32, v *int32) int32
	statusName   func(rc int32) string // cuBLAS 11.4+
	statusString func(rc int32) string

	gemmEx, gemmStridedBatchedEx uintptr // 19 and 23 arguments: purego.SyscallN
}

// loadCublas loads libcublas once, libcublasLt first: libcublas needs it, and a
// libcublasLt already loaded is found by its soname wherever it lives.
func loadCublas() error {
	_ = loadCublasLt()
	return cublasLib.open(func(l *library) error {
		b := &cublas
		err := l.bindAll([]symbol{
			{fptr: &b.create, name: "cublasCreate_v2"},
			{fptr: &b.destroy, name: "cublasDestroy_v2"},
			{fptr: &b.setStream, name: "cublasSetStream_v2"},
			{fptr: &b.setMathMode, name: "cublasSetMathMode"},
			{fptr: &b.setWorkspace, name: "cublasSetWorkspace_v2"},
			{fptr: &b.getProperty, name: "cublasGetProperty"},
			{fptr: &b.statusName, name: "cublasGetStatusName", optional: true},
			{fptr: &b.statusString, name: "cublasGetStatusString", optional: true},
			{fptr: &b.gemmEx, name: "cublasGemmEx"},
			{fptr: &b.gemmStridedBatchedEx, name: "cublasGemmStridedBatchedEx"},
		})
		if err != nil {
			return err
		}
		var v [3]int32 // libraryPropertyType: MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
		for i := range v {
			b.getProperty(int32(i), &v[i])
		}
		l.version = fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
		return nil
	})
}

func blasError(lib, fn string, rc int32, name, text func(int32) string) *Error {
	e := &Error{Lib: lib, Func: fn, Code: int(rc), Name: codeName(cublasStatusNames, "CUBLAS_STATUS", int(rc))}
	if name != nil {
		if s := name(rc); s != "" {
			e.Name = s
		}
	}
	if text != nil {
		e.Text = text(rc)
	}
	return e
}

func blasCheck(fn string, rc int32) error {
	if rc == cublasStatusSuccess {
		return nil
	}
	return blasError(libCublas, fn, rc, cublas.statusName, cublas.statusString)
}

// BlasCreate creates a cuBLAS handle bound to the current context. It loads the
// driver first (Init), so cuBLAS uses the libcuda gamp found.
func BlasCreate() (BlasHandle, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if err := loadCublas(); err != nil {
		return 0, err
	}
	var h BlasHandle
	err := blasCheck("cublasCreate_v2", cublas.create(&h))
	return h, err
}

// BlasDestroy destroys h.
func BlasDestroy(h BlasHandle) error {
	if err := loadCublas(); err != nil {
		return err
	}
	return blasCheck("cublasDestroy_v2", cublas.destroy(h))
}

// BlasSetStream makes h queue its work on s.
func BlasSetStream(h BlasHandle, s Stream) error {
	if err := loadCublas(); err != nil {
		return err
	}
	return blasCheck("cublasSetStream_v2", cublas.setStream(h, s))
}

// BlasSetMathMode sets h's math mode (the Math constants).
func BlasSetMathMode(h BlasHandle, mode int) error {
	if err := loadCublas(); err != nil {
		return err
	}
	return blasCheck("cublasSetMathMode", cublas.setMathMode(h, int32(mode)))
}

// BlasSetWorkspace gives h a device workspace of bytes (256-byte aligned, at least
// 4 MiB recommended; 32 MiB on Hopper) instead of its own pool, which makes its
// memory use explicit and graph-capture safe.
func BlasSetWorkspace(h BlasHandle, ws DevicePtr, bytes uint64) error {
	if err := loadCublas(); err != nil {
		return err
	}
	return blasCheck("cublasSetWorkspace_v2", cublas.setWorkspace(h, ws, bytes))
}

// cInts converts GEMM sizes to C ints, or says which one does not fit.
func cInts(fn string, names string, v ...int) (out [16]uintptr, err error) {
	for i, x := range v {
		if x < math.MinInt32 || x > math.MaxInt32 {
			return out, fmt.Errorf("cu: %s: argument %d of (%s) is %d, which does not fit in a C int", fn, i, names, x)
		}
		out[i] = uintptr(x)
	}
	return out, nil
}

// GemmEx computes the column-major C = alpha·op(A)·op(B) + beta·C with op(A) m×k,
// op(B) k×n and C m×n, the matrices of data types aType, bType, cType (R16F, …)
// multiplied in computeType with algorithm algo (GemmDefault, …), queued on h's
// stream. alpha and beta point at host values of the scale type: float32 for the 32F
// compute types, float64 for Compute64F, a half for Compute16F. cuBLAS is
// column-major: the row-major C = A·B is GemmEx(OpN, OpN, n, m, k, B, n, A, k, C, n).
func GemmEx(h BlasHandle, transA, transB, m, n, k int, alpha unsafe.Pointer, A DevicePtr, aType, lda int, B DevicePtr, bType, ldb int, beta unsafe.Pointer, C DevicePtr, cType, ldc int, computeType, algo int) error {
	if err := loadCublas(); err != nil {
		return err
	}
	v, err := cInts("cublasGemmEx", "transA, transB, m, n, k, aType, lda, bType, ldb, cType, ldc, computeType, algo",
		transA, transB, m, n, k, aType, lda, bType, ldb, cType, ldc, computeType, algo)
	if err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(cublas.gemmEx, uintptr(h), v[0], v[1], v[2], v[3], v[4],
		uintptr(alpha), uintptr(A), v[5], v[6], uintptr(B), v[7], v[8],
		uintptr(beta), uintptr(C), v[9], v[10], v[11], v[12])
	return blasCheck("cublasGemmEx", int32(r))
}

// GemmStridedBatchedEx is GemmEx over batch matrices, the i-th at A+i·strideA,
// B+i·strideB, C+i·strideC (strides in elements).
func GemmStridedBatchedEx(h BlasHandle, transA, transB, m, n, k int, alpha unsafe.Pointer, A DevicePtr, aType, lda int, strideA int64, B DevicePtr, bType, ldb int, strideB int64, beta unsafe.Pointer, C DevicePtr, cType, ldc int, strideC int64, batch int, computeType, algo int) error {
	if err := loadCublas(); err != nil {
		return err
	}
	v, err := cInts("cublasGemmStridedBatchedEx", "transA, transB, m, n, k, aType, lda, bType, ldb, cType, ldc, batch, computeType, algo",
		transA, transB, m, n, k, aType, lda, bType, ldb, cType, ldc, batch, computeType, algo)
	if err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(cublas.gemmStridedBatchedEx, uintptr(h), v[0], v[1], v[2], v[3], v[4],
		uintptr(alpha), uintptr(A), v[5], v[6], uintptr(strideA), uintptr(B), v[7], v[8], uintptr(strideB),
		uintptr(beta), uintptr(C), v[9], v[10], uintptr(strideC), v[11], v[12], v[13])
	return blasCheck("cublasGemmStridedBatchedEx", int32(r))
}
