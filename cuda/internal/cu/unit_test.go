package cu

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/gamp-ml/gamp/backend"
)

func TestErrorText(t *testing.T) {
	for _, tc := range []struct {
		e    *Error
		text string
		oom  bool
	}{
		{&Error{Lib: "cuda", Func: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Text: "out of memory"},
			"cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", true},
		{&Error{Lib: "cuda", Func: "cuInit", Code: 100, Name: "CUDA_ERROR_NO_DEVICE", Text: "no CUDA-capable device is detected"},
			"cuda: cuInit: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected", false},
		{&Error{Lib: "cublas", Func: "cublasGemmEx", Code: 3, Name: "CUBLAS_STATUS_ALLOC_FAILED"},
			"cublas: cublasGemmEx: CUBLAS_STATUS_ALLOC_FAILED (3)", true},
		{&Error{Lib: "cublasLt", Func: "cublasLtMatmul", Code: 3, Name: "CUBLAS_STATUS_ALLOC_FAILED"},
			"cublasLt: cublasLtMatmul: CUBLAS_STATUS_ALLOC_FAILED (3)", true},
		{&Error{Lib: "nvrtc", Func: "nvrtcCompileProgram", Code: 6, Name: "NVRTC_ERROR_COMPILATION", Text: "NVRTC_ERROR_COMPILATION"},
			"nvrtc: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6)", false},
		{&Error{Lib: "nvml", Func: "nvmlInit_v2", Code: 2, Name: "NVML_ERROR_INVALID_ARGUMENT", Text: "Invalid Argument"},
			"nvml: nvmlInit_v2: NVML_ERROR_INVALID_ARGUMENT (2): Invalid Argument", false},
	} {
		if got := tc.e.Error(); got != tc.text {
			t.Errorf("Error() = %q, want %q", got, tc.text)
		}
		if tc.e.OutOfMemory() != tc.oom {
			t.Errorf("%s: OutOfMemory() = %v", tc.text, !tc.oom)
		}
		wrapped := fmt.Errorf("allocating: %w", tc.e)
		if errors.Is(wrapped, backend.ErrOutOfMemory) != tc.oom || errors.Is(wrapped, ErrOutOfMemory) != tc.oom {
			t.Errorf("%s: errors.Is(ErrOutOfMemory) = %v", tc.text, !tc.oom)
		}
	}
	if codeName(nvmlReturnNames, "NVML_ERROR", 6) != "NVML_ERROR_NOT_FOUND" || codeName(cublasStatusNames, "CUBLAS_STATUS", 99) != "CUBLAS_STATUS_99" {
		t.Error("codeName")
	}
}

func TestHeuristicResultLayout(t *testing.T) {
	// cublasLtMatmulHeuristicResult_t: algo (8 uint64), size_t workspaceSize,
	// cublasStatus_t state, float wavesCount, int reserved[4].
	var r ltHeuristicResult
	if unsafe.Sizeof(r) != 96 || unsafe.Offsetof(r.workspaceSize) != 64 || unsafe.Offsetof(r.state) != 72 ||
		unsafe.Offsetof(r.wavesCount) != 76 || unsafe.Offsetof(r.reserved) != 80 {
		t.Errorf("ltHeuristicResult layout: size %d", unsafe.Sizeof(r))
	}
	var u nvmlUtilization
	var m nvmlMemory
	if unsafe.Sizeof(u) != 8 || unsafe.Sizeof(m) != 24 {
		t.Error("NVML struct layouts")
	}
}

