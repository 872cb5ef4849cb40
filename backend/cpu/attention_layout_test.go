package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// attnLayoutCase is a packed-projection geometry: batches × heads, T rows of D.
type attnLayoutCase struct {
	n, heads, t, d int
	causal         bool
}

var attnLayoutCases = []attnLayoutCase{
	{2, 3, 7, 5, true}, {2, 3, 7, 5, false}, {2, 2, 70, 16, true}, {1, 2, 130, 32, true},
	{1, 2, 130, 32, false}, {3, 4, 33, 8, true}, {2, 4, 128, 32, true}, {1, 1, 64, 64, false},
}

// TestAttentionLayoutMatchesDense runs the kernels on operands placed by an
// AttentionLayout — Q, K and V (and their gradients) in one packed [N, T, 3, H, D]
// storage after a few leading elements, O in [N, T, H·D] rows padded to a wider stride,
// dO time-major [T, N, H·D] — and checks every result against the contiguous [BH, T, D]
// run on the same values bit for bit, and that no element outside the places is
// written.
func TestAttentionLayoutMatchesDense(t *testing.T) {
	b, _ := New(0)
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16, backend.Float16, backend.Float64} {
		for _, c := range attnLayoutCases {
			t.Run(fmt.Sprintf("%s/N=%d/H=%d/T=%d/D=%d/causal=%v", dt, c.n, c.heads, c.t, c.d, c.causal), func(t *testing.T) {
				bh, hd := c.n*c.heads, c.heads*c.d
				dc := attnCase{bh: bh, t: c.t, d: c.d, causal: c.causal}
				in := newAttnData(dc, uint64(7*c.t+c.d))
				want := runAttn(t, dc, in, dt)

				const lead, sentinel = 3, 7.5
				pack := backend.AttentionLayout{Heads: c.heads}
				row := 3 * hd
				for p, s := range []*backend.AttentionStride{&pack.Q, &pack.K, &pack.V} {
					*s = backend.AttentionStride{Off: lead + p*hd, Batch: c.t * row, Head: c.d, Row: row}
				}
				oRow := hd + 2
				pack.O = backend.AttentionStride{Off: 1, Batch: c.t * oRow, Head: c.d, Row: oRow}
				pack.GO = backend.AttentionStride{Off: 0, Batch: hd, Head: c.d, Row: c.n * hd}
				pack.GQ, pack.GK, pack.GV = pack.Q, pack.K, pack.V
				// The values of head h of batch n at place s, from the dense [BH, T, D] x.
				place := func(buf []float32, s backend.AttentionStride, x []float32) {
					for h := range bh {
						for r := range c.t {
							at := s.Off + h/c.heads*s.Batch + h%c.heads*s.Head + r*s.Row
							copy(buf[at:at+c.d], x[(h*c.t+r)*c.d:][:c.d])
						}
					}
				}
				fill := func(n int) []float32 {
					x := make([]float32, n)
					for i := range x {
						x[i] = sentinel
					}
					return x
				}
				mk := func(v []float32) backend.Storage {
					s, err := b.Alloc(dt, len(v))
					if err != nil {
						t.Fatal(err)
					}
					st(s).storeF32(0, v)
					return s
				}
				qkv := fill(lead + c.n*c.t*row + 5)
				place(qkv, pack.Q, in.q)
				place(qkv, pack.K, in.k)
				place(qkv, pack.V, in.v)
				gob := fill(c.t * c.n * hd)
				place(gob, pack.GO, in.g)
				lseDT := backend.Float32
				if dt == backend.Float64 {
					lseDT = backend.Float64
				}
				lse, _ := b.Alloc(lseDT, bh*c.t)
				x, o, gx := mk(qkv), mk(fill(1+c.n*c.t*oRow)), mk(fill(len(qkv)))
				a := backend.AttentionArgs{Q: x, K: x, V: x, O: o, LSE: lse, BH: bh, T: c.t, D: c.d,
					Scale: 1 / math.Sqrt(float64(c.d)), Causal: c.causal, Layout: &pack}
				b.Attention(a)
				a.GO, a.GQ, a.GK, a.GV = mk(gob), gx, gx, gx
				b.AttentionBackward(a)

				// gather returns the dense [BH, T, D] values at place s of storage x and
				// checks that everything else still holds the sentinel.
				gather := func(what string, x backend.Storage, places ...backend.AttentionStride) [][]float64 {
					all := make([]float64, st(x).n)
					st(x).loadF64(all, 0)
					seen := make([]bool, len(all))
					var out [][]float64
					for _, s := range places {
						d := make([]float64, bh*c.t*c.d)
						for h := range bh {
							for r := range c.t {
								at := s.Off + h/c.heads*s.Batch + h%c.heads*s.Head + r*s.Row
								copy(d[(h*c.t+r)*c.d:][:c.d], all[at:at+c.d])
								for i := range c.d {
									seen[at+i] = true
								}
							}
						}
						out = append(out, d)
					}
					for i, v := range all {
						if !seen[i] && v != sentinel {
							t.Fatalf("%s: element %d outside the layout was written: %v", what, i, v)
						}
					}
					return out
				}
				same := func(what string, want, got []float64) {
					t.Helper()
					for i := range want {
						if math.Float64bits(want[i]) != math.Float64bits(got[i]) {
							t.Fatalf("%s[%d]: got %v, want %v (dense)", what, i, got[i], want[i])
						}
					}
				}
				same("O", want.o, gather("O", o, pack.O)[0])
				gotLSE := make([]float64, bh*c.t)
				st(lse).loadF64(gotLSE, 0)
				same("LSE", want.lse, gotLSE)
				g := gather("dQKV", gx, pack.GQ, pack.GK, pack.GV)
				same("GQ", want.gq, g[0])
				same("GK", want.gk, g[1])
				same("GV", want.gv, g[2])
			})
		}
	}
}

