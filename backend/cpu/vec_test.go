package cpu

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gamp-ml/gamp/internal/testenv"
)

// vecInputs returns n float32s: mostly uniform in ±4, with zeros of both signs,
// subnormals, huge values, infinities and NaNs mixed in.
func vecInputs(rng *rand.Rand, n int) []float32 {
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, 3e38, -3e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1, -1}
	x := make([]float32, n)
	for i := range x {
		if rng.IntN(8) == 0 {
			x[i] = special[rng.IntN(len(special))]
		} else {
			x[i] = float32(rng.Float64()*8 - 4)
		}
	}
	return x
}

// sameBits reports whether a and b are the same float32, any two NaNs counting as
// equal (x86 and Go pick NaN payloads by operand order).
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

func sameBits64(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (a != a && b != b)
}

// vecLens are the lengths the loops are tried at: every length to 200, then a few
// that cross the four-register rounds.
var vecLens = func() []int {
	var ns []int
	for n := range 201 {
		ns = append(ns, n)
	}
	return append(ns, 255, 256, 257, 1000, 1024, 4099)
}()

// TestVecImplsSelected checks the dispatch: the kernels use the first implementation
// listed, and none under purego.
func TestVecImplsSelected(t *testing.T) {
	if len(vecImpls) == 0 {
		if vec != nil {
			t.Fatal("vec is set but no implementation is listed")
		}
		t.Skip("no vector implementation on this machine or build")
	}
	if vec != vecImpls[0] {
		t.Fatalf("vec is %s, want the first listed, %s", vec.name, vecImpls[0].name)
	}
	for _, v := range vecImpls {
		t.Logf("vector implementation: %s", v.name)
	}
}

