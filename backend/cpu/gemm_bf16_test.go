package cpu

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
	"github.com/gamp-ml/gamp/internal/testenv"
)

// sameFloat32 reports whether x and y have the same bits, any two NaNs
// counting as equal.
func sameFloat32(x, y float32) bool {
	return math.Float32bits(x) == math.Float32bits(y) || x != x && y != y
}

// TestGemmBF16Semantics pins down VDPBF16PS arithmetic in one lane: from
// an accumulator acc, acc = fma(a_odd, b_odd, acc), then fma(a_even, b_even,
// acc), each rounded to nearest even, denormal inputs read as zero, tiny
// results flushed to a zero of their sign, tininess judged after rounding.
// The expected values were measured with VDPBF16PS on AMD Zen 5 and agree
// with the Intel SDM's pseudocode; every kernel this machine runs, the
// pure-Go twin included, must reproduce them. A first pair step sets acc
// (to -0 through a flushed negative product).
func TestGemmBF16Semantics(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	inf := float32(math.Inf(1))
	zero, minNormal, onePointFive := float32(0), float32(0x1p-126), float32(0x1.8p-126)
	cases := []struct {
		name      string
		acc       float32
		even, odd [2]float32 // (a, b) of the even and the odd k
		want      float32
		// wantAMX, where set, is TDPBF16PS's result (see gemmAMXKernelGo
		// and amxFMA): even and odd k in two chains, tiny products dropped,
		// tininess judged on the IEEE float32 result.
		wantAMX *float32
	}{
		{name: "exact", acc: 1, even: [2]float32{2, 3}, odd: [2]float32{0.5, 0.25}, want: 7.125},
		{name: "odd k first", acc: 0x1p24, even: [2]float32{1, 1}, odd: [2]float32{-0x1p24, 1}, want: 1, wantAMX: &zero},
		{name: "rounded twice", acc: 0x1p24, even: [2]float32{1, 1}, odd: [2]float32{1, 1}, want: 0x1p24},
		{name: "tiny product flushed", acc: 0, even: [2]float32{0x1p-70, 0x1p-70}, want: 0},
		{name: "negative tiny product flushed to -0", acc: 0, even: [2]float32{-0x1p-70, 0x1p-70}, want: negZero, wantAMX: &zero},
		{name: "negative tiny product, odd k", acc: 0, odd: [2]float32{-0x1p-70, 0x1p-70}, want: 0},
		{name: "tiny after each step", acc: 0, even: [2]float32{0x1p-64, 0x1p-63}, odd: [2]float32{0x1p-63, 0x1p-64}, want: 0},
		{name: "tininess after rounding", acc: 0x1p-126, odd: [2]float32{0x1p-75, -0x1p-76}, want: 0x1p-126},
		{name: "flushed where IEEE rounds up", acc: 0x1p-126, odd: [2]float32{0x1.8p-75, -0x1p-76}, want: 0, wantAMX: &minNormal},
		{name: "tiny product kept", acc: 0x1.8p-126, odd: [2]float32{-0x1p-63, 0x1p-64}, want: 0x1p-126, wantAMX: &onePointFive},
		{name: "tiny sum of normals", acc: 0x1p-125, even: [2]float32{-0x1.8p-63, 0x1p-63}, want: 0},
		{name: "exact cancellation", acc: 0x1p-100, even: [2]float32{-0x1p-50, 0x1p-50}, want: 0},
		{name: "-0 plus +0 and -0", acc: negZero, even: [2]float32{-1, 0}, want: 0},
		{name: "-0 plus -0 and -0", acc: negZero, even: [2]float32{-1, 0}, odd: [2]float32{-1, 0}, want: negZero, wantAMX: &zero},
		{name: "overflow", acc: 1, even: [2]float32{0x1p127, 0x1p127}, want: inf},
		{name: "product past MaxFloat32 brought back", acc: -0x1.fep127, even: [2]float32{0x1p127, 2}, want: 0x1p120},
		{name: "denormal input is zero", acc: 1, even: [2]float32{0x1p-130, 0x1p127}, want: 1},
		{name: "inf", acc: 1, even: [2]float32{-inf, 2}, want: -inf},
		{name: "inf times zero", acc: 1, odd: [2]float32{inf, 0}, want: float32(math.NaN())},
	}
	// Bits, not BFloat16FromFloat32: denormals must reach the kernel.
	bits := func(f float32) uint32 { return math.Float32bits(f) >> 16 }
	for _, kern := range bf16TestKernels() {
		mr, nr := kern.mr, kern.nr
		kc2 := kern.padK(2)
		for _, c := range cases {
			t.Run(kern.name+"/"+c.name, func(t *testing.T) {
				a := make([]uint32, kc2*mr)
				b := make([]uint32, kc2*nr)
				// The first pair step sets acc with the product that the
				// kernel computes first.
				first, second := bits(c.acc)<<16, bits(1)<<16
				if kern.rowsA {
					first, second = bits(c.acc), bits(1)
				}
				if math.Signbit(float64(c.acc)) && c.acc == 0 {
					// -0: +0·+0 first, then a negative product that flushes.
					first, second = bits(-0x1p-70), bits(0x1p-70)
					if kern.rowsA {
						first, second = first<<16, second<<16
					}
				}
				// The last two pair steps, after any zero padding.
				a[kern.aIndex(kc2, mr-1, kc2-2)], b[(kc2-1)*nr-1] = first, second
				a[kern.aIndex(kc2, mr-1, kc2-1)] = bits(c.even[0]) | bits(c.odd[0])<<16
				b[kc2*nr-1] = bits(c.even[1]) | bits(c.odd[1])<<16
				cc := make([]float32, mr*nr)
				kern.fn(kc2, a, b, cc, nr, false)
				want := c.want
				if kern.rowsA && c.wantAMX != nil {
					want = *c.wantAMX
				}
				if got := cc[len(cc)-1]; !sameFloat32(got, want) {
					t.Fatalf("got %v (%#08x), want %v (%#08x)", got, math.Float32bits(got), want, math.Float32bits(want))
				}
			})
		}
	}
}

