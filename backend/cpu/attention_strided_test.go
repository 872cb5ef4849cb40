package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// TestAttnStridedKernel checks attnStridedT, the kernel mulF32 runs on a transposed A
// in place (row i's value at step p at a[i+p*astep]), for every row count 1–12 and
// several depths: bit for bit against gemmKernel32's fn (12 rows) or rowsFn on the
// same values packed by attnPackTGo, with start nil (added to C), +0s and a bias row
// (C holding garbage then); against an exactly fused multiply-add loop; against the
// pure-Go twin gemmKernelGoRows within a tight bound; nothing outside the rows×32 block
// written, nothing past the rows of A read into it (they hold NaN). A holds a column
// of -0s, an Inf and a NaN.
func TestAttnStridedKernel(t *testing.T) {
	if attnStridedT == nil {
		t.Skip("gemmKernel32 has no strided kernel in this build")
	}
	kern := gemmKernel32
	mr, nr := kern.mr, kern.nr
	rng := rand.New(rand.NewPCG(91, 92))
	for rows := 1; rows <= mr; rows++ {
		for _, kc := range []int{0, 1, 7, 16, 17, 64, 100} {
			t.Run(fmt.Sprintf("rows=%d/kc=%d", rows, kc), func(t *testing.T) {
				astep := 64 + 3 // the tile's row stride, and not a multiple of 16
				// a: kc stored rows of astep values; columns [0, rows) are op(A)'s rows,
				// the rest NaN.
				a := make([]float32, kc*astep)
				for x := range a {
					a[x] = float32(math.NaN())
					if x%astep < rows {
						a[x] = rng.Float32()*2 - 1
					}
				}
				if rows > 1 && kc > 3 {
					for p := range kc {
						a[p*astep+1] = float32(math.Copysign(0, -1))
					}
				}
				if rows > 2 && kc > 5 {
					a[4*astep+2] = float32(math.Inf(1))
					a[5*astep] = float32(math.NaN())
				}
				b := make([]float32, kc*nr)
				for x := range b {
					b[x] = rng.Float32()*2 - 1
				}
				ap := make([]float32, kc*mr)
				attnPackTGo(ap, a, astep, kc, rows, mr)
				const ldc = 45
				c0 := make([]float32, mr*ldc)
				for x := range c0 {
					c0[x] = rng.Float32()*2 - 1
				}
				bias := make([]float32, nr)
				for x := range bias {
					bias[x] = rng.Float32()*2 - 1
				}
				bias[0] = float32(math.Copysign(0, -1))
				garbage := make([]float32, mr*ldc)
				for x := range garbage {
					garbage[x] = [...]float32{float32(math.NaN()), float32(math.Copysign(0, -1)), 3}[x%3]
				}
				// The references: fn (whole panel) or rowsFn on the packed panel.
				ref := func(c, start []float32) {
					if rows == mr {
						if start != nil {
							for i := range mr {
								copy(c[i*ldc:][:nr], start)
							}
						}
						kern.fn(kc, ap, b, c, ldc)
						return
					}
					kern.rowsFn(rows, kc, ap, b, c, ldc, start)
				}
				for _, tc := range []struct {
					name      string
					c0, start []float32
				}{{"add", c0, nil}, {"zero", garbage, make([]float32, nr)}, {"bias", garbage, bias}} {
					want := slices.Clone(tc.c0)
					ref(want, tc.start)
					got := slices.Clone(tc.c0)
					attnStridedT(rows, kc, a, 1, astep, b, got, ldc, tc.start)
					for i := range mr {
						for j := range ldc {
							x := i*ldc + j
							if i >= rows || j >= nr {
								if math.Float32bits(got[x]) != math.Float32bits(tc.c0[x]) {
									t.Fatalf("%s: wrote outside the rows at (%d,%d)", tc.name, i, j)
								}
								continue
							}
							if !gemmSameBits(got[x], want[x]) {
								t.Fatalf("%s: (%d,%d) = %v (%#x), packed kernel %v (%#x)", tc.name, i, j,
									got[x], math.Float32bits(got[x]), want[x], math.Float32bits(want[x]))
							}
						}
					}
				}
				got := slices.Clone(c0)
				attnStridedT(rows, kc, a, 1, astep, b, got, ldc, nil)
				twin := slices.Clone(c0)
				gemmKernelGoRows(rows, nr, kc, a, 1, astep, b, twin, ldc, nil)
				for i := range rows {
					for j := range nr {
						x := i*ldc + j
						var acc, s float32
						for p := range kc {
							acc = gemmFMA32(a[p*astep+i], b[p*nr+j], acc)
							s += float32(math.Abs(float64(a[p*astep+i] * b[p*nr+j])))
						}
						if want := c0[x] + acc; !gemmSameBits(got[x], want) {
							t.Fatalf("(%d,%d): kernel %v, fused Go loop %v", i, j, got[x], want)
						}
						tol := float64(kc+1) * 0x1p-24 * float64(s+float32(math.Abs(float64(c0[x]))))
						if d := math.Abs(float64(got[x] - twin[x])); !(d <= tol) && !(got[x] != got[x] && twin[x] != twin[x]) &&
							!(math.IsInf(float64(got[x]), 0) && got[x] == twin[x]) {
							t.Fatalf("(%d,%d): kernel %v, Go twin %v, differ by more than %v", i, j, got[x], twin[x], tol)
						}
					}
				}
			})
		}
	}
}

// TestAttentionStridedT runs the float32 (and float16) attention with mulF32's strided
// transposed-A kernel (attnStridedT) and the A prefetch (attnPrefetchA) and without
// them (Pᵀ and dSᵀ packed per row panel by attnPackT, as before), bit for bit, on
// every geometry of attnCases and the transformer shapes, on plain inputs and on
// inputs holding NaN, ±Inf and -0, with outputs and pooled scratch holding NaN before
// the passes.
func TestAttentionStridedT(t *testing.T) {
	saved := attnStridedT
	defer func() { attnStridedT, attnPrefetchA = saved, true }()
	cases := append([]attnCase{{1, 1, 1, false}, {2, 128, 64, false}, {2, 64, 32, false}, {1, 65, 12, true}, {1, 76, 64, true}}, attnCases...)
	for _, dt := range []backend.DType{backend.Float32, backend.Float16} {
		for ci, c := range cases {
			for _, special := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/special=%v", dt, c, special), func(t *testing.T) {
					in := newAttnData(c, uint64(120+ci))
					if special {
						n := len(in.q)
						for i, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1))} {
							in.q[(7*i+1)%n] = v
							in.k[(11*i+3)%n] = v
							in.v[(13*i+2)%n] = v
							in.g[(5*i+4)%n] = v
						}
						for i := range min(n, 2*c.d) {
							in.g[n-1-i] = float32(math.Copysign(0, -1))
						}
					}
					attnStridedT, attnPrefetchA = nil, false
					want := runAttn(t, c, in, dt)
					attnStridedT, attnPrefetchA = saved, true
					nan := float32(math.NaN())
					runAttnFilled(t, c, newAttnDataFilled(c, nan), dt, nan)
					got := runAttnFilled(t, c, in, dt, nan)
					for p, w := range want.parts() {
						g := got.parts()[p]
						for i := range w {
							if math.Float64bits(g[i]) != math.Float64bits(w[i]) && !(g[i] != g[i] && w[i] != w[i]) {
								t.Fatalf("%s[%d]: strided %.8g, packed %.8g", attnPartNames[p], i, g[i], w[i])
							}
						}
					}
				})
			}
		}
	}
}