// TestAttentionLayoutMisuse checks that a Layout is validated: heads that do not divide
// BH, a negative stride, and storage too small for the places.
func TestAttentionLayoutMisuse(t *testing.T) {
	b, _ := New(0)
	s, _ := b.Alloc(backend.Float32, 64)
	os, _ := b.Alloc(backend.Float32, 64)
	lse, _ := b.Alloc(backend.Float32, 8)
	good := backend.AttentionStride{Batch: 16, Head: 4, Row: 8}
	base := func() backend.AttentionArgs {
		return backend.AttentionArgs{Q: s, K: s, V: s, O: os, LSE: lse, BH: 4, T: 2, D: 4, Scale: 1,
			Layout: &backend.AttentionLayout{Heads: 2, Q: good, K: good, V: good, O: good}}
	}
	a := base()
	b.Attention(a) // 4 heads of 2 rows of 4 fit in 64 elements
	for name, f := range map[string]func(*backend.AttentionArgs){
		"heads":    func(a *backend.AttentionArgs) { a.Layout.Heads = 3 },
		"negative": func(a *backend.AttentionArgs) { a.Layout.K.Row = -8 },
		"size":     func(a *backend.AttentionArgs) { a.Layout.V.Off = 40 },
	} {
		a := base()
		f(&a)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			b.Attention(a)
		}()
	}
	if !b.AttentionLayouts() {
		t.Fatal("AttentionLayouts reports false")
	}
}

// TestAttnDotBF16 checks the backward pass's row term on bf16 rows against attnDot on
// the rows widened to float32, bit for bit: random values, and every bf16 pattern
// (NaNs, infinities, subnormals) against a few others, over lengths 0 to 37.
func TestAttnDotBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	widen := func(x []half.BFloat16) []float32 {
		f := make([]float32, len(x))
		half.BFloat16ToFloat32(f, x)
		return f
	}
	check := func(x, y []half.BFloat16) {
		t.Helper()
		got, want := attnDotBF16(x, y), attnDot(widen(x), widen(y))
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("attnDotBF16(%v, %v) = %v, want %v", x, y, got, want)
		}
	}
	for n := range 38 {
		for range 50 {
			x, y := make([]half.BFloat16, n), make([]half.BFloat16, n)
			for i := range x {
				x[i] = half.BFloat16FromFloat32(float32(rng.NormFloat64() * 3))
				y[i] = half.BFloat16FromFloat32(float32(rng.NormFloat64()))
			}
			check(x, y)
		}
	}
	for b := range 1 << 16 {
		x := []half.BFloat16{half.BFloat16FromBits(uint16(b)), half.BFloat16FromFloat32(1.5), half.BFloat16FromBits(uint16(b)), half.BFloat16FromFloat32(-2), half.BFloat16FromBits(uint16(b ^ 0x8000))}
		y := []half.BFloat16{half.BFloat16FromFloat32(0.75), half.BFloat16FromBits(uint16(b)), half.BFloat16FromFloat32(1e-38), half.BFloat16FromBits(uint16(b)), half.BFloat16FromFloat32(3)}
		check(x, y)
	}
}

// attnDeltaF32 (attnDeltaF32AVX where the CPU has AVX-512) against attnDeltaF32Go, bit
// for bit (NaN payloads aside): row counts around the four-row groups, widths that are
// multiples of 4 and others (the Go twin's), strided rows, and values that overflow,
// cancel, go subnormal or hold infinities and NaNs.
func TestAttnDeltaF32Twin(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	specials := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3e38, -3e38, 1e-40, -1e-45, 0, float32(math.Copysign(0, -1))}
	for _, rows := range []int{1, 2, 3, 4, 5, 7, 8, 9, 128} {
		for _, d := range []int{1, 3, 4, 8, 12, 64, 68} {
			for _, special := range []bool{false, true} {
				lg, lo := d+5, 3*d+1
				g := make([]float32, (rows-1)*lg+d)
				o := make([]float32, (rows-1)*lo+d)
				for i := range g {
					g[i] = float32(rng.NormFloat64() * 4)
				}
				for i := range o {
					o[i] = float32(rng.NormFloat64())
				}
				if special {
					for range 1 + rows*d/16 {
						g[rng.IntN(len(g))] = specials[rng.IntN(len(specials))]
						o[rng.IntN(len(o))] = specials[rng.IntN(len(specials))]
					}
				}
				got, want := make([]float32, rows), make([]float32, rows)
				attnDeltaF32(got, g, lg, o, lo, rows, d)
				attnDeltaF32Go(want, g, lg, o, lo, rows, d)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
						t.Fatalf("t=%d d=%d special=%v: delta[%d] = %v, want %v", rows, d, special, i, got[i], want[i])
					}
				}
			}
		}
	}
}