// bf16TestKernels lists the kernels to test: those this machine runs and
// their pure-Go twins.
func bf16TestKernels() []*gemmBF16Kernel {
	var ks []*gemmBF16Kernel
	for _, k := range gemmBF16Kernels() {
		for _, x := range []*gemmBF16Kernel{k, k.goTwin()} {
			if !slices.Contains(ks, x) {
				ks = append(ks, x)
			}
		}
	}
	return ks
}

// padK rounds kc2 up to a whole number of the kernel's k tiles.
func (k *gemmBF16Kernel) padK(kc2 int) int {
	return gemmCeilDiv(kc2, k.tileK) * k.tileK
}

// aIndex is the index of row i, pair step p in an A micro-panel of kc2
// steps.
func (k *gemmBF16Kernel) aIndex(kc2, i, p int) int {
	if k.rowsA {
		return p/amxTileK*amxMR*amxTileK + i*amxTileK + p%amxTileK
	}
	return p*k.mr + i
}

// bf16Random returns random bf16 bits of the given class: 0 values in ±[1/16,
// 16), 1 tiny normals whose products underflow, 2 any bits (NaN, Inf and
// denormals included), 3 denormals and zeros.
func bf16Random(rng *rand.Rand, class int) uint32 {
	switch class {
	case 0:
		return rng.Uint32()&0x807f | uint32(123+rng.IntN(8))<<7
	case 1:
		return rng.Uint32()&0x807f | uint32(1+rng.IntN(70))<<7
	case 2:
		return rng.Uint32() & 0xffff
	default:
		return rng.Uint32() & 0x807f
	}
}

// TestGemmBF16MicroKernel runs each micro-kernel on random panels, ordinary
// and hostile (denormals, underflowing and overflowing products, NaN, Inf),
// against the pure-Go twin: bit for bit, NaN payloads aside.
func TestGemmBF16MicroKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, kern := range gemmBF16Kernels() {
		mr, nr := kern.mr, kern.nr
		for _, kc2 := range []int{1, 2, 7, 128, 517} {
			kc2 := kern.padK(kc2)
			for _, mix := range []string{"normal", "tiny", "hostile"} {
				for _, add := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/kc2=%d/%s/add=%v", kern.name, kc2, mix, add), func(t *testing.T) {
						class := func(x int) int {
							switch mix {
							case "normal":
								return 0
							case "tiny":
								return x % 2
							}
							return x % 4
						}
						a := make([]uint32, kc2*mr)
						b := make([]uint32, kc2*nr)
						for i := range a {
							a[i] = bf16Random(rng, class(i)) | bf16Random(rng, class(i+1))<<16
						}
						for i := range b {
							b[i] = bf16Random(rng, class(i+2)) | bf16Random(rng, class(i/3))<<16
						}
						const ldc = 101
						c0 := make([]float32, mr*ldc)
						for i := range c0 {
							c0[i] = rng.Float32()*2 - 1
						}
						got := append([]float32(nil), c0...)
						kern.fn(kc2, a, b, got, ldc, add)
						want := append([]float32(nil), c0...)
						kern.goTwin().fn(kc2, a, b, want, ldc, add)
						for x := range got {
							if x%ldc >= nr && got[x] != c0[x] {
								t.Fatalf("kernel wrote outside its tile at (%d,%d)", x/ldc, x%ldc)
							}
							if !sameFloat32(got[x], want[x]) {
								t.Fatalf("(%d,%d): kernel %v (%#08x), Go twin %v (%#08x)", x/ldc, x%ldc,
									got[x], math.Float32bits(got[x]), want[x], math.Float32bits(want[x]))
							}
						}
					})
				}
			}
		}
	}
}

