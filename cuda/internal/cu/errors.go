package cu

import (
	"errors"
	"fmt"

	"github.com/gamp-ml/gamp/backend"
)

// ErrUnavailable is wrapped by every error that means "this machine cannot run CUDA
// work": a library that cannot be found or loaded, a library too old to have a symbol
// gamp needs, a stub libcuda (cuInit 34) or no device (cuInit 100). The error's text
// gives the reason and the paths tried.
var ErrUnavailable = errors.New("cuda unavailable")

// ErrNotSupported is wrapped by the errors of calls the loaded library is too old for
// (cuFuncGetParamInfo needs CUDA 12.4).
var ErrNotSupported = errors.New("not supported by the loaded CUDA library")

// ErrOutOfMemory is backend.ErrOutOfMemory: errors.Is(err, ErrOutOfMemory) holds for
// every *Error whose OutOfMemory method reports true, so the caching allocator can tell
// "device full, empty the cache and retry" from every other failure.
var ErrOutOfMemory = backend.ErrOutOfMemory

// Error is a failed call into a CUDA library: the library ("cuda" for the driver,
// "nvrtc", "cublas", "cublasLt", "nvml"), the C function, its status code and the
// library's own name and description of that code.
type Error struct {
	Lib, Func string
	Code      int
	Name      string // e.g. CUDA_ERROR_OUT_OF_MEMORY
	Text      string // e.g. out of memory
}

// Error formats e as "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory".
func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s: %s (%d)", e.Lib, e.Func, e.Name, e.Code)
	if e.Text != "" && e.Text != e.Name {
		s += ": " + e.Text
	}
	return s
}

// OutOfMemory reports whether e means the device (or the library's host allocator)
// ran out of memory: driver CUDA_ERROR_OUT_OF_MEMORY (2), cuBLAS/cuBLASLt
// CUBLAS_STATUS_ALLOC_FAILED (3), NVRTC_ERROR_OUT_OF_MEMORY (1).
func (e *Error) OutOfMemory() bool {
	switch e.Lib {
	case libDriver:
		return e.Code == cudaErrorOutOfMemory
	case libCublas, libCublasLt:
		return e.Code == cublasStatusAllocFailed
	case libNVRTC:
		return e.Code == nvrtcErrorOutOfMemory
	}
	return false
}

// Is makes errors.Is(e, ErrOutOfMemory) true for out-of-memory errors.
func (e *Error) Is(target error) bool { return target == ErrOutOfMemory && e.OutOfMemory() }

// The Lib values of *Error.
const (
	libDriver   = "cuda"
	libNVRTC    = "nvrtc"
	libCublas   = "cublas"
	libCublasLt = "cublasLt"
	libNVML     = "nvml"
)

// CUresult codes gamp looks at (cuda.h).
const (
	cudaSuccess                       = 0
	cudaErrorInvalidValue             = 1
	cudaErrorOutOfMemory              = 2
	cudaErrorNotInitialized           = 3
	cudaErrorStubLibrary              = 34
	cudaErrorNoDevice                 = 100
	cudaErrorNotFound                 = 500
	cudaErrorNotReady                 = 600
	cudaErrorPeerAccessAlreadyEnabled = 704
	cudaErrorNotSupported             = 801
)

// Status codes of the other libraries that gamp looks at.
const (
	cublasStatusSuccess     = 0
	cublasStatusAllocFailed = 3
	nvrtcSuccess            = 0
	nvrtcErrorOutOfMemory   = 1
	nvmlSuccess             = 0
)

// cublasStatusNames names cublasStatus_t values for libraries too old to have
// cublasGetStatusName (cublas_api.h).
var cublasStatusNames = map[int]string{
	0:  "CUBLAS_STATUS_SUCCESS",
	1:  "CUBLAS_STATUS_NOT_INITIALIZED",
	3:  "CUBLAS_STATUS_ALLOC_FAILED",
	7:  "CUBLAS_STATUS_INVALID_VALUE",
	8:  "CUBLAS_STATUS_ARCH_MISMATCH",
	11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED",
	14: "CUBLAS_STATUS_INTERNAL_ERROR",
	15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// nvmlReturnNames names nvmlReturn_t values (nvml.h); nvmlErrorString gives the text.
var nvmlReturnNames = map[int]string{
	0:   "NVML_SUCCESS",
	1:   "NVML_ERROR_UNINITIALIZED",
	2:   "NVML_ERROR_INVALID_ARGUMENT",
	3:   "NVML_ERROR_NOT_SUPPORTED",
	4:   "NVML_ERROR_NO_PERMISSION",
	5:   "NVML_ERROR_ALREADY_INITIALIZED",
	6:   "NVML_ERROR_NOT_FOUND",
	7:   "NVML_ERROR_INSUFFICIENT_SIZE",
	8:   "NVML_ERROR_INSUFFICIENT_POWER",
	9:   "NVML_ERROR_DRIVER_NOT_LOADED",
	10:  "NVML_ERROR_TIMEOUT",
	11:  "NVML_ERROR_IRQ_ISSUE",
	12:  "NVML_ERROR_LIBRARY_NOT_FOUND",
	13:  "NVML_ERROR_FUNCTION_NOT_FOUND",
	14:  "NVML_ERROR_CORRUPTED_INFOROM",
	15:  "NVML_ERROR_GPU_IS_LOST",
	16:  "NVML_ERROR_RESET_REQUIRED",
	17:  "NVML_ERROR_OPERATING_SYSTEM",
	18:  "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
	19:  "NVML_ERROR_IN_USE",
	20:  "NVML_ERROR_MEMORY",
	21:  "NVML_ERROR_NO_DATA",
	22:  "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED",
	23:  "NVML_ERROR_INSUFFICIENT_RESOURCES",
	24:  "NVML_ERROR_FREQ_NOT_SUPPORTED",
	25:  "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
	26:  "NVML_ERROR_DEPRECATED",
	27:  "NVML_ERROR_NOT_READY",
	28:  "NVML_ERROR_GPU_NOT_FOUND",
	29:  "NVML_ERROR_INVALID_STATE",
	999: "NVML_ERROR_UNKNOWN",
}

// codeName returns names[code], or a generic name for a code the table lacks.
func codeName(names map[int]string, prefix string, code int) string {
	if n, ok := names[code]; ok {
		return n
	}
	return fmt.Sprintf("%s_%d", prefix, code)
}
