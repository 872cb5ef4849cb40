package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"unsafe"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
	"github.com/gamp-ml/gamp/internal/testenv"
)

// convTestGeoms are the direct kernels' geometries under test: the Fashion CNN's two
// convolutions, few and many channels, groups, dilation, asymmetric padding, no
// padding, output channels that are not a multiple of the micro-kernel's rows, an
// odd number of taps (bf16 pairs) and taps past one k slice.
func convTestGeoms() []backend.Conv2dArgs {
	gs := []backend.Conv2dArgs{
		{ConvArgs: backend.ConvArgs{N: 3, C: 1, H: 28, W: 28, KH: 5, KW: 5, PadH: 2, PadW: 2}, O: 16, Groups: 1},
		{ConvArgs: backend.ConvArgs{N: 2, C: 16, H: 14, W: 14, KH: 5, KW: 5, PadH: 2, PadW: 2}, O: 32, Groups: 1},
		{ConvArgs: backend.ConvArgs{N: 2, C: 3, H: 9, W: 7, KH: 3, KW: 3, PadH: 1, PadW: 1}, O: 5, Groups: 1},
		{ConvArgs: backend.ConvArgs{N: 2, C: 4, H: 8, W: 10, KH: 3, KW: 3, PadH: 2, PadW: 1, DilationH: 2, DilationW: 1}, O: 6, Groups: 2},
		{ConvArgs: backend.ConvArgs{N: 1, C: 2, H: 6, W: 5, KH: 2, KW: 3}, O: 13, Groups: 1},
		{ConvArgs: backend.ConvArgs{N: 2, C: 6, H: 5, W: 5, KH: 1, KW: 1}, O: 6, Groups: 3},
		{ConvArgs: backend.ConvArgs{N: 1, C: 70, H: 4, W: 4, KH: 3, KW: 3, PadH: 1, PadW: 1}, O: 3, Groups: 1},
		{ConvArgs: backend.ConvArgs{N: 17, C: 2, H: 5, W: 6, KH: 3, KW: 3, PadH: 1, PadW: 1}, O: 4, Groups: 1},
	}
	for i := range gs {
		a := &gs[i]
		a.StrideH, a.StrideW = 1, 1
		a.DilationH, a.DilationW = max(a.DilationH, 1), max(a.DilationW, 1)
		a.OH = convOut(a.H, a.KH, 1, a.PadH, a.DilationH)
		a.OW = convOut(a.W, a.KW, 1, a.PadW, a.DilationW)
	}
	return gs
}

// convRef computes the forward output, input gradient and weight gradient of a in
// float64 from the definition, with the sum of the magnitudes of each result's terms
// (for error bounds).
func convRef(a backend.Conv2dArgs, x, w, bias, gy []float64) (y, yMag, gx, gxMag, gw, gwMag []float64) {
	cg, og := a.C/a.Groups, a.O/a.Groups
	y, yMag = make([]float64, a.N*a.O*a.OH*a.OW), make([]float64, a.N*a.O*a.OH*a.OW)
	gx, gxMag = make([]float64, len(x)), make([]float64, len(x))
	gw, gwMag = make([]float64, len(w)), make([]float64, len(w))
	for n := range a.N {
		for o := range a.O {
			g := o / og
			for oh := range a.OH {
				for ow := range a.OW {
					yi := ((n*a.O+o)*a.OH+oh)*a.OW + ow
					if bias != nil {
						y[yi], yMag[yi] = bias[o], math.Abs(bias[o])
					}
					for c := range cg {
						for kh := range a.KH {
							for kw := range a.KW {
								h := oh - a.PadH + kh*a.DilationH
								ww := ow - a.PadW + kw*a.DilationW
								if h < 0 || h >= a.H || ww < 0 || ww >= a.W {
									continue
								}
								xi := ((n*a.C+g*cg+c)*a.H+h)*a.W + ww
								wi := ((o*cg+c)*a.KH+kh)*a.KW + kw
								y[yi] += x[xi] * w[wi]
								yMag[yi] += math.Abs(x[xi] * w[wi])
								gx[xi] += gy[yi] * w[wi]
								gxMag[xi] += math.Abs(gy[yi] * w[wi])
								gw[wi] += gy[yi] * x[xi]
								gwMag[wi] += math.Abs(gy[yi] * x[xi])
							}
						}
					}
				}
			}
		}
	}
	return
}

func convRandom(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(float32(rng.NormFloat64()))
	}
	return v
}

// convF32Of returns v rounded to float32.
func convF32Of(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, e := range v {
		out[i] = float32(e)
	}
	return out
}

// convCheckClose fails unless got is within tol·mag + rounding of want, element by
// element.
func convCheckClose(t *testing.T, what string, got []float32, want, mag []float64, tol, round float64) {
	t.Helper()
	for i := range want {
		d := math.Abs(float64(got[i]) - want[i])
		if d > tol*mag[i]+round*math.Abs(want[i]) || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s[%d] = %v, want %v (error %.3g, terms' magnitude %.3g)", what, i, got[i], want[i], d, mag[i])
		}
	}
}