// TestGemmBF16MicroKernelStore runs each kernel's bf16-storing variant
// against the pure-Go twin's, bit for bit (NaN payloads aside), for several
// alpha and beta, C holding NaN where beta == 0 must ignore it.
func TestGemmBF16MicroKernelStore(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	scalars := [][2]float32{{1, 0}, {0.75, 0}, {1, 1}, {-0.5, 2}, {0x1p-120, 0x1p-10}, {3, float32(math.Copysign(0, -1))}}
	for _, kern := range gemmBF16Kernels() {
		mr, nr := kern.mr, kern.nr
		for _, kc2 := range []int{0, 1, 3, 200} {
			kc2 := kern.padK(kc2)
			for _, mix := range []string{"normal", "hostile"} {
				for _, sc := range scalars {
					t.Run(fmt.Sprintf("%s/kc2=%d/%s/alpha=%v,beta=%v", kern.name, kc2, mix, sc[0], sc[1]), func(t *testing.T) {
						class := func(x int) int {
							if mix == "normal" {
								return 0
							}
							return x % 4
						}
						a := make([]uint32, kc2*mr)
						b := make([]uint32, kc2*nr)
						for i := range a {
							a[i] = bf16Random(rng, class(i)) | bf16Random(rng, class(i+1))<<16
						}
						for i := range b {
							b[i] = bf16Random(rng, class(i+3)) | bf16Random(rng, class(i/5))<<16
						}
						const ldc = 45
						c0 := make([]half.BFloat16, mr*ldc)
						for i := range c0 {
							c0[i] = half.BFloat16(bf16Random(rng, class(i+2)))
						}
						got := append([]half.BFloat16(nil), c0...)
						kern.store(kc2, a, b, got, ldc, sc[0], sc[1])
						want := append([]half.BFloat16(nil), c0...)
						kern.goTwin().store(kc2, a, b, want, ldc, sc[0], sc[1])
						for x := range got {
							if got[x] != want[x] && !(got[x].IsNaN() && want[x].IsNaN()) {
								t.Fatalf("(%d,%d): kernel %v (%#04x), Go twin %v (%#04x)", x/ldc, x%ldc, got[x], uint16(got[x]), want[x], uint16(want[x]))
							}
							if x%ldc >= nr && got[x] != c0[x] {
								t.Fatalf("kernel wrote outside its tile at (%d,%d)", x/ldc, x%ldc)
							}
						}
					})
				}
			}
		}
	}
}

// TestGemmBF16PackPairRows checks the packing routines this machine uses
// against gemmBF16PackPairRowsGo and gemmBF16PackGatherRowsGo over widths,
// strides and row steps.
func TestGemmBF16PackPairRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, stride := range []int{1, 12, 15, 16, 17, 32} {
		for _, w := range []int{0, 1, stride / 2, stride - 1, stride} {
			for _, steps := range []int{1, 2, 9} {
				w := max(w, 0)
				ld := w + rng.IntN(5)
				src := make([]half.BFloat16, (2*steps-1)*ld+w)
				for i := range src {
					src[i] = half.BFloat16(rng.Uint32())
				}
				fill := func() []uint32 {
					d := make([]uint32, steps*stride+3)
					for i := range d {
						d[i] = 0xdeadbeef
					}
					return d
				}
				got, want := fill(), fill()
				gemmBF16PackPairRows(got[:steps*stride], src, ld, steps, w, stride)
				gemmBF16PackPairRowsGo(want[:steps*stride], src, ld, steps, w, stride)
				if !slices.Equal(got, want) {
					t.Fatalf("pair rows: stride=%d w=%d steps=%d ld=%d:\n got %x\nwant %x", stride, w, steps, ld, got, want)
				}
				// w stored rows of ld2 ≥ 2·steps values.
				ld2 := 2*steps + rng.IntN(3)
				src2 := make([]half.BFloat16, max((w-1)*ld2+2*steps, 0))
				for i := range src2 {
					src2[i] = half.BFloat16(rng.Uint32())
				}
				got, want = fill(), fill()
				gemmBF16PackGatherRows(got[:steps*stride], src2, ld2, steps, w, stride)
				gemmBF16PackGatherRowsGo(want[:steps*stride], src2, ld2, steps, w, stride)
				if !slices.Equal(got, want) {
					t.Fatalf("gather rows: stride=%d w=%d steps=%d ld=%d:\n got %x\nwant %x", stride, w, steps, ld2, got, want)
				}
			}
		}
	}
}

// TestGemmBF16AsmGenerated regenerates gemm_bf16_amd64.s where GNU as and
// objdump are present and checks that the committed file is up to date.
func TestGemmBF16AsmGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go run")
	}
	gotool := testenv.Programs(t, testenv.GoTool, "go")[0]
	testenv.Programs(t, testenv.Binutils, "as", "objdump")
	out := t.TempDir() + "/gemm_bf16_amd64.s"
	// With its tools present, a generator that fails is a failure: skipping would let a
	// stale committed file pass.
	if b, err := exec.Command(gotool, "run", "./internal/asmgen", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("asmgen: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("gemm_bf16_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatal("gemm_bf16_amd64.s is not what asmgen writes: run go generate ./backend/cpu/")
	}
}

// newBF16Case is newGemmCase with inputs rounded to bf16 and its reference
// product recomputed from them.
func newBF16Case(rng *rand.Rand, sh gemmShape) *gemmCase {
	g := newGemmCase(rng, sh)
	for _, x := range [][]float64{g.opA, g.opB, g.c0} {
		for i, v := range x {
			x[i] = half.BFloat16FromFloat64(v).Float64()
		}
	}
	for i := range sh.m {
		for j := range sh.n {
			var p, s float64
			for l := range sh.k {
				x := g.opA[i*sh.k+l] * g.opB[l*sh.n+j]
				p += x
				s += math.Abs(x)
			}
			g.p[i*sh.n+j], g.s[i*sh.n+j] = p, s
		}
	}
	return g
}