// TestVecOp compares every implementation's op loop with vecOpGo bit for bit, at every
// length to 200, at four misalignments, out of place and in place.
func TestVecOp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, impl := range vecImpls {
		for op := range numVecOps {
			for _, n := range vecLens {
				for mis := range 4 {
					a := vecInputs(rng, n+mis)[mis:]
					b := vecInputs(rng, n+mis+1)[mis:]
					if op.binary() {
						b = b[:n]
					} else {
						b = b[:1]
					}
					want := make([]float32, n)
					vecOpGo(op, want, a, b)
					tail := b
					m := n &^ 15
					if op.binary() {
						tail = b[m:]
					}
					got := make([]float32, n+mis)[mis:]
					if m > 0 {
						impl.op(op, &got[0], &a[0], &b[0], m)
					}
					vecOpGo(op, got[m:], a[m:], tail)
					for i := range want {
						if !sameBits(got[i], want[i]) {
							t.Fatalf("%s %s n=%d mis=%d: [%d] = %v (%#x), twin %v (%#x); a=%v b=%v", impl.name, op, n, mis, i,
								got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]), a[i], b[min(i, len(b)-1)])
						}
					}
					// In place: dst is a.
					inPlace := slices.Clone(a)
					if m > 0 {
						impl.op(op, &inPlace[0], &inPlace[0], &b[0], m)
					}
					vecOpGo(op, inPlace[m:], inPlace[m:], tail)
					for i := range want {
						if !sameBits(inPlace[i], want[i]) {
							t.Fatalf("%s %s n=%d in place: [%d] = %v, twin %v", impl.name, op, n, i, inPlace[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestVecWrappers checks vecBinary and vecScalar, which pick the implementation and
// run the tail, against vecOpGo.
func TestVecWrappers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for op := range numVecOps {
		for _, n := range vecLens {
			a, b := vecInputs(rng, n+1)[1:], vecInputs(rng, n)
			want, got := make([]float32, n), make([]float32, n)
			if op.binary() {
				vecOpGo(op, want, a, b)
				vecBinary(op, got, a, b)
			} else {
				s := float32(rng.Float64()*4 - 2)
				vecOpGo(op, want, a, []float32{s})
				vecScalar(op, got, a, s)
			}
			for i := range want {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("%s n=%d: [%d] = %v, twin %v", op, n, i, got[i], want[i])
				}
			}
		}
	}
}

func TestVecScaleFinite(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, impl := range append([]*vecImpl{nil}, vecImpls...) {
		for _, n := range vecLens {
			for mis := range 3 {
				for _, bad := range []float32{0, float32(math.Inf(-1)), float32(math.NaN()), 3e38} {
					x := make([]float32, n+mis)[mis:]
					for i := range x {
						x[i] = float32(rng.Float64()*8 - 4)
					}
					if bad != 0 && n > 0 {
						x[rng.IntN(n)] = bad
					}
					k := float32(1 << 20)
					want := slices.Clone(x)
					wantOK := scaleFinite(want, k)
					got := slices.Clone(x)
					var gotOK bool
					if impl == nil {
						gotOK = vecScaleFinite(got, k)
					} else {
						m := n &^ 15
						gotOK = true
						if m > 0 {
							gotOK = impl.scaleFinite(&got[0], k, m)
						}
						gotOK = scaleFinite(got[m:], k) && gotOK
					}
					name := "vecScaleFinite"
					if impl != nil {
						name = impl.name
					}
					if gotOK != wantOK {
						t.Fatalf("%s n=%d bad=%v: finite %v, twin %v", name, n, bad, gotOK, wantOK)
					}
					for i := range want {
						if !sameBits(got[i], want[i]) {
							t.Fatalf("%s n=%d: [%d] = %v, twin %v", name, n, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestVecSums compares the float64 accumulation loops with their twins bit for bit, and
// vecSumF64 with a sequential float64 sum within the float64 rounding bound.
func TestVecSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range vecLens {
		for mis := range 3 {
			x := make([]float32, n+mis)[mis:]
			y := make([]float32, n+mis)[mis:]
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 100)
				y[i] = float32(rng.NormFloat64())
			}
			var seq, abs float64
			for _, v := range x {
				seq += float64(v)
				abs += math.Abs(float64(v))
			}
			got := vecSumF64(x)
			if bound := float64(n) * 0x1p-52 * abs; math.Abs(got-seq) > bound {
				t.Fatalf("vecSumF64 n=%d: %v, sequential %v, more than %g apart", n, got, seq, bound)
			}
			var ws, wd [16]float64
			vecSumF64Go(&ws, x)
			vecDotF64Go(&wd, x, y)
			if want := vecFold(&ws); !sameBits64(got, want) {
				t.Fatalf("vecSumF64 n=%d: %v, twin %v", n, got, want)
			}
			if got, want := vecDotF64(x, y), vecFold(&wd); !sameBits64(got, want) {
				t.Fatalf("vecDotF64 n=%d: %v, twin %v", n, got, want)
			}
			acc0 := make([]float64, n)
			for i := range acc0 {
				acc0[i] = rng.NormFloat64()
			}
			wantAcc := slices.Clone(acc0)
			vecAccF64Go(wantAcc, x)
			gotAcc := slices.Clone(acc0)
			vecAccF64(gotAcc, x)
			for i := range wantAcc {
				if !sameBits64(gotAcc[i], wantAcc[i]) {
					t.Fatalf("vecAccF64 n=%d: [%d] = %v, twin %v", n, i, gotAcc[i], wantAcc[i])
				}
			}
			m := n &^ 15
			for _, impl := range vecImpls {
				if m == 0 {
					break
				}
				var s, d, ws, wd [16]float64
				impl.sumF64(&s, &x[0], m)
				impl.dotF64(&d, &x[0], &y[0], m)
				vecSumF64Go(&ws, x[:m])
				vecDotF64Go(&wd, x[:m], y[:m])
				acc := slices.Clone(acc0)
				impl.accF64(&acc[0], &x[0], m)
				want := slices.Clone(acc0)
				vecAccF64Go(want[:m], x[:m])
				for k := range 16 {
					if !sameBits64(s[k], ws[k]) || !sameBits64(d[k], wd[k]) {
						t.Fatalf("%s n=%d lane %d: sum %v dot %v, twin %v %v", impl.name, n, k, s[k], d[k], ws[k], wd[k])
					}
				}
				for i := range want {
					if !sameBits64(acc[i], want[i]) {
						t.Fatalf("%s accF64 n=%d: [%d] = %v, twin %v", impl.name, n, i, acc[i], want[i])
					}
				}
			}
		}
	}
}

// TestVecAsmGenerated checks that vec_amd64.s and the dispatch files are what
// internal/vecgen writes.
func TestVecAsmGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go run")
	}
	gotool := testenv.Programs(t, testenv.GoTool, "go")[0]
	out := t.TempDir() + "/vec_amd64.s"
	if b, err := exec.Command(gotool, "run", "./internal/vecgen", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("vecgen: %v\n%s", err, b)
	}
	// The assembly and, beside it, the generated dispatch functions.
	for _, name := range []string{"vec_amd64.s", "vec_dispatch_amd64.go", "vec_dispatch_generic.go"} {
		got, err := os.ReadFile(filepath.Join(filepath.Dir(out), name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s is not what vecgen writes: run go generate ./backend/cpu/", name)
		}
	}
}

func TestVecMaxF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range vecLens {
		for mis := range 3 {
			x := vecInputs(rng, n+mis)[mis:]
			if rng.IntN(2) == 0 {
				for i := range x {
					if x[i] != x[i] {
						x[i] = 1
					}
				}
			}
			var want [16]float32
			for k := range want {
				want[k] = float32(math.Inf(-1))
			}
			vecMaxF32Go(&want, x)
			got := vecMaxF32(x)
			var seq float32 = float32(math.Inf(-1))
			nan := false
			for _, v := range x {
				seq = max(seq, v)
				nan = nan || v != v
			}
			if !nan && got != seq {
				t.Fatalf("vecMaxF32 n=%d: %v, want %v", n, got, seq)
			}
			m := n &^ 15
			for _, impl := range vecImpls {
				if m == 0 {
					break
				}
				var s, w [16]float32
				for k := range s {
					s[k], w[k] = float32(k)-8, float32(k)-8
				}
				impl.maxF32(&s, &x[0], m)
				vecMaxF32Go(&w, x[:m])
				for k := range s {
					if !sameBits(s[k], w[k]) {
						t.Fatalf("%s maxF32 n=%d lane %d: %v, twin %v", impl.name, n, k, s[k], w[k])
					}
				}
			}
		}
	}
}

// TestExpF64 checks the exponential against math.Exp: within 4 ulp on its range, 0
// below it, +Inf above, NaN for NaN.
func TestExpF64(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	worst := 0.0
	for i := range 200000 {
		x := rng.Float64()*(expHi-expLo) + expLo
		if i < 1000 {
			x = rng.Float64()*2 - 1
		}
		got, want := expF64(x), math.Exp(x)
		ulp := math.Abs(got-want) / (math.Nextafter(want, math.Inf(1)) - want)
		worst = max(worst, ulp)
		if ulp > 4 {
			t.Fatalf("expF64(%v) = %v, math.Exp %v: %.2f ulp apart", x, got, want, ulp)
		}
	}
	t.Logf("worst error %.2f ulp", worst)
	for _, c := range []struct{ x, want float64 }{
		{0, 1}, {-708.5, 0}, {math.Inf(-1), 0}, {709.5, math.Inf(1)}, {math.Inf(1), math.Inf(1)},
	} {
		if got := expF64(c.x); got != c.want {
			t.Errorf("expF64(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if got := expF64(math.NaN()); got == got {
		t.Errorf("expF64(NaN) = %v", got)
	}
}

func TestVecExpF64(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range vecLens {
		for mis := range 3 {
			x := make([]float32, n+mis)[mis:]
			for i := range x {
				switch rng.IntN(10) {
				case 0:
					x[i] = []float32{float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN()), -708.2, -707.9, 709.3, 0}[rng.IntN(7)]
				default:
					x[i] = float32(rng.Float64()*100 - 90)
				}
			}
			shift := rng.Float64()*4 - 2
			want := make([]float64, n)
			var ws [16]float64
			vecExpF64Go(&ws, want, x, shift)
			got := make([]float64, n)
			sum := vecExpF64(got, x, shift)
			if w := vecFold(&ws); !sameBits64(sum, w) {
				t.Fatalf("vecExpF64 n=%d: sum %v, twin %v", n, sum, w)
			}
			for i := range want {
				if !sameBits64(got[i], want[i]) {
					t.Fatalf("vecExpF64 n=%d: e[%d] = exp(%v - %v) = %v, twin %v", n, i, x[i], shift, got[i], want[i])
				}
			}
			m := n &^ 15
			for _, impl := range vecImpls {
				if m == 0 {
					break
				}
				var s, w [16]float64
				e := make([]float64, m)
				impl.expF64(&s, &e[0], &x[0], shift, m)
				vecExpF64Go(&w, want[:m], x[:m], shift)
				for k := range s {
					if !sameBits64(s[k], w[k]) {
						t.Fatalf("%s expF64 n=%d lane %d: %v, twin %v", impl.name, n, k, s[k], w[k])
					}
				}
				for i := range e {
					if !sameBits64(e[i], want[i]) {
						t.Fatalf("%s expF64 n=%d: e[%d] = exp(%v - %v) = %v, twin %v", impl.name, n, i, x[i], shift, e[i], want[i])
					}
				}
			}
		}
	}
}

func TestVecNarrow(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	var ops []narrowOp
	for op := narrowDiv; op <= narrowCopy; op++ {
		ops = append(ops, op, op+narrowOdd)
	}
	// Besides ordinary values, e holds values past float32's range and below its
	// subnormals, and ones a float32 ulp cannot hold (what rounding to odd is for).
	eSpecial := []float64{math.Inf(1), math.NaN(), 1e39, -4e38, 1e-46, -3e-320, 1 + 0x1p-30, 0x1p-140 * (1 + 0x1p-40)}
	for _, op := range ops {
		for _, n := range vecLens {
			mis := n % 3
			x := vecInputs(rng, n+mis)[mis:]
			y := vecInputs(rng, n+mis)[mis:]
			e := make([]float64, n)
			for i := range e {
				e[i] = rng.NormFloat64() * 1e3
				if rng.IntN(8) == 0 {
					e[i] = eSpecial[rng.IntN(len(eSpecial))]
				}
			}
			c0, c1 := rng.Float64()*3+0.1, rng.NormFloat64()
			want := make([]float32, n)
			vecNarrowGo(op, want, e, x, y, c0, c1)
			got := make([]float32, n)
			vecNarrow(op, got, e, x, y, c0, c1)
			for i := range want {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("vecNarrow %d n=%d: [%d] = %v, twin %v", op, n, i, got[i], want[i])
				}
			}
			m := n &^ 15
			for _, impl := range vecImpls {
				if m == 0 {
					break
				}
				if op >= narrowOdd && impl.name != "avx512" {
					continue // the odd loops are AVX-512's alone
				}
				got := make([]float32, m)
				impl.narrow(op, &got[0], &e[0], &x[0], &y[0], c0, c1, m)
				for i := range got {
					if !sameBits(got[i], want[i]) {
						t.Fatalf("%s narrow %d n=%d: [%d] = %v, twin %v", impl.name, op, n, i, got[i], want[i])
					}
				}
			}
		}
	}
}

func TestVecAccDevF64(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, op := range []accDevOp{accSq, accProd} {
		for _, n := range vecLens {
			mis := n % 3
			x := vecInputs(rng, n+mis)[mis:]
			g := vecInputs(rng, n+mis)[mis:]
			m := make([]float64, n)
			acc0 := make([]float64, n)
			for i := range m {
				m[i], acc0[i] = rng.NormFloat64(), rng.NormFloat64()*10
			}
			want := slices.Clone(acc0)
			vecAccDevF64Go(op, want, g, x, m)
			got := slices.Clone(acc0)
			vecAccDevF64(op, got, g, x, m)
			for i := range want {
				if !sameBits64(got[i], want[i]) {
					t.Fatalf("vecAccDevF64 %d n=%d: [%d] = %v, twin %v", op, n, i, got[i], want[i])
				}
			}
			k := n &^ 15
			for _, impl := range vecImpls {
				if k == 0 {
					break
				}
				got := slices.Clone(acc0)
				impl.accDev(op, &got[0], &g[0], &x[0], &m[0], k)
				for i := range k {
					if !sameBits64(got[i], want[i]) {
						t.Fatalf("%s accDev %d n=%d: [%d] = %v, twin %v", impl.name, op, n, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestVecMaxSelect checks the branch-free maximum against vecMax on signed zeros,
// infinities, NaNs and ordinary values, both orders.
func TestVecMaxSelect(t *testing.T) {
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 3e38, float32(math.Inf(1)),
		float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0x7fc00001), 1e-45}
	for _, a := range vals {
		for _, b := range vals {
			if got, want := vecMaxSelect(a, b), vecMax(a, b); math.Float32bits(got) != math.Float32bits(want) {
				t.Errorf("vecMaxSelect(%v, %v) = %#x, vecMax %#x", a, b, math.Float32bits(got), math.Float32bits(want))
			}
		}
	}
}

// TestVecFold checks the written-out fold against the pairwise loop it spells.
func TestVecFold(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for range 1000 {
		var s [16]float64
		for k := range s {
			s[k] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(30)-15))
		}
		w := s
		for step := 8; step > 0; step /= 2 {
			for k := range step {
				w[k] += w[k+step]
			}
		}
		if got := vecFold(&s); !sameBits64(got, w[0]) {
			t.Fatalf("vecFold(%v) = %v, loop %v", s, got, w[0])
		}
	}
}