// TestConvDirectF32 checks the float32 kernels against the float64 definition: each
// result is within 2⁻²⁰ of the sum of its terms' magnitudes (float32 accumulation).
func TestConvDirectF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, a := range convTestGeoms() {
		t.Run(fmt.Sprintf("%+v", a), func(t *testing.T) {
			x := convRandom(rng, a.N*a.C*a.H*a.W)
			w := convRandom(rng, a.O*a.C/a.Groups*a.KH*a.KW)
			bias := convRandom(rng, a.O)
			gy := convRandom(rng, a.N*a.O*a.OH*a.OW)
			y, yMag, gx, gxMag, gw, gwMag := convRef(a, x, w, bias, gy)
			f := convF32Of
			d, ok := inputGradArgs(a)
			if !ok {
				t.Fatal("input gradient not covered")
			}
			// Both tiles where the machine has the 16×16 one: same bits.
			ops := []*convOps[float32, float32]{convF32}
			for _, o := range []*convOps[float32, float32]{convF32x16, convF32x8} {
				if o != nil {
					ops = append(ops, o)
				}
			}
			var first []float32
			for _, o := range ops {
				got := make([]float32, len(y))
				convForward(o, got, f(x), f(w), f(bias), a)
				convCheckClose(t, "y", got, y, yMag, 1.0/(1<<20), 0)
				gotX := make([]float32, len(gx))
				convForward(o, gotX, f(gy), flipWeights(f(w), a), nil, d)
				convCheckClose(t, "gx", gotX, gx, gxMag, 1.0/(1<<20), 0)
				both := append(got, gotX...)
				if first == nil {
					first = both
					continue
				}
				for i := range both {
					if math.Float32bits(both[i]) != math.Float32bits(first[i]) {
						t.Fatalf("%d×%d tile: element %d = %v, 12×32 tile %v", o.mr, o.nr, i, both[i], first[i])
					}
				}
			}
			gotW := make([]float32, len(gw))
			if !convWeightGrad(convF32, gotW, f(x), f(gy), a) {
				t.Fatal("weight gradient declined finite data")
			}
			convCheckClose(t, "gw", gotW, gw, gwMag, 1.0/(1<<20), 0)
		})
	}
}

// TestConvDirectBF16 checks the bf16 kernels (the pure-Go VDPBF16PS and AMX twins,
// and VDPBF16PS and AMX where this machine has them) against the float64 definition —
// float32 accumulation, then one rounding to bf16 (2⁻⁸ relative) — and each machine
// kernel against its twin bit for bit.
func TestConvDirectBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	// Each pure-Go kernel first, then the machine's kernel of the same layout.
	kerns := [][]*gemmBF16Kernel{{gemmBF16KernelGo12x32}, {gemmAMXKernelGo32x32}}
	for _, k := range gemmBF16Kernels() {
		if k != k.goTwin() {
			i := 0
			if k.rowsA {
				i = 1
			}
			kerns[i] = append(kerns[i], k)
		}
	}
	for _, a := range convTestGeoms() {
		t.Run(fmt.Sprintf("%+v", a), func(t *testing.T) {
			b := func(v []float64) []half.BFloat16 {
				out := make([]half.BFloat16, len(v))
				for i, e := range v {
					out[i] = half.BFloat16FromFloat64(e)
					v[i] = out[i].Float64()
				}
				return out
			}
			x := convRandom(rng, a.N*a.C*a.H*a.W)
			w := convRandom(rng, a.O*a.C/a.Groups*a.KH*a.KW)
			bias := convRandom(rng, a.O)
			gy := convRandom(rng, a.N*a.O*a.OH*a.OW)
			xb, wb, bb, gyb := b(x), b(w), b(bias), b(gy)
			y, yMag, gx, gxMag, gw, gwMag := convRef(a, x, w, bias, gy)
			f := func(v []half.BFloat16) []float32 {
				out := make([]float32, len(v))
				for i, e := range v {
					out[i] = e.Float32()
				}
				return out
			}
			for _, ks := range kerns {
				var first [3][]half.BFloat16
				for k, kern := range ks {
					o := newConvBF16(kern)
					gotY := make([]half.BFloat16, len(y))
					convForward(o, gotY, xb, wb, bb, a)
					convCheckClose(t, "y "+kern.name, f(gotY), y, yMag, 1.0/(1<<20), 1.0/256)
					d, _ := inputGradArgs(a)
					gotX := make([]half.BFloat16, len(gx))
					convForward(o, gotX, gyb, flipWeights(wb, a), nil, d)
					convCheckClose(t, "gx "+kern.name, f(gotX), gx, gxMag, 1.0/(1<<20), 1.0/256)
					gotW := make([]half.BFloat16, len(gw))
					convWeightGrad(o, gotW, xb, gyb, a)
					convCheckClose(t, "gw "+kern.name, f(gotW), gw, gwMag, 1.0/(1<<20), 1.0/256)
					res := [3][]half.BFloat16{gotY, gotX, gotW}
					if k == 0 {
						first = res
						continue
					}
					for r := range res {
						for i := range res[r] {
							if res[r][i] != first[r][i] {
								t.Fatalf("result %d [%d]: %v with %s, %v with its Go twin", r, i, res[r][i], kern.name, first[r][i])
							}
						}
					}
				}
			}
		})
	}
}