// checkBF16 is gemmCase.check for a bf16 product: run gets the operands as
// bf16 and the tolerance adds the final rounding to bf16 to the float32
// accumulation bound.
func (g *gemmCase) checkBF16(t *testing.T, transA, transB bool, alpha, beta float64, pad int,
	run func(a []half.BFloat16, lda int, b []half.BFloat16, ldb int, c []half.BFloat16, ldc int),
) {
	t.Helper()
	a, lda := gemmStore[float64](g.opA, g.m, g.k, transA, pad)
	b, ldb := gemmStore[float64](g.opB, g.k, g.n, transB, pad)
	c, ldc := gemmStore[float64](g.c0, g.m, g.n, false, pad)
	if beta == 0 {
		for i := range g.m {
			for j := range g.n {
				c[i*ldc+j] = math.NaN()
			}
		}
	}
	conv := func(x []float64) []half.BFloat16 {
		y := make([]half.BFloat16, len(x))
		half.Float64ToBFloat16(y, x)
		return y
	}
	cb := conv(c)
	run(conv(a), lda, conv(b), ldb, cb, ldc)
	for i := range g.m {
		for j := range ldc {
			got := cb[i*ldc+j].Float64()
			if j >= g.n {
				if !math.IsNaN(got) {
					t.Fatalf("C padding (%d,%d) overwritten with %v", i, j, got)
				}
				continue
			}
			want := alpha * g.p[i*g.n+j]
			bound := math.Abs(alpha) * g.s[i*g.n+j]
			if beta != 0 {
				want += beta * g.c0[i*g.n+j]
				bound += math.Abs(beta * g.c0[i*g.n+j])
			}
			acc := float64(g.k+3)*0x1p-24*bound + float64(g.k)*0x1p-126
			tol := 0x1p-8*(math.Abs(want)+acc) + acc
			if math.IsNaN(got) || math.Abs(got-want) > tol {
				t.Fatalf("C[%d][%d] = %v, want %v ± %v", i, j, got, want, tol)
			}
		}
	}
}

var gemmBF16Shapes = []gemmShape{
	{1, 1, 1},
	{1, 1, 2},
	{2, 3, 3},
	{1, 17, 5},
	{19, 1, 7},
	{1, 1, 301},
	{12, 32, 256},
	{13, 33, 257},
	{37, 53, 71},
	{64, 64, 64},
	{129, 257, 65},
	{3, 4100, 9},               // more than one NC column block
	{31, 45, 2*gemmBF16KC + 3}, // three k slices, the last odd
	{20, 40, gemmBF16KC + 6},   // two k slices
	{300, 200, 500},            // several row tasks
	{97, 101, 1031},            // primes
	{150, 33, 15},              // short k, many row panels
	{11, 300, 2},               // one pair step
	{2, 2, gemmBF16KC + 1},
	{96, 70, 64},   // AMX: A read in place, edge columns
	{33, 40, 96},   // AMX: one panel in place, one packed
	{64, 64, 32},   // one k tile
	{65, 33, 4096}, // in place, the longest unsliced k
}

// TestGemmBF16 checks whole products with every kernel against a float64
// reference of the bf16 inputs, over transposes, strides wider than the
// rows and alpha/beta pairs; the pure-Go kernel on the smaller shapes only.
func TestGemmBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, sh := range gemmBF16Shapes {
		if testing.Short() && sh.m*sh.n*sh.k > 1<<20 {
			continue
		}
		g := newBF16Case(rng, sh)
		for _, kern := range gemmBF16Kernels() {
			// The pure-Go twin is slow: where the assembly kernel runs too,
			// it skips the larger shapes; alone (purego), it runs them with
			// fewer layouts and scalars.
			slow := kern == gemmBF16KernelGo12x32
			big := sh.m*sh.n*sh.k > 1<<21
			if slow && big && len(gemmBF16Kernels()) > 1 {
				continue
			}
			for ti, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
				for si, sc := range gemmScalars {
					if slow && (si%2 == 1 || big && (ti+si)%3 != 0) {
						continue
					}
					pad := si % 3
					name := fmt.Sprintf("%s/%dx%dx%d/tA=%v,tB=%v/alpha=%v,beta=%v", kern.name, sh.m, sh.n, sh.k, tr[0], tr[1], sc.alpha, sc.beta)
					t.Run(name, func(t *testing.T) {
						g.checkBF16(t, tr[0], tr[1], sc.alpha, sc.beta, pad, func(a []half.BFloat16, lda int, b []half.BFloat16, ldb int, c []half.BFloat16, ldc int) {
							gemmBF16With(kern, Workers(), tr[0], tr[1], sh.m, sh.n, sh.k, float32(sc.alpha), a, lda, b, ldb, float32(sc.beta), c, ldc)
						})
					})
				}
			}
		}
	}
}

// bf16Matrix returns n random bf16 values in (-1, 1).
func bf16Matrix(rng *rand.Rand, n int) []half.BFloat16 {
	x := make([]half.BFloat16, n)
	for i := range x {
		x[i] = half.BFloat16FromFloat32(rng.Float32()*2 - 1)
	}
	return x
}

