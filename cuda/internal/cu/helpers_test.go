package cu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"

	"github.com/gamp-ml/gamp/half"
)

// Helpers shared by the stand-in tests and the GPU tests: they run the same code
// against either.

// onDevice locks the test goroutine to its OS thread and makes device 0's primary
// context current there. Call as: defer onDevice(t)().
func onDevice(t *testing.T) (release func()) {
	t.Helper()
	runtime.LockOSThread()
	d, err := DeviceGet(0)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	ctx, err := PrimaryCtxRetain(d)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	if err := CtxSetCurrent(ctx); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	return func() {
		_ = CtxSetCurrent(0)
		_ = PrimaryCtxRelease(d)
		runtime.UnlockOSThread()
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// upload copies b to new device memory.
func upload(t *testing.T, b []byte) DevicePtr {
	t.Helper()
	p, err := MemAlloc(uint64(len(b)))
	must(t, err)
	must(t, MemcpyHtoD(p, unsafe.Pointer(&b[0]), uint64(len(b))))
	return p
}

// download copies n bytes of device memory at p.
func download(t *testing.T, p DevicePtr, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	must(t, MemcpyDtoH(unsafe.Pointer(&b[0]), p, uint64(n)))
	return b
}

func elemSize(dt int) int {
	switch dt {
	case R64F:
		return 8
	case R32F:
		return 4
	}
	return 2
}

// roundTo returns v as stored in data type dt.
func roundTo(dt int, v float64) float64 {
	switch dt {
	case R32F:
		return float64(float32(v))
	case R16F:
		return half.Float16FromFloat64(v).Float64()
	case R16BF:
		return half.BFloat16FromFloat64(v).Float64()
	}
	return v
}

func encode(dt int, v []float64) []byte {
	es := elemSize(dt)
	b := make([]byte, len(v)*es)
	for i, x := range v {
		switch dt {
		case R64F:
			binary.LittleEndian.PutUint64(b[i*8:], math.Float64bits(x))
		case R32F:
			binary.LittleEndian.PutUint32(b[i*4:], math.Float32bits(float32(x)))
		case R16F:
			binary.LittleEndian.PutUint16(b[i*2:], half.Float16FromFloat64(x).Bits())
		case R16BF:
			binary.LittleEndian.PutUint16(b[i*2:], half.BFloat16FromFloat64(x).Bits())
		}
	}
	return b
}

func decode(dt int, b []byte) []float64 {
	es := elemSize(dt)
	v := make([]float64, len(b)/es)
	for i := range v {
		switch dt {
		case R64F:
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[i*8:]))
		case R32F:
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[i*4:])))
		case R16F:
			v[i] = half.Float16FromBits(binary.LittleEndian.Uint16(b[i*2:])).Float64()
		case R16BF:
			v[i] = half.BFloat16FromBits(binary.LittleEndian.Uint16(b[i*2:])).Float64()
		}
	}
	return v
}

// gemmCase is a row-major C = alpha·op(A)·op(B) + beta·C, batch times.
type gemmCase struct {
	name                string
	dt                  int
	transA, transB      bool
	m, n, k             int
	padA, padB, padC    int // extra elements per row
	batch               int
	alpha, beta         float64
	lda, ldb, ldc       int
	sizeA, sizeB, sizeC int // elements per batch entry
}

func (c *gemmCase) layout() {
	c.batch = max(c.batch, 1)
	aRows, aCols := c.m, c.k
	if c.transA {
		aRows, aCols = c.k, c.m
	}
	bRows, bCols := c.k, c.n
	if c.transB {
		bRows, bCols = c.n, c.k
	}
	c.lda, c.ldb, c.ldc = aCols+c.padA, bCols+c.padB, c.n+c.padC
	c.sizeA, c.sizeB, c.sizeC = aRows*c.lda, bRows*c.ldb, c.m*c.ldc
}

// inputs returns A, B and C (all batch entries) rounded to the data type.
func (c *gemmCase) inputs(seed uint64) (a, b, cc []float64) {
	r := rand.New(rand.NewPCG(seed, 7))
	gen := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = roundTo(c.dt, r.Float64()*2-1)
		}
		return v
	}
	return gen(c.sizeA * c.batch), gen(c.sizeB * c.batch), gen(c.sizeC * c.batch)
}

// reference computes the expected C in float64.
func (c *gemmCase) reference(a, b, cIn []float64) []float64 {
	out := append([]float64(nil), cIn...)
	for bi := 0; bi < c.batch; bi++ {
		A, B, C := a[bi*c.sizeA:], b[bi*c.sizeB:], out[bi*c.sizeC:]
		for i := 0; i < c.m; i++ {
			for j := 0; j < c.n; j++ {
				s := 0.0
				for l := 0; l < c.k; l++ {
					ia, ib := i*c.lda+l, l*c.ldb+j
					if c.transA {
						ia = l*c.lda + i
					}
					if c.transB {
						ib = j*c.ldb + l
					}
					av, bv := A[ia], B[ib]
					s += av * bv
				}
				C[i*c.ldc+j] = c.alpha*s + c.beta*C[i*c.ldc+j]
			}
		}
	}
	return out
}