func TestLtColumnMajor(t *testing.T) {
	// Row-major C (M×N) = op(A)·op(B) is column-major Cᵀ (N×M) = op(B)ᵀ·op(A)ᵀ:
	// cuBLASLt's A is the spec's B, viewed column-major as its transpose.
	base := LtMatmulSpec{M: 2, N: 3, K: 5, AType: R16F, BType: R16BF, CType: R32F, ComputeType: Compute32F}
	for _, tc := range []struct {
		name   string
		modify func(*LtMatmulSpec)
		want   ltProblem
	}{
		{"NN packed", func(*LtMatmulSpec) {}, ltProblem{
			transA: OpN, transB: OpN, batch: 1,
			a: ltLayout{typ: R16BF, rows: 3, cols: 5, ld: 3},
			b: ltLayout{typ: R16F, rows: 5, cols: 2, ld: 5},
			c: ltLayout{typ: R32F, rows: 3, cols: 2, ld: 3},
		}},
		{"TT padded batched", func(s *LtMatmulSpec) {
			s.TransA, s.TransB = true, true
			s.LDA, s.LDB, s.LDC = 4, 6, 8
			s.Batch, s.StrideA, s.StrideB, s.StrideC = 7, 100, 200, 300
		}, ltProblem{
			transA: OpT, transB: OpT, batch: 7,
			a: ltLayout{typ: R16BF, rows: 5, cols: 3, ld: 6, stride: 200},
			b: ltLayout{typ: R16F, rows: 2, cols: 5, ld: 4, stride: 100},
			c: ltLayout{typ: R32F, rows: 3, cols: 2, ld: 8, stride: 300},
		}},
	} {
		s := base
		tc.modify(&s)
		got, err := ltColumnMajor(s)
		if err != nil || got != tc.want {
			t.Errorf("%s: ltColumnMajor = %+v, %v\nwant %+v", tc.name, got, err, tc.want)
		}
	}
	for _, bad := range []func(*LtMatmulSpec){
		func(s *LtMatmulSpec) { s.K = 0 },
		func(s *LtMatmulSpec) { s.LDA = 4 },                   // A is 2×5: rows of 5
		func(s *LtMatmulSpec) { s.TransB, s.LDB = true, 4 },   // B is 3×5: rows of 5
		func(s *LtMatmulSpec) { s.LDC = 2 },                   // C rows of 3
		func(s *LtMatmulSpec) { s.Batch = math.MaxInt32 + 1 }, // not a C int
	} {
		s := base
		bad(&s)
		if _, err := ltColumnMajor(s); err == nil {
			t.Errorf("ltColumnMajor(%+v) accepted", s)
		}
	}
	if scaleType(Compute64F) != R64F || scaleType(Compute16F) != R16F || scaleType(Compute32FFastTF32) != R32F {
		t.Error("scaleType")
	}
}

func TestKernelArgs(t *testing.T) {
	a := NewKernelArgs(6)
	defer a.Free()
	a.SetPtr(0, 0x1234_5678_9abc)
	a.SetI32(1, -2)
	a.SetU32(2, 7)
	a.SetF32(3, 1.5)
	a.SetF64(4, -0.25)
	a.SetU16(5, 0x3c00)
	if a.Len() != 6 {
		t.Fatal(a.Len())
	}
	// Each pointer points at its slot, where a little-endian read of the kernel's
	// parameter size gives the value.
	for i := range a.ptrs {
		if a.ptrs[i] != unsafe.Pointer(&a.slots[i]) {
			t.Fatalf("ptrs[%d] does not point at slot %d", i, i)
		}
	}
	if *(*uint64)(a.ptrs[0]) != 0x1234_5678_9abc || *(*int32)(a.ptrs[1]) != -2 || *(*uint32)(a.ptrs[2]) != 7 ||
		*(*float32)(a.ptrs[3]) != 1.5 || *(*float64)(a.ptrs[4]) != -0.25 || *(*uint16)(a.ptrs[5]) != 0x3c00 {
		t.Errorf("slots %x", a.slots)
	}
	empty := NewKernelArgs(0)
	empty.Free()
}

func TestGPUArch(t *testing.T) {
	for _, tc := range []struct {
		opts []string
		want string
	}{
		{[]string{"-default-device", "--gpu-architecture=sm_90"}, "sm_90"},
		{[]string{"-arch=sm_80"}, "sm_80"},
		{[]string{"-arch", "compute_75"}, "compute_75"},
		{[]string{"--gpu-architecture", "sm_100a"}, "sm_100a"},
		{[]string{"-std=c++17"}, ""},
	} {
		if got := gpuArch(tc.opts); got != tc.want {
			t.Errorf("gpuArch(%q) = %q, want %q", tc.opts, got, tc.want)
		}
	}
}

func TestIsBinaryImage(t *testing.T) {
	if !isBinaryImage([]byte("\x7fELF\x02\x01")) || !isBinaryImage([]byte{0x50, 0xed, 0x55, 0xba, 1}) ||
		isBinaryImage([]byte(".version 8.0\n")) || isBinaryImage([]byte("ab")) {
		t.Error("isBinaryImage")
	}
}

func TestCStrings(t *testing.T) {
	if s := cBuf([]byte("abc\x00def")); s != "abc" {
		t.Error(s)
	}
	if s := cBuf([]byte("abc")); s != "abc" {
		t.Error(s)
	}
	b := cString("hi")
	if len(b) != 3 || b[2] != 0 || goString(&b[0]) != "hi" || goString(nil) != "" {
		t.Error("cString/goString")
	}
}