// TestGemmBF16Deterministic checks that whole products agree bit for bit
// between each micro-kernel and its pure-Go twin and across worker counts
// (rows or columns split among the workers): the summation order is fixed by
// the shape and the kernel's arithmetic (VDPBF16PS or AMX) alone.
func TestGemmBF16Deterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	// {37, 4133, 71} and {128, 512, 300}: few rows of a transposed A against
	// more columns, which two or more workers split by columns.
	for _, sh := range []gemmShape{{37, 4133, 71}, {128, 512, 300}} {
		for _, kern := range bf16TestKernels() {
			if !bf16SplitsColumns(kern, 2, true, sh.m, sh.n, sh.k) {
				t.Fatalf("%v: %s, 2 workers: the columns are not split", sh, kern.name)
			}
		}
	}
	// {256, 200, 192}: the MLP's 256 rows (22 row panels, the last of 4 rows)
	// read in place, alpha 1, split by rows; {128, 300, 256}: 128 rows, which
	// two workers split by columns with every in-place kernel.
	inPlace, inPlaceCols := gemmShape{256, 200, 192}, gemmShape{128, 300, 256}
	for _, kern := range bf16TestKernels() {
		if kern.direct != nil && !bf16SplitsColumns(kern, 2, false, inPlaceCols.m, inPlaceCols.n, inPlaceCols.k) {
			t.Fatalf("%v: %s, 2 workers, A in place: the columns are not split", inPlaceCols, kern.name)
		}
	}
	for _, sh := range []gemmShape{{20, 40, 2*gemmBF16KC + 100}, {37, 4133, 71}, {300, 64, 129}, {128, 512, 300}, inPlace, inPlaceCols} {
		transA := sh != inPlace && sh != inPlaceCols
		lda := sh.m
		if !transA {
			lda = sh.k
		}
		a := bf16Matrix(rng, sh.m*sh.k)
		b := bf16Matrix(rng, sh.k*sh.n)
		c0 := bf16Matrix(rng, sh.m*sh.n)
		wants := map[*gemmBF16Kernel][]half.BFloat16{}
		for _, kern := range bf16TestKernels() {
			for _, w := range []int{1, 2, 3, 7, 16} {
				if kern == kern.goTwin() && w > 2 && len(gemmBF16Kernels()) > 1 {
					continue
				}
				c := append([]half.BFloat16(nil), c0...)
				alpha := float32(0.75)
				if !transA {
					alpha = 1 // the in-place kernels' case
				}
				gemmBF16With(kern, w, transA, false, sh.m, sh.n, sh.k, alpha, a, lda, b, sh.n, 0.5, c, sh.n)
				want := wants[kern.goTwin()]
				if want == nil {
					wants[kern.goTwin()] = c
					continue
				}
				for i := range c {
					if c[i] != want[i] {
						t.Fatalf("%v: %s, workers=%d: element %d is %v, first run %v", sh, kern.name, w, i, c[i], want[i])
					}
				}
			}
		}
	}
}

// bf16SplitsColumns says whether GemmBF16 on workers workers splits the
// columns of an m×n×k product among them (gemmBF16Call.splitColumns).
func bf16SplitsColumns(kern *gemmBF16Kernel, workers int, transA bool, m, n, k int) bool {
	if 2*float64(m)*float64(n)*float64(k) < gemmSerialFlops {
		return false
	}
	g := &gemmBF16Call{kern: kern, transA: transA}
	g.plan(m, n, k, kern.mr, kern.nr, workers, gemmSizes{kc: gemmBF16KC, mc: gemmBF16MC, nc: gemmBF16NC, evenK: true})
	return g.splitColumns()
}

// gemmBF16HashEnv makes TestGemmBF16Threads's child process print a hash of
// a product instead of testing.
const gemmBF16HashEnv = "GAMP_TEST_GEMM_BF16_HASH"

// TestGemmBF16Threads runs one product in child processes with
// GAMP_CPU_THREADS=1, 2 and 3 (the pool size is fixed per process) and
// checks that they print the same result.
func TestGemmBF16Threads(t *testing.T) {
	if os.Getenv(gemmBF16HashEnv) != "" {
		rng := rand.New(rand.NewPCG(17, 18))
		const m, n, k = 333, 257, gemmBF16KC + 500 // two k slices
		a, b, c := bf16Matrix(rng, k*m), bf16Matrix(rng, n*k), bf16Matrix(rng, m*n)
		GemmBF16(true, true, m, n, k, 1, a, m, b, k, 1, c, n)
		h := sha256.Sum256(unsafe.Slice((*byte)(unsafe.Pointer(&c[0])), 2*len(c)))
		fmt.Printf("hash=%s workers=%d\n", hex.EncodeToString(h[:]), Workers())
		return
	}
	if testing.Short() {
		t.Skip("starts child processes")
	}
	var first string
	for _, threads := range []string{"1", "2", "3"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGemmBF16Threads$", "-test.count=1")
		cmd.Env = append(os.Environ(), gemmBF16HashEnv+"=1", poolThreadsEnv+"="+threads)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GAMP_CPU_THREADS=%s: %v\n%s", threads, err, out)
		}
		line := ""
		for l := range strings.Lines(string(out)) {
			if strings.HasPrefix(l, "hash=") {
				line = strings.TrimSpace(l)
			}
		}
		if !strings.HasSuffix(line, "workers="+threads) {
			t.Fatalf("GAMP_CPU_THREADS=%s: child printed %q", threads, out)
		}
		h, _, _ := strings.Cut(line, " ")
		t.Logf("GAMP_CPU_THREADS=%s: %s", threads, h)
		if first == "" {
			first = h
		} else if h != first {
			t.Fatalf("GAMP_CPU_THREADS=%s gives %s, GAMP_CPU_THREADS=1 %s", threads, h, first)
		}
	}
}