// TestConvGatherPairs pits convGatherPairs and convGatherF32 against their pure-Go
// twins, widths 0–32, random bits (NaNs included), runs at random offsets or equally
// far apart (the shuffle transposes of convGatherWords, with a rest for the gather).
func TestConvGatherPairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	src := make([]half.BFloat16, 4096)
	for i := range src {
		src[i] = half.BFloat16(rng.Uint32())
	}
	for _, stride := range []int{12, 16, 32} {
		for w := 0; w <= stride; w++ {
			for _, steps := range []int{1, 3, 17, 32, 40, 41} {
				offs := make([]int, w)
				for i := range offs {
					offs[i] = rng.IntN(len(src) - 2*steps)
				}
				if steps >= 32 && w > 1 {
					// Runs equally far apart (the weight gradient's gy rows): the
					// transposes where w is 16 or 32.
					d := 2 * (steps + rng.IntN(4))
					at := 2 * rng.IntN((len(src)-(w-1)*d-2*steps)/2)
					for i := range offs {
						offs[i] = at + i*d
					}
				}
				got := make([]uint32, steps*stride)
				want := make([]uint32, steps*stride)
				for i := range got {
					got[i], want[i] = rng.Uint32(), rng.Uint32()
				}
				convGatherPairs(got, src, offs, steps, w, stride)
				convGatherPairsGo(want, src, offs, steps, w, stride)
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("stride %d w %d steps %d: [%d] = %#x, want %#x", stride, w, steps, i, got[i], want[i])
					}
				}
				f32 := unsafe.Slice((*float32)(unsafe.Pointer(&src[0])), len(src)/2)
				for i := range offs {
					offs[i] /= 2
				}
				gotF := make([]float32, steps*stride)
				wantF := make([]float32, steps*stride)
				for i := range gotF {
					gotF[i], wantF[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
				}
				convGatherF32(gotF, f32, offs, steps, w, stride)
				convGatherF32Go(wantF, f32, offs, steps, w, stride)
				for i := range gotF {
					if math.Float32bits(gotF[i]) != math.Float32bits(wantF[i]) {
						t.Fatalf("float32: stride %d w %d steps %d: [%d] = %v, want %v", stride, w, steps, i, gotF[i], wantF[i])
					}
				}
			}
		}
	}
}

// TestConvMatchesIm2Col runs the Fashion CNN's second convolution through the Backend
// methods and through Im2Col + MatMul: the float32 forward is bit-identical (same
// micro-kernel, same k order and slices), the gradients agree within float32
// rounding; a NaN in the image sends the weight gradient back to the Im2Col path.
func TestConvMatchesIm2Col(t *testing.T) {
	b, _ := New(0)
	a := convTestGeoms()[1]
	rng := rand.New(rand.NewPCG(5, 6))
	up := func(v []float64) backend.Storage {
		s, _ := b.Alloc(backend.Float32, len(v))
		f := make([]float32, len(v))
		for i, e := range v {
			f[i] = float32(e)
		}
		b.Upload(s, 0, f)
		return s
	}
	k := a.C * a.KH * a.KW
	x, w := up(convRandom(rng, a.N*a.C*a.H*a.W)), up(convRandom(rng, a.O*k))
	bias := up(convRandom(rng, a.O))
	y, _ := b.Alloc(backend.Float32, a.N*a.O*a.OH*a.OW)
	if !b.Conv2d(y, x, w, bias, a) {
		t.Fatal("Conv2d did not take the geometry")
	}
	col, _ := b.Alloc(backend.Float32, a.N*k*a.OH*a.OW)
	b.Im2Col(col, x, a.ConvArgs)
	ref, _ := b.Alloc(backend.Float32, a.N*a.O*a.OH*a.OW)
	b.Copy(backend.Dense(ref, 0, a.N, a.O, a.OH*a.OW), backend.View{S: bias, Shape: []int{a.N, a.O, a.OH * a.OW}, Strides: []int{0, 1, 0}})
	b.MatMul(backend.MatMulArgs{A: w, B: col, C: ref, Batch: a.N, M: a.O, N: a.OH * a.OW, K: k,
		StrideC: a.O * a.OH * a.OW, StrideB: k * a.OH * a.OW, Alpha: 1, Beta: 1})
	got, want := make([]float32, a.N*a.O*a.OH*a.OW), make([]float32, a.N*a.O*a.OH*a.OW)
	b.Download(got, y, 0)
	b.Download(want, ref, 0)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("y[%d] = %v, Im2Col path %v", i, got[i], want[i])
		}
	}
	gw, _ := b.Alloc(backend.Float32, a.O*k)
	b.Upload(gw, 0, []float32{7})
	b.Upload(x, a.C*a.H*a.W+5, []float32{float32(math.NaN())}) // in the second image
	if b.Conv2dWeightGrad(gw, x, y, a) {
		t.Fatal("weight gradient of an image with a NaN did not fall back")
	}
	v := make([]float32, 1)
	if b.Download(v, gw, 0); v[0] != 7 {
		t.Fatalf("declined weight gradient wrote %v", v[0])
	}
	strided := a
	strided.StrideH, strided.OH = 2, convOut(a.H, a.KH, 2, a.PadH, 1)
	if b.Conv2d(y, x, w, nil, strided) {
		t.Fatal("Conv2d took a strided geometry")
	}
}