// check compares got with want on C's m×n entries, with a tolerance for the output
// type's rounding and float32 accumulation.
func (c *gemmCase) check(t *testing.T, got, want []float64) {
	t.Helper()
	eps := map[int]float64{R64F: 1e-12, R32F: 1e-5, R16F: 2e-3, R16BF: 1.6e-2}[c.dt]
	bad := 0
	for bi := 0; bi < c.batch; bi++ {
		for i := 0; i < c.m; i++ {
			for j := 0; j < c.n; j++ {
				x := bi*c.sizeC + i*c.ldc + j
				if d := math.Abs(got[x] - want[x]); d > eps*(math.Abs(want[x])+1) || math.IsNaN(got[x]) {
					if bad++; bad <= 5 {
						t.Errorf("%s: C[%d][%d][%d] = %v, want %v", c.name, bi, i, j, got[x], want[x])
					}
				}
			}
		}
	}
	// Padding between rows must be untouched.
	for bi := 0; bi < c.batch; bi++ {
		for i := 0; i < c.m; i++ {
			for j := c.n; j < c.ldc; j++ {
				x := bi*c.sizeC + i*c.ldc + j
				if got[x] != want[x] {
					t.Fatalf("%s: padding C[%d][%d][%d] changed to %v", c.name, bi, i, j, got[x])
				}
			}
		}
	}
}

// scalars returns alpha and beta as host values of the scale type.
func (c *gemmCase) scalars() (alpha, beta unsafe.Pointer, compute int) {
	if c.dt == R64F {
		v := []float64{c.alpha, c.beta}
		return unsafe.Pointer(&v[0]), unsafe.Pointer(&v[1]), Compute64F
	}
	v := []float32{float32(c.alpha), float32(c.beta)}
	return unsafe.Pointer(&v[0]), unsafe.Pointer(&v[1]), Compute32F
}

func op(trans bool) int {
	if trans {
		return OpT
	}
	return OpN
}

// runGemmEx runs c through GemmEx (GemmStridedBatchedEx when batched) as the column-major
// Cᵀ = op(B)ᵀ·op(A)ᵀ and checks the result.
func runGemmEx(t *testing.T, h BlasHandle, c gemmCase, s Stream) {
	t.Helper()
	c.layout()
	a, b, cIn := c.inputs(uint64(c.m*131 + c.n*7 + c.k))
	A, B, C := upload(t, encode(c.dt, a)), upload(t, encode(c.dt, b)), upload(t, encode(c.dt, cIn))
	defer func() { _, _, _ = MemFree(A), MemFree(B), MemFree(C) }()
	alpha, beta, compute := c.scalars()
	algo := GemmDefault
	if c.dt == R16F || c.dt == R16BF {
		algo = GemmDefaultTensorOp
	}
	var err error
	if c.batch == 1 {
		err = GemmEx(h, op(c.transB), op(c.transA), c.n, c.m, c.k, alpha, B, c.dt, c.ldb, A, c.dt, c.lda,
			beta, C, c.dt, c.ldc, compute, algo)
	} else {
		err = GemmStridedBatchedEx(h, op(c.transB), op(c.transA), c.n, c.m, c.k, alpha, B, c.dt, c.ldb, int64(c.sizeB),
			A, c.dt, c.lda, int64(c.sizeA), beta, C, c.dt, c.ldc, int64(c.sizeC), c.batch, compute, algo)
	}
	must(t, err)
	must(t, StreamSynchronize(s))
	c.check(t, decode(c.dt, download(t, C, len(cIn)*elemSize(c.dt))), c.reference(a, b, cIn))
}

// runLt runs c through a cuBLASLt plan, every algorithm the heuristic offers and the
// library's own choice, and checks each result.
func runLt(t *testing.T, h LtHandle, c gemmCase, s Stream) {
	t.Helper()
	c.layout()
	_, _, compute := c.scalars()
	spec := LtMatmulSpec{
		TransA: c.transA, TransB: c.transB, M: c.m, N: c.n, K: c.k,
		AType: c.dt, BType: c.dt, CType: c.dt, ComputeType: compute,
		LDA: c.lda, LDB: c.ldb, LDC: c.ldc,
		Batch: c.batch, StrideA: int64(c.sizeA), StrideB: int64(c.sizeB), StrideC: int64(c.sizeC),
		MaxWorkspace: 1 << 20,
	}
	p, err := NewLtMatmulPlan(h, spec, 4)
	must(t, err)
	defer func() { must(t, p.Destroy()) }()
	if len(p.Algos()) == 0 {
		t.Fatal("no algorithms")
	}
	ws, err := MemAlloc(1 << 20)
	must(t, err)
	defer func() { _ = MemFree(ws) }()
	a, b, cIn := c.inputs(uint64(c.m*17 + c.n*3 + c.k))
	A, B := upload(t, encode(c.dt, a)), upload(t, encode(c.dt, b))
	defer func() { _, _ = MemFree(A), MemFree(B) }()
	want := c.reference(a, b, cIn)
	for algo := -1; algo < len(p.Algos()); algo++ {
		C := upload(t, encode(c.dt, cIn))
		alpha, beta, _ := c.scalars()
		must(t, p.Run(algo, alpha, A, B, beta, C, ws, 1<<20, s))
		must(t, StreamSynchronize(s))
		c.check(t, decode(c.dt, download(t, C, len(cIn)*elemSize(c.dt))), want)
		_ = MemFree(C)
	}
}