// TestMatMulBF16 runs BFloat16 MatMul (GemmBF16 where the CPU has
// AVX512_BF16, the float32 GEMM otherwise) over batches with broadcast
// operands, offsets, strides and beta, against a float64 reference.
func TestMatMulBF16(t *testing.T) {
	be, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(19, 20))
	type mmCase struct {
		batch, m, n, k   int
		transA, transB   bool
		strideA, strideB int // 0: broadcast, else 1: dense
		alpha, beta      float32
		padA, padB, padC int
	}
	cases := []mmCase{
		{1, 1, 1, 1, false, false, 1, 1, 1, 0, 0, 0, 0},
		{3, 5, 7, 9, false, false, 1, 1, 1, 0, 1, 2, 3},
		{4, 13, 33, 31, true, false, 0, 1, 1, 1, 0, 0, 1},
		{2, 129, 65, 257, false, true, 1, 0, 2, 0.5, 3, 1, 0},
		{5, 12, 32, 2, true, true, 0, 0, 1, -1, 0, 0, 0},
		{1, 64, 300, 1100, false, true, 1, 1, -0.5, 0, 1, 1, 1},
		{6, 3, 4, 0, false, false, 1, 1, 1, 2, 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			ra, ca := c.m, c.k
			if c.transA {
				ra, ca = c.k, c.m
			}
			rb, cb := c.k, c.n
			if c.transB {
				rb, cb = c.n, c.k
			}
			lda, ldb, ldc := ca+c.padA, cb+c.padB, c.n+c.padC
			sizeA, sizeB, sizeC := max(ra*lda, 1), max(rb*ldb, 1), c.m*ldc
			strideA, strideB := c.strideA*sizeA, c.strideB*sizeB
			offA, offB, offC := 3, 5, 7
			alloc := func(n int) ([]half.BFloat16, backend.Storage) {
				s, err := be.Alloc(backend.BFloat16, n)
				if err != nil {
					t.Fatal(err)
				}
				x := st(s).bf16()
				copy(x, bf16Matrix(rng, n))
				return x, s
			}
			av, as := alloc(offA + max(strideA*(c.batch-1), 0) + sizeA)
			bv, bs := alloc(offB + max(strideB*(c.batch-1), 0) + sizeB)
			cv, cs := alloc(offC + sizeC*c.batch)
			c0 := append([]half.BFloat16(nil), cv...)
			be.MatMul(backend.MatMulArgs{
				A: as, B: bs, C: cs, OffA: offA, OffB: offB, OffC: offC,
				Batch: c.batch, M: c.m, N: c.n, K: c.k, TransA: c.transA, TransB: c.transB,
				LDA: lda, LDB: ldb, LDC: ldc, StrideA: strideA, StrideB: strideB, StrideC: sizeC,
				Alpha: c.alpha, Beta: c.beta,
			})
			for bi := range c.batch {
				for i := range c.m {
					for j := range ldc {
						x := offC + bi*sizeC + i*ldc + j
						if j >= c.n {
							if cv[x] != c0[x] {
								t.Fatalf("batch %d: C padding (%d,%d) changed", bi, i, j)
							}
							continue
						}
						var p, s float64
						for l := range c.k {
							ai := offA + bi*strideA + i*lda + l
							if c.transA {
								ai = offA + bi*strideA + l*lda + i
							}
							bj := offB + bi*strideB + l*ldb + j
							if c.transB {
								bj = offB + bi*strideB + j*ldb + l
							}
							v := av[ai].Float64() * bv[bj].Float64()
							p += v
							s += math.Abs(v)
						}
						want := float64(c.alpha)*p + float64(c.beta)*c0[x].Float64()
						acc := float64(c.k+3)*0x1p-24*(math.Abs(float64(c.alpha))*s+math.Abs(float64(c.beta)*c0[x].Float64())) + float64(c.k)*0x1p-126
						tol := 0x1p-8*(math.Abs(want)+acc) + acc
						if got := cv[x].Float64(); !(math.Abs(got-want) <= tol) {
							t.Fatalf("batch %d: C[%d][%d] = %v, want %v ± %v", bi, i, j, got, want, tol)
						}
					}
				}
			}
		})
	}
}