// TestConvAsmGenerated checks that conv_amd64.s is what internal/convgen writes.
func TestConvAsmGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go run")
	}
	gotool := testenv.Programs(t, testenv.GoTool, "go")[0]
	out := t.TempDir() + "/conv_amd64.s"
	if b, err := exec.Command(gotool, "run", "./internal/convgen", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("convgen: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("conv_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatal("conv_amd64.s is not what convgen writes: run go generate ./backend/cpu/")
	}
}

// convCPUTime reports, besides the wall time, the process CPU time per op
// (cpu-ns/op): on a shared machine it is less inflated by other processes
// than the wall time, which waits for descheduled workers.
func convCPUTime(bm *testing.B, fn func()) {
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	for bm.Loop() {
		fn()
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	ns := func(r *syscall.Rusage) float64 { return float64(r.Utime.Nano() + r.Stime.Nano()) }
	bm.ReportMetric((ns(&r1)-ns(&r0))/float64(bm.N), "cpu-ns/op")
}

// BenchmarkConvCNN times the Fashion CNN's convolutions (batch 128) in each pass.
func BenchmarkConvCNN(bm *testing.B) {
	for _, a := range convTestGeoms()[:2] {
		a.N = 128
		rng := rand.New(rand.NewPCG(1, 2))
		x32 := make([]float32, a.N*a.C*a.H*a.W)
		w32 := make([]float32, a.O*a.C*a.KH*a.KW)
		y32 := make([]float32, a.N*a.O*a.OH*a.OW)
		for _, v := range [][]float32{x32, w32, y32} {
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
		}
		xb, wb, yb := make([]half.BFloat16, len(x32)), make([]half.BFloat16, len(w32)), make([]half.BFloat16, len(y32))
		half.Float32ToBFloat16(xb, x32)
		half.Float32ToBFloat16(wb, w32)
		half.Float32ToBFloat16(yb, y32)
		d, _ := inputGradArgs(a)
		gx32, gxb := make([]float32, len(x32)), make([]half.BFloat16, len(x32))
		gw32, gwb := make([]float32, len(w32)), make([]half.BFloat16, len(w32))
		name := fmt.Sprintf("C%d", a.C)
		for _, o := range []*convOps[float32, float32]{convF32, convF32x16, convF32x8} {
			if o == nil {
				continue
			}
			tile := fmt.Sprintf("%dx%d", o.mr, o.nr)
			bm.Run(name+"/fp32/fwd"+tile, func(bm *testing.B) {
				convCPUTime(bm, func() { convForward(o, y32, x32, w32, nil, a) })
			})
			bm.Run(name+"/fp32/dx"+tile, func(bm *testing.B) {
				convCPUTime(bm, func() { convForward(o, gx32, y32, flipWeights(w32, a), nil, d) })
			})
		}
		bm.Run(name+"/fp32/dw", func(bm *testing.B) {
			convCPUTime(bm, func() { convWeightGrad(convF32WGrad(a.O), gw32, x32, y32, a) })
		})
		// packed: B panels packed per tap pair and A gathered for the weight
		// gradient (convBF16); chosen: what Conv2d and its gradients run
		// (convBF16For, convBF16WGrad: the in-place kernels where there are).
		bm.Run(name+"/bf16/fwd-packed", func(bm *testing.B) {
			convCPUTime(bm, func() { convForward(convBF16, yb, xb, wb, nil, a) })
		})
		bm.Run(name+"/bf16/fwd-chosen", func(bm *testing.B) {
			convCPUTime(bm, func() { convForward(convBF16For(a.O), yb, xb, wb, nil, a) })
		})
		bm.Run(name+"/bf16/dx-packed", func(bm *testing.B) {
			convCPUTime(bm, func() { convForward(convBF16, gxb, yb, flipWeights(wb, a), nil, d) })
		})
		bm.Run(name+"/bf16/dx-chosen", func(bm *testing.B) {
			convCPUTime(bm, func() { convForward(convBF16For(d.O), gxb, yb, flipWeights(wb, a), nil, d) })
		})
		bm.Run(name+"/bf16/dw-packed", func(bm *testing.B) {
			convCPUTime(bm, func() { convWeightGrad(convBF16, gwb, xb, yb, a) })
		})
		bm.Run(name+"/bf16/dw-chosen", func(bm *testing.B) {
			convCPUTime(bm, func() { convWeightGrad(convBF16WGrad(a.O), gwb, xb, yb, a) })
		})
	}
}

// TestConvWeightGradTaps checks that the weight gradient with the taps as rows
// (convWeightGradTaps) equals, bit for bit, the product with the output channels as
// rows (convWeightGradRows) on the same kernel — float32, each bf16 micro-kernel
// (pure-Go twins and this machine's) — including batches split into several chunks
// and images into several pixel slices.
func TestConvWeightGradTaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	kerns := []*gemmBF16Kernel{gemmBF16KernelGo12x32, gemmAMXKernelGo32x32}
	for _, k := range gemmBF16Kernels() {
		if k != k.goTwin() {
			kerns = append(kerns, k)
		}
	}
	if convBF16Kernel != nil && !slices.Contains(kerns, convBF16Kernel) {
		kerns = append(kerns, convBF16Kernel)
	}
	geoms := convTestGeoms()
	big := geoms[0]
	big.N, big.H, big.W, big.OH, big.OW = 20, 40, 40, 40, 40 // several pixel slices, chunks
	geoms = append(geoms, big)
	for _, a := range geoms {
		s := newConvShape(a, false)
		nw := a.O * a.C / a.Groups * a.KH * a.KW
		x32, gy32 := convRandom(rng, a.N*a.C*a.H*a.W), convRandom(rng, a.N*a.O*a.OH*a.OW)
		f := func(v []float64) []float32 {
			out := make([]float32, len(v))
			for i, e := range v {
				out[i] = float32(e)
			}
			return out
		}
		want := make([]float32, nw)
		if !convWeightGradRows(convF32, want, f(x32), f(gy32), &s) {
			t.Fatal("weight gradient declined finite data")
		}
		ops := []*convOps[float32, float32]{convF32}
		if o := convF32Rows(s.og); o != nil {
			ops = append(ops, o)
		}
		for _, o := range ops {
			got := make([]float32, nw)
			if !convWeightGradTaps(o, got, f(x32), f(gy32), &s) {
				t.Fatal("weight gradient declined finite data")
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%+v float32 %dx%d: gw[%d] = %v, rows as output channels %v", a, o.mr, o.nr, i, got[i], want[i])
				}
			}
		}
		b := func(v []float64) []half.BFloat16 {
			out := make([]half.BFloat16, len(v))
			for i, e := range v {
				out[i] = half.BFloat16FromFloat64(e)
			}
			return out
		}
		x, gy := b(x32), b(gy32)
		for _, kern := range kerns {
			o := newConvBF16(kern)
			got := make([]half.BFloat16, nw)
			want := make([]half.BFloat16, len(got))
			if !convWeightGradTaps(o, got, x, gy, &s) || !convWeightGradRows(o, want, x, gy, &s) {
				t.Fatal("weight gradient declined finite data")
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%+v %s: gw[%d] = %v, rows as output channels %v", a, kern.name, i, got[i], want[i])
				}
			}
		}
	}
}

