package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gamp-ml/gamp/half"
)

// amxKernels lists the AMX-layout kernels to test: the pure-Go twin, and the
// assembly kernel where this machine runs it.
func amxKernels() []*gemmBF16Kernel {
	var ks []*gemmBF16Kernel
	for _, k := range bf16TestKernels() {
		if k.rowsA {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		ks = append(ks, gemmAMXKernelGo32x32)
	}
	return ks
}

// amxSum returns element (0, 0) of the AMX kernel's product of one A row
// holding the k values x (several k tiles) and a B column of ones.
func amxSum(kern *gemmBF16Kernel, x []float32) float32 {
	kc2 := len(x) / 2
	a := make([]uint32, kern.mr*kc2)
	b := make([]uint32, kc2*kern.nr)
	bits := func(f float32) uint32 { return math.Float32bits(f) >> 16 }
	for p := range kc2 {
		a[kern.aIndex(kc2, 0, p)] = bits(x[2*p]) | bits(x[2*p+1])<<16
		b[p*kern.nr] = bits(1) | bits(1)<<16
	}
	c := make([]float32, kern.mr*kern.nr)
	kern.fn(kc2, a, b, c, kern.nr, false)
	return c[0]
}

// TestAMXSummationOrder pins down the order in which TDPBF16PS adds its 32
// products per k tile, as measured on Sapphire Rapids: the even-k products
// in one chain and the odd-k ones in another, each in ascending k and
// rounded at each step, then C + (even + odd). It places 2^30 at k = i,
// -2^30 at k = j and 1 at k = c and checks where the 1 survives.
func TestAMXSummationOrder(t *testing.T) {
	const big = 0x1p30
	// Under the race detector (raceShort) every fifth 2^30 and -2^30 position:
	// the kernels start no goroutines, and the plain pass runs them all.
	step := 1
	if raceShort() {
		step = 5
	}
	for _, kern := range amxKernels() {
		t.Run(kern.name, func(t *testing.T) {
			for i := 0; i < 32; i += step {
				for j := 0; j < 32; j += step {
					for c := range 32 {
						if i == j || i == c || j == c {
							continue
						}
						x := make([]float32, 32)
						x[i], x[j], x[c] = big, -big, 1
						// The 1 is lost when it meets ±2^30 in its own chain
						// (the other chain then holds the opposite) unless
						// both come before it in that chain.
						same := func(k int) bool { return k%2 == c%2 }
						want := float32(1)
						switch {
						case same(i) != same(j):
							want = 0
						case same(i) && (i > c || j > c):
							want = 0
						}
						if got := amxSum(kern, x); got != want {
							t.Fatalf("2^30 at k=%d, -2^30 at %d, 1 at %d: got %v, want %v", i, j, c, got, want)
						}
					}
				}
			}
			// Across k tiles C is the accumulator: C + (even + odd) loses the
			// 1 wherever it is in the second tile.
			for j := 0; j < 32; j += step {
				for c := range 32 {
					if c == j {
						continue
					}
					x := make([]float32, 64)
					x[0], x[32+j], x[32+c] = big, -big, 1
					if got := amxSum(kern, x); got != 0 {
						t.Fatalf("C = 2^30, then -2^30 at k=%d and 1 at %d: got %v, want 0", j, c, got)
					}
				}
			}
			// Each addition rounds to float32: 1 + 2^-24 + 2^-24 is 1 in one
			// chain, and 1 + 2^-23 in two.
			for _, tc := range []struct {
				k    [3]int
				want float32
			}{{[3]int{0, 2, 4}, 1}, {[3]int{0, 1, 3}, 1 + 0x1p-23}, {[3]int{1, 0, 2}, 1 + 0x1p-23}} {
				x := make([]float32, 32)
				x[tc.k[0]], x[tc.k[1]], x[tc.k[2]] = 1, 0x1p-24, 0x1p-24
				if got := amxSum(kern, x); got != tc.want {
					t.Fatalf("1 at k=%d, 2^-24 at %d and %d: got %v, want %v", tc.k[0], tc.k[1], tc.k[2], got, tc.want)
				}
			}
		})
	}
}

// TestAMXTileConfig checks the LDTILECFG operand: palette 1, eight tiles of
// 16 rows by 64 bytes.
func TestAMXTileConfig(t *testing.T) {
	c := amxTileConfig
	if c[0] != 1 || c[1] != 0 {
		t.Fatalf("palette %d, start row %d", c[0], c[1])
	}
	for tile := range 8 {
		if cols, rows := int(c[16+2*tile])|int(c[17+2*tile])<<8, c[48+tile]; cols != 64 || rows != 16 {
			t.Fatalf("tile %d: %d rows of %d bytes", tile, rows, cols)
		}
	}
}

// TestAMXDirect runs each kernel's in-place store (A read from a row-major
// matrix: the AMX kernels and the 12×32 VDPBF16PS one) against the twin's,
// which packs A first, bit for bit (NaN payloads aside), on ordinary and
// hostile values, strides and scalars.
func TestAMXDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	kerns := amxKernels()
	for _, k := range bf16TestKernels() {
		if !k.rowsA && k.direct != nil && k != k.goTwin() {
			kerns = append(kerns, k)
		}
	}
	for _, kern := range kerns {
		for _, kc2 := range []int{16, 48, 256} {
			for _, lda := range []int{2 * kc2, 2*kc2 + 3} {
				for _, mix := range []string{"normal", "hostile"} {
					for _, sc := range [][2]float32{{1, 0}, {-0.5, 2}} {
						t.Run(fmt.Sprintf("%s/kc2=%d/lda=%d/%s/%v", kern.name, kc2, lda, mix, sc), func(t *testing.T) {
							class := func(x int) int {
								if mix == "normal" {
									return 0
								}
								return x % 4
							}
							a, b := bf16DirectOperands(rng, kern, kc2, lda, class)
							const ldc = 41
							c0 := make([]half.BFloat16, kern.mr*ldc)
							for i := range c0 {
								c0[i] = half.BFloat16(bf16Random(rng, class(i+2)))
							}
							got := append([]half.BFloat16(nil), c0...)
							kern.direct(kc2, a, lda, b, got, ldc, sc[0], sc[1])
							want := append([]half.BFloat16(nil), c0...)
							twinDirect(kern)(kc2, a, lda, b, want, ldc, sc[0], sc[1])
							for x := range got {
								if got[x] != want[x] && !(got[x].IsNaN() && want[x].IsNaN()) {
									t.Fatalf("(%d,%d): kernel %#04x, twin %#04x", x/ldc, x%ldc, uint16(got[x]), uint16(want[x]))
								}
							}
						})
					}
				}
			}
		}
	}
}