func TestGemmBF16EdgeCases(t *testing.T) {
	bf := func(xs ...float32) []half.BFloat16 {
		y := make([]half.BFloat16, len(xs))
		half.Float32ToBFloat16(y, xs)
		return y
	}
	nan := float32(math.NaN())
	t.Run("k=0 beta=0 overwrites NaN", func(t *testing.T) {
		c := bf(nan, nan, nan, nan)
		GemmBF16(false, false, 2, 2, 0, 1, nil, 1, nil, 2, 0, c, 2)
		gemmEqual(t, c, bf(0, 0, 0, 0))
	})
	t.Run("k=0 scales by beta", func(t *testing.T) {
		c := bf(1, 2, 3, 4, 5, 6)
		GemmBF16(true, true, 2, 2, 0, 1, nil, 2, nil, 1, 2, c, 3)
		gemmEqual(t, c, bf(2, 4, 3, 8, 10, 6))
	})
	t.Run("alpha=0 ignores A and B", func(t *testing.T) {
		a := bf(nan, nan)
		c := bf(1, 2)
		GemmBF16(false, false, 1, 2, 1, 0, a, 1, a, 2, 3, c, 2)
		gemmEqual(t, c, bf(3, 6))
	})
	t.Run("beta=0 with NaN C and k>0", func(t *testing.T) {
		c := bf(nan, nan)
		GemmBF16(false, false, 1, 2, 2, 2, bf(1, 2), 2, bf(1, 2, 3, 4), 2, 0, c, 2)
		gemmEqual(t, c, bf(14, 20))
	})
	t.Run("rounds once", func(t *testing.T) {
		// 1 + 2^-9 + 2^-9: each partial sum would round back to 1 in bf16.
		c := bf(0)
		GemmBF16(false, false, 1, 1, 3, 1, bf(1, 0x1p-9, 0x1p-9), 3, bf(1, 1, 1), 1, 0, c, 1)
		gemmEqual(t, c, bf(1+0x1p-8))
	})
	t.Run("subnormal result kept", func(t *testing.T) {
		c := bf(0)
		GemmBF16(false, false, 1, 1, 1, 0x1p-10, bf(0x1p-60), 1, bf(0x1p-60), 1, 0, c, 1)
		gemmEqual(t, c, bf(0x1p-130))
	})
}

func TestGemmBF16Panics(t *testing.T) {
	x := make([]half.BFloat16, 16)
	for name, f := range map[string]func(){
		"negative m":   func() { GemmBF16(false, false, -1, 2, 2, 1, x, 2, x, 2, 0, x, 2) },
		"lda < k":      func() { GemmBF16(false, false, 2, 2, 3, 1, x, 2, x, 2, 0, x, 2) },
		"lda < m (tA)": func() { GemmBF16(true, false, 3, 2, 2, 1, x, 2, x, 2, 0, x, 2) },
		"ldb < k (tB)": func() { GemmBF16(false, true, 2, 2, 3, 1, x, 3, x, 2, 0, x, 2) },
		"ldc < n":      func() { GemmBF16(false, false, 2, 3, 2, 1, x, 2, x, 3, 0, x, 2) },
		"short A":      func() { GemmBF16(false, false, 4, 2, 5, 1, x, 5, x, 2, 0, x, 2) },
		"short C":      func() { GemmBF16(false, false, 9, 2, 1, 1, x, 1, x, 2, 0, x, 2) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil {
					t.Fatal("no panic")
				} else if _, ok := r.(gemmArgError); !ok {
					t.Fatalf("panic value %#v, want a gemmArgError", r)
				}
			}()
			f()
		})
	}
}