// TestConvForwardWiden checks that the bf16 forward convolution of one input channel
// per group is the float32 one on the widened operands, each element rounded once
// to bf16, bit for bit, with and without bias.
func TestConvForwardWiden(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	g := convTestGeoms()[0]
	grouped := g
	grouped.C, grouped.O, grouped.Groups = 3, 6, 3
	for _, a := range []backend.Conv2dArgs{g, grouped} {
		if !convWidens(a) {
			t.Skip("no float32 in-place kernels")
		}
		b := func(n int) ([]half.BFloat16, []float32) {
			v, f := make([]half.BFloat16, n), make([]float32, n)
			for i := range v {
				v[i] = half.BFloat16FromFloat64(rng.NormFloat64())
				f[i] = v[i].Float32()
			}
			return v, f
		}
		x, x32 := b(a.N * a.C * a.H * a.W)
		w, w32 := b(a.O * a.KH * a.KW)
		bias, bias32 := b(a.O)
		for _, withBias := range []bool{false, true} {
			bb, bb32 := bias, bias32
			if !withBias {
				bb, bb32 = nil, nil
			}
			got := make([]half.BFloat16, a.N*a.O*a.OH*a.OW)
			convForward(convBF16, got, x, w, bb, a)
			y32 := make([]float32, len(got))
			convForward(convF32For(a.O/a.Groups), y32, x32, w32, bb32, a)
			for i, v := range y32 {
				if want := half.BFloat16FromFloat32(v); got[i] != want {
					t.Fatalf("%+v bias %v: y[%d] = %v, float32 path rounded %v", a, withBias, i, got[i], want)
				}
			}
		}
	}
}