// TestAMXPackTrans checks packAMXA for a transposed op(A) (AVX-512 scatter
// where the CPU has it) against packAMXAGo over widths, depths and strides,
// into panels holding garbage.
func TestAMXPackTrans(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, lanes := range []int{1, 5, 16, 17, 31, 32} {
		for _, kc := range []int{1, 2, 31, 32, 33, 64, 101} {
			for _, pad := range []int{0, 3} {
				ld := lanes + pad
				kc2 := gemmCeilDiv(gemmCeilDiv(kc, 2), amxTileK) * amxTileK
				src := make([]half.BFloat16, (kc-1)*ld+lanes)
				for i := range src {
					src[i] = half.BFloat16(rng.Uint32())
				}
				got := make([]uint32, amxMR*kc2)
				want := make([]uint32, amxMR*kc2)
				for i := range got {
					got[i], want[i] = rng.Uint32(), rng.Uint32()
				}
				packAMXA(got, src, ld, kc, kc2, lanes, false)
				packAMXAGo(want, src, ld, kc, kc2, lanes, false)
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("lanes=%d kc=%d ld=%d: word %d is %#x, want %#x", lanes, kc, ld, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestAMXStrips runs each kernel's strip stores (storeN, directN,
// directRow: several tiles a call; the AMX kernels have all three, the 12×32
// VDPBF16PS one directN) against the twin's one-tile store, bit for bit (NaN
// payloads aside), on ordinary and hostile values and scalars, without and
// with a bias (the twin copying it into C and running with beta 1): hostile
// bias values and tiny products make the sums denormal, where the AMX
// kernel's rounding leaves VCVTNE2PS2BF16.
func TestAMXStrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	const n = 3
	kerns := amxKernels()
	for _, k := range bf16TestKernels() {
		if !k.rowsA && k != k.goTwin() {
			kerns = append(kerns, k)
		}
	}
	for _, kern := range kerns {
		if kern.storeN == nil && kern.directN == nil && kern.directRow == nil {
			continue
		}
		twin := kern.goTwin()
		mr, nr := kern.mr, kern.nr
		for _, kc2 := range []int{16, 48} {
			for _, mix := range []string{"normal", "hostile", "tiny"} {
				for _, sc := range [][2]float32{{1, 0}, {-0.5, 0}, {-0.5, 2}, {1, 1}} {
					for _, withBias := range []bool{false, true} {
						t.Run(fmt.Sprintf("%s/kc2=%d/%s/%v/bias=%v", kern.name, kc2, mix, sc, withBias), func(t *testing.T) {
							class := func(x int) int {
								switch mix {
								case "normal":
									return 0
								case "tiny": // zero products, denormal C and bias
									return 3
								}
								return x % 4
							}
							lda := 2*kc2 + 3
							a := make([]half.BFloat16, n*mr*lda)
							for i := range a {
								a[i] = half.BFloat16(bf16Random(rng, class(i)))
							}
							ap := make([]uint32, n*mr*kc2)
							for i := range ap {
								ap[i] = bf16Random(rng, class(i)) | bf16Random(rng, class(i/5))<<16
							}
							b := make([]uint32, n*kc2*nr)
							for i := range b {
								b[i] = bf16Random(rng, class(i+1)) | bf16Random(rng, class(i/3))<<16
							}
							var bias []half.BFloat16
							if withBias {
								bias = make([]half.BFloat16, n*nr)
								for i := range bias {
									bias[i] = half.BFloat16(bf16Random(rng, class(i+3)))
								}
							}
							ldc := n*nr + 5
							c0 := make([]half.BFloat16, n*mr*ldc)
							for i := range c0 {
								c0[i] = half.BFloat16(bf16Random(rng, class(i+2)))
							}
							// want runs the twin on the tile of C at (i, j)
							// after the bias, if any, was copied in.
							want := func(c []half.BFloat16, i, j int, tile func(c []half.BFloat16, beta float32)) {
								beta := sc[1]
								if bias != nil {
									for r := range mr {
										copy(c[(i+r)*ldc+j:][:nr], bias[j:][:nr])
									}
									beta = 1
								}
								tile(c[i*ldc+j:], beta)
							}
							check := func(what string, got, want []half.BFloat16) {
								t.Helper()
								for x := range got {
									if got[x] != want[x] && !(got[x].IsNaN() && want[x].IsNaN()) {
										t.Fatalf("%s (%d,%d): kernel %#04x, twin %#04x", what, x/ldc, x%ldc, uint16(got[x]), uint16(want[x]))
									}
								}
							}
							biasAt := func(j int) []half.BFloat16 {
								if bias == nil {
									return nil
								}
								return bias[j:]
							}

							// storeN: a column of n tiles from packed A panels.
							if kern.storeN != nil {
								got, exp := slices.Clone(c0), slices.Clone(c0)
								kern.storeN(n, kc2, ap, b, biasAt(nr), got[nr:], ldc, sc[0], sc[1])
								for r := range n {
									want(exp, r*mr, nr, func(c []half.BFloat16, beta float32) {
										twin.store(kc2, ap[r*mr*kc2:], b, c, ldc, sc[0], beta)
									})
								}
								check("storeN", got, exp)
							}

							// directN: a column of n tiles from A in place.
							if kern.directN != nil {
								got, exp := slices.Clone(c0), slices.Clone(c0)
								kern.directN(n, kc2, a, lda, b, biasAt(nr), got[nr:], ldc, sc[0], sc[1])
								for r := range n {
									want(exp, r*mr, nr, func(c []half.BFloat16, beta float32) {
										twinDirect(kern)(kc2, a[r*mr*lda:], lda, b, c, ldc, sc[0], beta)
									})
								}
								check("directN", got, exp)
							}

							// directRow: a row of n tiles, n B panels.
							if kern.directRow != nil {
								got, exp := slices.Clone(c0), slices.Clone(c0)
								kern.directRow(n, kc2, a, lda, b, biasAt(0), got, ldc, sc[0], sc[1])
								for q := range n {
									want(exp, 0, q*nr, func(c []half.BFloat16, beta float32) {
										twinDirect(kern)(kc2, a, lda, b[q*kc2*nr:], c, ldc, sc[0], beta)
									})
								}
								check("directRow", got, exp)
							}
						})
					}
				}
			}
		}
	}
}

// TestAMXPackTransPanels checks the multi-panel packing of a transposed
// op(A) (several AMX panels chunk by chunk of k) against packAMXAGo panel
// by panel, into panels holding garbage.
func TestAMXPackTransPanels(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	for _, rows := range []int{1, 32, 64, 70, 101, 160} {
		for _, kc := range []int{1, 32, 64, 65, 100, 255, 513} {
			kc2 := gemmCeilDiv((kc+1)/2, amxTileK)*amxTileK + amxTileK
			ld := rows + 3
			src := make([]half.BFloat16, kc*ld)
			for i := range src {
				src[i] = half.BFloat16(rng.Uint32())
			}
			panels := gemmCeilDiv(rows, amxMR)
			got := make([]uint32, panels*amxMR*kc2)
			for i := range got {
				got[i] = rng.Uint32()
			}
			want := slices.Clone(got)
			if !packAMXATransPanels(got, src, ld, kc, kc2, rows) {
				t.Skip("no AVX-512")
			}
			for q := range panels {
				packAMXAGo(want[q*amxMR*kc2:][:amxMR*kc2], src[q*amxMR:], ld, kc, kc2, min(amxMR, rows-q*amxMR), false)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("rows=%d kc=%d: word %d = %#x, want %#x", rows, kc, i, got[i], want[i])
				}
			}
		}
	}
}

// TestBF16FnDirect runs each kernel's fnDirect (the float32 tile from A read in
// place) against packing the rows (packPairs) and the twin's fn, bit for bit (NaN
// payloads aside), storing and adding, on ordinary and hostile values and strides.
func TestBF16FnDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	ran := false
	for _, kern := range bf16TestKernels() {
		if kern.fnDirect == nil {
			continue
		}
		ran = true
		twin := kern.goTwin()
		for _, kc2 := range []int{1, 16, 33, 256} {
			for _, lda := range []int{2 * kc2, 2*kc2 + 3} {
				for _, add := range []bool{false, true} {
					for _, mix := range []int{0, 1} {
						class := func(x int) int { return mix * (x % 4) }
						a, b := bf16DirectOperands(rng, kern, kc2, lda, class)
						const ldc = 37
						c0 := make([]float32, kern.mr*ldc)
						for i := range c0 {
							c0[i] = float32(rng.NormFloat64())
						}
						got, want := slices.Clone(c0), slices.Clone(c0)
						kern.fnDirect(kc2, a, lda, b, got, ldc, add)
						ap := make([]uint32, kc2*kern.mr)
						packPairs(ap, a, lda, 2*kc2, kern.mr, kern.mr, true)
						twin.fn(kc2, ap, b, want, ldc, add)
						for x := range got {
							if math.Float32bits(got[x]) != math.Float32bits(want[x]) && !(got[x] != got[x] && want[x] != want[x]) {
								t.Fatalf("%s kc2=%d lda=%d add=%v mix=%d (%d,%d): %v, twin %v", kern.name, kc2, lda, add, mix, x/ldc, x%ldc, got[x], want[x])
							}
						}
					}
				}
			}
		}
	}
	if !ran {
		t.Skip("no kernel reads A in place for a float32 tile on this CPU (needs AVX512_BF16)")
	}
}

// twinDirect returns the direct store of kern's twin: the twin's own (the AMX twin
// has one) or, for the 12×32 twin, which GemmBF16 runs packed (a direct form would
// pack per tile), its 12 rows of A packed side by side (packPairs) and stored.
func twinDirect(kern *gemmBF16Kernel) func(kc2 int, a []half.BFloat16, lda int, b []uint32, c []half.BFloat16, ldc int, alpha, beta float32) {
	twin := kern.goTwin()
	if twin.direct != nil {
		return twin.direct
	}
	return func(kc2 int, a []half.BFloat16, lda int, b []uint32, c []half.BFloat16, ldc int, alpha, beta float32) {
		ap := make([]uint32, kc2*twin.mr)
		packPairs(ap, a, lda, 2*kc2, twin.mr, twin.mr, true)
		twin.store(kc2, ap, b, c, ldc, alpha, beta)
	}
}

// bf16DirectOperands returns the operands of a direct kernel test: mr rows of A
// (row stride lda, 2·kc2 values each) and a B panel of kc2 pair steps, each value of
// bf16Random's class(i) (i its index, shifted for B's halves).
func bf16DirectOperands(rng *rand.Rand, kern *gemmBF16Kernel, kc2, lda int, class func(int) int) ([]half.BFloat16, []uint32) {
	a := make([]half.BFloat16, (kern.mr-1)*lda+2*kc2)
	for i := range a {
		a[i] = half.BFloat16(bf16Random(rng, class(i)))
	}
	b := make([]uint32, kc2*kern.nr)
	for i := range b {
		b[i] = bf16Random(rng, class(i+1)) | bf16Random(rng, class(i/3))<<16
	}
	return a, b
}