func TestGemmBF16NoAllocs(t *testing.T) {
	if gemmBuildSetting("-race") == "true" {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	for _, sh := range []gemmShape{{256, 256, 256}, {64, 64, gemmBF16KC + 1}} { // one k slice, two
		n, k := sh.n, sh.k
		a, b, c := make([]half.BFloat16, n*k), make([]half.BFloat16, n*k), make([]half.BFloat16, n*n)
		f := func() { GemmBF16(false, true, n, n, k, 1, a, k, b, k, 0, c, n) }
		// Warm up under AllocsPerRun's GOMAXPROCS(1) too: there the pool's
		// workers run only when the caller blocks, so each may still hold a
		// previous call's job when the next call starts, and the free list
		// of jobs has to grow to cover them first.
		testing.AllocsPerRun(10, f)
		allocs := testing.AllocsPerRun(10, func() {
			GemmBF16(false, true, n, n, k, 1, a, k, b, k, 0, c, n)
		})
		if allocs != 0 {
			t.Fatalf("k=%d: %v allocations per call, want 0", k, allocs)
		}
	}
}

// BenchmarkGemmBF16 times GemmBF16 on square row-major products C = A·B at
// 256–2048 next to the float32 Gemm and to what MatMul did for bf16 before
// (widen A and B to float32, float32 Gemm, round C), all on every core.
// GFLOP/s counts 2·n³ operations whatever the precision.
func BenchmarkGemmBF16(b *testing.B) {
	for _, n := range gemmBenchSizes {
		x, y, _ := gemmBenchOperands(n)
		xb, yb, zb := make([]half.BFloat16, n*n), make([]half.BFloat16, n*n), make([]half.BFloat16, n*n)
		half.Float32ToBFloat16(xb, x)
		half.Float32ToBFloat16(yb, y)
		b.Run(fmt.Sprintf("bf16/%d", n), func(b *testing.B) {
			for b.Loop() {
				GemmBF16(false, false, n, n, n, 1, xb, n, yb, n, 0, zb, n)
			}
			reportGFLOPs(b, n)
		})
		b.Run(fmt.Sprintf("f32/%d", n), func(b *testing.B) {
			z := make([]float32, n*n)
			for b.Loop() {
				Gemm(false, false, n, n, n, 1, x, n, y, n, 0, z, n)
			}
			reportGFLOPs(b, n)
		})
		b.Run(fmt.Sprintf("bf16-widened/%d", n), func(b *testing.B) {
			for b.Loop() {
				xw, yw, zw := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
				half.BFloat16ToFloat32(xw, xb)
				half.BFloat16ToFloat32(yw, yb)
				Gemm(false, false, n, n, n, 1, xw, n, yw, n, 0, zw, n)
				half.Float32ToBFloat16(zb, zw)
			}
			reportGFLOPs(b, n)
		})
	}
}

// BenchmarkGemmBF16MicroKernel measures each bf16 micro-kernel alone on
// panels that stay in L1, next to the float32 one: the ceilings.
func BenchmarkGemmBF16MicroKernel(b *testing.B) {
	const kc = 512 // k values: 256 pair steps
	for _, kern := range gemmBF16Kernels() {
		b.Run(kern.name, func(b *testing.B) {
			x := make([]uint32, kc/2*kern.mr)
			y := make([]uint32, kc/2*kern.nr)
			c := make([]float32, kern.mr*kern.nr)
			for b.Loop() {
				kern.fn(kc/2, x, y, c, kern.nr, false)
			}
			b.ReportMetric(2*float64(kern.mr*kern.nr*kc)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
	kern := gemmKernel32
	b.Run("f32-"+kern.name, func(b *testing.B) {
		x := make([]float32, kc*kern.mr)
		y := make([]float32, kc*kern.nr)
		c := make([]float32, kern.mr*kern.nr)
		for b.Loop() {
			kern.fn(kc, x, y, c, kern.nr)
		}
		b.ReportMetric(2*float64(kern.mr*kern.nr*kc)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}

// TestGemmBF16PaddedA is TestGemmPaddedA for bf16: products whose A the kernel
// reads in place at a stride of a multiple of 4 KB (2048 bf16 words: the
// second linear layer of a width-512 transformer's MLP, and its first layer's
// input gradient) are copied off it (gemmPadA) and must leave the bits of
// the same product with A at a stride that is not, for every micro-kernel
// that reads A in place, several worker counts, a scaled C and a bias. The
// steady-state call must not allocate.
func TestGemmBF16PaddedA(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const k = 2048
	for _, kern := range gemmBF16Kernels() {
		if kern.direct == nil {
			continue
		}
		for _, sh := range []struct{ m, n, lda int }{{256, 100, 2048}, {30, 70, 4096}, {25, 33, 2048}} {
			a := make([]half.BFloat16, (sh.m-1)*sh.lda+k)
			ref := make([]half.BFloat16, sh.m*(k+6))
			for i := range sh.m {
				for p := range k {
					v := half.BFloat16FromFloat32(float32(rng.NormFloat64()))
					a[i*sh.lda+p], ref[i*(k+6)+p] = v, v
				}
			}
			if !gemmAliasedRows[half.BFloat16](sh.lda) || gemmAliasedRows[half.BFloat16](k+6) {
				t.Fatal("strides do not exercise the copy")
			}
			b := make([]half.BFloat16, sh.n*k)
			bias := make([]half.BFloat16, sh.n)
			c0 := make([]half.BFloat16, sh.m*sh.n)
			for _, s := range [][]half.BFloat16{b, bias, c0} {
				for i := range s {
					s[i] = half.BFloat16FromFloat32(float32(rng.NormFloat64()))
				}
			}
			for _, w := range []int{1, 2, 3} {
				for _, beta := range []float32{0, 0.5} {
					for _, withBias := range []bool{false, true} {
						var bs []half.BFloat16
						if withBias {
							bs = bias
						}
						got, want := slices.Clone(c0), slices.Clone(c0)
						gemmBF16WithBias(kern, w, false, true, sh.m, sh.n, k, 1, a, sh.lda, b, k, beta, bs, got, sh.n)
						gemmBF16WithBias(kern, w, false, true, sh.m, sh.n, k, 1, ref, k+6, b, k, beta, bs, want, sh.n)
						for i := range want {
							if got[i] != want[i] {
								t.Fatalf("%s m=%d n=%d lda=%d workers=%d beta=%v bias=%v: element %d is %#04x, want %#04x",
									kern.name, sh.m, sh.n, sh.lda, w, beta, withBias, i, uint16(got[i]), uint16(want[i]))
							}
						}
					}
				}
			}
		}
	}
	if gemmBuildSetting("-race") == "true" {
		return // sync.Pool drops items at random under the race detector
	}
	const m, n = 256, 256
	a, b, c := make([]half.BFloat16, m*k), make([]half.BFloat16, n*k), make([]half.BFloat16, m*n)
	GemmBF16(false, true, m, n, k, 1, a, k, b, k, 0, c, n)
	if allocs := testing.AllocsPerRun(20, func() { GemmBF16(false, true, m, n, k, 1, a, k, b, k, 0, c, n) }); allocs != 0 {
		t.Fatalf("%v allocations per call with A copied, want 0", allocs)
	}
}