// TestConvFill pits convFill against its pure-Go twin convFillGo, bit for bit:
// rows around the 16-element chunk, ld past n (the gaps left alone), values with
// any bits (signed zeros, NaN payloads).
func TestConvFill(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, n := range []int{1, 7, 15, 16, 17, 31, 32, 33, 100, 256} {
		for _, rows := range []int{1, 3, 32} {
			ld := n + rng.IntN(5)
			v := make([]float32, rows)
			for i := range v {
				v[i] = math.Float32frombits(rng.Uint32())
			}
			v[0] = float32(math.Copysign(0, -1))
			got := make([]float32, (rows-1)*ld+n+3)
			for i := range got {
				got[i] = float32(i)
			}
			want := append([]float32(nil), got...)
			convFill(got, ld, v, n, rows)
			convFillGo(want, ld, v, n, rows)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n %d rows %d ld %d: [%d] = %#x, want %#x", n, rows, ld, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
				}
			}
		}
	}
}

// TestConvNarrow pits convNarrowTo against its pure-Go twin convNarrowGo, bit for
// bit: rows around the 16-element chunk, strided source rows, packed and strided
// destination rows (whose gaps must stay untouched), values with any bits (NaNs,
// ties, infinities, subnormals), dst exactly as long as its last row needs.
func TestConvNarrow(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	for _, n := range []int{1, 7, 14, 15, 16, 17, 28, 31, 32, 33, 100} {
		for _, rows := range []int{1, 3, 28} {
			ls := n + rng.IntN(5)
			ld := n
			if rng.IntN(2) == 0 {
				ld += 1 + rng.IntN(40)
			}
			src := make([]float32, (rows-1)*ls+n)
			for i := range src {
				switch rng.IntN(4) {
				case 0:
					src[i] = math.Float32frombits(rng.Uint32())
				case 1:
					src[i] = math.Float32frombits(rng.Uint32()&^0xffff | 0x8000) // a tie
				case 2:
					if rng.IntN(8) == 0 {
						src[i] = math.Float32frombits(rng.Uint32() & 0x807fffff) // subnormal (or 0)
						break
					}
					src[i] = float32(rng.NormFloat64())
				default:
					src[i] = float32(rng.NormFloat64())
				}
			}
			got, want := make([]half.BFloat16, (rows-1)*ld+n), make([]half.BFloat16, (rows-1)*ld+n)
			for i := range got {
				got[i], want[i] = 0x1234, 0x1234 // the gaps between strided rows
			}
			convNarrowTo(got, ld, src, ls, n, rows)
			convNarrowGo(want, ld, src, ls, n, rows)
			if !slices.Equal(got, want) {
				t.Fatalf("n %d rows %d ls %d ld %d: %v, want %v", n, rows, ls, ld, got, want)
			}
		}
	}
}

// TestConvRows pits convRows against its pure-Go twin convRowsGo, for float32 and
// bf16 rows around the 64-byte chunk, padding copies into wider rows and the
// in-place forward compaction of the wide grid (dst and src one buffer).
func TestConvRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{1, 7, 14, 15, 16, 17, 28, 31, 32, 33, 47, 64, 100} {
		for _, rows := range []int{1, 3, 14} {
			for _, inPlace := range []bool{false, true} {
				ls, ld := n+rng.IntN(5), n+rng.IntN(9)
				if inPlace {
					ld = n // compaction: dst rows packed at the front of src's
				}
				src := make([]float32, (rows-1)*ls+n+3)
				for i := range src {
					src[i] = float32(rng.NormFloat64())
				}
				got := make([]float32, max((rows-1)*ld+n+3, len(src)))
				for i := range got {
					got[i] = float32(i)
				}
				want := append([]float32(nil), got...)
				if inPlace {
					copy(got, src)
					copy(want, src)
					convRows(got, ld, got, ls, n, rows)
					convRowsGo(want, ld, want, ls, n, rows)
				} else {
					convRows(got, ld, src, ls, n, rows)
					convRowsGo(want, ld, src, ls, n, rows)
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("float32 n %d rows %d in place %v: [%d] = %v, want %v", n, rows, inPlace, i, got[i], want[i])
					}
				}
				hs := make([]half.BFloat16, len(src))
				for i := range hs {
					hs[i] = half.BFloat16(rng.Uint32())
				}
				hg, hw := make([]half.BFloat16, len(got)), make([]half.BFloat16, len(got))
				convRows(hg, ld, hs, ls, n, rows)
				convRowsGo(hw, ld, hs, ls, n, rows)
				if !slices.Equal(hg, hw) {
					t.Fatalf("bf16 n %d rows %d: %v, want %v", n, rows, hg, hw)
				}
			}
		}
	}
}

// BenchmarkConvLayer times the Fashion CNN's convolutions (batch 128; float32, bf16
// and float16) through the Backend methods, as a training step runs them (the first
// layer has no input gradient), with the CPU time per op (cpu-ns/op).
func BenchmarkConvLayer(bm *testing.B) {
	b, _ := New(0)
	for _, a := range convTestGeoms()[:2] {
		a.N = 128
		rng := rand.New(rand.NewPCG(1, 2))
		for _, dt := range []backend.DType{backend.Float32, backend.BFloat16, backend.Float16} {
			up := func(n int) backend.Storage {
				s, _ := b.Alloc(dt, n)
				f := make([]float32, n)
				for i := range f {
					f[i] = float32(rng.NormFloat64())
				}
				switch dt {
				case backend.Float32:
					b.Upload(s, 0, f)
				case backend.BFloat16:
					h := make([]half.BFloat16, n)
					half.Float32ToBFloat16(h, f)
					b.Upload(s, 0, h)
				default:
					h := make([]half.Float16, n)
					half.Float32ToFloat16(h, f)
					b.Upload(s, 0, h)
				}
				return s
			}
			x, w, gy := up(a.N*a.C*a.H*a.W), up(a.O*a.C*a.KH*a.KW), up(a.N*a.O*a.OH*a.OW)
			bias := up(a.O)
			y, gx, gw := up(a.N*a.O*a.OH*a.OW), up(a.N*a.C*a.H*a.W), up(a.O*a.C*a.KH*a.KW)
			name := fmt.Sprintf("C%d/%s", a.C, dt)
			bm.Run(name+"/fwd", func(bm *testing.B) { convCPUTime(bm, func() { b.Conv2d(y, x, w, bias, a) }) })
			if a.C > 1 {
				bm.Run(name+"/dx", func(bm *testing.B) { convCPUTime(bm, func() { b.Conv2dInputGrad(gx, gy, w, a) }) })
			}
			bm.Run(name+"/dw", func(bm *testing.B) { convCPUTime(bm, func() { b.Conv2dWeightGrad(gw, x, gy, a) }) })
		}
	}
}

// TestConvBF16Chosen checks that the bf16 convolutions Conv2d and its gradients run
// (convBF16For, convBF16WGrad: on this machine the in-place VDPBF16PS kernels where
// there are, reading the pair-interleaved image, the shifted pair images of taps
// paired across rows and channels, or the taps' runs in place) equal, bit for bit,
// the packed path on the pure-Go twin kernel (B panels packed per tap pair, A
// gathered; never widened to float32): forward with and without bias, input gradient
// and weight gradient, on every test geometry (one, two, three, four and seventy
// channels per group) and one with several pixel slices and chunks.
func TestConvBF16Chosen(t *testing.T) {
	if convBF16 == nil {
		t.Skip("no bf16 direct convolution on this CPU (no VDPBF16PS)")
	}
	twin := newConvBF16(gemmBF16KernelGo12x32)
	rng := rand.New(rand.NewPCG(25, 26))
	geoms := convTestGeoms()
	big := geoms[1]
	big.N, big.H, big.W, big.OH, big.OW = 17, 30, 30, 30, 30
	if !raceShort() { // the race pass keeps the test geometries, which start the same tasks
		geoms = append(geoms, big)
	}
	bf := func(v []float64) []half.BFloat16 {
		out := make([]half.BFloat16, len(v))
		for i, e := range v {
			out[i] = half.BFloat16FromFloat64(e)
		}
		return out
	}
	check := func(what string, a backend.Conv2dArgs, got, want []half.BFloat16) {
		t.Helper()
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%+v %s: [%d] = %v, packed twin %v", a, what, i, got[i], want[i])
			}
		}
	}
	for _, a := range geoms {
		nw := a.O * a.C / a.Groups * a.KH * a.KW
		x, w := bf(convRandom(rng, a.N*a.C*a.H*a.W)), bf(convRandom(rng, nw))
		gy, bias := bf(convRandom(rng, a.N*a.O*a.OH*a.OW)), bf(convRandom(rng, a.O))
		for _, b := range [][]half.BFloat16{nil, bias} {
			got, want := make([]half.BFloat16, len(gy)), make([]half.BFloat16, len(gy))
			convForward(convBF16For(a.O/a.Groups), got, x, w, b, a)
			convForwardWith(twin, want, x, w, b, a, false)
			check(fmt.Sprintf("forward (bias %v)", b != nil), a, got, want)
		}
		if d, ok := inputGradArgs(a); ok {
			got, want := make([]half.BFloat16, len(x)), make([]half.BFloat16, len(x))
			convForward(convBF16For(d.O/d.Groups), got, gy, flipWeights(w, a), nil, d)
			convForward(twin, want, gy, flipWeights(w, a), nil, d)
			check("input gradient", a, got, want)
		}
		got, want := make([]half.BFloat16, nw), make([]half.BFloat16, nw)
		if !convWeightGrad(convBF16WGrad(a.O/a.Groups), got, x, gy, a) || !convWeightGrad(twin, want, x, gy, a) {
			t.Fatal("weight gradient declined finite data")
		}
		check("weight gradient", a, got, want)
	}
}

// TestConvPaddingPastReach checks the forward convolution and the weight gradient,
// float32 and bf16, against the float64 definition where the padding is wider than
// the kernel's reach (PadW > (KW−1)·DilationW): the rows' shared padding is then
// 2·PadW − (KW−1)·DilationW columns (wp = OW), not PadW. (The input gradient of such
// a geometry takes the Im2Col path.)
func TestConvPaddingPastReach(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	for _, a := range []backend.Conv2dArgs{
		{ConvArgs: backend.ConvArgs{N: 2, C: 4, H: 5, W: 6, KH: 1, KW: 1, PadH: 1, PadW: 1}, O: 3, Groups: 1},
		{ConvArgs: backend.ConvArgs{N: 2, C: 2, H: 6, W: 7, KH: 3, KW: 2, PadH: 2, PadW: 2}, O: 4, Groups: 1},
		{ConvArgs: backend.ConvArgs{N: 3, C: 4, H: 4, W: 5, KH: 2, KW: 2, PadH: 3, PadW: 3, DilationH: 2, DilationW: 2}, O: 16, Groups: 2},
	} {
		a.StrideH, a.StrideW = 1, 1
		a.DilationH, a.DilationW = max(a.DilationH, 1), max(a.DilationW, 1)
		a.OH = convOut(a.H, a.KH, 1, a.PadH, a.DilationH)
		a.OW = convOut(a.W, a.KW, 1, a.PadW, a.DilationW)
		if s := newConvShape(a, false); s.wp != a.OW {
			t.Fatalf("%+v: padded width %d, want OW = %d", a, s.wp, a.OW)
		}
		nw := a.O * a.C / a.Groups * a.KH * a.KW
		x, w := convRandom(rng, a.N*a.C*a.H*a.W), convRandom(rng, nw)
		bias, gy := convRandom(rng, a.O), convRandom(rng, a.N*a.O*a.OH*a.OW)
		y, yMag, _, _, gw, gwMag := convRef(a, x, w, bias, gy)
		f32 := convF32Of
		for _, o := range []*convOps[float32, float32]{convF32, convF32x8, convF32x16, convF32For(a.O / a.Groups)} {
			if o == nil {
				continue
			}
			got := make([]float32, len(y))
			convForward(o, got, f32(x), f32(w), f32(bias), a)
			convCheckClose(t, fmt.Sprintf("%+v float32 %dx%d y", a, o.mr, o.nr), got, y, yMag, 1.0/(1<<20), 0)
		}
		gotW := make([]float32, nw)
		if !convWeightGrad(convF32WGrad(a.O/a.Groups), gotW, f32(x), f32(gy), a) {
			t.Fatal("weight gradient declined finite data")
		}
		convCheckClose(t, fmt.Sprintf("%+v float32 gw", a), gotW, gw, gwMag, 1.0/(1<<20), 0)
		if convBF16 == nil {
			continue
		}
		bf := func(v []float64) []half.BFloat16 {
			out := make([]half.BFloat16, len(v))
			for i, e := range v {
				out[i] = half.BFloat16FromFloat64(e)
				v[i] = out[i].Float64()
			}
			return out
		}
		xb, wb, bb, gyb := bf(x), bf(w), bf(bias), bf(gy)
		y, yMag, _, _, gw, gwMag = convRef(a, x, w, bias, gy) // of the rounded operands
		wide := func(v []half.BFloat16) []float32 {
			out := make([]float32, len(v))
			for i, e := range v {
				out[i] = e.Float32()
			}
			return out
		}
		gotY := make([]half.BFloat16, len(y))
		convForward(convBF16For(a.O/a.Groups), gotY, xb, wb, bb, a)
		convCheckClose(t, fmt.Sprintf("%+v bf16 y", a), wide(gotY), y, yMag, 1.0/(1<<20), 1.0/256)
		gotWB := make([]half.BFloat16, nw)
		if !convWeightGrad(convBF16WGrad(a.O/a.Groups), gotWB, xb, gyb, a) {
			t.Fatal("weight gradient declined finite data")
		}
		convCheckClose(t, fmt.Sprintf("%+v bf16 gw", a), wide(gotWB), gw, gwMag, 1.0/(1<<20), 1.0/256)
	}
}
